/**
 * Issue 26, part 4: a workspace that cannot verify its callers, as upstream's `random-yaml-auth-error`
 * scenario sets it up: the Stack's ServiceAccount has no `system:auth-delegator`, so its workspace
 * may not create TokenReviews and SubjectAccessReviews.
 * - The Stack is Stalled with reason `Unauthenticated`; its message says what was refused and holds
 *   the `kubectl` command that fixes it; a Warning event says the same.
 * - No update Job is started (none would get past the workspace), and the workspace pod is kept.
 * - Running that command (the real kubectl, as the cluster's admin) is all it takes: the agent checks
 *   again on its own, reports Ready, and the Stack's update runs, in the same pod.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import { Labels } from '../contract';
import { toolchain } from './testbed/toolchain';
import { defined, e2eStackSpec, eventually, condition, workspaceReport, type Operator } from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const ns = 'auth-error';
const { recordTiming, getStack, readyStack } = e2eSuite('auth-error', ns, (started) => (op = started));

/** A ServiceAccount of the namespace that is bound to nothing (op.namespace binds only `pulumi`). */
const ACCOUNT = 'no-delegator';
const STACK = 'auth-error';

async function jobsOfStack(): Promise<k8s.V1Job[]> {
  const list = await op.batch.listNamespacedJob({ namespace: ns, labelSelector: `${Labels.stackName}=${STACK}` });
  return list.items;
}

describe('a workspace whose ServiceAccount lacks system:auth-delegator', () => {
  it('stalls the Stack with reason Unauthenticated and the fix, starts no Job, and recovers once bound', async () => {
    const started = Date.now();
    await op.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: ACCOUNT } } });
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: STACK, namespace: ns },
      program: {
        resources: { stash: { type: 'pulumi:index:Stash', properties: { input: 'verified' } } },
        outputs: { value: '${stash.output}' },
      },
    } as k8s.KubernetesObject);
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: STACK, namespace: ns },
      spec: e2eStackSpec({ stack: 'dev', programRef: { name: STACK }, serviceAccountName: ACCOUNT }),
    } as k8s.KubernetesObject);

    const stalled = await eventually(
      'the Stack to be Stalled with reason Unauthenticated',
      async () => {
        const s = await getStack(STACK);
        return condition(s, 'Stalled')?.reason === 'Unauthenticated' ? s : undefined;
      },
      180_000,
      500,
    );
    recordTiming('apply to Stalled/Unauthenticated', started);
    const message = defined(condition(stalled, 'Stalled')?.message, 'the Stalled message');
    expect(message).toMatch(/^Unauthenticated: the workspace cannot verify its callers: /);
    expect(message).toContain(
      `its ServiceAccount (system:serviceaccount:${ns}:${ACCOUNT}) may not create tokenreviews.authentication.k8s.io ` +
        'or subjectaccessreviews.authorization.k8s.io',
    );
    const fix = `kubectl create clusterrolebinding pulumi-operator:auth-delegator:${ns}:${ACCOUNT} --clusterrole=system:auth-delegator --serviceaccount=${ns}:${ACCOUNT}`;
    expect(message).toContain(fix);
    expect(condition(stalled, 'Ready')).toMatchObject({ status: 'False', reason: 'NotReadyStalled' });
    expect(stalled.status?.currentUpdate).toBeUndefined();

    // The agent's own report in the workspace's status ConfigMap, which the Stack's condition comes from.
    expect(await workspaceReport(op, ns, STACK)).toMatchObject({
      state: 'Failed',
      reason: 'Unauthenticated',
    });
    // A Warning event with the reason and the fix.
    const event = await eventually(
      'the Unauthenticated event',
      async () => {
        const list = await op.core.listNamespacedEvent({ namespace: ns });
        return list.items.find((e) => e.involvedObject.kind === 'Stack' && e.reason === 'Unauthenticated');
      },
      30_000,
      500,
    );
    expect(event.type).toBe('Warning');
    expect(event.message).toContain(fix);

    // No Job was started, and the workspace pod runs on, never restarted.
    expect(await jobsOfStack()).toEqual([]);
    const pod = await op.core.readNamespacedPod({ namespace: ns, name: `${STACK}-workspace-0` });
    const podUid = defined(pod.metadata?.uid, 'the workspace pod uid');
    expect(pod.status?.phase).toBe('Running');
    expect(pod.status?.containerStatuses?.find((c) => c.name === 'pulumi')?.restartCount).toBe(0);
    // The pod's log has the hint, as upstream's agent logs it.
    expect(await op.logs(ns, `${STACK}-workspace-0`, 'pulumi')).toContain(
      "bind the ClusterRole system:auth-delegator to this pod's ServiceAccount",
    );

    // The fix, exactly as the message gives it.
    const granted = Date.now();
    const [, ...args] = fix.split(' ');
    await promisify(execFile)(toolchain.binaries.kubectl, ['--kubeconfig', op.cp.kubeconfigPath, ...args]);
    const ready = await readyStack(STACK, (s) => s.status?.lastUpdate?.state === 'succeeded', 240_000);
    recordTiming('binding granted to Ready', granted);
    expect(ready.status?.outputs).toEqual({ value: 'verified' });
    expect(condition(ready, 'Stalled')).toBeUndefined();

    // One Job, the one that succeeded; the same pod served it, without a restart.
    const jobs = await jobsOfStack();
    expect(jobs.map((j) => j.metadata?.name)).toEqual([ready.status?.lastUpdate?.name]);
    const after = await op.core.readNamespacedPod({ namespace: ns, name: `${STACK}-workspace-0` });
    expect(after.metadata?.uid).toBe(podUid);
    expect(after.status?.containerStatuses?.find((c) => c.name === 'pulumi')?.restartCount).toBe(0);
    recordTiming('apply to Ready', started);
  });
});
