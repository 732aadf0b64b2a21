/**
 * The sync hook under load, side by side with a bare Fastify route answering the same number of
 * bytes to the same request, in one run. Each server runs alone on CPU 0 (taskset), the load
 * generator (autocannon) on CPU 1. Reports max throughput (10 connections) as autocannon sees it and
 * as the server's own CPU time per request gives it (one-core capacity: immune to the load
 * generator's own limits), and latency at a constant 1,000 requests/s (open loop, ./open-loop.ts).
 * Run: npm run bench
 */
import autocannon from 'autocannon';
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { openLoop } from './open-loop';
import { realisticSyncRequest } from './sync-hook-request';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** The target compares the hook with `bare` (Fastify as it comes); `bare-parser` isolates the parser's share. */
const MODES = ['bare', 'bare-parser', 'hooks'];
const ROUTE_NAMES: Record<string, string> = { bare: 'bare Fastify route', 'bare-parser': "bare route, hooks' JSON parser", hooks: 'sync hook' };

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

function start(mode: string, bytes: number): Promise<{ child: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    const child = fork(join(__dirname, 'sync-hook-server.js'), [mode, String(bytes)], { execPath: 'taskset', execArgv: ['-c', '0', process.execPath] });
    child.once('message', (m: any) => resolve({ child, port: m.port }));
    child.once('error', reject);
  });
}

/** The server's CPU time so far (user + system), in µs. */
function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (m: any) => resolve(m.cpu.user + m.cpu.system));
    child.send('cpu');
  });
}

async function load(port: number, body: string, opts: Partial<autocannon.Options>) {
  const result = await autocannon({
    url: `http://127.0.0.1:${port}/stack/sync`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    duration: DURATION,
    ...opts,
  });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${result.non2xx} non-2xx answers, ${result.errors} errors`);
  return result;
}

async function main(): Promise<void> {
  // The load generator runs on the other core.
  try {
    require('node:child_process').execFileSync('taskset', ['-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
  } catch {
    /* single-core machine: measure anyway */
  }
  const { body, response } = realisticSyncRequest();
  const bytes = Buffer.byteLength(response);
  // Rounds alternate between the two servers and each figure is the median over rounds, so a
  // change in background load biases both sides alike instead of whichever ran second.
  const samples: Record<string, { max: number[]; p99max: number[]; cpu: number[]; fixed: number[]; p50: number[]; p99: number[]; p999: number[]; lag: number[] }> = {};
  for (let round = 0; round < ROUNDS; round++) {
    // Odd rounds run the hook first, so a drift in the machine's speed does not favour one side.
    for (const mode of round % 2 ? [...MODES].reverse() : MODES) {
      const { child, port } = await start(mode, bytes);
      await load(port, body, { connections: 10, duration: 2 }); // warm-up (JIT)
      const cpuBefore = await cpuOf(child);
      const max = await load(port, body, { connections: 10 });
      const cpuPerRequest = ((await cpuOf(child)) - cpuBefore) / max.requests.total;
      const fixed = await openLoop({ url: `http://127.0.0.1:${port}`, path: '/stack/sync', body, rate: 1000, seconds: DURATION });
      child.kill();
      const s = (samples[mode] ??= { max: [], p99max: [], cpu: [], fixed: [], p50: [], p99: [], p999: [], lag: [] });
      s.max.push(max.requests.average);
      s.p99max.push(max.latency.p99);
      s.cpu.push(cpuPerRequest);
      s.fixed.push(fixed.rate);
      s.p50.push(fixed.p50);
      s.p99.push(fixed.p99);
      s.p999.push(fixed.p999);
      s.lag.push(fixed.sendLagP99);
    }
  }
  const rows: Record<string, string | number>[] = MODES.map((mode) => {
    const s = samples[mode]!;
    return {
      route: ROUTE_NAMES[mode]!,
      'max req/s': Math.round(median(s.max)),
      'p99 at max (ms)': median(s.p99max),
      'server CPU per request (µs)': Math.round(median(s.cpu)),
      'one-core capacity (req/s)': Math.round(1e6 / median(s.cpu)),
      'req/s at fixed rate': Math.round(median(s.fixed)),
      'p50 at 1,000 req/s (ms)': round2(median(s.p50)),
      'p99 at 1,000 req/s (ms)': round2(median(s.p99)),
      'p99.9 at 1,000 req/s (ms)': round2(median(s.p999)),
      'generator send lag p99 (ms)': round2(median(s.lag)),
    };
  });
  const [bare, bareParser, hooks] = rows as [Record<string, number>, Record<string, number>, Record<string, number>];
  console.log(`request ${Buffer.byteLength(body)} bytes, response ${bytes} bytes, ${DURATION} s per run, median of ${ROUNDS} alternating rounds, node ${process.version}`);
  console.table(rows);
  console.log(`throughput ratio (sync hook / bare route): ${(hooks['max req/s']! / bare['max req/s']!).toFixed(2)} measured by autocannon, ${(bare['server CPU per request (µs)']! / hooks['server CPU per request (µs)']!).toFixed(2)} by server CPU per request (one-core capacity)`);
  console.log(`against the bare route with the hooks' parser: ${(hooks['max req/s']! / bareParser['max req/s']!).toFixed(2)} by autocannon, ${(bareParser['server CPU per request (µs)']! / hooks['server CPU per request (µs)']!).toFixed(2)} by server CPU per request`);
  console.log(JSON.stringify({ requestBytes: Buffer.byteLength(body), responseBytes: bytes, rounds: ROUNDS, rows, samples }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
