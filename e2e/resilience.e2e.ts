/**
 * Issue 5, scenario 7: resilience, driven through the API server with the real agent and Pulumi CLI.
 * - Deleting the workspace pod in the middle of an update: kubelet sends SIGTERM, the agent
 *   interrupts Pulumi, which unlocks the stack; the update is reported as failed and the next one
 *   succeeds, with no lock left in the backend.
 * - Restarting the hook server in the middle of an update changes nothing (the hooks hold no state):
 *   the Stack reaches Ready with the same update.
 *
 * An update is held in the middle by its program: `fn::readFile` of a named pipe on the state volume
 * blocks (while the stack is locked) until the test writes to the pipe.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { defined, e2eStackSpec, eventually, type Operator, condition } from './harness';
import { e2eSuite } from './suite';
import { gatedProgram, stateGates } from './testbed/state-gate';

let op: Operator;
const ns = 'resilience';

// Declared before the suite's own afterAll, so it runs first: no pipe writer outlives the suite.
const gates = stateGates(() => op.stateDir(ns));
afterAll(() => gates.stop());
const { recordTiming, getStack, readyStack } = e2eSuite('resilience', ns, (started) => (op = started));

async function jobsOf(name: string): Promise<k8s.V1Job[]> {
  return (await op.batch.listNamespacedJob({ namespace: ns, labelSelector: `pulumi.com/stack-name=${name}` })).items;
}

const gate = (name: string) => gates.gate(name);

function stack(name: string): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: ns },
    spec: e2eStackSpec({ stack: 'dev', programRef: { name } }),
  } as k8s.KubernetesObject;
}

/** Every file under the backend's lock directory (`<state>/.pulumi/locks/...`). */
function lockFiles(): string[] {
  const root = join(op.stateDir(ns), '.pulumi', 'locks');
  const out: string[] = [];
  const walk = (dir: string): void => {
    if (!existsSync(dir)) return;
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(p.slice(root.length + 1));
    }
  };
  walk(root);
  return out;
}
/** The lock entries of a project's `dev` stack: `organization/<project>/dev/<id>.json` (and its `.attrs`). */
const locksOf = (project: string) => lockFiles().filter((f) => f.startsWith(`organization/${project}/dev/`));

describe('resilience', () => {
  it('deleting the workspace pod mid-update leaves no lock, and the next update succeeds', async () => {
    const started = Date.now();
    const g = gate('gate-interrupted');
    await op.objects.create(gatedProgram('interrupted', ns, g.inPod));
    await op.objects.create(stack('interrupted'));

    // The update is running and holds the stack's lock, blocked on the gate.
    const running = await eventually(
      'the update to hold the stack lock',
      async () => {
        const s = await getStack('interrupted');
        return s.status?.currentUpdate?.name && locksOf('interrupted').length > 0 ? s : undefined;
      },
      240_000,
      250,
    );
    const interrupted = defined(running.status?.currentUpdate?.name, 'currentUpdate.name');
    const oldPod = await op.core.readNamespacedPod({ namespace: ns, name: 'interrupted-workspace-0' });
    const oldLog = await op.followLogs(ns, 'interrupted-workspace-0', 'pulumi');

    // A short grace period: kubelet sends SIGTERM, and SIGKILL 20 s later.
    await op.core.deleteNamespacedPod({ namespace: ns, name: 'interrupted-workspace-0', gracePeriodSeconds: 20 });
    const failed = await eventually(
      'the interrupted update to be reported',
      async () => {
        const s = await getStack('interrupted');
        return s.status?.lastUpdate?.name === interrupted ? s : undefined;
      },
      240_000,
      250,
    );
    expect(failed.status?.lastUpdate).toMatchObject({ type: 'up', state: 'failed' });
    expect(failed.status?.lastUpdate?.message).toMatch(/interrupt|SIGTERM/i);
    expect(condition(failed, 'Reconciling')?.reason).toBe('RetryingAfterFailure');
    // No lock is left. No other operation had started when we looked: none in the status, and the
    // interrupted update's Job is still the only one.
    const locks = locksOf('interrupted');
    const after = await getStack('interrupted');
    expect(after.status?.currentUpdate).toBeUndefined();
    expect((await jobsOf('interrupted')).map((j) => j.metadata?.name)).toEqual([interrupted]);
    expect(locks).toEqual([]);
    // The workspace was stopped by a SIGTERM (not killed) and interrupted Pulumi.
    await eventually('the old workspace to log the SIGTERM', () => oldLog.text().includes('SIGTERM received'), 30_000);
    oldLog.stop();
    recordTiming('pod deleted mid-update: failure reported', started, failed.status?.lastUpdate?.message);

    // The retry (same spec, after the backoff) runs in a new workspace pod and succeeds.
    const retry = Date.now();
    g.write('open');
    const done = await readyStack('interrupted', (s) => s.status?.lastUpdate?.name !== interrupted);
    recordTiming('pod deleted mid-update: next update succeeds', retry);
    expect(done.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded', failures: 0 });
    expect(done.status?.outputs).toEqual({ opened: 'open' });
    const newPod = await op.core.readNamespacedPod({ namespace: ns, name: 'interrupted-workspace-0' });
    expect(newPod.metadata?.uid).not.toBe(oldPod.metadata?.uid);
    expect(locksOf('interrupted')).toEqual([]);
  });

  it('restarting the hook server mid-run changes nothing', async () => {
    const started = Date.now();
    const g = gate('gate-steady');
    await op.objects.create(gatedProgram('steady', ns, g.inPod));
    await op.objects.create(stack('steady'));
    const running = await eventually(
      'the update to run',
      async () => {
        const s = await getStack('steady');
        return s.status?.currentUpdate?.name && locksOf('steady').length > 0 ? s : undefined;
      },
      240_000,
      250,
    );
    const update = defined(running.status?.currentUpdate?.name, 'currentUpdate.name');

    await op.restartHooks();
    // Make Metacontroller sync the Stack through the new server while the update still runs.
    await op.custom.patchNamespacedCustomObject(
      {
        group: 'pulumi.com',
        version: 'v1',
        namespace: ns,
        plural: 'stacks',
        name: 'steady',
        body: { metadata: { annotations: { 'e2e.test/poke': '1' } } },
      },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await eventually(
      'the new hook server to answer a Stack sync',
      async () => {
        const { text } = await op.hookRequest('/metrics');
        const m = /^pulumi_hook_request_duration_seconds_count\{hook="stack_sync"\} (\d+)/m.exec(text);
        return m && Number(m[1]) > 0 ? true : undefined;
      },
      60_000,
    );
    const during = await getStack('steady');
    expect(during.status?.currentUpdate?.name).toBe(update);
    expect(condition(during, 'Reconciling')?.reason).toBe('StackProcessing');

    g.write('steady');
    const done = await readyStack('steady');
    recordTiming('hook restart mid-run', started);
    expect(done.status?.lastUpdate).toMatchObject({ name: update, type: 'up', state: 'succeeded' });
    expect(done.status?.outputs).toEqual({ opened: 'steady' });
    expect((await jobsOf('steady')).map((j) => j.metadata?.name)).toEqual([update]);
  });
});
