/**
 * The one home of the test bed's small helpers (waiting, ports, log tails), shared by the test
 * bed, the e2e harness, the packaging tests and the agent tests. packaging/test-helpers.test.ts
 * fails when one of these names is defined again elsewhere.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Thrown from an `eventually` check: stop waiting at once (e.g. the process awaited has died). */
export class GiveUp extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'GiveUp';
  }
}

/**
 * Polls fn until it returns a value other than undefined or false; a throw counts as "not yet"
 * and its message is kept for the timeout error, which says what was awaited. A GiveUp ends the
 * wait at once. The one polling loop of the tests: every wait goes through it.
 */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 60_000,
  everyMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      if (e instanceof GiveUp) throw e;
      last = (e as Error).message;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${last}` : ''}`);
    await sleep(everyMs);
  }
}

/** A TCP port free on `host` right now (the kernel's choice). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      if (addr === null || typeof addr === 'string') {
        srv.close();
        reject(new Error('no port'));
        return;
      }
      srv.close(() => resolve(addr.port));
    });
  });
}

export async function distinctFreePorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

/** The last `lines` lines of a log file, or why there are none. */
export function tail(file: string, lines = 40): string {
  try {
    return fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch (e) {
    return `(no log: ${(e as Error).message})`;
  }
}
