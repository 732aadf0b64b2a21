/**
 * Issue 36: a burst larger than the node never deadlocks. 40 Program Stacks applied at once with
 * `workspaceReclaimPolicy: Delete` on the 2-CPU node, whose CPU requests hold 20 workspace pods
 * (docs/benchmarks.md): before the operations budget, 20 workspace pods ran, each waiting for its
 * Job, and 20 Job pods stayed Pending behind them for ever. Now at most OPERATIONS_MAX (the
 * default, 20) Stacks are in operation; the rest wait Reconciling/Queued with their position, no
 * workspace pod started for them, and a Job pod requests no CPU, so it is scheduled once its
 * workspace runs. All 40 end Ready.
 */
import * as k8s from '@kubernetes/client-node';
import { DEFAULT_OPERATIONS_MAX } from '../hooks/src/config';
import type { Stack } from '../schemas/generated/types';
import { e2eStackSpec, eventually, condition, type Operator } from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const ns = 'operations-budget';
const BURST = 40;

const { recordTiming } = e2eSuite('operations-budget', ns, (started) => (op = started));

async function stacks(): Promise<Stack[]> {
  return (
    (await op.custom.listNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1',
      namespace: ns,
      plural: 'stacks',
    })) as {
      items: Stack[];
    }
  ).items;
}

/** One look at the burst: how many Stacks are Ready, in operation, queued; the Job pods Pending. */
interface Sample {
  atSeconds: number;
  ready: number;
  processing: number;
  queued: number;
  pendingJobPods: number;
  workspacePods: number;
}

describe('a burst of Program Stacks larger than the node', () => {
  it(`${BURST} Stacks with workspaceReclaimPolicy: Delete applied at once all end Ready, the rest queued meanwhile`, async () => {
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: 'hello', namespace: ns },
      program: { variables: { greeting: 'hello' }, outputs: { greeting: '${greeting}' } },
    } as k8s.KubernetesObject);
    const started = Date.now();
    await Promise.all(
      Array.from({ length: BURST }, (_, i) =>
        op.objects.create({
          apiVersion: 'pulumi.com/v1',
          kind: 'Stack',
          metadata: { name: `s${i}`, namespace: ns },
          spec: e2eStackSpec({ stack: `s${i}`, programRef: { name: 'hello' }, workspaceReclaimPolicy: 'Delete' }),
        } as k8s.KubernetesObject),
      ),
    );

    const samples: Sample[] = [];
    const queuedMessages = new Set<string>();
    const all = await eventually(
      `all ${BURST} Stacks to be Ready`,
      async () => {
        const items = await stacks();
        const pods = (await op.core.listNamespacedPod({ namespace: ns })).items;
        const reconciling = items.map((s) => condition(s, 'Reconciling'));
        for (const c of reconciling) if (c?.reason === 'Queued') queuedMessages.add(c.message ?? '');
        samples.push({
          atSeconds: Math.round((Date.now() - started) / 1000),
          ready: items.filter(
            (s) => condition(s, 'Ready')?.status === 'True' && s.status?.lastUpdate?.state === 'succeeded',
          ).length,
          processing: reconciling.filter((c) => c?.reason === 'StackProcessing').length,
          queued: reconciling.filter((c) => c?.reason === 'Queued').length,
          pendingJobPods: pods.filter(
            (p) => p.metadata?.labels?.['auto.pulumi.com/component'] === 'update' && p.status?.phase === 'Pending',
          ).length,
          workspacePods: pods.filter((p) => p.metadata?.name?.endsWith('-workspace-0')).length,
        });
        return items.length === BURST && samples.at(-1)?.ready === BURST ? items : undefined;
      },
      1_500_000,
      2000,
    );
    const peak = (k: keyof Sample) => Math.max(...samples.map((s) => s[k]));
    recordTiming(
      `${BURST} Stacks applied at once to all Ready`,
      started,
      JSON.stringify({
        peakProcessing: peak('processing'),
        peakQueued: peak('queued'),
        peakWorkspacePods: peak('workspacePods'),
        peakPendingJobPods: peak('pendingJobPods'),
        queueOverTime: samples.filter((_, i) => i % 5 === 0).map((s) => [s.atSeconds, s.queued, s.processing, s.ready]),
      }),
    );

    // Each ran its own first update, once.
    for (const s of all) expect(s.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded', generation: 1 });
    // More were waiting than the budget holds: some were seen queued, with their position.
    expect(peak('queued')).toBeGreaterThan(0);
    const queuedMessage = new RegExp(
      `^queued: position \\d+ of \\d+ waiting; \\d+ of ${DEFAULT_OPERATIONS_MAX} operations running`,
    );
    expect([...queuedMessages].some((m) => queuedMessage.test(m))).toBe(true);
    // The budget held: never were all of the burst in operation at once.
    expect(peak('processing')).toBeLessThan(BURST);
    // With Delete, each workspace goes once its Stack is Ready: none is left.
    await eventually(
      'the workspace pods to be gone',
      async () =>
        (await op.core.listNamespacedPod({ namespace: ns })).items.every(
          (p) => !p.metadata?.name?.endsWith('-workspace-0'),
        ),
      300_000,
      2000,
    );
  }, 1_900_000);
});
