/**
 * Issue 5, scenario 4: a Stack whose program fails at `pulumi up` time. The operator retries with
 * backoff (a small retryMaxBackoffDurationSeconds keeps the test short), counts the failures in
 * `status.lastUpdate.failures`, says Reconciling/RetryingAfterFailure while it retries and
 * Stalled/UpdateFailed once the failure limit is reached. A reconciliation request forces a run
 * on the Stalled Stack; fixing the program makes it Ready. The program is a Program object whose
 * output refers to a variable that does not exist: the Program renders fine, the Pulumi YAML
 * language host rejects it when `pulumi up` runs it.
 */
import * as k8s from '@kubernetes/client-node';
import type { Stack } from '../schemas/generated/types';
import { defined, e2eStackSpec, eventually, type Operator, condition } from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const getStack = (ns: string, name: string) => op.getStack(ns, name);
const readyStack = (...args: Parameters<Operator['readyStack']>) => op.readyStack(...args);

const { timings } = e2eSuite('failure-retry', undefined, (started) => (op = started));

const STACKS = { group: 'pulumi.com', version: 'v1', plural: 'stacks' } as const;
const PROGRAMS = { group: 'pulumi.com', version: 'v1', plural: 'programs' } as const;
const mergePatch = () => k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

/** The program's outputs: a broken one refers to a variable nobody defines. */
function outputs(broken: boolean): Record<string, string> {
  return broken ? { greeting: '${greeting}', oops: '${doesNotExist}' } : { greeting: '${greeting}' };
}

/** What the Stack said about one finished, failed operation while it waited for the next. */
interface Observed {
  job: string;
  failures: number | undefined;
  condition: string;
  reason: string;
  message: string;
  /** When the operation ended (lastResyncTime) and when the next one's Job was created. */
  endedAt: string | undefined;
}

/**
 * Watches a failing Stack until it is Stalled, recording each failed operation once with the
 * condition the Stack showed between that failure and the next attempt.
 */
async function watchFailures(
  ns: string,
  name: string,
  timeoutMs: number,
): Promise<{ stalled: Stack; seen: Observed[] }> {
  const seen = new Map<string, Observed>();
  const stalled = await eventually(
    `Stack ${ns}/${name} to be Stalled`,
    async () => {
      const s = await getStack(ns, name);
      const last = s.status?.lastUpdate;
      if (!last || last.state !== 'failed' || s.status?.currentUpdate) return undefined;
      const stalledCond = condition(s, 'Stalled');
      const reconciling = condition(s, 'Reconciling');
      const shown =
        stalledCond?.status === 'True' ? stalledCond : reconciling?.status === 'True' ? reconciling : undefined;
      const job = defined(last.name, 'lastUpdate.name');
      if (shown && !seen.has(job)) {
        seen.set(job, {
          job,
          failures: last.failures,
          condition: shown.type,
          reason: shown.reason,
          message: shown.message,
          endedAt: last.lastResyncTime,
        });
      }
      return stalledCond?.status === 'True' ? s : undefined;
    },
    timeoutMs,
    250,
  );
  return { stalled, seen: [...seen.values()] };
}

describe('a failing Stack', () => {
  const ns = 'failure-retry';
  const name = 'flaky';

  it('retries with backoff, counting failures, and stalls after the failure limit', async () => {
    await op.namespace(ns);
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name, namespace: ns },
      program: { variables: { greeting: 'hello' }, outputs: outputs(true) },
    } as k8s.KubernetesObject);
    const started = Date.now();
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name, namespace: ns },
      spec: e2eStackSpec({ stack: 'dev', programRef: { name }, retryMaxBackoffDurationSeconds: 10 }),
    } as k8s.KubernetesObject);

    const { stalled, seen } = await watchFailures(ns, name, 300_000);
    timings['failure: apply to Stalled after 4 failures'] = Date.now() - started;

    // Four operations, each its own Job; three retries announced, then the stall.
    expect(seen.map(({ failures, condition: c, reason }) => ({ failures, condition: c, reason }))).toEqual([
      { failures: 0, condition: 'Reconciling', reason: 'RetryingAfterFailure' },
      { failures: 1, condition: 'Reconciling', reason: 'RetryingAfterFailure' },
      { failures: 2, condition: 'Reconciling', reason: 'RetryingAfterFailure' },
      { failures: 3, condition: 'Stalled', reason: 'UpdateFailed' },
    ]);
    expect(seen.slice(0, 3).map((o) => o.message)).toEqual([
      '0 update failure(s)',
      '1 update failure(s)',
      '2 update failure(s)',
    ]);
    expect(seen[3]?.message).toMatch(/failed 3 times/);
    expect(new Set(seen.map((o) => o.job)).size).toBe(4);
    // Each retry waited for its cooldown after the previous failure (recorded, not asserted).
    for (let i = 1; i < seen.length; i++) {
      const job = await op.batch.readNamespacedJob({ namespace: ns, name: seen[i]!.job });
      timings[`failure: backoff before attempt ${i + 1}`] =
        defined(job.metadata?.creationTimestamp, 'creationTimestamp').getTime() -
        Date.parse(defined(seen[i - 1]?.endedAt, 'lastResyncTime'));
    }

    expect(condition(stalled, 'Ready')).toMatchObject({ status: 'False', reason: 'NotReadyStalled' });
    expect(condition(stalled, 'Reconciling')).toBeUndefined();
    expect(stalled.status?.lastUpdate).toMatchObject({
      type: 'up',
      state: 'failed',
      failures: 3,
      lastAttemptedCommit: '1',
      lastSuccessfulCommit: '',
    });
    // The Stack says why the update failed: the program's error reaches status.lastUpdate.message.
    expect(stalled.status?.lastUpdate?.message).toMatch(/doesNotExist/);
    expect(stalled.status?.outputs).toBeUndefined();

    // Stalled means no more attempts: after more than a cooldown, still the same last operation.
    await new Promise((r) => setTimeout(r, 20_000));
    const still = await getStack(ns, name);
    expect(still.status?.lastUpdate?.name).toBe(stalled.status?.lastUpdate?.name);
    expect(still.status?.currentUpdate).toBeUndefined();
    expect(condition(still, 'Stalled')).toMatchObject({ status: 'True', reason: 'UpdateFailed' });
  }, 420_000);

  it('runs again on a reconciliation request while Stalled', async () => {
    const before = await getStack(ns, name);
    const started = Date.now();
    await op.custom.patchNamespacedCustomObject(
      {
        ...STACKS,
        namespace: ns,
        name,
        body: { metadata: { annotations: { 'pulumi.com/reconciliation-request': 'retry-1' } } },
      },
      mergePatch(),
    );
    // The forced run is a new attempt: it fails again, counted from zero, and the Stack retries.
    const after = await eventually(
      'the forced run to finish',
      async () => {
        const s = await getStack(ns, name);
        return s.status?.lastUpdate?.reconcileRequest === 'retry-1' ? s : undefined;
      },
      180_000,
      250,
    );
    timings['failure: reconciliation request to a finished run'] = Date.now() - started;
    expect(after.status?.lastUpdate?.name).not.toBe(before.status?.lastUpdate?.name);
    expect(after.status?.lastUpdate).toMatchObject({ type: 'up', state: 'failed', failures: 0 });
    expect(after.status?.observedReconcileRequest).toBe('retry-1');
    expect(condition(after, 'Stalled')).toBeUndefined();
    expect(condition(after, 'Reconciling')).toMatchObject({ status: 'True' });
  }, 240_000);

  it('becomes Ready when the program is fixed', async () => {
    const started = Date.now();
    // A JSON merge patch of `outputs` replaces the map's keys given; null removes the broken one.
    await op.custom.patchNamespacedCustomObject(
      { ...PROGRAMS, namespace: ns, name, body: { program: { outputs: { oops: null } } } },
      mergePatch(),
    );
    const stack = await readyStack(ns, name, (s) => s.status?.lastUpdate?.state === 'succeeded');
    timings['failure: fixed program to Ready'] = Date.now() - started;
    expect(stack.status?.lastUpdate).toMatchObject({
      type: 'up',
      state: 'succeeded',
      failures: 0,
      lastSuccessfulCommit: '2',
    });
    expect(stack.status?.outputs).toEqual({ greeting: 'hello' });
    expect(condition(stack, 'Stalled')).toBeUndefined();
    expect(condition(stack, 'Reconciling')).toBeUndefined();
  }, 300_000);
});
