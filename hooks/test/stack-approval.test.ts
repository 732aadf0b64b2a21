/**
 * The approval gate (docs/approval.md), played through the three composed controllers: a change
 * is previewed with a saved plan, waits for an approval naming that plan, and the approved `up`
 * applies exactly it; stale approvals, rejections, expiry, newer changes and a lost plan.
 */
import type { Stack } from '../../schemas/generated/types';
import { PLAN_NOT_FOUND } from '../../contract';
import { syncStack } from './controllers';
import {
  condition,
  jobFinishes,
  jobsOf,
  makeProgram,
  makeStack,
  NOW,
  syncRequest,
  workspaceBecomesReady,
} from './builders';
import { at, operationOf } from './children';
import { ctx, step as play } from './stories';
import type { KObject } from '../src/lib/k8s';
import type { StackSyncResponse } from '../src/stack/sync';

const related = [makeProgram()];
const gated = (extra: Partial<Stack['spec']> = {}) =>
  makeStack({ approval: { required: true, ...(extra.approval ?? {}) }, ...extra });

function annotate(stack: Stack, annotations: Record<string, string>): Stack {
  return { ...stack, metadata: { ...stack.metadata, annotations: { ...stack.metadata.annotations, ...annotations } } };
}

/** One sync (and the next, when it records an operation to start: stories.step). */
const step = (stack: Stack, cluster: KObject[], now = NOW) => play(stack, cluster, related, now);

const updatesOf = (res: StackSyncResponse) =>
  res.children.filter((c) => c.kind === 'Update') as (KObject & { spec: Record<string, unknown> })[];

/** From creation to the plan's preview Job. */
function toPreview(stack = gated()) {
  const first = step(stack, []);
  const ready = workspaceBecomesReady(first.cluster);
  const second = step(first.stack, ready);
  return second;
}

/** The preview succeeded and its plan awaits approval. */
function toAwaiting(stack = gated(), changes = { create: 2, same: 1 }) {
  const p = toPreview(stack);
  const previewJob = at(jobsOf(p.res), 0, 'Job');
  const done = jobFinishes(p.cluster, previewJob.metadata.name ?? '', {
    state: 'succeeded',
    message: 'preview succeeded (2 to create, 1 unchanged)',
    resourceChanges: changes,
  });
  const s = step(p.stack, done);
  return { ...s, previewName: previewJob.metadata.name ?? '' };
}

describe('the approval gate', () => {
  it('previews a change with a saved plan instead of running up', () => {
    const { res } = toPreview();
    const job = at(jobsOf(res), 0, 'Job');
    expect(job.metadata.name).toMatch(/^my-stack-preview-[0-9a-f]{8}$/);
    expect(operationOf(job)).toEqual({
      type: 'preview',
      stack: 'dev',
      message: 'Initial stack update',
      savePlan: job.metadata.name,
    });
    const update = updatesOf(res).find((u) => u.metadata.name === job.metadata.name);
    expect(update?.spec.savePlan).toBe(true);
    expect(res.status.plan).toMatchObject({ id: job.metadata.name, state: 'Previewing', generation: 1, commit: '1' });
    expect(res.status.currentUpdate?.name).toBe(job.metadata.name);
    expect(condition(res.status, 'AwaitingApproval')).toMatchObject({ status: 'False', reason: 'Previewing' });
  });

  it('records the plan summary and waits with AwaitingApproval, naming the kubectl commands', () => {
    const { res, previewName } = toAwaiting();
    expect(res.status.plan).toMatchObject({
      id: previewName,
      state: 'AwaitingApproval',
      summary: { create: 2, update: 0, delete: 0, replace: 0, same: 1 },
      createdAt: '2026-11-22T10:01:00Z',
    });
    expect(res.status.lastUpdate).toBeUndefined();
    expect(res.status.currentUpdate).toBeUndefined();
    expect(jobsOf(res).filter((j) => j.metadata.name?.includes('-up-'))).toHaveLength(0);
    const awaiting = condition(res.status, 'AwaitingApproval');
    expect(awaiting).toMatchObject({ status: 'True', reason: 'AwaitingApproval' });
    expect(awaiting?.message).toContain(`kubectl annotate stack my-stack -n team-a pulumi.com/approve=${previewName}`);
    expect(awaiting?.message).toContain(`pulumi.com/reject=${previewName}`);
    expect(condition(res.status, 'Reconciling')).toMatchObject({ status: 'True', reason: 'AwaitingApproval' });
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False' });
  });

  it('keeps waiting, the same bytes, on a resync', () => {
    const a = toAwaiting();
    const again = step(a.stack, a.cluster);
    expect(again.res.status).toEqual(a.res.status);
  });

  it('ignores an approval that names another plan, and says so', () => {
    const a = toAwaiting();
    const stale = step(annotate(a.stack, { 'pulumi.com/approve': 'my-stack-preview-00000000' }), a.cluster);
    expect(stale.res.status.plan?.state).toBe('AwaitingApproval');
    expect(jobsOf(stale.res).some((j) => j.metadata.name?.includes('-up-'))).toBe(false);
    expect(condition(stale.res.status, 'AwaitingApproval')?.message).toContain(
      'pulumi.com/approve="my-stack-preview-00000000" names another plan and was ignored',
    );
  });

  it('applies exactly the approved plan, then is Ready with the up as lastUpdate', () => {
    const a = toAwaiting();
    const approved = step(annotate(a.stack, { 'pulumi.com/approve': a.previewName }), a.cluster);
    const up = at(
      jobsOf(approved.res).filter((j) => j.metadata.name?.includes('-up-')),
      0,
      'up Job',
    );
    expect(operationOf(up)).toEqual({ type: 'up', stack: 'dev', message: 'Initial stack update', plan: a.previewName });
    expect(approved.res.status.plan?.state).toBe('Approved');
    expect(approved.res.status.currentUpdate?.name).toBe(up.metadata.name);
    const done = jobFinishes(approved.cluster, up.metadata.name ?? '', {
      state: 'succeeded',
      outputs: { greeting: 'hi' },
    });
    const after = step(approved.stack, done);
    expect(after.res.status.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded', name: up.metadata.name });
    expect(after.res.status.outputs).toEqual({ greeting: 'hi' });
    expect(after.res.status.plan?.state).toBe('Applied');
    expect(condition(after.res.status, 'Ready')).toMatchObject({ status: 'True' });
    expect(condition(after.res.status, 'AwaitingApproval')).toMatchObject({ status: 'False', reason: 'PlanApplied' });
    // In sync: nothing more runs, and the old approval is stale for the next change.
    const synced = step(after.stack, after.cluster);
    expect(synced.res.status.currentUpdate).toBeUndefined();
  });

  it('previews a newer change again: the old plan id no longer applies', () => {
    const a = toAwaiting();
    const edited = annotate(
      { ...a.stack, metadata: { ...a.stack.metadata, generation: 2 }, spec: { ...a.stack.spec, refresh: true } },
      { 'pulumi.com/approve': a.previewName },
    );
    const next = step(edited, a.cluster);
    const preview = at(
      jobsOf(next.res).filter((j) => j.metadata.name?.includes('-preview-') && j.metadata.name !== a.previewName),
      0,
      'new preview Job',
    );
    expect(next.res.status.plan).toMatchObject({ id: preview.metadata.name, state: 'Previewing', generation: 2 });
    expect(jobsOf(next.res).some((j) => j.metadata.name?.includes('-up-'))).toBe(false);
  });

  it('stops after a rejection, visibly, until the next change', () => {
    const a = toAwaiting();
    const rejected = step(annotate(a.stack, { 'pulumi.com/reject': a.previewName }), a.cluster);
    expect(rejected.res.status.plan?.state).toBe('Rejected');
    expect(condition(rejected.res.status, 'AwaitingApproval')).toMatchObject({
      status: 'False',
      reason: 'PlanRejected',
    });
    expect(condition(rejected.res.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'PlanRejected' });
    // An approval after the rejection does not revive the plan.
    const late = step(annotate(rejected.stack, { 'pulumi.com/approve': a.previewName }), rejected.cluster);
    expect(late.res.status.plan?.state).toBe('Rejected');
    expect(jobsOf(late.res).some((j) => j.metadata.name?.includes('-up-'))).toBe(false);
    // A reconciliation request previews again.
    const again = step(annotate(late.stack, { 'pulumi.com/reconciliation-request': 'again' }), late.cluster);
    expect(again.res.status.plan).toMatchObject({ state: 'Previewing', reconcileRequest: 'again' });
  });

  it('expires a plan after expiresAfter and asks to be called then', () => {
    const a = toAwaiting(gated({ approval: { required: true, expiresAfter: '1h' } }));
    expect(a.res.status.plan?.expiresAt).toBe('2026-11-22T11:01:00Z');
    expect(a.res.resyncAfterSeconds).toBeGreaterThan(0);
    const later = step(a.stack, a.cluster, new Date('2026-11-22T11:01:00Z'));
    expect(later.res.status.plan?.state).toBe('Expired');
    expect(condition(later.res.status, 'AwaitingApproval')).toMatchObject({ status: 'False', reason: 'PlanExpired' });
    expect(condition(later.res.status, 'Stalled')).toMatchObject({ reason: 'PlanExpired' });
  });

  it('previews again when the plan was lost with the workspace pod', () => {
    const a = toAwaiting();
    const approved = step(annotate(a.stack, { 'pulumi.com/approve': a.previewName }), a.cluster);
    const up = at(
      jobsOf(approved.res).filter((j) => j.metadata.name?.includes('-up-')),
      0,
      'up Job',
    );
    const lost = jobFinishes(approved.cluster, up.metadata.name ?? '', {
      state: 'failed',
      reason: PLAN_NOT_FOUND,
      message: 'up failed: the plan is not in this workspace',
    });
    const after = step(approved.stack, lost, new Date('2026-11-22T10:01:00Z'));
    expect(after.res.status.plan?.state).toBe('Lost');
    expect(condition(after.res.status, 'AwaitingApproval')).toMatchObject({ reason: 'PlanLost' });
    // After the failure's cooldown, a new preview (a new plan id) rather than an unreviewed up.
    const retry = step(after.stack, after.cluster, new Date('2026-11-22T10:02:00Z'));
    expect(retry.res.status.plan).toMatchObject({ state: 'Previewing' });
    expect(retry.res.status.plan?.id).not.toBe(a.previewName);
    expect(jobsOf(retry.res).some((j) => j.metadata.name === retry.res.status.plan?.id)).toBe(true);
  });

  it('retries a failed preview with the usual backoff', () => {
    const p = toPreview();
    const previewJob = at(jobsOf(p.res), 0, 'Job');
    const failed = jobFinishes(p.cluster, previewJob.metadata.name ?? '', { state: 'failed', message: 'boom' });
    const s = step(p.stack, failed);
    expect(s.res.status.lastUpdate).toMatchObject({ type: 'preview', state: 'failed', failures: 0 });
    expect(s.res.status.plan?.state).toBe('Failed');
    expect(condition(s.res.status, 'Reconciling')).toMatchObject({ reason: 'PreviewFailed' });
  });

  it('does not gate the destroy on deletion', () => {
    const a = toAwaiting(gated({ destroyOnFinalize: true }));
    const { res } = play(a.stack, a.cluster, related, NOW, true);
    const destroy = jobsOf(res).find((j) => j.metadata.name?.includes('-destroy-'));
    expect(destroy && operationOf(destroy)).toMatchObject({ type: 'destroy' });
  });

  it('leaves an ungated Stack without a plan or condition', () => {
    const plain = toPreview(makeStack());
    expect(plain.res.status.plan).toBeUndefined();
    expect(condition(plain.res.status, 'AwaitingApproval')).toBeUndefined();
    expect(operationOf(at(jobsOf(plain.res), 0, 'Job')).type).toBe('up');
  });

  it('turns off: the plan and condition go, and the change runs as a plain up', () => {
    const a = toAwaiting();
    const off = {
      ...a.stack,
      metadata: { ...a.stack.metadata, generation: 2 },
      spec: { ...a.stack.spec, approval: { required: false } },
    };
    const s = step(off, a.cluster);
    expect(s.res.status.plan).toBeUndefined();
    expect(condition(s.res.status, 'AwaitingApproval')).toBeUndefined();
    const up = jobsOf(s.res).find((j) => j.metadata.name?.includes('-up-'));
    expect(up && operationOf(up)).toMatchObject({ type: 'up' });
    expect(up && operationOf(up).plan).toBeUndefined();
  });

  it('waits a day at a time for a plan centuries from expiring, and refuses an expiry longer than Go allows', () => {
    const a = toAwaiting(gated({ approval: { required: true, expiresAfter: '2000000h' } }));
    expect(a.res.status.plan?.expiresAt).toBe('2255-01-19T18:01:00Z');
    expect(a.res.resyncAfterSeconds).toBe(24 * 3600);
    // The same for an expiry anyone with access to the status could write.
    const forged = structuredClone(a.stack);
    forged.status!.plan!.expiresAt = '9999-12-31T23:59:59Z';
    expect(step(forged, a.cluster).res.resyncAfterSeconds).toBe(24 * 3600);
    // Go's longest duration is 2562047h47m16.854775807s: one hour more is no duration there, nor here.
    const tooLong = syncStack(
      syncRequest(gated({ approval: { required: true, expiresAfter: '2562048h' } }), [], related),
      ctx(),
    );
    expect(condition(tooLong.status, 'Stalled')?.message).toContain('spec.approval.expiresAfter: "2562048h"');
  });

  it('is SpecInvalid for an expiry that is not a positive duration, naming the field', () => {
    const res = syncStack(syncRequest(gated({ approval: { required: true, expiresAfter: '0s' } }), [], related), ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({ reason: 'SpecInvalid' });
    expect(condition(res.status, 'Stalled')?.message).toContain('spec.approval.expiresAfter');
    const bad = syncStack(
      syncRequest(gated({ approval: { required: true, expiresAfter: 'soon' } }), [], related),
      ctx(),
    );
    expect(condition(bad.status, 'Stalled')?.message).toContain('expiresAfter');
  });
});

describe('results under the approval gate: only the approved plan’s up may make the Stack succeed', () => {
  /** A finished Update the hooks never recorded, made by someone allowed to create Updates. */
  function forgedUpdate(stack: Stack, type: 'up' | 'preview', extra: Record<string, unknown>): KObject {
    const name = `my-stack-${type}-0f0f0f0f`;
    const done = '2026-11-22T10:02:00Z';
    return {
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Update',
      metadata: {
        name,
        namespace: 'team-a',
        annotations: {
          'pulumi.com/update-generation': String(stack.metadata.generation),
          'pulumi.com/update-reconcile-request': '',
          'pulumi.com/update-commit': '1',
          'pulumi.com/update-previous': '',
        },
      },
      spec: { workspaceName: 'my-stack', stackName: 'dev', type, ...extra },
      status: {
        endTime: done,
        message: `${type} succeeded`,
        outputValues: { stolen: 'yes' },
        resourceChanges: { create: 0, same: 9 },
        conditions: [{ type: 'Complete', status: 'True', reason: 'Updated', lastTransitionTime: done }],
      },
    };
  }

  it.each([
    ['an up', 'up', {}],
    ['an up applying a plan of its own', 'up', { plan: 'my-stack-preview-0f0f0f0f' }],
    ['a preview saving a plan', 'preview', { savePlan: true }],
  ] as const)('ignores %s the status does not name: the plan still awaits approval', (_what, type, extra) => {
    const a = toAwaiting();
    const res = syncStack(syncRequest(a.stack, [...a.cluster, forgedUpdate(a.stack, type, extra)], related), ctx());
    expect(res.status.lastUpdate).toBeUndefined();
    expect(res.status.outputs).toBeUndefined();
    expect(res.status.plan).toEqual(a.res.status.plan);
    expect(condition(res.status, 'AwaitingApproval')).toMatchObject({ status: 'True' });
  });

  it('refuses (409) the up the status names when it applies another plan than the approved one', () => {
    const a = toAwaiting();
    const approved = step(annotate(a.stack, { 'pulumi.com/approve': a.previewName }), a.cluster);
    const up = approved.res.status.currentUpdate?.name ?? '';
    const replanned = approved.cluster.map((o) =>
      o.kind === 'Update' && o.metadata.name === up
        ? { ...o, spec: { ...(o.spec as object), plan: 'my-stack-preview-0f0f0f0f' } }
        : o,
    );
    expect(() => syncStack(syncRequest(approved.stack, replanned, related), ctx())).toThrow(
      expect.objectContaining({ field: ['children', 'Update.auto.pulumi.com/v1alpha1', `team-a/${up}`] }) as Error,
    );
  });

  it('does not count a plain up that succeeded after the gate was turned on: the change is previewed', () => {
    const first = step(makeStack(), []);
    const started = step(first.stack, workspaceBecomesReady(first.cluster));
    const up = started.res.status.currentUpdate?.name ?? '';
    expect(up).toMatch(/^my-stack-up-/);
    const turnedOn = {
      ...started.stack,
      metadata: { ...started.stack.metadata, generation: 2 },
      spec: { ...started.stack.spec, approval: { required: true } },
    };
    const done = jobFinishes(started.cluster, up, { state: 'succeeded', outputs: { url: 'u' } });
    const res = syncStack(syncRequest(turnedOn, done, related), ctx());
    expect(res.status.lastUpdate).toBeUndefined();
    expect(res.status.outputs).toBeUndefined();
    expect(res.status.plan).toMatchObject({ state: 'Previewing', generation: 2 });
  });
});
