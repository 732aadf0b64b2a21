/**
 * Issue 5, scenario 6: deleting a Stack, driven through the API server with the real agent and
 * Pulumi CLI (YAML programs from Program objects, a file backend on the namespace's PVC):
 * - `destroyOnFinalize`: a destroy Job runs, the backend's state shows no resources, the Stack goes;
 * - a destroy that fails (a protected resource) keeps the finalizer and says why in the status;
 * - without `destroyOnFinalize` the Stack goes at once, without a destroy Job, its resources kept.
 */
import * as k8s from '@kubernetes/client-node';
import type { Stack, StackSpec, StackUpdateState } from '../schemas/generated/types';
import {
  checkpointResources,
  defined,
  eventually,
  type Operator,
  condition,
  programStack,
  stashProgram,
} from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const ns = 'deletion';

const { recordTiming, getStack, readyStack } = e2eSuite('deletion', ns, (started) => (op = started));

async function stackGone(name: string, timeoutMs = 240_000): Promise<void> {
  await eventually(
    `Stack ${ns}/${name} to be gone`,
    async () => {
      try {
        await getStack(name);
        return false;
      } catch (e) {
        return e instanceof k8s.ApiException && e.code === 404;
      }
    },
    timeoutMs,
    250,
  );
}
async function deleteStack(name: string): Promise<void> {
  await op.custom.deleteNamespacedCustomObject({
    group: 'pulumi.com',
    version: 'v1',
    namespace: ns,
    plural: 'stacks',
    name,
  });
}

/** A program whose Stash holds the program's name. */
const program = (name: string, options?: object, namespace = ns) => stashProgram(name, namespace, name, { options });
const stack = (name: string, spec: Partial<StackSpec> = {}, namespace = ns) => programStack(name, namespace, spec);

/** The resource types in the stack's checkpoint (`<state>/.pulumi/stacks/<project>/<stack>.json`). */
function stateTypes(project: string, namespace = ns): string[] {
  const resources = checkpointResources(op.stateDir(namespace), project, 'dev');
  if (!resources) throw new Error(`the checkpoint of ${project}/dev does not exist`);
  return resources.map((r) => r.type);
}

interface SeenJob {
  type: string;
  /** The agent's result on the Job (`pulumi.com/update-result`), as last seen. */
  result?: Partial<Pick<StackUpdateState, 'state' | 'type' | 'message'>>;
}

/**
 * The operation Jobs of a Stack seen while it is deleted (they go with it: they are its children),
 * through a watch, so that no version of a Job is missed.
 */
async function jobRecorder(name: string): Promise<{ stop(): Map<string, SeenJob> }> {
  const jobs = new Map<string, SeenJob>();
  const watch = await new k8s.Watch(op.cp.kubeConfig).watch(
    `/apis/batch/v1/namespaces/${ns}/jobs`,
    { labelSelector: `pulumi.com/stack-name=${name}` },
    (_phase: string, j: k8s.V1Job) => {
      const raw = j.metadata?.annotations?.['pulumi.com/update-result'];
      const seen: SeenJob = { type: j.metadata?.labels?.['auto.pulumi.com/update-type'] ?? '' };
      if (raw) seen.result = JSON.parse(raw) as SeenJob['result'];
      const jobName = j.metadata?.name ?? '';
      if (seen.result || !jobs.get(jobName)?.result) jobs.set(jobName, seen);
    },
    () => undefined,
  );
  return {
    stop() {
      watch.abort();
      return jobs;
    },
  };
}

/** Every version of a Stack's status.lastUpdate seen through a watch (the Stack's history while it is deleted). */
interface SeenStack {
  phase: string;
  lastUpdate: StackUpdateState | undefined;
  finalizers: string[] | undefined;
}
async function stackRecorder(name: string): Promise<{ stop(): SeenStack[] }> {
  const seen: SeenStack[] = [];
  const watch = await new k8s.Watch(op.cp.kubeConfig).watch(
    `/apis/pulumi.com/v1/namespaces/${ns}/stacks`,
    { fieldSelector: `metadata.name=${name}` },
    (phase: string, s: Stack) =>
      seen.push({ phase, lastUpdate: s.status?.lastUpdate, finalizers: s.metadata.finalizers }),
    () => undefined,
  );
  return {
    stop() {
      watch.abort();
      return seen;
    },
  };
}

describe('deleting a Stack', () => {
  it('with destroyOnFinalize: runs a destroy Job, empties the state, then goes', async () => {
    await op.objects.create(program('doomed'));
    await op.objects.create(stack('doomed', { destroyOnFinalize: true }));
    const ready = await readyStack('doomed');
    expect(ready.status?.outputs).toEqual({ value: 'doomed' });
    expect(stateTypes('doomed')).toContain('pulumi:index:Stash');
    expect(ready.metadata.finalizers?.length ?? 0).toBeGreaterThan(0);

    const started = Date.now();
    const jobs = await jobRecorder('doomed');
    const history = await stackRecorder('doomed');
    await deleteStack('doomed');
    await stackGone('doomed');
    const seenJobs = jobs.stop();
    const versions = history.stop();
    recordTiming(
      'delete with destroy',
      started,
      JSON.stringify({
        jobs: [...seenJobs].map(([n, j]) => [n, j.result?.state]),
        stack: versions.map((v) => [v.phase, v.lastUpdate?.type, v.lastUpdate?.state]),
      }),
    );

    const destroyJobs = [...seenJobs.values()].filter((j) => j.type === 'destroy');
    expect(destroyJobs).toHaveLength(1);
    // The Stack was released after that destroy had succeeded (the agent's result on its Job).
    expect(destroyJobs[0]!.result).toMatchObject({ type: 'destroy', state: 'succeeded' });
    // The backend still knows the stack (destroy, not `stack rm`), with no resources.
    expect(stateTypes('doomed')).toEqual([]);
  });

  it('keeps the finalizer and says why when the destroy fails', async () => {
    // A protected resource cannot be deleted: `pulumi destroy` fails.
    await op.objects.create(program('guarded', { protect: true }));
    await op.objects.create(stack('guarded', { destroyOnFinalize: true }));
    await readyStack('guarded');
    expect(stateTypes('guarded')).toContain('pulumi:index:Stash');

    const started = Date.now();
    await deleteStack('guarded');
    const failed = await eventually(
      'the destroy to fail',
      async () => {
        const s = await getStack('guarded');
        const last = s.status?.lastUpdate;
        return last?.type === 'destroy' &&
          last.state === 'failed' &&
          s.status?.observedGeneration === s.metadata.generation
          ? s
          : undefined;
      },
      240_000,
      500,
    );
    recordTiming(
      'failing destroy reported',
      started,
      `${condition(failed, 'Reconciling')?.message ?? condition(failed, 'Stalled')?.message} | ${failed.status?.lastUpdate?.message}`,
    );

    // Still there, waiting for its finalizer, and saying why.
    expect(failed.metadata.deletionTimestamp).toBeDefined();
    expect(failed.metadata.finalizers?.some((f) => f.startsWith('metacontroller.io/'))).toBe(true);
    expect(failed.status?.lastUpdate?.message).toMatch(/protect/i);
    expect(failed.status?.lastUpdate?.message).toContain('pulumi:index:Stash::stash');
    expect(condition(failed, 'Ready')).toMatchObject({ status: 'False' });
    const notReady = condition(failed, 'Reconciling') ?? condition(failed, 'Stalled');
    expect(notReady).toBeDefined();
    expect(['RetryingAfterFailure', 'UpdateFailed']).toContain(notReady?.reason);
    const job = await op.batch.readNamespacedJob({
      namespace: ns,
      name: defined(failed.status?.lastUpdate?.name, 'lastUpdate.name'),
    });
    expect(job.metadata?.labels?.['auto.pulumi.com/update-type']).toBe('destroy');
    // Nothing was destroyed, and the Stack is still there after the next look.
    expect(stateTypes('guarded')).toContain('pulumi:index:Stash');
    const again = await getStack('guarded');
    expect(again.metadata.uid).toBe(failed.metadata.uid);
  });

  it('without destroyOnFinalize: goes at once, without a destroy Job, resources kept', async () => {
    await op.objects.create(program('kept'));
    await op.objects.create(stack('kept'));
    const ready = await readyStack('kept');
    expect(ready.spec.destroyOnFinalize).toBeUndefined();
    expect(stateTypes('kept')).toContain('pulumi:index:Stash');

    const started = Date.now();
    const jobs = await jobRecorder('kept');
    await deleteStack('kept');
    await stackGone('kept');
    recordTiming('delete without destroy', started);
    const seenJobs = jobs.stop();

    expect([...seenJobs.values()].filter((j) => j.type !== 'up')).toEqual([]);
    expect(stateTypes('kept')).toContain('pulumi:index:Stash');
  });

  it('namespace deleted under a destroyOnFinalize Stack: Stalled/NamespaceTerminating with the way out, finalizer kept', async () => {
    const gone = await op.namespace('deletion-namespace-gone');
    await op.objects.create(program('orphan', undefined, gone));
    await op.objects.create(stack('orphan', { destroyOnFinalize: true }, gone));
    await op.readyStack(gone, 'orphan');

    const started = Date.now();
    await op.core.deleteNamespace({ name: gone });
    // The namespace controller deletes the workspace and marks the Stack deleted; no destroy can start.
    const stalled = await eventually(
      'the Stack to stall with NamespaceTerminating',
      async () => {
        const s = await op.getStack(gone, 'orphan');
        return s.metadata.deletionTimestamp && condition(s, 'Stalled')?.reason === 'NamespaceTerminating'
          ? s
          : undefined;
      },
      240_000,
      500,
    );
    recordTiming('namespace deleted under a Stack: stalled', started, condition(stalled, 'Stalled')?.message);
    const message = condition(stalled, 'Stalled')?.message;
    expect(message).toContain(`kubectl patch stack orphan -n ${gone} --type=merge -p '{"metadata":{"finalizers":[]}}'`);
    expect(stalled.metadata.finalizers).toEqual(['metacontroller.io/compositecontroller-pulumi-stacks']);
    expect(condition(stalled, 'Ready')).toMatchObject({ status: 'False' });
    // The resources were not destroyed: the stack's state still has them.
    expect(stateTypes('orphan', gone)).toContain('pulumi:index:Stash');

    // Doing what the message says releases the Stack.
    await op.custom.patchNamespacedCustomObject(
      {
        group: 'pulumi.com',
        version: 'v1',
        namespace: gone,
        plural: 'stacks',
        name: 'orphan',
        body: { metadata: { finalizers: [] } },
      },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await eventually(
      'the Stack to be gone',
      async () =>
        op.getStack(gone, 'orphan').then(
          () => false,
          (e: unknown) => e instanceof k8s.ApiException && e.code === 404,
        ),
      60_000,
    );
  });
});
