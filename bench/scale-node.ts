/**
 * End to end on the real node: how many Program Stacks reach Ready on this machine. Starts the
 * test bed's cluster (e2e/harness.ts: API server, kubelet, Metacontroller, the hooks), then ramps
 * the number of Stacks in one namespace (cumulative steps, default 5, 10, 20, 40), each step
 * bounded (--step-timeout seconds); it stops at the first step whose Stacks are not all Ready in
 * time. Per step: time from the step's applies to all Ready, and from the kubelet's
 * /stats/summary (through the API server's node proxy, sampled every 3 s) each workspace pod's
 * CPU and working set at the end, and each Job pod's peak working set and CPU time; from the API
 * server's own apiserver_request_total, the requests the step cost (all clients: Metacontroller,
 * the hooks, kubelet, the pods) and the request rate of the cluster at rest after it (--idle seconds).
 *
 * Run (root, test bed built): npm run build && bash e2e/testbed/node/run-in-testbed.sh node dist/bench/scale-node.js [--reclaim Delete] [--steps 5,10,20,40] [--step-timeout 600] [--idle 60] [--workspace-cpu 10m]
 *
 * With --burst N it measures issue 36's figures instead (bench/scale-node-burst.ts): N Stacks at
 * once with hibernation, at rest, a wake, one Stack against its floor; --parts picks some of
 * burst,wake,floor (--burst 0: wake,floor only), --runs the runs of each wake and floor figure
 * (3), --timeout the burst's bound (2400 s), --sample its sampling (5 s), --idle the quiet period
 * before each memory figure (60 s). Run it with `node --expose-gc` (memory after a collection)
 * and, for the real Metacontroller's own figures, METACONTROLLER_ARGS='--metrics-address=127.0.0.1:9999'.
 */
import * as k8s from '@kubernetes/client-node';
import { e2eStackSpec, startOperator } from '../e2e/harness';
import { benchNamespace, burstRun, type Part } from './scale-node-burst';
import { apiRequests, median, mib, summary, topDeltas, type PodStats } from './scale-node-stats';

const NS = 'scale';

function arg(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at < 0 ? fallback : process.argv[at + 1]!;
}

function readyCount(items: { status?: { conditions?: { type: string; status: string }[] } }[]): number {
  return items.filter((s) => s.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')).length;
}

async function ramp(): Promise<void> {
  const reclaim = arg('reclaim', 'Retain');
  const steps = arg('steps', '5,10,20,40').split(',').map(Number);
  const stepTimeoutMs = Number(arg('step-timeout', '600')) * 1000;
  const idleMs = Number(arg('idle', '60')) * 1000;
  const workspaceCpu = arg('workspace-cpu', '');
  const op = await startOperator();
  const results: unknown[] = [];
  try {
    await benchNamespace(op, NS);
    let created = 0;
    for (const total of steps) {
      const started = Date.now();
      const requestsBefore = await apiRequests(op);
      for (; created < total; created++) {
        const spec = e2eStackSpec({ stack: `s${created}`, programRef: { name: 'hello' } });
        if (reclaim === 'Delete') spec.workspaceReclaimPolicy = 'Delete';
        // A smaller CPU request than the default 100m: how many fit by use rather than by requests.
        if (workspaceCpu) spec.workspaceTemplate!.spec!.resources = { requests: { cpu: workspaceCpu, memory: '64Mi' } };
        await op.objects.create({
          apiVersion: 'pulumi.com/v1',
          kind: 'Stack',
          metadata: { name: `s${created}`, namespace: NS },
          spec,
        } as k8s.KubernetesObject);
      }
      const jobPeaks = new Map<string, { workingSet: number; cpuSeconds: number }>();
      let workspaces: PodStats[] = [];
      let ready = 0;
      while (Date.now() - started < stepTimeoutMs) {
        const list = (await op.custom.listNamespacedCustomObject({
          group: 'pulumi.com',
          version: 'v1',
          namespace: NS,
          plural: 'stacks',
        })) as { items: { status?: { conditions?: { type: string; status: string }[] } }[] };
        ready = readyCount(list.items);
        try {
          const pods = await summary(op, NS);
          workspaces = pods.filter((p) => p.podRef.name.endsWith('-workspace-0'));
          for (const p of pods.filter((x) => !x.podRef.name.endsWith('-workspace-0'))) {
            const seen = jobPeaks.get(p.podRef.name) ?? { workingSet: 0, cpuSeconds: 0 };
            jobPeaks.set(p.podRef.name, {
              workingSet: Math.max(seen.workingSet, p.memory?.workingSetBytes ?? 0),
              cpuSeconds: Math.max(seen.cpuSeconds, (p.cpu?.usageCoreNanoSeconds ?? 0) / 1e9),
            });
          }
        } catch (err) {
          console.error(`stats: ${err instanceof Error ? err.message : String(err)}`);
        }
        if (ready === total) break;
        await new Promise((r) => setTimeout(r, 3000));
      }
      const readyAt = Date.now();
      const requestsAtReady = await apiRequests(op);
      // The cluster at rest: resyncs, leases, kubelet status, the workspace pods' probes.
      await new Promise((r) => setTimeout(r, ready === total ? idleMs : 0));
      const requestsIdle = await apiRequests(op);
      let workspacesAtRest: PodStats[] = [];
      try {
        workspacesAtRest = (await summary(op, NS)).filter((p) => p.podRef.name.endsWith('-workspace-0'));
      } catch (err) {
        console.error(`stats: ${err instanceof Error ? err.message : String(err)}`);
      }
      const idleSeconds = (Date.now() - readyAt) / 1000;
      const jobs = [...jobPeaks.values()];
      const step = {
        reclaim,
        workspaceCpuRequest: workspaceCpu || 'default',
        stacks: total,
        ready,
        secondsToAllReady: ready === total ? (readyAt - started) / 1000 : null,
        apiRequestsForStep: {
          all: requestsAtReady.all - requestsBefore.all,
          writes: requestsAtReady.writes - requestsBefore.writes,
        },
        apiRequestsPerSecondAtRest:
          idleSeconds > 0 ? Math.round(((requestsIdle.all - requestsAtReady.all) / idleSeconds) * 100) / 100 : null,
        apiRequestsAtRestTop: topDeltas(requestsAtReady.by, requestsIdle.by, 8),
        workspacePods: workspaces.length,
        workspaceWorkingSetMiB: { median: mib(median(workspaces.map((p) => p.memory?.workingSetBytes ?? 0))) },
        workspaceMilliCoresAtReady: {
          median: Math.round(median(workspaces.map((p) => p.cpu?.usageNanoCores ?? 0)) / 1e6),
        },
        // Cumulative since the pod started: what a workspace pod spent to get its Stack Ready.
        workspaceCpuSecondsAtReady: {
          median: Math.round(median(workspaces.map((p) => (p.cpu?.usageCoreNanoSeconds ?? 0) / 1e9)) * 100) / 100,
          max: Math.round(Math.max(0, ...workspaces.map((p) => (p.cpu?.usageCoreNanoSeconds ?? 0) / 1e9)) * 100) / 100,
        },
        workspaceAtRest: {
          pods: workspacesAtRest.length,
          milliCores: { median: Math.round(median(workspacesAtRest.map((p) => p.cpu?.usageNanoCores ?? 0)) / 1e6) },
          workingSetMiB: { median: mib(median(workspacesAtRest.map((p) => p.memory?.workingSetBytes ?? 0))) },
        },
        // Job pods live seconds; the kubelet's stats (10 s housekeeping) often have no figures for them.
        jobPodsWithFigures: jobs.filter((j) => j.workingSet > 0).length,
        jobPodsSeen: jobs.length,
        jobPeakWorkingSetMiB: { median: mib(median(jobs.map((j) => j.workingSet))) },
        jobCpuSeconds: { median: Math.round(median(jobs.map((j) => j.cpuSeconds)) * 100) / 100 },
      };
      console.log(JSON.stringify(step));
      results.push(step);
      if (ready < total) {
        const node = await op.core.readNode({ name: op.node.name });
        const pods = await op.core.listNamespacedPod({ namespace: NS });
        const phases: Record<string, number> = {};
        for (const p of pods.items) phases[p.status?.phase ?? '?'] = (phases[p.status?.phase ?? '?'] ?? 0) + 1;
        console.log(
          JSON.stringify({ stoppedAt: total, podPhases: phases, allocatable: node.status?.allocatable ?? {} }),
        );
        break;
      }
    }
  } finally {
    await op.stop();
  }
  console.log(JSON.stringify({ results }, null, 2));
}

async function main(): Promise<void> {
  if (!process.argv.includes('--burst')) return ramp();
  const stacks = Number(arg('burst', '0'));
  const out = await burstRun({
    namespace: NS,
    stacks,
    parts: new Set(arg('parts', stacks > 0 ? 'burst,wake,floor' : 'wake,floor').split(',') as Part[]),
    timeoutMs: Number(arg('timeout', '2400')) * 1000,
    idleMs: Number(arg('idle', '60')) * 1000,
    sampleMs: Number(arg('sample', '5')) * 1000,
    runs: Number(arg('runs', '3')),
  });
  console.log(JSON.stringify(out, null, 2));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
