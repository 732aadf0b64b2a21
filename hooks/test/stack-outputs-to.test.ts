/**
 * spec.outputsTo on the hooks' side (docs/outputs-to.md): the field's validation, what each `up`'s
 * Update, Job and Job identity carry, and what the Stack records of the runner's report: where the
 * outputs are, which were left out, and a conflict with an object that is not the Stack's.
 */
import type { Stack, StackSpec, Update } from '../../schemas/generated/types';
import { Annotations, OutputsToKeys, type OutputsToReport, type OutputsToRequest } from '../../contract';
import { stableStringify } from '../src/lib/json';
import type { KObject } from '../src/lib/k8s';
import { stackEvents } from '../src/stack/events';
import { validateStackObject } from '../src/stack/validate';
import { syncUpdate } from '../src/update/sync';
import { syncStack } from './controllers';
import {
  applyChildren,
  childrenMap,
  condition,
  jobFinishes,
  jobsOf,
  makeStack,
  NOW,
  objectMap,
  syncRequest,
  testConfig,
  withStatus,
} from './builders';
import { at, childOf, childrenOf, containerOf, envVar, podSpecOf } from './children';
import { ctx, syncStarting, toFirstJob } from './stories';

const UID = makeStack().metadata.uid!;
const SECRET_TARGET: StackSpec['outputsTo'] = { kind: 'Secret', name: 'app-outputs' };

function updateOf(res: { children: KObject[] }, name: string): KObject {
  return childOf(res, 'Update', name);
}

function requestOf(update: KObject): OutputsToRequest | undefined {
  const raw = update.metadata.annotations?.[OutputsToKeys.annotation];
  return raw === undefined ? undefined : (JSON.parse(raw) as OutputsToRequest);
}

/** The first `up` of `stack` finished with `report`, absorbed; the state after. */
function firstUp(stack: Stack, report: OutputsToReport | undefined, outputs: Record<string, unknown> = { url: 'u' }) {
  const first = toFirstJob(stack);
  const done = jobFinishes(first.cluster, first.job.metadata.name, {
    state: 'succeeded',
    outputs,
    ...(report ? { outputsTo: report } : {}),
  });
  const res = syncStack(syncRequest(first.stack, done), ctx());
  return {
    ...first,
    res,
    before: first.stack,
    done,
    stack: withStatus(first.stack, res),
    cluster: applyChildren(done, res.children),
  };
}

/** From an absorbed state, the Stack is changed (`change`) and its next `up` starts (recorded, then made): its Update and Job. */
function nextUp(state: { stack: Stack; cluster: KObject[] }, change: (s: Stack) => Stack) {
  const { res, stack, cluster } = syncStarting(change(state.stack), state.cluster);
  const update = childrenOf(res, 'Update').find((u) => !state.cluster.some((o) => o.metadata.name === u.metadata.name));
  if (!update) throw new Error('no new Update');
  return { res, update, stack, cluster };
}

const respec = (spec: Partial<StackSpec>) => (s: Stack) => ({
  ...s,
  metadata: { ...s.metadata, generation: (s.metadata.generation ?? 1) + 1 },
  spec: { ...s.spec, ...spec },
});
const requested = (value: string) => (s: Stack) => ({
  ...s,
  metadata: { ...s.metadata, annotations: { [Annotations.reconciliationRequest]: value } },
});

describe('spec.outputsTo is validated', () => {
  const problems = (outputsTo: unknown) =>
    validateStackObject(makeStack({ outputsTo } as Partial<StackSpec>)).join('\n');

  it.each([
    [
      'a kind that is neither',
      { kind: 'Deployment', name: 'x' },
      /^spec\.outputsTo\.kind must be one of "Secret", "ConfigMap"$/,
    ],
    ['no name', { kind: 'Secret' }, /spec\.outputsTo\.name is required/],
    ['a name no object can have', { kind: 'Secret', name: 'Not_A_Name' }, /spec\.outputsTo\.name must match pattern/],
    [
      'an output whose name is no key, without a key',
      { kind: 'Secret', name: 'x', outputs: [{ name: 'db:url' }] },
      /^spec\.outputsTo\.outputs\[0\]\.name: "db:url" is not a valid key .* set spec\.outputsTo\.outputs\[0\]\.key$/,
    ],
    [
      'a key with a character keys cannot have',
      { kind: 'Secret', name: 'x', outputs: [{ name: 'url', key: 'a/b' }] },
      /spec\.outputsTo\.outputs\[0\]\.key must match pattern/,
    ],
    [
      'the key ".."',
      { kind: 'ConfigMap', name: 'x', outputs: [{ name: 'url', key: '..' }] },
      /^spec\.outputsTo\.outputs\[0\]\.key: "\.\." is not a valid key/,
    ],
    [
      'two outputs under one key',
      { kind: 'Secret', name: 'x', outputs: [{ name: 'url' }, { name: 'other', key: 'url' }] },
      /^spec\.outputsTo\.outputs\[1\]: key "url" is already used by spec\.outputsTo\.outputs\[0\]/,
    ],
    ['an unknown field', { kind: 'Secret', name: 'x', mode: 'all' }, /spec\.outputsTo\.mode is not a known field/],
  ])('%s is SpecInvalid, naming the field', (_, outputsTo, message) => {
    expect(problems(outputsTo)).toMatch(message);
  });

  it('accepts all outputs, or a list with keys renamed', () => {
    expect(problems(SECRET_TARGET)).toBe('');
    expect(
      problems({ kind: 'ConfigMap', name: 'a.b-c', outputs: [{ name: 'db:url', key: 'DB_URL' }, { name: 'url' }] }),
    ).toBe('');
  });

  it('stalls a Stack with SpecInvalid, as every invalid field does', () => {
    const stack = makeStack({ outputsTo: { kind: 'Secret', name: 'x', outputs: [{ name: 'a b' }] } });
    const res = syncStack(syncRequest(stack), ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'SpecInvalid' });
    expect(condition(res.status, 'Stalled')?.message).toContain('spec.outputsTo.outputs[0].name');
  });
});

describe('an up of a Stack without spec.outputsTo (upstream manifests)', () => {
  it('carries no request, and its Job has no env for it and no rule for it', () => {
    const { r2, job } = toFirstJob();
    const update = updateOf(r2, job.metadata.name);
    expect(update.metadata.annotations?.[OutputsToKeys.annotation]).toBeUndefined();
    expect(envVar(containerOf(podSpecOf(job), 'update'), OutputsToKeys.env)).toBeUndefined();
    expect(childOf(r2, 'Role', job.metadata.name).rules).toEqual([
      {
        apiGroups: ['auto.pulumi.com'],
        resources: ['workspaces/rpc'],
        verbs: ['use'],
        resourceNames: ['my-stack'],
      },
      { apiGroups: ['batch'], resources: ['jobs'], verbs: ['patch'], resourceNames: [job.metadata.name] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
    ]);
  });

  it('records nothing of it', () => {
    const { res } = firstUp(makeStack(), undefined);
    expect(res.status.outputsTo).toBeUndefined();
    expect(condition(res.status, 'OutputsSkipped')).toBeUndefined();
    expect(condition(res.status, 'Ready')?.status).toBe('True');
  });

  it('drops a request put on its Updates through updateTemplate: only the hooks say what a Job writes', () => {
    const request = { stack: { name: 'my-stack', uid: UID }, target: { kind: 'Secret', name: 'other' } };
    const stack = makeStack({
      updateTemplate: { metadata: { annotations: { [OutputsToKeys.annotation]: JSON.stringify(request) } } },
    });
    const { r2, job } = toFirstJob(stack);
    expect(updateOf(r2, job.metadata.name).metadata.annotations?.[OutputsToKeys.annotation]).toBeUndefined();
  });
});

describe('an up of a Stack with spec.outputsTo', () => {
  it('asks its runner to write there, owned by the Stack', () => {
    const stack = makeStack({ outputsTo: { kind: 'Secret', name: 'app-outputs', outputs: [{ name: 'url' }] } });
    const { r2, job } = toFirstJob(stack);
    const request = requestOf(updateOf(r2, job.metadata.name));
    expect(request).toEqual({
      stack: { name: 'my-stack', uid: UID },
      target: { kind: 'Secret', name: 'app-outputs', outputs: [{ name: 'url' }] },
    });
    const env = envVar(containerOf(podSpecOf(job), 'update'), OutputsToKeys.env);
    expect(JSON.parse(env?.value ?? '')).toEqual(request);
  });

  it("lets its Job's identity get and update only that Secret (it may create Secrets already)", () => {
    const { r2, job } = toFirstJob(makeStack({ outputsTo: SECRET_TARGET }));
    expect((childOf(r2, 'Role', job.metadata.name).rules ?? []).slice(3)).toEqual([
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'update'], resourceNames: ['app-outputs'] },
    ]);
  });

  it('lets it create ConfigMaps, and get and update only that one, for a ConfigMap', () => {
    const { r2, job } = toFirstJob(makeStack({ outputsTo: { kind: 'ConfigMap', name: 'app-config' } }));
    expect((childOf(r2, 'Role', job.metadata.name).rules ?? []).slice(3)).toEqual([
      { apiGroups: [''], resources: ['configmaps'], verbs: ['create'] },
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'update'], resourceNames: ['app-config'] },
    ]);
  });

  it('records where the outputs are, and is Ready', () => {
    const { res, stack, cluster } = firstUp(makeStack({ outputsTo: SECRET_TARGET }), {
      kind: 'Secret',
      name: 'app-outputs',
      state: 'written',
    });
    expect(res.status.outputsTo).toEqual({ kind: 'Secret', name: 'app-outputs', state: 'written' });
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True', reason: 'ProcessingCompleted' });
    expect(condition(res.status, 'OutputsSkipped')).toBeUndefined();
    // Fed back, the same status: nothing runs again.
    const again = syncStack(syncRequest(stack, cluster), ctx(new Date('2026-11-22T11:00:00Z')));
    expect(stableStringify(again.status)).toBe(stableStringify(res.status));
    expect(jobsOf(again).length).toBe(jobsOf(res).length);
  });

  it('names the outputs left out in the condition OutputsSkipped, until an up leaves none out', () => {
    const target: StackSpec['outputsTo'] = { kind: 'ConfigMap', name: 'app-config' };
    const first = firstUp(
      makeStack({ outputsTo: target }),
      {
        kind: 'ConfigMap',
        name: 'app-config',
        state: 'written',
        skipped: { secret: ['password'], invalidKey: ['db:url'], missing: ['gone'], total: 5 },
      },
      { url: 'u', password: '[secret]' },
    );
    const skipped = condition(first.res.status, 'OutputsSkipped');
    expect(skipped).toMatchObject({ status: 'True', reason: 'SecretOutputs', observedGeneration: 1 });
    expect(skipped?.message).toBe(
      'ConfigMap app-config does not hold 5 output(s): secret outputs, which only a Secret may hold: "password"; ' +
        'outputs whose names are not valid keys (list them in spec.outputsTo.outputs with a key): "db:url"; ' +
        'outputs the stack does not have: "gone" (and 2 more)',
    );
    // Leaving outputs out is no failure: the Stack is Ready.
    expect(condition(first.res.status, 'Ready')?.status).toBe('True');

    const next = nextUp(first, requested('again'));
    const done = jobFinishes(next.cluster, next.update.metadata.name, {
      state: 'succeeded',
      outputs: { url: 'u' },
      outputsTo: { kind: 'ConfigMap', name: 'app-config', state: 'written' },
    });
    const res = syncStack(syncRequest(next.stack, done), ctx());
    expect(condition(res.status, 'OutputsSkipped')).toBeUndefined();
  });

  it('stalls with OutputsConflict when the object is not the Stack’s, and clears once an up writes it', () => {
    const first = firstUp(makeStack({ outputsTo: SECRET_TARGET }), {
      kind: 'Secret',
      name: 'app-outputs',
      state: 'conflict',
    });
    expect(first.res.status.outputsTo).toEqual({ kind: 'Secret', name: 'app-outputs', state: 'conflict' });
    const stalled = condition(first.res.status, 'Stalled');
    expect(stalled).toMatchObject({ status: 'True', reason: 'OutputsConflict' });
    expect(stalled?.message).toContain('Secret app-outputs exists and is not this Stack');
    expect(stalled?.message).toContain('kubectl annotate stack my-stack -n team-a pulumi.com/reconciliation-request=');
    expect(condition(first.res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'NotReadyStalled' });
    // The up itself succeeded: its outputs are recorded.
    expect(first.res.status.lastUpdate?.state).toBe('succeeded');
    expect(first.res.status.outputs).toEqual({ url: 'u' });
    // It stays so (the same bytes), starting nothing, until something changes.
    const again = syncStack(syncRequest(first.stack, first.cluster), ctx(new Date('2026-11-22T12:00:00Z')));
    expect(stableStringify(again.status)).toBe(stableStringify(first.res.status));
    expect(childrenOf(again, 'Update').length).toBe(childrenOf(first.res, 'Update').length);
    // A Warning event of its reason when it stalls, and none for the same stall again.
    const events = (stack: Stack, observed: KObject[], res: { status: Stack['status']; children: KObject[] }) =>
      stackEvents({
        stack,
        observed: childrenMap(...observed),
        status: res.status ?? {},
        children: res.children,
        finalizing: false,
        now: NOW,
      })
        .filter((e) => e.reason === 'OutputsConflict')
        .map((e) => ({ type: e.type, message: e.message }));
    expect(events(first.before, first.done, first.res)).toEqual([{ type: 'Warning', message: stalled?.message }]);
    expect(events(first.stack, first.cluster, again)).toEqual([]);

    // The object deleted, the user asks for another run: the conflict is not an object to delete later.
    const next = nextUp(first, requested('after-deleting-it'));
    expect(requestOf(next.update)).toEqual({
      stack: { name: 'my-stack', uid: UID },
      target: { kind: 'Secret', name: 'app-outputs' },
    });
    const done = jobFinishes(next.cluster, next.update.metadata.name, {
      state: 'succeeded',
      outputs: { url: 'u' },
      outputsTo: { kind: 'Secret', name: 'app-outputs', state: 'written' },
    });
    const res = syncStack(syncRequest(next.stack, done), ctx());
    expect(condition(res.status, 'Stalled')).toBeUndefined();
    expect(condition(res.status, 'Ready')?.status).toBe('True');
    expect(res.status.outputsTo?.state).toBe('written');
  });

  it('asks to delete the object written before when the name changes, or the field goes', () => {
    const first = firstUp(makeStack({ outputsTo: SECRET_TARGET }), {
      kind: 'Secret',
      name: 'app-outputs',
      state: 'written',
    });
    const renamed = nextUp(first, respec({ outputsTo: { kind: 'ConfigMap', name: 'app-outputs' } }));
    expect(requestOf(renamed.update)).toEqual({
      stack: { name: 'my-stack', uid: UID },
      target: { kind: 'ConfigMap', name: 'app-outputs' },
      previous: { kind: 'Secret', name: 'app-outputs' },
    });
    const role = childOf(renamed.res, 'Role', renamed.update.metadata.name);
    expect((role.rules ?? []).slice(3)).toEqual([
      { apiGroups: [''], resources: ['configmaps'], verbs: ['create'] },
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'update'], resourceNames: ['app-outputs'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'delete'], resourceNames: ['app-outputs'] },
    ]);

    const removed = nextUp(first, (s) => {
      const spec = { ...s.spec };
      delete spec.outputsTo;
      return { ...s, metadata: { ...s.metadata, generation: 2 }, spec };
    });
    expect(requestOf(removed.update)).toEqual({
      stack: { name: 'my-stack', uid: UID },
      previous: { kind: 'Secret', name: 'app-outputs' },
    });
    // Its result carries no report (nothing was written): the status forgets the object.
    const done = jobFinishes(removed.cluster, removed.update.metadata.name, { state: 'succeeded', outputs: {} });
    const res = syncStack(syncRequest(removed.stack, done), ctx());
    expect(res.status.outputsTo).toBeUndefined();
    expect(condition(res.status, 'Ready')?.status).toBe('True');
  });

  it('keeps the object of an earlier up when an up fails: it is asked again next time', () => {
    const first = firstUp(makeStack({ outputsTo: SECRET_TARGET }), {
      kind: 'Secret',
      name: 'app-outputs',
      state: 'written',
    });
    const next = nextUp(first, respec({ outputsTo: { kind: 'Secret', name: 'moved' } }));
    const failed = jobFinishes(next.cluster, next.update.metadata.name, { state: 'failed' });
    const res = syncStack(syncRequest(next.stack, failed), ctx());
    expect(res.status.outputsTo).toEqual({ kind: 'Secret', name: 'app-outputs', state: 'written' });
  });

  it('asks nothing of a preview', () => {
    const { r2, job } = toFirstJob(makeStack({ preview: true, outputsTo: SECRET_TARGET }));
    expect(updateOf(r2, job.metadata.name).metadata.annotations?.[OutputsToKeys.annotation]).toBeUndefined();
  });
});

describe('an Update carrying a request', () => {
  const workspace = {
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Workspace',
    metadata: { name: 'ws', namespace: 'team-a', generation: 1 },
    spec: {},
    status: { observedGeneration: 1, conditions: [{ type: 'Ready', status: 'True', reason: 'Succeeded' }] },
  } as KObject;
  const update = (annotation: string): Update => ({
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Update',
    metadata: {
      name: 'u1',
      namespace: 'team-a',
      generation: 1,
      annotations: { [OutputsToKeys.annotation]: annotation },
    },
    spec: { workspaceName: 'ws', stackName: 'dev', type: 'up' },
  });

  it.each([
    ['not JSON', '{', /is not JSON$/],
    ['without the Stack', JSON.stringify({ target: { kind: 'Secret', name: 'x' } }), /stack must name the Stack/],
    [
      'with another kind',
      JSON.stringify({ stack: { name: 's', uid: 'u' }, target: { kind: 'Pod', name: 'x' } }),
      /target\.kind must be Secret or ConfigMap$/,
    ],
    [
      'with a key no object can have',
      JSON.stringify({
        stack: { name: 's', uid: 'u' },
        target: { kind: 'Secret', name: 'x', outputs: [{ name: 'a b' }] },
      }),
      /target\.outputs\[0\] needs a valid key$/,
    ],
    [
      'naming a Stack that does not own it',
      JSON.stringify({ stack: { name: 'other', uid: 'u-other' }, target: { kind: 'Secret', name: 'x' } }),
      /names Stack other, which does not own this Update$/,
    ],
  ])('%s fails (InvalidSpec) naming the annotation, and runs nothing', (_, annotation, message) => {
    const res = syncUpdate(
      { parent: update(annotation), related: objectMap(workspace) },
      { config: testConfig, now: NOW },
    );
    expect(res.children).toEqual([]);
    const failed = condition(res.status, 'Failed');
    expect(failed).toMatchObject({ status: 'True', reason: 'InvalidSpec' });
    expect(failed?.message).toMatch(/^metadata\.annotations\["pulumi\.com\/outputs-to"\] /);
    expect(failed?.message).toMatch(message);
  });

  it("reports the runner's report in its status", () => {
    const stack = makeStack({ outputsTo: SECRET_TARGET });
    const { cluster, job } = toFirstJob(stack);
    const report: OutputsToReport = {
      kind: 'Secret',
      name: 'app-outputs',
      state: 'written',
      skipped: { missing: ['gone'], total: 1 },
    };
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', outputs: {}, outputsTo: report });
    const desired = at(
      done.filter((o) => o.kind === 'Update'),
      0,
      'Update',
    ) as Update;
    // As Metacontroller stores it: the Stack its controller owner.
    const owner = { apiVersion: 'pulumi.com/v1', kind: 'Stack', name: stack.metadata.name, uid: stack.metadata.uid! };
    const parent = { ...desired, metadata: { ...desired.metadata, ownerReferences: [{ ...owner, controller: true }] } };
    const own = done.filter((o) => o.metadata.name === job.metadata.name && o.kind !== 'Update');
    const res = syncUpdate({ parent, children: objectMap(...own) }, { config: testConfig, now: NOW });
    expect(res.status.outputsTo).toEqual(report);
  });
});

describe('a status.outputsTo written by someone else', () => {
  it.each([
    ['without a state', { kind: 'Secret', name: 'x' }],
    ['with a name no object can have', { kind: 'Secret', name: 'Not A Name', state: 'written' }],
    ['of another kind', { kind: 'Pod', name: 'x', state: 'written' }],
  ])('%s names nothing to delete, and never stalls the Stack', (_, outputsTo) => {
    const stack = makeStack({ outputsTo: SECRET_TARGET }, {}, { outputsTo } as Stack['status']);
    const { r2, job } = toFirstJob(stack);
    expect(requestOf(updateOf(r2, job.metadata.name))).toEqual({
      stack: { name: 'my-stack', uid: UID },
      target: { kind: 'Secret', name: 'app-outputs' },
    });
    expect(condition(r2.status, 'Stalled')).toBeUndefined();
  });

  it('is carried over only whole', () => {
    const res = syncStack(
      syncRequest(makeStack({}, {}, { outputsTo: { kind: 'Secret', name: 'x' } } as Stack['status'])),
      ctx(),
    );
    expect(res.status.outputsTo).toBeUndefined();
  });
});
