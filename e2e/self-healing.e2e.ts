/**
 * Issue 24, self-healing: Stacks with `spec.selfHealing` whose `up` is interrupted on the real node
 * end Ready, with no lock and no pending operation left in the backend.
 * - The workspace pod dies mid-`up` as on a lost node: every process of its `pulumi` container is
 *   SIGKILLed from the node (nothing can unlock the stack), then the pod is force-deleted. The lock
 *   stays behind; the retry's workspace finds it stale (its host, no such `pulumi` running), removes
 *   it with `pulumi cancel` and runs the `up` again.
 * - The Job is deleted mid-`up`: its Update ends Aborted, the Stack counts a failed attempt and
 *   retries after the backoff.
 * Each `up` is held mid-run by its program: `fn::readFile` of a named pipe on the state volume blocks
 * (the stack locked) until the test writes to the pipe (e2e/testbed/state-gate.ts).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import type { Stack } from '../schemas/generated/types';
import { defined, e2eStackSpec, eventually, condition, type Operator } from './harness';
import { e2eSuite } from './suite';
import { gatedProgram, stateGates } from './testbed/state-gate';

let op: Operator;
const ns = 'self-healing';

// Declared before the suite's own afterAll, so it runs first: no pipe writer outlives the suite.
const gates = stateGates(() => op.stateDir(ns));
afterAll(() => gates.stop());
const { recordTiming, getStack, readyStack } = e2eSuite('self-healing', ns, (started) => (op = started));

function healingStack(name: string): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: ns },
    spec: e2eStackSpec({ stack: 'dev', programRef: { name }, selfHealing: true }),
  } as k8s.KubernetesObject;
}

/** The lock files of a project's `dev` stack in the file backend (`.pulumi/locks/organization/<project>/dev/`). */
function locksOf(project: string): string[] {
  const dir = join(op.stateDir(ns), '.pulumi', 'locks', 'organization', project, 'dev');
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.json')) : [];
}

/** The checkpoint's pending operations (`.pulumi/stacks/<project>/dev.json`). */
function pendingOperationsOf(project: string): unknown[] {
  const file = join(op.stateDir(ns), '.pulumi', 'stacks', project, 'dev.json');
  const doc = JSON.parse(readFileSync(file, 'utf8')) as {
    checkpoint?: { latest?: { pending_operations?: unknown[] } };
  };
  return doc.checkpoint?.latest?.pending_operations ?? [];
}

/** Waits until the Stack's `up` runs and holds the stack's lock (blocked on its gate): the Update's name. */
async function upHoldingLock(name: string): Promise<string> {
  const running = await eventually(
    `${name}'s up to hold the stack lock`,
    async () => {
      const s = await getStack(name);
      return s.status?.currentUpdate?.name && locksOf(name).length > 0 ? s : undefined;
    },
    240_000,
    250,
  );
  return defined(running.status?.currentUpdate?.name, 'currentUpdate.name');
}

/** Waits for the interrupted Update's failure in lastUpdate, with the Reconciling condition that says so. */
async function interruptionReported(name: string, update: string): Promise<Stack> {
  return eventually(
    `the interrupted update of ${name} to be reported`,
    async () => {
      const s = await getStack(name);
      const reconciling = condition(s, 'Reconciling');
      return s.status?.lastUpdate?.name === update && reconciling?.message?.startsWith('Interrupted') ? s : undefined;
    },
    240_000,
    250,
  );
}

async function updateFailedReason(name: string): Promise<string | undefined> {
  const update = (await op.custom.getNamespacedCustomObject({
    group: 'auto.pulumi.com',
    version: 'v1alpha1',
    namespace: ns,
    plural: 'updates',
    name,
  })) as { status?: { conditions?: { type: string; status: string; reason?: string }[] } };
  return update.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True')?.reason;
}

/** The Normal event of the retry, whose message says the update before it was interrupted. */
async function retryEvent(name: string, interrupted: string): Promise<string> {
  return eventually(
    `${name}'s retry event`,
    async () => {
      const list = await op.core.listNamespacedEvent({ namespace: ns });
      return list.items.find(
        (e) =>
          e.involvedObject.name === name &&
          e.reason === 'StackUpdateDetected' &&
          e.message?.startsWith(`Interrupted up ${interrupted}`),
      )?.message;
    },
    120_000,
  );
}

describe('self-healing', () => {
  it('a workspace pod killed mid-up leaves a stale lock, which the retry removes; the Stack ends Ready', async () => {
    const started = Date.now();
    const g = gates.gate('gate-killed');
    await op.objects.create(gatedProgram('killed', ns, g.inPod));
    await op.objects.create(healingStack('killed'));
    const interrupted = await upHoldingLock('killed');

    // As on a lost node: every process of the container dies at once (SIGKILL to its PID 1 from
    // the node ends its PID namespace), so nothing unlocks the stack; then the pod is force-deleted.
    const pod = await op.core.readNamespacedPod({ namespace: ns, name: 'killed-workspace-0' });
    const containerId = defined(
      pod.status?.containerStatuses?.find((c) => c.name === 'pulumi')?.containerID,
      'the pulumi container id',
    ).replace(/^containerd:\/\//, '');
    const info = JSON.parse(await op.node.crictl('inspect', containerId)) as { info?: { pid?: number } };
    process.kill(defined(info.info?.pid, 'the container pid'), 'SIGKILL');
    await op.core.deleteNamespacedPod({ namespace: ns, name: 'killed-workspace-0', gracePeriodSeconds: 0 });
    const staleLocks = locksOf('killed');
    expect(staleLocks).toHaveLength(1);

    const failed = await interruptionReported('killed', interrupted);
    expect(failed.status?.lastUpdate).toMatchObject({ type: 'up', state: 'failed' });
    expect(await updateFailedReason(interrupted)).toBe('WorkspaceUnavailable');
    recordTiming('pod killed mid-up: interruption reported', started, condition(failed, 'Reconciling')?.message);

    const retry = Date.now();
    g.write('healed');
    const done = await readyStack('killed', (s) => s.status?.lastUpdate?.name !== interrupted, 360_000);
    recordTiming('pod killed mid-up: healed and Ready', retry, done.status?.lastUpdate?.message);
    expect(done.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });
    expect(done.status?.lastUpdate?.message).toMatch(
      /self-healing: removed the stale lock of an interrupted operation/,
    );
    expect(done.status?.outputs).toEqual({ opened: 'healed' });
    expect(await retryEvent('killed', interrupted)).toMatch(/WorkspaceUnavailable/);
    expect(locksOf('killed')).toEqual([]);
    expect(pendingOperationsOf('killed')).toEqual([]);
  }, 600_000);

  it('a Job deleted mid-up ends Aborted, and the retry makes the Stack Ready', async () => {
    const started = Date.now();
    const g = gates.gate('gate-orphaned');
    await op.objects.create(gatedProgram('orphaned', ns, g.inPod));
    await op.objects.create(healingStack('orphaned'));
    const interrupted = await upHoldingLock('orphaned');
    const interruptedLocks = locksOf('orphaned');

    // As `kubectl delete job`: the Job goes at once, its pod after its runner has stopped.
    await op.batch.deleteNamespacedJob({ namespace: ns, name: interrupted, propagationPolicy: 'Background' });
    const failed = await interruptionReported('orphaned', interrupted);
    expect(failed.status?.lastUpdate).toMatchObject({ type: 'up', state: 'failed' });
    expect(await updateFailedReason(interrupted)).toBe('Aborted');
    recordTiming('Job deleted mid-up: interruption reported', started, condition(failed, 'Reconciling')?.message);

    // The interrupted `up` stops and unlocks the stack (its lock file goes; a retry's has another
    // name): only then is the gate written, or the stopping program could read what is meant for the retry.
    await eventually(
      'the interrupted up to unlock the stack',
      () => interruptedLocks.every((f) => !locksOf('orphaned').includes(f)),
      120_000,
      250,
    );
    const retry = Date.now();
    g.write('resumed');
    const done = await readyStack('orphaned', (s) => s.status?.lastUpdate?.name !== interrupted, 360_000);
    recordTiming('Job deleted mid-up: Ready', retry, done.status?.lastUpdate?.message);
    expect(done.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });
    expect(done.status?.outputs).toEqual({ opened: 'resumed' });
    expect(await retryEvent('orphaned', interrupted)).toMatch(/Aborted/);
    expect(locksOf('orphaned')).toEqual([]);
    expect(pendingOperationsOf('orphaned')).toEqual([]);
  }, 600_000);
});
