/**
 * The sync hook's cost per request in CPU instructions, side by side with the bare Fastify routes,
 * counted by Valgrind's callgrind: a figure that does not move with the host's load, unlike
 * throughput on a shared VM (rounds drift by tens of percent: docs/benchmarks.md), so a change of a
 * few percent can be seen in one run.
 *
 * Each server (./sync-hook-server.ts) runs under callgrind with instrumentation off while it
 * answers WARMUP requests (V8 is still optimising the hot code for the first few thousand:
 * docs/benchmarks.md), then callgrind counts the instructions of all its threads (JIT code,
 * the optimising compiler, the garbage collector) over the next REQUESTS requests, sent one at a
 * time on one keep-alive connection.
 *
 * Instructions are not time: the hook touches more memory than a bare route, so it loses more to
 * cache misses than the counts show. The throughput bench stays the measure of the target; this
 * one tells where the hook's work is and whether a change removed some.
 *
 * Needs valgrind (Debian: apt-get install valgrind). Run:
 *   npm run build && node dist/bench/sync-hook-instructions.js
 * (BENCH_REQUEST=captured|synthetic, BENCH_WARMUP_REQUESTS (default 6000), BENCH_REQUESTS (default 1000))
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';
import {
  benchRequest,
  expectAnsweredAtRest,
  portOf,
  type BenchRequest,
  requestKindFromEnv,
  ROUTE_NAMES,
  forkServer,
  SERVER_MODES,
  WARMUP_REQUESTS,
} from './sync-hook-request';

const REQUEST = requestKindFromEnv();
const WARMUP = WARMUP_REQUESTS;
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 1000);
const MODES = SERVER_MODES;

function startUnderCallgrind(
  mode: string,
  bytes: number,
  outFile: string,
): Promise<{ child: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    const child = forkServer(mode, bytes, REQUEST, {
      execPath: 'valgrind',
      execArgv: [
        '--tool=callgrind',
        '--quiet',
        '--instr-atstart=no',
        `--callgrind-out-file=${outFile}`,
        process.execPath,
      ],
    });
    child.once('message', (m) => {
      try {
        resolve({ child, port: portOf(m) });
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
    child.once('error', reject);
    child.once('exit', (code) =>
      reject(new Error(`${mode} server under valgrind exited (${code}); is valgrind installed?`)),
    );
  });
}

async function send(pool: Pool, body: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const res = await pool.request({
      path: '/stack/sync',
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body,
    });
    await res.body.text();
    if (res.statusCode !== 200) throw new Error(`answer ${res.statusCode}`);
  }
}

/** Instructions (callgrind's Ir) in the dump callgrind wrote for `-d`. */
function dumpedInstructions(dir: string, base: string): number {
  const dumps = readdirSync(dir).filter((f) => f.startsWith(`${base}.`));
  if (dumps.length !== 1) throw new Error(`expected one callgrind dump, found ${dumps.join(', ') || 'none'}`);
  const totals = /^totals: (\d+)/m.exec(readFileSync(join(dir, dumps[0]!), 'utf8'));
  if (!totals) throw new Error('callgrind dump without totals');
  return Number(totals[1]);
}

async function instructionsPerRequest(mode: string, request: BenchRequest, dir: string): Promise<number> {
  const base = `callgrind-${mode}`;
  const { child, port } = await startUnderCallgrind(mode, Buffer.byteLength(request.response), join(dir, base));
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 1 });
  try {
    if (mode === 'hooks') await expectAnsweredAtRest(port, request);
    await send(pool, request.body, WARMUP);
    const control = (flag: string) => execFileSync('callgrind_control', [flag, String(child.pid)], { stdio: 'ignore' });
    control('--instr=on');
    control('--zero');
    await send(pool, request.body, REQUESTS);
    control('--dump');
    return dumpedInstructions(dir, base) / REQUESTS;
  } finally {
    await pool.close();
    child.kill('SIGKILL');
  }
}

async function main(): Promise<void> {
  const request = benchRequest(REQUEST);
  const { body, response } = request;
  const bytes = Buffer.byteLength(response);
  const dir = mkdtempSync(join(tmpdir(), 'bench-callgrind-'));
  const perRequest: Record<string, number> = {};
  try {
    for (const mode of MODES) {
      perRequest[mode] = await instructionsPerRequest(mode, request, dir);
      console.error(`${ROUTE_NAMES[mode]}: ${(perRequest[mode] / 1e6).toFixed(3)} M instructions per request`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `${REQUEST} request ${Buffer.byteLength(body)} bytes, response ${bytes} bytes; ${WARMUP} requests of warm-up, then ${REQUESTS} counted; node ${process.version}`,
  );
  console.table(
    MODES.map((mode) => ({
      route: ROUTE_NAMES[mode],
      'M instructions per request': Number((perRequest[mode]! / 1e6).toFixed(3)),
    })),
  );
  console.log(
    `instruction ratio (bare route / sync hook, i.e. throughput at equal instructions per second): ${(perRequest.bare! / perRequest.hooks!).toFixed(3)}; against the hooks' parser ${(perRequest['bare-parser']! / perRequest.hooks!).toFixed(3)}`,
  );
  console.log(
    JSON.stringify({ request: REQUEST, warmup: WARMUP, requests: REQUESTS, instructionsPerRequest: perRequest }),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
