/**
 * The control plane at scale: one full resync of N Stacks at rest (default 1,000, mixed sources,
 * ./scale-stacks.ts) replayed against two replicas (--replicas) of the real hook server, as Metacontroller sends
 * it: every parent of each of the three controllers (Stacks, Workspaces, Updates) once, each
 * controller with 5 workers (Metacontroller's --workers default), every request sent to one of the
 * replicas picked at random (a Service in iptables mode). Several resyncs (--resyncs, default 3): cold (the
 * first after the replicas start), then warm ones, each after the git lookups' cache has expired
 * (as it has 600 s later). Requests go to a random replica, so a replica sees a parent for the
 * first time on any resync with some chance: the second is warm for about half of them, the third
 * for three quarters. Per replica and resync: CPU seconds (/proc/<pid>/stat), peak RSS (VmHWM), the hooks'
 * cache hits and misses (/metrics, pulumi_hook_cache_requests_total), and the requests the hooks
 * made: git lookups (a fake git host) and Kubernetes API calls (a fake API server: Events; the
 * list and watch of Stacks, Programs, Workspaces and Updates, whose lists hold every parent of the
 * replay, so the replicas' mirrors hold what they would at that many Stacks), both on loopback
 * (./scale-fakes.ts). The replicas are measured once their mirrors are synced.
 *
 * Run: npm run bench:scale -- [--stacks 1000] [--seed 22] [--namespaces 50] [--resyncs 3]
 *   [--replicas 2] [--memory-limit 512] [--json]
 * The replicas are `node dist/hooks/src/main.js` as deployed (the image's node flags, LOG_LEVEL info, logs drained), each
 * in a memory cgroup of the chart's limit (--memory-limit MiB, 0: none; needs root), since V8
 * sizes its heap from it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { request as httpRequest } from 'undici';
import { configFromEnv, HOOKS_NODE_FLAGS } from '../hooks/src/config';
import { buildServer } from '../hooks/src/server';
import { fakeApiServer, fakeGitHost, kubeconfigFor, type CountingServer, type Listed } from './scale-fakes';
import { prng, recordings, SOURCE_KINDS, scaleStacks, type HookRequest, type Route } from './scale-stacks';

const ROOT = join(__dirname, '..', '..');
const WORKERS_PER_CONTROLLER = 5;
const GIT_CACHE_TTL_MS = configFromEnv({}).gitCacheTtlMs;

function option(name: string, fallback: number): number {
  const at = process.argv.indexOf(`--${name}`);
  if (at < 0) return fallback;
  const n = Number(process.argv[at + 1]);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer`);
  return n;
}

interface Replica {
  name: string;
  child: ChildProcess;
  url: string;
  /** The replica's own memory cgroup, removed when it has exited. */
  cgroup?: string;
}

/**
 * A memory cgroup of `limitMiB` for one replica (v2, else v1's memory controller), as a container
 * with the chart's memory limit has. V8 sizes its heap from it (a 512 MiB limit: a heap limit of
 * about 260 MB and a small young generation; without one, on this 24 GB machine, 4.2 GB).
 */
function memoryCgroup(name: string, limitMiB: number): string {
  const bytes = String(limitMiB * 2 ** 20);
  const v2 = existsSync('/sys/fs/cgroup/cgroup.controllers');
  const dir = join(v2 ? '/sys/fs/cgroup' : '/sys/fs/cgroup/memory', `pko-scale-${process.pid}-${name}`);
  mkdirSync(dir);
  writeFileSync(join(dir, v2 ? 'memory.max' : 'memory.limit_in_bytes'), bytes);
  return dir;
}

/** What the replicas are configured with, as the hooks that answered the recordings were. */
interface ReplicaConfig {
  agentImage: string;
  /** The program server's URL and the file holding its CA. */
  programServer: { url: string; caFile: string };
  kubeconfig: string;
}

async function startReplica(name: string, port: number, config: ReplicaConfig, limitMiB: number): Promise<Replica> {
  const main = join(ROOT, 'dist', 'hooks', 'src', 'main.js');
  const probe = join(__dirname, 'scale-gc-probe.js');
  const cgroup = limitMiB > 0 ? memoryCgroup(name, limitMiB) : undefined;
  const argv = [process.execPath, ...HOOKS_NODE_FLAGS, '--expose-gc', '-r', probe, main];
  // The shell joins the cgroup, then becomes node: the replica starts inside its limit.
  const [command, ...args] = cgroup
    ? ['sh', '-c', `echo $$ > ${join(cgroup, 'cgroup.procs')} && exec "$0" "$@"`, ...argv]
    : argv;
  const child = spawn(command!, args, {
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      PORT: String(port),
      // Each replica's program server needs a port of its own too (nothing downloads from it here).
      PROGRAM_PORT: String(port + 1000),
      HOST: '127.0.0.1',
      AGENT_IMAGE: config.agentImage,
      PROGRAM_SERVER_URL: config.programServer.url,
      PROGRAM_SERVER_CA_FILE: config.programServer.caFile,
      KUBECONFIG: config.kubeconfig,
      // For trying V8 or allocator settings on the replicas (docs/benchmarks.md, "Scale").
      ...(process.env.SCALE_REPLICA_NODE_OPTIONS ? { NODE_OPTIONS: process.env.SCALE_REPLICA_NODE_OPTIONS } : {}),
      ...(process.env.MALLOC_ARENA_MAX ? { MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX } : {}),
    },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  child.stdout!.resume(); // the log lines, drained as a container runtime does
  const url = `http://127.0.0.1:${port}`;
  for (let tries = 0; tries < 200; tries++) {
    try {
      const res = await httpRequest(`${url}/readyz`);
      await res.body.text();
      if (res.statusCode === 200) return { name, child, url, ...(cgroup ? { cgroup } : {}) };
    } catch {
      /* not listening yet */
    }
    await sleep(50);
  }
  child.kill();
  throw new Error(`replica ${name} did not become ready`);
}

/** utime + stime of a process, in seconds. */
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100; // USER_HZ is 100 on Linux
}

function memoryMiB(pid: number): { rss: number; hwm: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kib('VmRSS') / 1024, hwm: kib('VmHWM') / 1024 };
}

/** Heap and RSS after two full collections in the replica (./scale-gc-probe.ts), in MiB. */
function afterGc(child: ChildProcess): Promise<{ rss: number; heapTotal: number; heapUsed: number; external: number }> {
  return new Promise((resolve) => {
    child.once('message', (m) => {
      const { memory } = m as { memory: NodeJS.MemoryUsage };
      const mib = (x: number) => Math.round(x / 2 ** 20);
      resolve({
        rss: mib(memory.rss),
        heapTotal: mib(memory.heapTotal),
        heapUsed: mib(memory.heapUsed),
        external: mib(memory.external + memory.arrayBuffers),
      });
    });
    child.send('gc');
  });
}

/** Waits until the replica's mirrors of Stacks, Programs, Workspaces and Updates have listed everything. */
async function mirrorsSynced(url: string): Promise<void> {
  for (let tries = 0; tries < 1200; tries++) {
    const res = await httpRequest(`${url}/metrics`);
    const text = await res.body.text();
    if ([...text.matchAll(/^pulumi_hook_objects_synced\{resource="\w+"\} 1$/gm)].length === 4) return;
    await sleep(100);
  }
  throw new Error(`${url}: the mirrors did not sync in 120 s`);
}

async function cacheCounts(url: string): Promise<Map<string, number>> {
  const res = await httpRequest(`${url}/metrics`);
  const text = await res.body.text();
  const counts = new Map<string, number>();
  for (const m of text.matchAll(/^pulumi_hook_cache_requests_total\{cache="(\w+)",result="(\w+)"\} (\d+)$/gm))
    counts.set(`${m[1]}/${m[2]}`, Number(m[3]));
  return counts;
}

function diff(after: Map<string, number>, before: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of after) if (v - (before.get(k) ?? 0) > 0) out[k] = v - (before.get(k) ?? 0);
  return out;
}

function quantile(sorted: number[], q: number): number {
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]! : NaN;
}

interface ResyncResult {
  wallSeconds: number;
  requests: number;
  latencyMs: Record<Route, { p50: number; p99: number; max: number }>;
  replicas: {
    name: string;
    requests: number;
    cpuSeconds: number;
    rssMiB: number;
    peakRssMiB: number;
    /** After the resync, two full collections: what the replica keeps. */
    afterGcMiB?: { rss: number; heapTotal: number; heapUsed: number; external: number };
    cache: Record<string, number>;
  }[];
  gitRequests: Record<string, number>;
  apiRequests: Record<string, number>;
  resyncAfterSeconds: Record<string, number>;
}

/**
 * One resync: the three controllers' queues, each drained by its 5 workers, all at once; each
 * request to a random replica. Every answer is checked to be a 200.
 */
async function resync(
  queues: Record<Route, HookRequest[]>,
  replicas: Replica[],
  random: () => number,
  git: CountingServer,
  api: CountingServer,
): Promise<ResyncResult> {
  const before = replicas.map((r) => ({ cpu: cpuSeconds(r.child.pid!) }));
  const cacheBefore = await Promise.all(replicas.map((r) => cacheCounts(r.url)));
  const gitBefore = git.counts();
  const apiBefore = api.counts();
  const sent = replicas.map(() => 0);
  const latencies: Record<Route, number[]> = { '/stack/sync': [], '/workspace/sync': [], '/update/sync': [] };
  const wake = new Map<string, number>();
  const started = performance.now();
  const worker = async (queue: HookRequest[]) => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const r = Math.floor(random() * replicas.length);
      sent[r]!++;
      const t0 = performance.now();
      const res = await httpRequest(`${replicas[r]!.url}${next.route}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: next.body,
      });
      const text = await res.body.text();
      latencies[next.route].push(performance.now() - t0);
      if (res.statusCode !== 200) throw new Error(`${next.route}: ${res.statusCode} ${text.slice(0, 300)}`);
      const after = /"resyncAfterSeconds":(\d+)/.exec(text)?.[1];
      const key = `${next.route} ${after ?? 'none'}`;
      wake.set(key, (wake.get(key) ?? 0) + 1);
    }
  };
  await Promise.all(
    (Object.keys(queues) as Route[]).flatMap((route) =>
      Array.from({ length: WORKERS_PER_CONTROLLER }, () => worker(queues[route])),
    ),
  );
  const wallSeconds = (performance.now() - started) / 1000;
  const cacheAfter = await Promise.all(replicas.map((r) => cacheCounts(r.url)));
  const stats = (xs: number[]) => {
    const s = [...xs].sort((a, b) => a - b);
    const r2 = (x: number) => Math.round(x * 100) / 100;
    return { p50: r2(quantile(s, 0.5)), p99: r2(quantile(s, 0.99)), max: r2(s[s.length - 1] ?? NaN) };
  };
  return {
    wallSeconds,
    requests: sent.reduce((a, b) => a + b, 0),
    latencyMs: {
      '/stack/sync': stats(latencies['/stack/sync']),
      '/workspace/sync': stats(latencies['/workspace/sync']),
      '/update/sync': stats(latencies['/update/sync']),
    },
    replicas: replicas.map((r, k) => {
      const mem = memoryMiB(r.child.pid!);
      return {
        name: r.name,
        requests: sent[k]!,
        cpuSeconds: Math.round((cpuSeconds(r.child.pid!) - before[k]!.cpu) * 100) / 100,
        rssMiB: Math.round(mem.rss),
        peakRssMiB: Math.round(mem.hwm),
        cache: diff(cacheAfter[k]!, cacheBefore[k]!),
      };
    }),
    gitRequests: diff(git.counts(), gitBefore),
    apiRequests: diff(api.counts(), apiBefore),
    resyncAfterSeconds: Object.fromEntries(wake),
  };
}

/** The requests of one resync, per controller, in a seeded order (the informers' list order is arbitrary). */
function queuesOf(stacks: Awaited<ReturnType<typeof scaleStacks>>, random: () => number): Record<Route, HookRequest[]> {
  const shuffled = <T>(xs: T[]) => {
    const a = [...xs];
    for (let i = a.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [a[i], a[j]] = [a[j]!, a[i]!];
    }
    return a;
  };
  return {
    '/stack/sync': shuffled(stacks.map((s) => s.stack)),
    '/workspace/sync': shuffled(stacks.map((s) => s.workspace)),
    '/update/sync': shuffled(stacks.flatMap((s) => s.updates)),
  };
}

async function main(): Promise<void> {
  const count = option('stacks', 1000);
  const seed = option('seed', 22);
  const namespaces = option('namespaces', 50);
  const at = process.argv.indexOf('--memory-limit');
  const limitMiB = at < 0 ? 512 : Number(process.argv[at + 1]);
  if (!Number.isInteger(limitMiB) || limitMiB < 0) throw new Error('--memory-limit must be a number of MiB (0: none)');
  const git = await fakeGitHost();
  const listed: Listed = {};
  const api = await fakeApiServer(listed);
  const dir = mkdtempSync(join(tmpdir(), 'pko-scale-'));
  const kubeconfig = join(dir, 'kubeconfig');
  writeFileSync(kubeconfig, kubeconfigFor(api.url));
  const { agentImage, programServer } = recordings();
  const caFile = join(dir, 'program-server-ca.pem');
  writeFileSync(caFile, programServer.ca);
  const replicaConfig: ReplicaConfig = { agentImage, programServer: { url: programServer.url, caFile }, kubeconfig };
  const replicas: Replica[] = [];
  try {
    // The requests, brought to rest by an in-process hook server (its git lookups go to the fake host too).
    const t0 = performance.now();
    const settler = buildServer({ ...configFromEnv({}), agentImage, programServer }, { logger: false });
    await settler.app.listen({ port: 0, host: '127.0.0.1' });
    const settlerUrl = `http://127.0.0.1:${(settler.app.server.address() as { port: number }).port}`;
    const stacks = await scaleStacks({
      count,
      seed,
      namespaces,
      gitUrl: git.url,
      now: new Date(),
      ask: async (route, body) => {
        const res = await httpRequest(`${settlerUrl}${route}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        const text = await res.body.text();
        if (res.statusCode !== 200) throw new Error(`${route}: ${res.statusCode} ${text.slice(0, 300)}`);
        return JSON.parse(text) as unknown;
      },
    });
    await settler.app.close();
    const statusWrites = {
      stacks: stacks.filter((s) => s.statusWrites.stack).length,
      workspaces: stacks.filter((s) => s.statusWrites.workspace).length,
      updates: stacks.reduce((sum, s) => sum + s.statusWrites.updates, 0),
    };
    console.error(
      `statuses an answer would change (Metacontroller writes them every resync): ${JSON.stringify(statusWrites)}`,
    );
    const bySource = Object.fromEntries(SOURCE_KINDS.map((k) => [k, stacks.filter((s) => s.source === k).length]));
    const bytes = (route: Route) =>
      stacks
        .flatMap((s) => [s.stack, s.workspace, ...s.updates])
        .filter((r) => r.route === route)
        .reduce((sum, r) => sum + r.body.length, 0);
    console.error(
      `${count} Stacks at rest built in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${JSON.stringify(bySource)}; ` +
        `request bytes per resync: stack ${(bytes('/stack/sync') / 1e6).toFixed(1)} MB, workspace ${(bytes('/workspace/sync') / 1e6).toFixed(1)} MB, update ${(bytes('/update/sync') / 1e6).toFixed(1)} MB`,
    );

    // The replicas' mirrors (gauges, events, operations budget) list every Stack, Workspace and Update.
    const parentOf = (r: HookRequest) => (JSON.parse(r.body) as { parent: unknown }).parent;
    const updates = stacks.flatMap((s) => s.updates);
    listed['/apis/pulumi.com/v1/stacks'] = { count: stacks.length, item: (i) => parentOf(stacks[i]!.stack) };
    listed['/apis/auto.pulumi.com/v1alpha1/workspaces'] = {
      count: stacks.length,
      item: (i) => parentOf(stacks[i]!.workspace),
    };
    listed['/apis/auto.pulumi.com/v1alpha1/updates'] = { count: updates.length, item: (i) => parentOf(updates[i]!) };

    const basePort = 20000 + Math.floor(prng(seed)() * 20000);
    for (let k = 0; k < option('replicas', 2); k++)
      replicas.push(await startReplica(`replica-${'abcdefghij'[k] ?? k}`, basePort + k, replicaConfig, limitMiB));
    await Promise.all(replicas.map((r) => mirrorsSynced(r.url)));
    const started = replicas.map((r) => ({
      name: r.name,
      ...memoryMiB(r.child.pid!),
      cpuSeconds: cpuSeconds(r.child.pid!),
    }));
    const random = prng(seed + 1);
    const results: Record<string, ResyncResult> = {};
    const resyncs = option('resyncs', 3);
    for (let k = 0; k < resyncs; k++) {
      const phase = k === 0 ? 'cold' : `warm ${k}`;
      if (k > 0) {
        // 600 s later the git lookups' answers have expired; wait out their TTL rather than 600 s.
        console.error(`waiting ${(GIT_CACHE_TTL_MS / 1000 + 1).toFixed(0)} s for the git lookup cache to expire`);
        await sleep(GIT_CACHE_TTL_MS + 1000);
      }
      const result = await resync(queuesOf(stacks, random), replicas, random, git, api);
      // Measured after the resync's CPU and peak RSS, so the collections count in neither.
      for (const [k, r] of replicas.entries()) result.replicas[k]!.afterGcMiB = await afterGc(r.child);
      results[phase] = result;
      console.error(`${phase} resync done in ${results[phase].wallSeconds.toFixed(1)} s`);
    }
    const report = {
      stacks: count,
      seed,
      namespaces,
      replicas: replicas.length,
      memoryLimitMiB: limitMiB,
      sources: bySource,
      node: process.version,
      started,
      results,
    };
    if (process.argv.includes('--json')) {
      console.log(JSON.stringify(report, null, 2));
      return;
    }
    for (const [phase, r] of Object.entries(results)) {
      console.log(`\n${phase} resync: ${r.requests} requests in ${r.wallSeconds.toFixed(1)} s (${count} Stacks)`);
      console.table(
        r.replicas.map((x) => ({
          replica: x.name,
          requests: x.requests,
          'CPU s': x.cpuSeconds,
          'RSS MiB': x.rssMiB,
          'peak RSS MiB': x.peakRssMiB,
          'after GC: RSS / heap total / used / external MiB': x.afterGcMiB
            ? `${x.afterGcMiB.rss} / ${x.afterGcMiB.heapTotal} / ${x.afterGcMiB.heapUsed} / ${x.afterGcMiB.external}`
            : '',
          cache: Object.entries(x.cache)
            .map(([k, v]) => `${k} ${v}`)
            .join(', '),
        })),
      );
      console.log('latency ms:', JSON.stringify(r.latencyMs));
      console.log('git requests:', JSON.stringify(r.gitRequests), 'API requests:', JSON.stringify(r.apiRequests));
      console.log('answers by resyncAfterSeconds:', JSON.stringify(r.resyncAfterSeconds));
    }
    console.log(
      '\nreplicas at start:',
      JSON.stringify(started),
      '\nAPI requests since start:',
      JSON.stringify(Object.fromEntries(api.counts())),
    );
  } finally {
    for (const r of replicas) {
      const exited = new Promise((done) => r.child.once('exit', done));
      r.child.kill();
      await exited;
      if (r.cgroup) rmdirSync(r.cgroup);
    }
    await git.close();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
