/**
 * The sync hook under load, side by side with a bare Fastify route answering the same number of
 * bytes to the same request, in one run. The hook server logs as deployed (a line per call at info,
 * to a pipe the bench drains). Each server runs alone on CPU 0 (taskset), the load generator
 * (autocannon) on CPU 1. Reports max throughput (10 connections) as autocannon sees it and
 * as the server's own CPU time per request gives it (one-core capacity: immune to the load
 * generator's own limits), and latency at a constant 1,000 requests/s (open loop, ./open-loop.ts).
 * Run: npm run bench (BENCH_REQUEST=synthetic for the request built by the unit tests' helpers;
 * BENCH_ROUNDS, BENCH_SECONDS, BENCH_WARMUP_REQUESTS)
 */
import autocannon from 'autocannon';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { openLoop } from './open-loop';
import {
  benchRequest,
  cpuOf as cpuOfMessage,
  portOf,
  requestKindFromEnv,
  ROUTE_NAMES,
  DEPLOYED_LOG_LEVEL,
  expectAnsweredAtRest,
  forkServer,
  SERVER_MODES,
  WARMUP_REQUESTS,
} from './sync-hook-request';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const REQUEST = requestKindFromEnv();
const MODES = SERVER_MODES;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

/**
 * Time the hypervisor gave CPU 0 (the server's) to other guests so far, in ms (/proc/stat "steal";
 * 0 where unknown). On a shared VM this is what makes the latency tail: the server is simply not
 * running.
 */
function stealMsOfCpu0(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('cpu0 '));
    return line ? Number(line.trim().split(/\s+/)[8] ?? 0) * 10 : 0; // USER_HZ is 100
  } catch {
    return 0;
  }
}

function start(mode: string, bytes: number): Promise<{ child: ChildProcess; port: number }> {
  return new Promise((resolve, reject) => {
    const child = forkServer(mode, bytes, REQUEST, { execPath: 'taskset', execArgv: ['-c', '0', process.execPath] });
    child.once('message', (m) => {
      try {
        resolve({ child, port: portOf(m) });
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
    child.once('error', reject);
  });
}

/** The server's CPU time so far (user + system), in µs. */
function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (m) => resolve(cpuOfMessage(m)));
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
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${result.non2xx} non-2xx answers, ${result.errors} errors`);
  return result;
}

async function main(): Promise<void> {
  // The load generator runs on the other core.
  try {
    execFileSync('taskset', ['-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
  } catch {
    /* single-core machine: measure anyway */
  }
  const request = benchRequest(REQUEST);
  const { body, response } = request;
  const bytes = Buffer.byteLength(response);
  // Rounds alternate between the servers and each figure is the median over rounds, so a
  // change in background load biases both sides alike instead of whichever ran second.
  const samples: Record<
    string,
    {
      max: number[];
      p99max: number[];
      cpu: number[];
      fixed: number[];
      p50: number[];
      p99: number[];
      p999: number[];
      lag: number[];
      steal: number[];
      stealAtMax: number[];
    }
  > = {};
  for (let round = 0; round < ROUNDS; round++) {
    // Odd rounds run the hook first, so a drift in the machine's speed does not favour one side.
    for (const mode of round % 2 ? [...MODES].reverse() : MODES) {
      const { child, port } = await start(mode, bytes);
      if (mode === 'hooks') await expectAnsweredAtRest(port, request);
      await load(port, body, { connections: 10, amount: WARMUP_REQUESTS }); // warm-up: the JIT's steady state
      const cpuBefore = await cpuOf(child);
      let stealBefore = stealMsOfCpu0();
      const max = await load(port, body, { connections: 10 });
      const cpuPerRequest = ((await cpuOf(child)) - cpuBefore) / max.requests.total;
      const stealAtMax = (stealMsOfCpu0() - stealBefore) / (DURATION * 10); // % of the run
      stealBefore = stealMsOfCpu0();
      const fixed = await openLoop({
        url: `http://127.0.0.1:${port}`,
        path: '/stack/sync',
        body,
        rate: 1000,
        seconds: DURATION,
      });
      const steal = (stealMsOfCpu0() - stealBefore) / (DURATION * 10); // % of the run
      child.kill();
      const s = (samples[mode] ??= {
        max: [],
        p99max: [],
        cpu: [],
        fixed: [],
        p50: [],
        p99: [],
        p999: [],
        lag: [],
        steal: [],
        stealAtMax: [],
      });
      s.max.push(max.requests.average);
      s.p99max.push(max.latency.p99);
      s.cpu.push(cpuPerRequest);
      s.fixed.push(fixed.rate);
      s.p50.push(fixed.p50);
      s.p99.push(fixed.p99);
      s.p999.push(fixed.p999);
      s.lag.push(fixed.sendLagP99);
      s.steal.push(steal);
      s.stealAtMax.push(stealAtMax);
      // Round by round on stderr: the medians hide drifts that the individual rounds show.
      console.error(
        `round ${round + 1} ${mode}: ${Math.round(max.requests.average)} req/s, ${Math.round(cpuPerRequest)} µs CPU/request (CPU 0 stolen ${stealAtMax.toFixed(1)} %), p99 at 1,000 req/s ${round2(fixed.p99)} ms (CPU 0 stolen ${steal.toFixed(1)} %)`,
      );
    }
  }
  const rows: Record<string, string | number>[] = MODES.map((mode) => {
    const s = samples[mode]!;
    return {
      route: ROUTE_NAMES[mode],
      'max req/s': Math.round(median(s.max)),
      'p99 at max (ms)': median(s.p99max),
      'server CPU per request (µs)': Math.round(median(s.cpu)),
      'CPU 0 stolen at max (%)': round2(median(s.stealAtMax)),
      'one-core capacity (req/s)': Math.round(1e6 / median(s.cpu)),
      'req/s at fixed rate': Math.round(median(s.fixed)),
      'p50 at 1,000 req/s (ms)': round2(median(s.p50)),
      'p99 at 1,000 req/s (ms)': round2(median(s.p99)),
      'p99.9 at 1,000 req/s (ms)': round2(median(s.p999)),
      'generator send lag p99 (ms)': round2(median(s.lag)),
      'CPU 0 stolen at 1,000 req/s (%)': round2(median(s.steal)),
    };
  });
  const [bare, bareParser, hooks] = rows as [Record<string, number>, Record<string, number>, Record<string, number>];
  console.log(
    `${REQUEST} request ${Buffer.byteLength(body)} bytes, response ${bytes} bytes, the hook server logging at ${DEPLOYED_LOG_LEVEL} as deployed, ${WARMUP_REQUESTS} requests of warm-up, ${DURATION} s per run, median of ${ROUNDS} alternating rounds, node ${process.version}`,
  );
  console.table(rows);
  // Each round measures the servers within a minute of each other, so its ratio is a paired
  // comparison: the machine's drift between rounds (tens of percent here) cancels out of it.
  const perRound = (mode: string, of: 'max' | 'cpu') =>
    samples.hooks![of].map((h, i) => (of === 'max' ? h / samples[mode]![of][i]! : samples[mode]![of][i]! / h));
  const ratios = (mode: string) =>
    `${median(perRound(mode, 'max')).toFixed(2)} by autocannon, ${median(perRound(mode, 'cpu')).toFixed(2)} by server CPU per request (medians of the per-round ratios; rounds: ${perRound(
      mode,
      'max',
    )
      .map((r) => r.toFixed(2))
      .join(' ')})`;
  console.log(`throughput ratio (sync hook / bare route): ${ratios('bare')}`);
  console.log(`against the bare route with the hooks' parser: ${ratios('bare-parser')}`);
  console.log(
    `ratio of the medians (sync hook / bare route): ${(hooks['max req/s']! / bare['max req/s']!).toFixed(2)} by autocannon, ${(bare['server CPU per request (µs)']! / hooks['server CPU per request (µs)']!).toFixed(2)} by CPU; with the hooks' parser ${(hooks['max req/s']! / bareParser['max req/s']!).toFixed(2)}, ${(bareParser['server CPU per request (µs)']! / hooks['server CPU per request (µs)']!).toFixed(2)}`,
  );
  console.log(
    JSON.stringify({
      request: REQUEST,
      warmupRequests: WARMUP_REQUESTS,
      requestBytes: Buffer.byteLength(body),
      responseBytes: bytes,
      rounds: ROUNDS,
      rows,
      samples,
    }),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
