import { planProblem } from '../src/update/plan';
import type { Update, Workspace } from '../../schemas/generated/types';
import { Annotations, formatUpdateResult, type UpdateResult } from '../../contract';
import type { KObject } from '../src/lib/k8s';
import { customizeUpdate } from '../src/update/customize';
import { updateEvents } from '../src/update/events';
import { syncUpdate, type UpdateSyncRequest } from '../src/update/sync';
import { condition, objectMap } from './builders';
import { ctx } from './stories';

function update(spec: Update['spec'], status?: Update['status']): Update {
  const u: Update = {
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Update',
    metadata: { name: 'u1', namespace: 'team-a', uid: 'u1-uid', generation: 1 },
    spec,
  };
  if (status) u.status = status;
  return u;
}

function workspace(ready: 'True' | 'False', stalled?: { reason: string; message: string }): Workspace {
  const conditions = [
    { type: 'Ready', status: ready, reason: ready === 'True' ? 'Succeeded' : 'Installing', message: 'm' },
  ];
  if (stalled) conditions.push({ type: 'Stalled', status: 'True', ...stalled });
  return {
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Workspace',
    metadata: { name: 'ws', namespace: 'team-a', uid: 'ws-uid', generation: 2 },
    spec: {},
    status: { observedGeneration: 2, conditions },
  } as Workspace;
}

const spec = { workspaceName: 'ws', stackName: 'dev', type: 'preview' };

/** The Update's Job, finished: the runner's result on it, and the Job controller's condition. */
function finishedJob(result: Omit<UpdateResult, 'startTime' | 'endTime'>): KObject {
  const endTime = '2026-11-22T10:00:40Z';
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: 'u1',
      namespace: 'team-a',
      annotations: {
        [Annotations.updateResult]: formatUpdateResult({ ...result, startTime: '2026-11-22T10:00:10Z', endTime }),
      },
    },
    status: { conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: '2026-11-22T10:00:41Z' }] },
  };
}

const kinds = (children: KObject[]) => children.map((c) => `${c.kind}/${c.metadata.name}`);

describe('an Update', () => {
  it('asks Metacontroller for its Workspace only', () => {
    expect(customizeUpdate(update(spec))).toEqual({
      relatedResources: [
        { apiVersion: 'auto.pulumi.com/v1alpha1', resource: 'workspaces', namespace: 'team-a', names: ['ws'] },
      ],
    });
    expect(customizeUpdate(update({ ...spec, workspaceName: '' }))).toEqual({ relatedResources: [] });
  });

  it('waits for a missing Workspace, saying so, and starts nothing', () => {
    const res = syncUpdate({ parent: update(spec), related: {} }, ctx());
    expect(res.children).toEqual([]);
    expect(condition(res.status, 'Progressing')).toMatchObject({
      status: 'False',
      reason: 'WorkspaceNotFound',
      message: 'workspace ws not found',
    });
    expect(condition(res.status, 'Complete')).toMatchObject({ status: 'False' });
    expect(res.resyncAfterSeconds).toBe(10);
  });

  it("waits for a Workspace that is not ready, with the Workspace's own reason", () => {
    const stalled = workspace('False', { reason: 'InstallationFailed', message: 'npm install failed' });
    const res = syncUpdate({ parent: update(spec), related: objectMap(stalled as KObject) }, ctx());
    expect(res.children).toEqual([]);
    expect(condition(res.status, 'Progressing')).toMatchObject({
      status: 'False',
      reason: 'WorkspaceNotReady',
      message: 'workspace ws is not ready (InstallationFailed: npm install failed)',
    });
  });

  it("creates the Job's identity first, then the Job, once its Workspace is ready", () => {
    const related = objectMap(workspace('True') as KObject);
    const first = syncUpdate({ parent: update(spec), related }, ctx());
    // The binding only once the account and the Role are its own: never to one that existed before.
    expect(kinds(first.children)).toEqual(['ServiceAccount/u1', 'Role/u1']);
    expect(condition(first.status, 'Progressing')).toMatchObject({ status: 'True' });
    const second = syncUpdate({ parent: update(spec), related, children: objectMap(...first.children) }, ctx());
    expect(kinds(second.children)).toEqual(['ServiceAccount/u1', 'Role/u1', 'RoleBinding/u1']);
    const third = syncUpdate({ parent: update(spec), related, children: objectMap(...second.children) }, ctx());
    expect(kinds(third.children)).toEqual(['Job/u1', 'ServiceAccount/u1', 'Role/u1', 'RoleBinding/u1']);
  });

  it('records the outcome of its Job: times, message, permalink, outputs masked, the Secret', () => {
    const related = objectMap(workspace('True') as KObject);
    const identity = syncUpdate({ parent: update({ ...spec, type: 'up' }), related }, ctx()).children;
    const job = finishedJob({
      state: 'succeeded',
      type: 'up',
      message: 'up succeeded (1 created)',
      permalink: 'https://app.pulumi.com/o/p/dev/updates/3',
      outputs: { url: 'https://x', password: '[secret]' },
      projectInfo: { name: 'p', runtime: 'yaml' },
    });
    const res = syncUpdate(
      { parent: update({ ...spec, type: 'up' }), related, children: objectMap(job, ...identity) },
      ctx(),
    );
    expect(res.status).toMatchObject({
      startTime: '2026-11-22T10:00:10Z',
      endTime: '2026-11-22T10:00:40Z',
      permalink: 'https://app.pulumi.com/o/p/dev/updates/3',
      message: 'up succeeded (1 created)',
      outputs: 'u1-stack-outputs',
      outputValues: { url: 'https://x', password: '[secret]' },
      projectInfo: { name: 'p', runtime: 'yaml' },
    });
    expect(res.status.conditions?.map((c) => [c.type, c.status, c.reason, c.lastTransitionTime])).toEqual([
      ['Progressing', 'False', 'Complete', '2026-11-22T10:00:40Z'],
      ['Failed', 'False', 'UpdateSucceeded', '2026-11-22T10:00:40Z'],
      ['Complete', 'True', 'Updated', '2026-11-22T10:00:40Z'],
    ]);
  });

  it('fails when its Job fails without a result', () => {
    const job: KObject = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'u1', namespace: 'team-a', labels: { 'auto.pulumi.com/update-type': 'preview' } },
      status: {
        conditions: [
          { type: 'Failed', status: 'True', reason: 'DeadlineExceeded', lastTransitionTime: '2026-11-22T10:02:00Z' },
        ],
      },
    };
    const res = syncUpdate({ parent: update(spec), children: objectMap(job) }, ctx());
    expect(condition(res.status, 'Failed')).toMatchObject({ status: 'True', reason: 'JobFailed' });
    expect(condition(res.status, 'Complete')).toMatchObject({ status: 'True' });
  });

  it('keeps its outcome and never runs again once its Job is gone', () => {
    const done = update(spec, {
      observedGeneration: 1,
      message: 'no changes',
      conditions: [
        {
          type: 'Progressing',
          status: 'False',
          reason: 'Complete',
          message: '',
          lastTransitionTime: '2026-11-22T10:00:40Z',
        },
        {
          type: 'Failed',
          status: 'False',
          reason: 'UpdateSucceeded',
          message: '',
          lastTransitionTime: '2026-11-22T10:00:40Z',
        },
        {
          type: 'Complete',
          status: 'True',
          reason: 'Updated',
          message: 'no changes',
          lastTransitionTime: '2026-11-22T10:00:40Z',
        },
      ],
    });
    const res = syncUpdate({ parent: done, related: objectMap(workspace('True') as KObject) }, ctx());
    expect(res.children).toEqual([]);
    expect(res.status).toEqual(done.status);
  });

  it('whose Job is deleted before it reports is Aborted, and never runs again', () => {
    const started = update(spec, {
      startTime: '2026-11-22T10:00:05Z',
      conditions: [
        {
          type: 'Progressing',
          status: 'True',
          reason: 'Progressing',
          message: 'the preview is running',
          lastTransitionTime: '2026-11-22T10:00:05Z',
        },
      ],
    });
    const res = syncUpdate({ parent: started, related: objectMap(workspace('True') as KObject) }, ctx());
    expect(res.children).toEqual([]);
    expect(condition(res.status, 'Failed')).toMatchObject({ status: 'True', reason: 'Aborted' });
    expect(condition(res.status, 'Complete')).toMatchObject({ status: 'True' });
  });

  it('named longer than a Job may be fails at once', () => {
    const long = { ...update(spec), metadata: { ...update(spec).metadata, name: 'u'.repeat(64) } };
    const res = syncUpdate({ parent: long }, ctx());
    expect(res.children).toEqual([]);
    expect(condition(res.status, 'Failed')?.message).toMatch(/^metadata\.name is 64 characters long/);
  });

  it('of an unknown type fails at once, naming the field', () => {
    const res = syncUpdate({ parent: update({ ...spec, type: 'import' }) }, ctx());
    expect(res.children).toEqual([]);
    expect(condition(res.status, 'Failed')).toMatchObject({
      status: 'True',
      reason: 'InvalidSpec',
      message: 'spec.type must be one of up, preview, refresh, destroy; got "import"',
    });
  });
});

describe('a hostile Update', () => {
  it('nested deeper than any operation fails at once, starting nothing', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const res = syncUpdate({ parent: update({ ...spec, target: deep as string[] }) }, ctx());
    expect(res.children).toEqual([]);
    expect(condition(res.status, 'Failed')).toMatchObject({ status: 'True', reason: 'InvalidSpec' });
  });
});

describe('update plan fields', () => {
  it('are refused on the wrong operation type: Failed InvalidSpec', () => {
    expect(planProblem({ savePlan: true }, 'up')).toMatch(/spec.savePlan is for a preview only/);
    expect(planProblem({ plan: 'p-1' }, 'preview')).toMatch(/spec.plan is for an up only/);
    expect(planProblem({ plan: '../x' }, 'up')).toMatch(/spec.plan must name a preview Update/);
    expect(planProblem({ savePlan: true }, 'preview')).toBeUndefined();
    expect(planProblem({ plan: 'p-1' }, 'up')).toBeUndefined();
  });
});

describe('events of an Update sync', () => {
  /** Syncs and returns the answer with the events it implies. */
  const sync = (req: UpdateSyncRequest) => {
    const res = syncUpdate(req, ctx());
    return { res, events: updateEvents({ update: req.parent, related: req.related, status: res.status }) };
  };
  const related = objectMap(workspace('True') as KObject);

  it.each([
    ['up', 'Up', 'Updated stack "dev"', 'Failed to update stack "dev"'],
    ['preview', 'Preview', 'Previewed stack "dev"', 'Failed to preview stack "dev"'],
    ['refresh', 'Refresh', 'Refreshed stack "dev"', 'Failed to refresh stack "dev"'],
    ['destroy', 'Destroy', 'Destroyed stack "dev"', 'Failed to destroy stack "dev"'],
  ])('a finished %s: UpdateSucceeded or UpdateFailed with upstream’s message, once', (type, action, ok, failed) => {
    const parent = update({ ...spec, type });
    for (const [state, event] of [
      ['succeeded', { type: 'Normal', reason: 'UpdateSucceeded', message: ok }],
      ['failed', { type: 'Warning', reason: 'UpdateFailed', message: failed }],
    ] as const) {
      const job = finishedJob({ state, type: type as UpdateResult['type'], message: 'm' });
      const done = sync({ parent, related, children: objectMap(job) });
      expect(done.events.map((e) => e.name)).toEqual([expect.stringMatching(/^u1\.[0-9a-f]{16}$/)]);
      expect(done.events.map((e) => ({ ...e, name: 'n' }))).toEqual([
        {
          ...event,
          name: 'n',
          namespace: 'team-a',
          action,
          regarding: {
            apiVersion: 'auto.pulumi.com/v1alpha1',
            kind: 'Update',
            name: 'u1',
            namespace: 'team-a',
            uid: 'u1-uid',
          },
          labels: { 'pulumi.com/stack-name': 'ws' },
        },
      ]);
      // Two identical syncs (a lost status write): the same event, by name.
      expect(sync({ parent, related, children: objectMap(job) }).events).toEqual(done.events);
      // Once its status says Complete: nothing, whatever comes (resyncs, its Job deleted).
      const complete = { ...parent, status: done.res.status };
      expect(sync({ parent: complete, related, children: objectMap(job) }).events).toEqual([]);
      expect(sync({ parent: complete, related }).events).toEqual([]);
    }
  });

  it('nothing while it waits or runs', () => {
    expect(sync({ parent: update(spec), related: {} }).events).toEqual([]);
    const first = sync({ parent: update(spec), related });
    expect(first.events).toEqual([]);
    const running: KObject = { apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'u1', namespace: 'team-a' } };
    expect(sync({ parent: update(spec), related, children: objectMap(running) }).events).toEqual([]);
  });

  it('UpdateFailed for an Update that cannot run, and for one whose Job was deleted', () => {
    expect(sync({ parent: update({ ...spec, type: 'import' }) }).events.map((e) => [e.reason, e.message])).toEqual([
      ['UpdateFailed', 'Failed to update stack "dev"'],
    ]);
    const started = update(spec, { startTime: '2026-11-22T10:00:05Z' });
    expect(sync({ parent: started, related }).events.map((e) => [e.reason, e.message])).toEqual([
      ['UpdateFailed', 'Failed to preview stack "dev"'],
    ]);
  });

  it('the workspace unreachable: ConnectionFailure on the Workspace too, naming the Update', () => {
    const job = finishedJob({
      state: 'failed',
      type: 'preview',
      reason: 'WorkspaceUnavailable',
      message: 'the workspace at http://ws-workspace.team-a:50051 did not become ready: connect ECONNREFUSED',
    });
    const parent = {
      ...update(spec),
      metadata: { ...update(spec).metadata, labels: { 'pulumi.com/stack-name': 'app' } },
    };
    const done = sync({ parent, related, children: objectMap(job) });
    expect(done.events.map((e) => [e.type, e.reason, e.regarding.kind, e.regarding.uid, e.message])).toEqual([
      ['Warning', 'UpdateFailed', 'Update', 'u1-uid', 'Failed to preview stack "dev"'],
      [
        'Warning',
        'ConnectionFailure',
        'Workspace',
        'ws-uid',
        'the workspace at http://ws-workspace.team-a:50051 did not become ready: connect ECONNREFUSED',
      ],
    ]);
    expect(done.events[1]).toMatchObject({
      action: 'Connect',
      related: { kind: 'Update', name: 'u1', uid: 'u1-uid' },
      labels: { 'pulumi.com/stack-name': 'app' },
    });
    expect(done.events[1]?.name).toMatch(/^ws\.[0-9a-f]{16}$/);
    expect(sync({ parent, related, children: objectMap(job) }).events).toEqual(done.events);
    // Without its Workspace in the request, only the Update's own event.
    expect(sync({ parent, related: {}, children: objectMap(job) }).events.map((e) => e.reason)).toEqual([
      'UpdateFailed',
    ]);
  });

  it('none for an Update without a uid', () => {
    const parent = { ...update(spec), metadata: { ...update(spec).metadata, uid: undefined } };
    const job = finishedJob({ state: 'succeeded', type: 'preview', message: 'm' });
    expect(sync({ parent, related, children: objectMap(job) }).events).toEqual([]);
  });
});
