/**
 * bench/scale-node.ts --burst N: issue 36's measurements on the real node, in one run.
 * - burst: N Program Stacks applied at once with hibernation (`workspaceReclaimPolicy: Delete`, a
 *   cache volume per Stack), under the operations budget: time to all Ready, apply→Ready per Stack
 *   (creationTimestamp to the Ready condition's lastTransitionTime), peak workspace and Job pods,
 *   the queue over time; the hooks' syncs per second and Metacontroller's hook calls; API requests
 *   per Stack. Then at rest: the pods left, and the resident memory of the hooks, Metacontroller,
 *   kube-apiserver and etcd against a baseline taken before the burst (0 Stacks).
 * - wake: apply→Ready of a reconciliation request for a hibernated Stack (warm cache) against a
 *   Stack with a retained workspace, and against a new Stack (cold: a new cache volume).
 * - floor: what no operator can beat for one Stack here: a pod from the agent image started on
 *   the node (created to its container running) plus the same program's bare `pulumi stack init`
 *   and `pulumi up` with the toolchain's CLI on this host, file backend.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { Labels } from '../contract';
import type { Stack } from '../schemas/generated/types';
import { AGENT_IMAGE, condition, e2eStackSpec, eventually, exists, startOperator, type Operator } from '../e2e/harness';
import { sleep } from '../e2e/testbed/helpers';
import { podOf } from '../e2e/testbed/pod-bed';
import { requireBinaries, toolchainEnv } from '../e2e/testbed/toolchain';
import {
  apiRequests,
  apiserverMetrics,
  label,
  median,
  mib,
  pidWithArg,
  promLines,
  promSum,
  quantile,
  round2,
  rssOf,
} from './scale-node-stats';

export type Part = 'burst' | 'wake' | 'floor';

export interface BurstOptions {
  namespace: string;
  stacks: number;
  parts: Set<Part>;
  /** How long the burst may take to all Ready. */
  timeoutMs: number;
  /** The quiet period before each memory figure. */
  idleMs: number;
  /** Every how long the burst is sampled. */
  sampleMs: number;
  /** Runs of each wake and floor measurement. */
  runs: number;
}

/** The namespace of the bench, with the Program every Stack runs (Pulumi YAML, no resource, one output). */
export async function benchNamespace(op: Operator, namespace: string): Promise<void> {
  await op.namespace(namespace);
  await op.objects.create({
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name: 'hello', namespace },
    program: { variables: { greeting: 'hello' }, outputs: { greeting: '${greeting}' } },
  } as k8s.KubernetesObject);
}

const seconds = (ms: number): number => Math.round(ms / 100) / 10;

function stackOf(namespace: string, name: string, reclaim: 'Delete' | 'Retain'): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace },
    spec: e2eStackSpec({ stack: name, programRef: { name: 'hello' }, workspaceReclaimPolicy: reclaim }),
  } as k8s.KubernetesObject;
}

async function stacks(op: Operator, namespace: string): Promise<Stack[]> {
  return (
    (await op.custom.listNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1',
      namespace,
      plural: 'stacks',
    })) as {
      items: Stack[];
    }
  ).items;
}

const isReady = (s: Stack): boolean =>
  condition(s, 'Ready')?.status === 'True' && s.status?.lastUpdate?.state === 'succeeded';
const isWorkspacePod = (p: k8s.V1Pod): boolean => p.metadata?.name?.endsWith('-workspace-0') ?? false;
const isJobPod = (p: k8s.V1Pod): boolean => p.metadata?.labels?.['auto.pulumi.com/component'] === 'update';

/** The real Metacontroller's /metrics, when METACONTROLLER_ARGS gives it an address (the test bed turns it off). */
async function metacontrollerMetrics(): Promise<string | undefined> {
  const address = /--metrics-address=(\S+)/.exec(process.env.METACONTROLLER_ARGS ?? '')?.[1];
  if (!process.env.METACONTROLLER_BIN || !address || address === '0') return undefined;
  const res = await fetch(`http://${address}/metrics`);
  return res.ok ? res.text() : undefined;
}

/** Hook requests by hook: the hooks' pulumi_hook_request_duration_seconds_count. */
async function hookCalls(op: Operator): Promise<Map<string, number>> {
  const res = await op.hookRequest('/metrics');
  if (res.status !== 200) throw new Error(`hooks /metrics: ${res.status}`);
  const by = new Map<string, number>();
  for (const l of promLines(res.text))
    if (l.name === 'pulumi_hook_request_duration_seconds_count') by.set(label(l.labels, 'hook'), l.value);
  return by;
}

/**
 * Metacontroller's calls of our hooks (metacontroller_<hook type>_requests_total), by hook type,
 * and its own API requests (client-go's rest_client_requests_total) as `api`.
 */
function metacontrollerCalls(text: string | undefined): Map<string, number> {
  const by = new Map<string, number>();
  for (const l of text === undefined ? [] : promLines(text)) {
    const type =
      l.name === 'rest_client_requests_total' ? 'api' : /^metacontroller_(.+)_requests_total$/.exec(l.name)?.[1];
    if (type) by.set(type, (by.get(type) ?? 0) + l.value);
  }
  return by;
}

const perSecond = (before: Map<string, number>, after: Map<string, number>, secs: number): Record<string, number> =>
  Object.fromEntries([...after].map(([k, v]) => [k, round2((v - (before.get(k) ?? 0)) / secs)]));

/**
 * Resident memory (VmRSS from /proc) and, where the process reports it, its heap in use, of what
 * holds a Stack's cost. The hooks run inside this process (e2e/harness.ts), so theirs is this
 * process's: the hooks plus the bench's clients (and the Metacontroller driver, without the real binary).
 */
type Memory = Record<string, { rssMiB: number; heapMiB: number }>;

async function memoryOnce(op: Operator): Promise<Memory> {
  (globalThis as { gc?: () => void }).gc?.();
  const pid = (name: string) => op.cp.processes.find((p) => p.name === name)?.pid ?? -1;
  const goHeap = (text: string | undefined) =>
    text === undefined ? Number.NaN : promSum(text, 'go_memstats_heap_inuse_bytes');
  const etcdText = await fetch(`${op.cp.etcdEndpoint}/metrics`).then((r) => r.text());
  const mcPid = process.env.METACONTROLLER_BIN ? pidWithArg(`--kubeconfig=${op.cp.kubeconfigPath}`) : undefined;
  return {
    hooksProcess: { rssMiB: mib(process.memoryUsage().rss), heapMiB: mib(process.memoryUsage().heapUsed) },
    metacontroller: {
      rssMiB: mcPid === undefined ? Number.NaN : mib(rssOf(mcPid)),
      heapMiB: mib(goHeap(await metacontrollerMetrics())),
    },
    kubeApiserver: { rssMiB: mib(rssOf(pid('kube-apiserver'))), heapMiB: mib(goHeap(await apiserverMetrics(op))) },
    etcd: { rssMiB: mib(rssOf(pid('etcd'))), heapMiB: mib(goHeap(etcdText)) },
  };
}

/** The median of five looks at memory, 5 s apart: Go's heaps and RSS move with each collection. */
async function memory(op: Operator): Promise<Memory> {
  const looks: Memory[] = [];
  for (let i = 0; i < 5; i++) {
    if (i > 0) await sleep(5000);
    looks.push(await memoryOnce(op));
  }
  return Object.fromEntries(
    Object.keys(looks[0]!).map((k) => [
      k,
      { rssMiB: median(looks.map((l) => l[k]!.rssMiB)), heapMiB: median(looks.map((l) => l[k]!.heapMiB)) },
    ]),
  );
}

/** One look at the burst: [seconds, queued, in operation, Ready, workspace pods, unfinished Job pods]. */
type Sample = [number, number, number, number, number, number];

async function sample(op: Operator, namespace: string, startedAt: number): Promise<{ sample: Sample; items: Stack[] }> {
  const items = await stacks(op, namespace);
  const pods = (await op.core.listNamespacedPod({ namespace })).items;
  const reconciling = items.map((s) => condition(s, 'Reconciling'));
  return {
    items,
    sample: [
      Math.round((Date.now() - startedAt) / 1000),
      reconciling.filter((c) => c?.status === 'True' && c.reason === 'Queued').length,
      reconciling.filter((c) => c?.status === 'True' && c.reason === 'StackProcessing').length,
      items.filter(isReady).length,
      pods.filter(isWorkspacePod).length,
      // Job pods not finished: those of the kept Updates stay, Completed, and hold nothing on the node.
      pods.filter((p) => isJobPod(p) && p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed').length,
    ],
  };
}

async function burst(op: Operator, o: BurstOptions): Promise<Record<string, unknown>> {
  const ns = o.namespace;
  // The test bed has no provisioner: each cache claim gets a volume of the node's disk first.
  for (let i = 0; i < o.stacks; i++) await op.volumeForClaim(ns, `s${i}-cache`);
  const before = {
    api: await apiRequests(op),
    hooks: await hookCalls(op),
    mc: metacontrollerCalls(await metacontrollerMetrics()),
  };
  const startedAt = Date.now();
  await Promise.all(Array.from({ length: o.stacks }, (_, i) => op.objects.create(stackOf(ns, `s${i}`, 'Delete'))));
  const appliedMs = Date.now() - startedAt;
  const series: Sample[] = [];
  let items: Stack[] = [];
  while (Date.now() - startedAt < o.timeoutMs) {
    const seen = await sample(op, ns, startedAt);
    series.push(seen.sample);
    items = seen.items;
    if (seen.sample[3] === o.stacks) break;
    await sleep(o.sampleMs);
  }
  const elapsedMs = Date.now() - startedAt;
  const after = {
    api: await apiRequests(op),
    hooks: await hookCalls(op),
    mc: metacontrollerCalls(await metacontrollerMetrics()),
  };
  const ready = items.filter(isReady);
  const applyToReady = ready.map(
    (s) =>
      (Date.parse(condition(s, 'Ready')?.lastTransitionTime ?? '') - Date.parse(s.metadata.creationTimestamp ?? '')) /
      1000,
  );
  const lastReady = Math.max(...ready.map((s) => Date.parse(condition(s, 'Ready')?.lastTransitionTime ?? '')));
  const firstApplied = Math.min(...items.map((s) => Date.parse(s.metadata.creationTimestamp ?? '')));
  const peak = (i: number) => Math.max(0, ...series.map((s) => s[i]!));
  const secs = elapsedMs / 1000;
  return {
    stacks: o.stacks,
    ready: ready.length,
    // Each Stack ran its first `up` once: the Update of generation 1, succeeded.
    firstUpOnce: ready.filter((s) => s.status?.lastUpdate?.type === 'up' && s.status.lastUpdate.generation === 1)
      .length,
    secondsToApplyAll: seconds(appliedMs),
    secondsToAllReady: ready.length === o.stacks ? seconds(elapsedMs) : null,
    // From the API server's timestamps (1 s resolution): the first creation to the last Ready.
    secondsFirstApplyToLastReady: ready.length === o.stacks ? (lastReady - firstApplied) / 1000 : null,
    applyToReadySeconds: {
      p50: quantile(applyToReady, 0.5),
      p99: quantile(applyToReady, 0.99),
      min: Math.min(...applyToReady),
      max: Math.max(...applyToReady),
    },
    peak: { queued: peak(1), inOperation: peak(2), workspacePods: peak(4), unfinishedJobPods: peak(5) },
    sampleEverySeconds: o.sampleMs / 1000,
    series: 'seconds:queued/inOperation/ready/workspacePods/unfinishedJobPods',
    queueOverTime: series.map((s) => `${s[0]}:${s[1]}/${s[2]}/${s[3]}/${s[4]}/${s[5]}`).join(' '),
    hookCallsPerSecond: perSecond(before.hooks, after.hooks, secs),
    metacontrollerCallsPerSecond: perSecond(before.mc, after.mc, secs),
    metacontroller: process.env.METACONTROLLER_BIN
      ? {
          // The binary's default when METACONTROLLER_ARGS names none (the test bed passes none).
          workers: Number(/--workers=(\d+)/.exec(process.env.METACONTROLLER_ARGS ?? '')?.[1] ?? 5),
          args: process.env.METACONTROLLER_ARGS ?? '',
        }
      : 'the test bed driver',
    // Every client's (Metacontroller, the hooks, kubelet, the pods), but the bench's own two lists per sample.
    apiRequests: {
      all: after.api.all - before.api.all - 2 * series.length,
      writes: after.api.writes - before.api.writes,
      perStack: round2((after.api.all - before.api.all - 2 * series.length) / o.stacks),
      writesPerStack: round2((after.api.writes - before.api.writes) / o.stacks),
    },
  };
}

/** What the namespace holds at rest, counted: the objects of the Stacks and what the cluster made for them. */
const AT_REST_KINDS = [
  ['pulumi.com/v1', 'Stack'],
  ['pulumi.com/v1', 'Program'],
  ['auto.pulumi.com/v1alpha1', 'Workspace'],
  ['auto.pulumi.com/v1alpha1', 'Update'],
  ['apps/v1', 'StatefulSet'],
  ['v1', 'Service'],
  ['batch/v1', 'Job'],
  ['v1', 'Pod'],
  ['v1', 'ServiceAccount'],
  ['rbac.authorization.k8s.io/v1', 'Role'],
  ['rbac.authorization.k8s.io/v1', 'RoleBinding'],
  ['v1', 'Secret'],
  ['v1', 'ConfigMap'],
  ['v1', 'PersistentVolumeClaim'],
  ['v1', 'Event'],
] as const;

/** Waits until no workspace pod is left in the namespace; the pods there then, and the objects by kind. */
async function atRest(op: Operator, namespace: string, idleMs: number): Promise<Record<string, unknown>> {
  const startedAt = Date.now();
  await eventually(
    'no workspace pod',
    async () => !(await op.core.listNamespacedPod({ namespace })).items.some(isWorkspacePod),
    900_000,
    2000,
  ).catch((e: unknown) => console.error(e instanceof Error ? e.message : e));
  const secondsToNoWorkspacePod = seconds(Date.now() - startedAt);
  await sleep(idleMs);
  const pods = (await op.core.listNamespacedPod({ namespace })).items;
  const objects: Record<string, number> = {};
  for (const [apiVersion, kind] of AT_REST_KINDS)
    objects[kind] = await op.objects
      .list(apiVersion, kind, namespace)
      .then((l) => l.items.length)
      .catch(() => Number.NaN);
  return {
    secondsToNoWorkspacePod,
    workspacePods: pods.filter(isWorkspacePod).length,
    jobPods: pods.filter(isJobPod).length,
    otherPods: pods.filter((p) => !isWorkspacePod(p) && !isJobPod(p)).length,
    objects,
  };
}

/** When each step of one Stack's operation was first seen, in seconds from the start (every 250 ms). */
type Stages = Partial<Record<'workspacePod' | 'workspacePodReady' | 'jobPod' | 'jobPodDone', number>>;

/**
 * Watches one Stack's workspace pod and Job pods in the background, leaving out pods that were
 * there before (a retained workspace, the Job pods of earlier operations).
 */
async function stages(op: Operator, namespace: string, name: string): Promise<{ stop(): Promise<Stages> }> {
  const jobPods = () =>
    op.core
      .listNamespacedPod({
        namespace,
        labelSelector: `${Labels.stackName}=${name},${Labels.workspaceComponent}=update`,
      })
      .then((l) => l.items);
  const workspacePod = () =>
    op.core.readNamespacedPod({ namespace, name: `${name}-workspace-0` }).catch(() => undefined);
  const old = new Set([...(await jobPods()), await workspacePod()].map((p) => p?.metadata?.uid));
  const startedAt = Date.now();
  const seen: Stages = {};
  const mark = (k: keyof Stages) => (seen[k] ??= seconds(Date.now() - startedAt));
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const ws = await workspacePod();
        if (ws && !old.has(ws.metadata?.uid)) {
          mark('workspacePod');
          if (ws.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) mark('workspacePodReady');
        }
        for (const p of await jobPods()) {
          if (old.has(p.metadata?.uid)) continue;
          mark('jobPod');
          if (p.status?.phase === 'Succeeded') mark('jobPodDone');
        }
      } catch {
        /* a failed look: the next one */
      }
      await sleep(250);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return seen;
    },
  };
}

interface Timed {
  seconds: number;
  stages: Stages;
}

/** From a reconciliation request to the Stack Ready with the operation it asked for. */
async function reconcile(op: Operator, namespace: string, name: string, request: string): Promise<Timed> {
  const before = (await op.getStack(namespace, name)).status?.lastUpdate?.name;
  const watch = await stages(op, namespace, name);
  const startedAt = Date.now();
  await op.patchStack(namespace, name, { metadata: { annotations: { 'pulumi.com/reconciliation-request': request } } });
  await op.readyStack(
    namespace,
    name,
    (s) => s.status?.lastUpdate?.name !== before && s.status?.lastUpdate?.state === 'succeeded',
    600_000,
  );
  return { seconds: seconds(Date.now() - startedAt), stages: await watch.stop() };
}

async function hibernated(op: Operator, namespace: string, name: string): Promise<void> {
  await eventually(
    `${name} to hold no workspace pod`,
    async () => !(await exists(() => op.core.readNamespacedPod({ namespace, name: `${name}-workspace-0` }))),
    300_000,
    500,
  );
}

/** From creating a Stack (a new cache volume: nothing warm) to Ready; then until it sleeps. */
async function coldStart(op: Operator, namespace: string, name: string): Promise<Timed> {
  await op.volumeForClaim(namespace, `${name}-cache`);
  const watch = await stages(op, namespace, name);
  const startedAt = Date.now();
  await op.objects.create(stackOf(namespace, name, 'Delete'));
  await op.readyStack(namespace, name, isReady, 600_000);
  const timed = { seconds: seconds(Date.now() - startedAt), stages: await watch.stop() };
  await hibernated(op, namespace, name);
  return timed;
}

/** Interleaved runs: a hibernated Stack's wake, a retained workspace's operation, a cold start. */
async function wake(op: Operator, o: BurstOptions, sleeper: string): Promise<Record<string, unknown>> {
  const ns = o.namespace;
  await op.objects.create(stackOf(ns, 'kept', 'Retain'));
  await op.readyStack(ns, 'kept', isReady, 600_000);
  const runs = { hibernatedWarm: [] as Timed[], retained: [] as Timed[], cold: [] as Timed[] };
  for (let i = 0; i < o.runs; i++) {
    await hibernated(op, ns, sleeper);
    runs.hibernatedWarm.push(await reconcile(op, ns, sleeper, `wake-${i}`));
    runs.retained.push(await reconcile(op, ns, 'kept', `wake-${i}`));
    runs.cold.push(await coldStart(op, ns, `cold${i}`));
  }
  const m = (xs: Timed[]) => median(xs.map((x) => x.seconds));
  const medians = { hibernatedWarm: m(runs.hibernatedWarm), retained: m(runs.retained), cold: m(runs.cold) };
  return {
    secondsMedian: medians,
    hibernatedOverRetained: round2(medians.hibernatedWarm / medians.retained),
    hibernatedOverCold: round2(medians.hibernatedWarm / medians.cold),
    runs,
  };
}

/** Seconds from creating a pod of the agent image to its container running. */
async function podStart(op: Operator, namespace: string, name: string): Promise<number> {
  const startedAt = Date.now();
  await op.core.createNamespacedPod({
    namespace,
    body: podOf(namespace, name, AGENT_IMAGE, { command: ['sleep', '600'] }),
  });
  await eventually(
    `pod ${name} to run`,
    async () =>
      (await op.core.readNamespacedPod({ namespace, name })).status?.containerStatuses?.[0]?.state?.running !==
      undefined,
    300_000,
    100,
  );
  const secs = (Date.now() - startedAt) / 1000;
  await op.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 });
  return round2(secs);
}

/** The same program as the Stacks', with the toolchain's CLI on this host: `stack init` and the first `up`. */
function bareUp(root: string): { stackInit: number; up: number } {
  requireBinaries(['pulumi', 'pulumiLanguageYaml']);
  const project = path.join(root, 'project');
  fs.mkdirSync(path.join(root, 'state'), { recursive: true });
  fs.mkdirSync(project, { recursive: true });
  fs.writeFileSync(
    path.join(project, 'Pulumi.yaml'),
    ['name: hello', 'runtime: yaml', 'variables:', '  greeting: hello', 'outputs:', '  greeting: ${greeting}', ''].join(
      '\n',
    ),
  );
  const env = {
    ...process.env,
    ...toolchainEnv(),
    PULUMI_HOME: path.join(root, 'home'),
    PULUMI_BACKEND_URL: `file://${path.join(root, 'state')}`,
    PULUMI_CONFIG_PASSPHRASE: 'bench',
    PULUMI_SKIP_UPDATE_CHECK: 'true',
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
  };
  const timed = (args: string[]): number => {
    const startedAt = Date.now();
    const r = spawnSync('pulumi', [...args, '--non-interactive'], { cwd: project, env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`pulumi ${args.join(' ')}: ${r.stdout}\n${r.stderr}`);
    return (Date.now() - startedAt) / 1000;
  };
  return { stackInit: round2(timed(['stack', 'init', 'bench'])), up: round2(timed(['up', '--yes', '--skip-preview'])) };
}

async function floor(op: Operator, o: BurstOptions, coldMedian: number | undefined): Promise<Record<string, unknown>> {
  const pods: number[] = [];
  const bare: { stackInit: number; up: number }[] = [];
  for (let i = 0; i < o.runs; i++) {
    pods.push(await podStart(op, o.namespace, `floor${i}`));
    // A new home and backend each time: as cold as a new Stack's workspace.
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-bench-floor-'));
    try {
      bare.push(bareUp(root));
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  }
  const podMedian = median(pods);
  const bareMedian = median(bare.map((b) => b.stackInit + b.up));
  const floorSeconds = round2(podMedian + bareMedian);
  return {
    podStartSeconds: pods,
    bareSeconds: bare,
    floorSeconds: { podStart: podMedian, bareStackInitAndUp: round2(bareMedian), sum: floorSeconds },
    ...(coldMedian === undefined
      ? {}
      : { coldStartSeconds: coldMedian, coldOverFloor: round2(coldMedian / floorSeconds) }),
  };
}

export async function burstRun(o: BurstOptions): Promise<Record<string, unknown>> {
  const ns = o.namespace;
  const out: Record<string, unknown> = { loadAverageAtStart: os.loadavg().map(round2) };
  // As a cluster with the chart's hibernation default and a cache volume: every Stack here names
  // its policy anyway. /metrics open to the bench (METRICS_AUTH off).
  const op = await startOperator({
    hookConfig: {
      workspaceReclaimDefault: 'Delete',
      workspaceCache: { size: '1Gi', retained: false },
      metricsAuth: false,
    },
  });
  const report = (key: string, value: unknown) => {
    out[key] = value;
    console.log(JSON.stringify({ [key]: value }));
  };
  try {
    await benchNamespace(op, ns);
    let sleeper = 's0';
    if (o.parts.has('burst')) {
      await sleep(o.idleMs);
      const baseline = await memory(op);
      report('memoryBaseline', baseline);
      const b = await burst(op, o);
      report('burst', b);
      // Not all Ready in time: not at rest either; what was reached is above.
      if (b.ready !== o.stacks) return out;
      report('atRest', await atRest(op, ns, o.idleMs));
      const rest = await memory(op);
      report('memoryAtRest', rest);
      const perStack = Object.fromEntries(
        Object.entries(rest).map(([k, v]) => [
          k,
          {
            rssKiB: Math.round(((v.rssMiB - baseline[k]!.rssMiB) * 1024) / o.stacks),
            heapKiB: Math.round(((v.heapMiB - baseline[k]!.heapMiB) * 1024) / o.stacks),
          },
        ]),
      );
      const total = (f: 'rssKiB' | 'heapKiB') =>
        Object.values(perStack).reduce((a, v) => a + (Number.isFinite(v[f]) ? v[f] : 0), 0);
      report('memoryPerIdleStack', { ...perStack, total: { rssKiB: total('rssKiB'), heapKiB: total('heapKiB') } });
    } else if (o.parts.has('wake')) {
      sleeper = 'sleeper';
      await coldStart(op, ns, sleeper);
    }
    let coldMedian: number | undefined;
    if (o.parts.has('wake')) {
      const w = await wake(op, o, sleeper);
      coldMedian = (w.secondsMedian as { cold: number }).cold;
      report('wake', w);
    }
    if (o.parts.has('floor')) report('floor', await floor(op, o, coldMedian));
  } finally {
    await op.stop();
    out.loadAverageAtEnd = os.loadavg().map(round2);
  }
  return out;
}
