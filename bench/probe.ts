/**
 * The hostile-input probe, long form: the real hook server in a child process on 127.0.0.1,
 * restarted if it dies (each restart counted as a crash), attacked with mutated real requests
 * (./probe-cases.ts) and the classes of issue 34, deep nesting, then a soak, and YAML alias bombs
 * for `render` in this process. Exits non-zero on any 5xx, crash, connection error, or answer,
 * Event or render breaking the checks. Cases are rebuilt from the printed seed and a case's index.
 * Run: npm run bench:probe -- --requests 50000 --seconds 300 --seed 7 [--soak-seconds 60]
 *      [--soak-rate 200] [--concurrency 4] [--render-cases 100] [--failures 20] [--json]
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadSeedBodies } from './probe-cases';
import { formatReport, probePassed, runProbe, type ProbeTarget } from './probe-run';

const REPO_ROOT = join(__dirname, '..', '..');

/** Resident memory of a process now and at its peak (Linux /proc: VmRSS, VmHWM), in bytes. */
function rssOf(pid: number): { now: number; peak: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
    return { now: kb('VmRSS'), peak: kb('VmHWM') };
  } catch {
    return undefined;
  }
}

class ChildServer implements ProbeTarget {
  private child!: ChildProcess;
  private listening = 0;
  private exits = 0;
  private exited = false;
  /** The highest peak of every server process this run started. */
  private peakOfDead = 0;

  async start(): Promise<void> {
    this.exited = false;
    const child = fork(join(__dirname, 'probe-server.js'), [], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
    child.stdout!.resume(); // the log, drained as a container runtime does
    this.child = child;
    child.once('exit', (code, signal) => {
      this.exited = true;
      this.exits++;
      process.stderr.write(`probe: the hook server exited (code ${code}, signal ${signal})\n`);
    });
    this.listening = await new Promise<number>((resolve, reject) => {
      child.once('message', (m) => resolve((m as { port: number }).port));
      child.once('error', reject);
      child.once('exit', () => reject(new Error('the hook server exited before it listened')));
    });
  }

  port(): number {
    return this.listening;
  }

  rss() {
    const r = this.child.pid === undefined ? undefined : rssOf(this.child.pid);
    if (r) this.peakOfDead = Math.max(this.peakOfDead, r.peak);
    return r ? { now: r.now, peak: Math.max(r.peak, this.peakOfDead) } : undefined;
  }

  private restarting: Promise<boolean> | undefined;

  /** One restart however many requests saw the crash; each of them waits for it. */
  recover(): Promise<boolean> {
    this.restarting ??= (async () => {
      await new Promise((r) => setTimeout(r, 50)); // an exit is reported a moment after the socket closes
      if (!this.exited) return false;
      await this.start();
      return true;
    })().finally(() => (this.restarting = undefined));
    return this.restarting;
  }

  crashes(): number {
    return this.exits;
  }

  /** Asks the server (./probe-server.ts) what was wrong with the Events it wrote. */
  events(): Promise<{ problems: string[]; written: number }> {
    return new Promise((resolve) => {
      this.child.once('message', (m) => {
        const r = m as { eventProblems: string[]; eventsWritten: number };
        resolve({ problems: r.eventProblems, written: r.eventsWritten });
      });
      this.child.send({ events: true });
    });
  }

  stop(): void {
    this.child.removeAllListeners('exit');
    this.child.kill('SIGTERM');
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      requests: { type: 'string', default: '20000' },
      seconds: { type: 'string', default: '300' },
      seed: { type: 'string' },
      'soak-seconds': { type: 'string', default: '60' },
      'soak-rate': { type: 'string', default: '200' },
      concurrency: { type: 'string', default: '4' },
      'render-cases': { type: 'string', default: '100' },
      failures: { type: 'string', default: '20' },
      json: { type: 'boolean', default: false },
    },
  });
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  process.stderr.write(`probe: seed ${seed}\n`);
  const server = new ChildServer();
  await server.start();
  const report = await runProbe(server, loadSeedBodies(REPO_ROOT), {
    seed,
    requests: Number(values.requests),
    seconds: Number(values.seconds),
    nestingDepths: [1_000, 10_000, 100_000],
    soakSeconds: Number(values['soak-seconds']),
    soakRate: Number(values['soak-rate']),
    concurrency: Number(values.concurrency),
    renderCases: Number(values['render-cases']),
    failuresKept: Number(values.failures),
  });
  server.stop();
  process.stdout.write(`${values.json ? JSON.stringify(report, null, 2) : formatReport(report)}\n`);
  process.exitCode = probePassed(report) ? 0 : 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exit(2);
});
