/**
 * Issue 24, item 3: an operation that outlives its deadline, on the real node. A Program Stack
 * whose `up` blocks (its program reads a named pipe on the state volume, as in resilience.e2e.ts)
 * has `spec.updateTemplate.spec.activeDeadlineSeconds`: the Job runner cancels the operation at
 * the deadline, Pulumi stops and unlocks the stack, the update fails with reason DeadlineExceeded
 * and a message that says so, and the retry (the pipe now written) succeeds in the same workspace.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { defined, e2eStackSpec, eventually, type Operator } from './harness';
import { e2eSuite } from './suite';
import { stateGates } from './testbed/state-gate';

let op: Operator;
const ns = 'bounded';
const DEADLINE = 20;

// Declared before the suite's own afterAll, so it runs first: no pipe writer outlives the suite.
const gates = stateGates(() => op.stateDir(ns));
afterAll(() => gates.stop());
const { recordTiming, getStack, readyStack } = e2eSuite('bounded-operations', ns, (started) => (op = started));

const gate = (name: string) => gates.gate(name);

/** The lock entries of the project's `dev` stack in the file backend. */
function locksOf(project: string): string[] {
  const root = join(op.stateDir(ns), '.pulumi', 'locks', 'organization', project, 'dev');
  return existsSync(root) ? readdirSync(root) : [];
}

async function jobsOf(name: string): Promise<k8s.V1Job[]> {
  return (await op.batch.listNamespacedJob({ namespace: ns, labelSelector: `pulumi.com/stack-name=${name}` })).items;
}

describe('bounded operations', () => {
  it('an up past its deadline is cancelled, leaves the stack unlocked, and the next up succeeds', async () => {
    const started = Date.now();
    const name = 'deadline';
    const g = gate('gate-deadline');
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name, namespace: ns },
      program: {
        variables: { opened: { 'fn::readFile': g.inPod } },
        resources: { stash: { type: 'pulumi:index:Stash', properties: { input: '${opened}' } } },
        outputs: { opened: '${opened}' },
      },
    } as k8s.KubernetesObject);
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name, namespace: ns },
      spec: e2eStackSpec({
        stack: 'dev',
        programRef: { name },
        updateTemplate: { spec: { activeDeadlineSeconds: DEADLINE } },
      }),
    } as k8s.KubernetesObject);

    // The up runs and holds the stack's lock, blocked on the pipe.
    const running = await eventually(
      'the up to hold the stack lock',
      async () => {
        const s = await getStack(name);
        return s.status?.currentUpdate?.name && locksOf(name).length > 0 ? s : undefined;
      },
      240_000,
      250,
    );
    const blocked = defined(running.status?.currentUpdate?.name, 'currentUpdate.name');
    const pod = await op.core.readNamespacedPod({ namespace: ns, name: `${name}-workspace-0` });

    // The Job carries the deadline: the runner's, and Kubernetes' backstop 60 s later.
    const [job] = await jobsOf(name);
    expect(job?.metadata?.name).toBe(blocked);
    expect(job?.spec?.activeDeadlineSeconds).toBe(DEADLINE + 60);
    const runnerEnv = job?.spec?.template.spec?.containers[0]?.env ?? [];
    expect(runnerEnv).toContainEqual({ name: 'PULUMI_OPERATION_DEADLINE_SECONDS', value: String(DEADLINE) });

    // The deadline passes: the up fails, saying why.
    const failed = await eventually(
      'the up past its deadline to be reported',
      async () => {
        const s = await getStack(name);
        return s.status?.lastUpdate?.name === blocked ? s : undefined;
      },
      240_000,
      250,
    );
    recordTiming('deadline: failure reported', started, failed.status?.lastUpdate?.message);
    expect(failed.status?.lastUpdate).toMatchObject({ type: 'up', state: 'failed' });
    expect(failed.status?.lastUpdate?.message).toMatch(
      new RegExp(`exceeded its deadline of ${DEADLINE}s and was cancelled`),
    );
    const update: unknown = await op.custom.getNamespacedCustomObject({
      group: 'auto.pulumi.com',
      version: 'v1alpha1',
      namespace: ns,
      plural: 'updates',
      name: blocked,
    });
    const conditions = (update as { status?: { conditions?: { type: string; reason?: string }[] } }).status?.conditions;
    expect(conditions?.find((c) => c.type === 'Failed')?.reason).toBe('DeadlineExceeded');
    // Pulumi unlocked the stack; the runner cancelled the operation, not Kubernetes the Job.
    expect(locksOf(name)).toEqual([]);
    const jobFailure = await eventually(
      'the Job to end',
      async () => {
        const ended = (await jobsOf(name)).find((j) => j.metadata?.name === blocked);
        return ended?.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True');
      },
      60_000,
    );
    // The runner exited on its own (a failed result): not stopped at the Job's backstop deadline.
    expect(jobFailure.reason).toBe('BackoffLimitExceeded');
    // The workspace is the same pod: only the operation was cancelled.
    const samePod = await op.core.readNamespacedPod({ namespace: ns, name: `${name}-workspace-0` });
    expect(samePod.metadata?.uid).toBe(pod.metadata?.uid);

    // The retry (after the backoff) reads the pipe at once and succeeds within the deadline.
    const retry = Date.now();
    g.write('open');
    const done = await readyStack(name, (s) => s.status?.lastUpdate?.name !== blocked);
    recordTiming('deadline: next up succeeds', retry);
    expect(done.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });
    expect(done.status?.outputs).toEqual({ opened: 'open' });
    expect(locksOf(name)).toEqual([]);
    const stillSamePod = await op.core.readNamespacedPod({ namespace: ns, name: `${name}-workspace-0` });
    expect(stillSamePod.metadata?.uid).toBe(pod.metadata?.uid);
  });
});
