/**
 * The hooks' CPU per Stack per resync. Metacontroller resyncs every parent every
 * resyncPeriodSeconds; a Stack at rest then costs its own sync, its Workspace's sync and one sync
 * per kept Update (the requests recorded by ./capture-sync-request.ts in bench/requests/). With
 * `--before <root>` (a worktree of an earlier commit, built: `npm ci && npm run build`), that
 * checkout's hook server answers its own recorded Stack request too, in the same rounds, so the
 * two versions are compared on the same machine at the same time.
 *
 * Each server runs alone on CPU 0 (taskset), autocannon on CPU 1 (10 connections), as ./sync-hook.ts:
 * warm-up (BENCH_WARMUP_REQUESTS), then BENCH_SECONDS at maximum throughput, and the server's own
 * CPU time over it divided by the requests answered. Rounds (BENCH_ROUNDS) alternate the order of
 * the servers; the totals are summed within a round (a paired measurement) and reported as medians.
 * With `--bare`, a bare Fastify route (parsing the same body, answering as many bytes) is measured
 * next to the Stack's, the Workspace's and the first Update's sync: what any hook call costs.
 * Run: npm run build && npx node dist/bench/resync-cost.js [--before /path/to/old/worktree] [--bare]
 */
import autocannon from 'autocannon';
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { request as httpRequest } from 'undici';
import { restingClock, type RecordedStack } from './recordings';
import { cpuOf as cpuOfMessage, portOf, WARMUP_REQUESTS } from './sync-hook-request';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6);
const THIS_ROOT = join(__dirname, '..', '..');

type Side = 'before' | 'after' | 'bare';

/** One recorded request, the route it goes to and what its answer must say for it to be at rest. */
interface Target {
  name: string;
  side: Side;
  root: string;
  route: string;
  file: string;
  atRest: (answer: AnswerStatus) => boolean;
  /** For a bare route: the hook target whose request it parses and whose answer's size it sends. */
  twin?: Target;
}

interface AnswerStatus {
  status?: { conditions?: { type: string; status: string }[] };
}

const conditionIs = (answer: AnswerStatus, type: string) =>
  answer.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;

function targets(beforeRoot: string | undefined): Target[] {
  const requests = (root: string) => join(root, 'bench', 'requests');
  const ready = (a: AnswerStatus) => conditionIs(a, 'Ready');
  const list: Target[] = [];
  if (beforeRoot)
    list.push({
      name: 'before: stack',
      side: 'before',
      root: beforeRoot,
      route: '/stack/sync',
      file: join(requests(beforeRoot), 'steady-state-sync.json'),
      atRest: ready,
    });
  list.push(
    {
      name: 'after: stack',
      side: 'after',
      root: THIS_ROOT,
      route: '/stack/sync',
      file: join(requests(THIS_ROOT), 'steady-state-sync.json'),
      atRest: ready,
    },
    {
      name: 'after: workspace',
      side: 'after',
      root: THIS_ROOT,
      route: '/workspace/sync',
      file: join(requests(THIS_ROOT), 'steady-state-workspace-sync.json'),
      atRest: ready,
    },
  );
  for (let n = 1; existsSync(join(requests(THIS_ROOT), `steady-state-update-sync-${n}.json`)); n++)
    list.push({
      name: `after: update ${n}`,
      side: 'after',
      root: THIS_ROOT,
      route: '/update/sync',
      file: join(requests(THIS_ROOT), `steady-state-update-sync-${n}.json`),
      atRest: (a) => conditionIs(a, 'Complete'),
    });
  return list;
}

/** Bare Fastify routes for the Stack's, the Workspace's and the first Update's request. */
function bareTwins(list: Target[]): Target[] {
  return list
    .filter((t) => ['after: stack', 'after: workspace', 'after: update 1'].includes(t.name))
    .map((t) => ({
      ...t,
      name: `bare route: ${t.name.slice('after: '.length)}`,
      side: 'bare',
      twin: t,
      atRest: () => true,
    }));
}

/** The recorded request's body, and the hook clock that makes it at rest (its Stack's recording's). */
function recorded(target: Target, stackFile: string): { body: string; now: string } {
  const file = JSON.parse(readFileSync(target.file, 'utf8')) as { request: unknown };
  const stack = JSON.parse(readFileSync(stackFile, 'utf8')) as { request: RecordedStack };
  return { body: JSON.stringify(file.request), now: restingClock(stack.request).toISOString() };
}

function start(target: Target, now: string, bytes: number): Promise<{ child: ChildProcess; port: number }> {
  const args = target.twin ? ['bare', target.file, now, target.route, String(bytes)] : [target.root, target.file, now];
  return new Promise((resolve, reject) => {
    const child = fork(join(__dirname, 'resync-cost-server.js'), args, {
      execPath: 'taskset',
      execArgv: ['-c', '0', process.execPath],
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    child.stdout!.resume(); // the log lines, drained as a container runtime does
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

function cpuOf(child: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    child.once('message', (m) => resolve(cpuOfMessage(m)));
    child.send('cpu');
  });
}

async function load(port: number, route: string, body: string, opts: Partial<autocannon.Options>) {
  const result = await autocannon({
    url: `http://127.0.0.1:${port}${route}`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
    connections: 10,
    ...opts,
  });
  if (result.non2xx > 0 || result.errors > 0)
    throw new Error(`${route}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
  return result;
}

/** One answer, checked to be the steady one: the bench must measure a parent at rest. */
async function checkAtRest(target: Target, port: number, body: string): Promise<number> {
  const res = await httpRequest(`http://127.0.0.1:${port}${target.route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const text = await res.body.text();
  if (res.statusCode !== 200 || !target.atRest(JSON.parse(text) as AnswerStatus))
    throw new Error(`${target.name}: not answered as at rest (${res.statusCode}): ${text.slice(0, 500)}`);
  return Buffer.byteLength(text);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function main(): Promise<void> {
  try {
    execFileSync('taskset', ['-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
  } catch {
    /* single-core machine: measure anyway */
  }
  const at = process.argv.indexOf('--before');
  const beforeRoot = at >= 0 ? process.argv[at + 1] : undefined;
  const hooks = targets(beforeRoot);
  const all = process.argv.includes('--bare') ? [...hooks, ...bareTwins(hooks)] : hooks;
  const stackFileOf = (t: Target) => join(t.root, 'bench', 'requests', 'steady-state-sync.json');
  const bodies = new Map(all.map((t) => [t, recorded(t, stackFileOf(t))]));
  const cpu = new Map<Target, number[]>(all.map((t) => [t, []]));
  const sizes = new Map<Target, { request: number; response: number }>();
  // Each hook's answer, once, checked to be at rest; its size is what the bare routes send.
  for (const target of hooks) {
    const { body, now } = bodies.get(target)!;
    const { child, port } = await start(target, now, 0);
    try {
      sizes.set(target, { request: Buffer.byteLength(body), response: await checkAtRest(target, port, body) });
    } finally {
      child.kill();
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const target of round % 2 ? [...all].reverse() : all) {
      const { body, now } = bodies.get(target)!;
      const { child, port } = await start(target, now, target.twin ? sizes.get(target.twin)!.response : 0);
      try {
        sizes.set(target, { request: Buffer.byteLength(body), response: await checkAtRest(target, port, body) });
        await load(port, target.route, body, { amount: WARMUP_REQUESTS });
        const before = await cpuOf(child);
        const run = await load(port, target.route, body, { duration: DURATION });
        const perRequest = ((await cpuOf(child)) - before) / run.requests.total;
        cpu.get(target)!.push(perRequest);
        console.error(`round ${round + 1} ${target.name}: ${Math.round(perRequest)} µs CPU/request`);
      } finally {
        child.kill();
      }
    }
  }
  console.table(
    all.map((t) => ({
      request: t.name,
      route: t.route,
      'request bytes': sizes.get(t)!.request,
      'answer bytes': sizes.get(t)!.response,
      'CPU per request (µs), median': Math.round(median(cpu.get(t)!)),
      rounds: cpu
        .get(t)!
        .map((x) => Math.round(x))
        .join(' '),
    })),
  );
  // Per round: one resync of a Stack at rest on each side, summed within the round.
  const perResync = (side: Side) =>
    Array.from({ length: ROUNDS }, (_, i) =>
      all.filter((t) => t.side === side).reduce((sum, t) => sum + cpu.get(t)![i]!, 0),
    );
  const after = perResync('after');
  console.log(
    `after: CPU per Stack per resync (stack + workspace + ${all.filter((t) => t.route === '/update/sync' && t.side === 'after').length} updates) median ${Math.round(median(after))} µs; rounds ${after.map(Math.round).join(' ')}`,
  );
  const bare = all.filter((t) => t.side === 'bare');
  if (bare.length) {
    // The floor: what the same five calls would cost if each hook did nothing but parse and answer.
    const updates = all.filter((t) => t.route === '/update/sync' && t.side === 'after').length;
    const floor = Array.from({ length: ROUNDS }, (_, i) =>
      bare.reduce((sum, t) => sum + cpu.get(t)![i]! * (t.route === '/update/sync' ? updates : 1), 0),
    );
    console.log(
      `bare routes, the same calls (stack + workspace + ${updates} × update 1): median ${Math.round(median(floor))} µs; rounds ${floor.map(Math.round).join(' ')}`,
    );
  }
  if (beforeRoot) {
    const before = perResync('before');
    const ratios = after.map((a, i) => a / before[i]!);
    console.log(
      `before: CPU per Stack per resync (stack) median ${Math.round(median(before))} µs; rounds ${before.map(Math.round).join(' ')}`,
    );
    console.log(
      `after / before: median of per-round ratios ${median(ratios).toFixed(2)}; rounds ${ratios.map((r) => r.toFixed(2)).join(' ')}; ratio of medians ${(median(after) / median(before)).toFixed(2)}`,
    );
  }
  console.log(
    JSON.stringify({
      rounds: ROUNDS,
      seconds: DURATION,
      warmupRequests: WARMUP_REQUESTS,
      node: process.version,
      cpu: Object.fromEntries(all.map((t) => [t.name, cpu.get(t)])),
    }),
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
