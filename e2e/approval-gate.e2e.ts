/**
 * Issue 23, the approval gate (docs/approval.md), the way a user drives it: a Program Stack with
 * `spec.approval.required` previews its change and saves an update plan in the workspace pod,
 * waits with AwaitingApproval and the plan's summary in `status.plan`; an approval naming another
 * plan does nothing; the right approval runs the `up` that applies exactly that plan; a change of
 * the Program replaces the pending plan (the old id no longer applies); a rejection is visible;
 * deleting the Stack destroys it without asking.
 */
import * as k8s from '@kubernetes/client-node';
import type { Stack } from '../schemas/generated/types';
import { defined, e2eStackSpec, eventually, exists, condition, type Operator, greetingProgram } from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const ns = 'approval-gate';
const { recordTiming } = e2eSuite('approval-gate', ns, (started) => (op = started));

const OPERATION_MS = 240_000;

const program = (greeting: string) => greetingProgram('gated', ns, greeting);

const patch = (plural: 'stacks' | 'programs', name: string, body: object) =>
  op.custom.patchNamespacedCustomObject(
    { group: 'pulumi.com', version: 'v1', namespace: ns, plural, name, body },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );

/** `kubectl annotate stack gated <key>=<value> --overwrite`. */
const annotate = (key: string, value: string) =>
  patch('stacks', 'gated', { metadata: { annotations: { [key]: value } } });

const getStack = () => op.getStack(ns, 'gated');

interface UpdateObject {
  metadata: { name: string };
  spec: Record<string, unknown>;
  status?: Record<string, unknown>;
}

async function updates(): Promise<UpdateObject[]> {
  const list = (await op.custom.listNamespacedCustomObject({
    group: 'auto.pulumi.com',
    version: 'v1alpha1',
    namespace: ns,
    plural: 'updates',
  })) as { items: UpdateObject[] };
  return list.items;
}

/** Waits until the Stack's plan awaits approval (and `also` holds); returns the Stack. */
function awaiting(what: string, also: (s: Stack) => boolean = () => true): Promise<Stack> {
  return eventually(
    what,
    async () => {
      const s = await getStack();
      return s.status?.plan?.state === 'AwaitingApproval' && also(s) ? s : undefined;
    },
    OPERATION_MS,
    500,
  );
}

describe('a Stack behind the approval gate', () => {
  let firstPlan = '';

  it('previews the change, saves a plan and waits with its summary', async () => {
    const started = Date.now();
    await op.objects.create(program('hello'));
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'gated', namespace: ns },
      spec: e2eStackSpec({
        stack: 'dev',
        programRef: { name: 'gated' },
        destroyOnFinalize: true,
        approval: { required: true, expiresAfter: '24h' },
      }),
    } as k8s.KubernetesObject);
    const stack = await awaiting('the first plan to await approval');
    recordTiming('apply to AwaitingApproval', started);
    const plan = defined(stack.status?.plan, 'status.plan');
    firstPlan = defined(plan.id, 'plan.id');
    expect(firstPlan).toMatch(/^gated-preview-[0-9a-f]{8}$/);
    // A new stack: its root resource is to be created.
    expect(plan.summary).toMatchObject({ create: 1, update: 0, delete: 0, replace: 0 });
    expect(plan.expiresAt).toBeDefined();
    const gate = condition(stack, 'AwaitingApproval');
    expect(gate).toMatchObject({ status: 'True', reason: 'AwaitingApproval' });
    expect(gate?.message).toContain(`kubectl annotate stack gated -n ${ns} pulumi.com/approve=${firstPlan}`);
    expect(condition(stack, 'Ready')?.status).toBe('False');
    // Nothing was applied: no up, no lastUpdate, no outputs.
    expect(stack.status?.lastUpdate).toBeUndefined();
    expect(stack.status?.outputs).toBeUndefined();
    const all = await updates();
    expect(all.map((u) => u.spec.type)).toEqual(['preview']);
    const preview = defined(
      all.find((u) => u.metadata.name === firstPlan),
      'the preview Update',
    );
    expect(preview.spec.savePlan).toBe(true);
    expect(preview.status?.resourceChanges).toMatchObject({ create: 1 });
    // The plan stays in the workspace pod; the secret value reached no status.
    expect(JSON.stringify(stack.status)).not.toContain('swordfish');
    expect(JSON.stringify(preview.status)).not.toContain('swordfish');
  });

  it('ignores an approval that names another plan, and says so', async () => {
    const stale = 'gated-preview-00000000';
    await annotate('pulumi.com/approve', stale);
    const stack = await eventually(
      'the stale approval to be reported',
      async () => {
        const s = await getStack();
        return condition(s, 'AwaitingApproval')?.message?.includes('names another plan and was ignored')
          ? s
          : undefined;
      },
      60_000,
      500,
    );
    expect(stack.status?.plan).toMatchObject({ id: firstPlan, state: 'AwaitingApproval' });
    expect((await updates()).some((u) => u.spec.type === 'up')).toBe(false);
    expect(stack.status?.lastUpdate).toBeUndefined();
  });

  it('applies exactly the approved plan, then is Ready with its outputs', async () => {
    const started = Date.now();
    await annotate('pulumi.com/approve', firstPlan);
    const stack = await op.readyStack(ns, 'gated', (s) => s.status?.lastUpdate?.type === 'up', OPERATION_MS);
    recordTiming('approval to Ready', started);
    expect(stack.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded', lastSuccessfulCommit: '1' });
    expect(stack.status?.outputs).toEqual({ greeting: 'hello', secretWord: '[secret]' });
    expect(stack.status?.plan).toMatchObject({ id: firstPlan, state: 'Applied' });
    expect(condition(stack, 'AwaitingApproval')).toMatchObject({ status: 'False', reason: 'PlanApplied' });
    const up = defined(
      (await updates()).find((u) => u.metadata.name === stack.status?.lastUpdate?.name),
      'the up Update',
    );
    expect(up.spec).toMatchObject({ type: 'up', plan: firstPlan });
  });

  it('previews a change of the Program as a new plan; the old approval does not apply it', async () => {
    const before = await getStack();
    await patch('programs', 'gated', { program: { variables: { greeting: 'bonjour' } } });
    const stack = await awaiting('a new plan for the changed Program', (s) => s.status?.plan?.id !== firstPlan);
    const plan = defined(stack.status?.plan, 'status.plan');
    expect(plan.commit).toBe('2');
    // Only the stack's outputs change: Pulumi counts its root resource as unchanged.
    expect(plan.summary).toMatchObject({ create: 0, delete: 0, replace: 0 });
    // The annotation still approves the first plan: stale for this one, and reported as such.
    expect(stack.metadata.annotations?.['pulumi.com/approve']).toBe(firstPlan);
    await eventually(
      'the old approval to be reported as ignored',
      async () =>
        condition(await getStack(), 'AwaitingApproval')?.message?.includes('names another plan and was ignored'),
      60_000,
      500,
    );
    const now = await getStack();
    expect(now.status?.lastUpdate?.name).toBe(before.status?.lastUpdate?.name);
    expect(now.status?.outputs).toEqual({ greeting: 'hello', secretWord: '[secret]' });
    expect(now.status?.plan?.state).toBe('AwaitingApproval');
  });

  it('discards a rejected plan, visibly, and applies nothing', async () => {
    const pending = defined((await getStack()).status?.plan?.id, 'plan.id');
    await annotate('pulumi.com/reject', pending);
    const stack = await eventually(
      'the rejection to show',
      async () => {
        const s = await getStack();
        return s.status?.plan?.state === 'Rejected' ? s : undefined;
      },
      60_000,
      500,
    );
    expect(condition(stack, 'AwaitingApproval')).toMatchObject({ status: 'False', reason: 'PlanRejected' });
    expect(condition(stack, 'Stalled')).toMatchObject({ status: 'True', reason: 'PlanRejected' });
    expect(stack.status?.outputs).toEqual({ greeting: 'hello', secretWord: '[secret]' });
    expect((await updates()).filter((u) => u.spec.type === 'up')).toHaveLength(1);
  });

  it('destroys on deletion without asking', async () => {
    const started = Date.now();
    await op.custom.deleteNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1',
      namespace: ns,
      plural: 'stacks',
      name: 'gated',
    });
    await eventually(
      'the Stack to be destroyed and removed',
      async () =>
        !(await exists(() =>
          op.custom.getNamespacedCustomObject({
            group: 'pulumi.com',
            version: 'v1',
            namespace: ns,
            plural: 'stacks',
            name: 'gated',
          }),
        )),
      OPERATION_MS,
      1000,
    );
    recordTiming('delete (destroy) to gone', started);
  });
});
