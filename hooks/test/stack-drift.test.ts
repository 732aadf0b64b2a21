import type { Stack, StackSpec } from '../../schemas/generated/types';
import type { KObject } from '../src/lib/k8s';
import { stackEvents } from '../src/stack/events';
import { DRIFT_CHECK_ANNOTATION, nextDriftCheck } from '../src/stack/drift';
import type { StackSyncResponse } from '../src/stack/sync';
import { syncStack } from './controllers';
import {
  applyChildren,
  childrenMap,
  condition,
  find,
  jobFinishes,
  makeProgram,
  makeStack,
  NOW,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { operationOf, childOf } from './children';
import { ctx, startRecorded, toFirstJob } from './stories';

const UP_ENDED = '2026-11-22T10:01:00Z';
const URN = 'urn:pulumi:dev::site::kubernetes:core/v1:ConfigMap::site';
const at = (iso: string) => ctx(new Date(iso));

/** A Stack whose first up succeeded at UP_ENDED, with the result in its status. */
function deployed(spec: Partial<StackSpec>) {
  const { stack, cluster, job } = toFirstJob(makeStack(spec));
  const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', outputs: {}, endTime: UP_ENDED });
  const res = syncStack(syncRequest(stack, done), at(UP_ENDED));
  return { stack: withStatus(stack, res), cluster: applyChildren(done, res.children), res };
}

const driftChecks = (res: { children: KObject[] }) =>
  res.children.filter((c) => c.kind === 'Update' && c.metadata.annotations?.[DRIFT_CHECK_ANNOTATION] !== undefined);

/** Runs the drift check due at `when` to its end with `result`; the state after the Stack recorded it. */
function checkRuns(stack: Stack, cluster: KObject[], when: string, result: object, ended: string) {
  const started = syncStack(syncRequest(stack, cluster), at(when));
  const check = driftChecks(started)[0]!;
  const s1 = withStatus(stack, started);
  const c1 = applyChildren(cluster, started.children);
  const done = jobFinishes(c1, check.metadata.name, { type: 'refresh', ...result } as never, ended);
  const recorded = syncStack(syncRequest(s1, done), at(ended));
  return { started, check, before: s1, observed: done, recorded, stack: withStatus(s1, recorded) };
}

const eventsOf = (stack: Stack, observed: KObject[], res: StackSyncResponse) =>
  stackEvents({
    stack,
    observed: childrenMap(...observed),
    status: res.status,
    children: res.children,
    finalizing: false,
    now: NOW,
  });

describe('drift detection', () => {
  it('is off without spec.driftDetection: no check, no wake-up for one', () => {
    const { stack, cluster } = deployed({});
    const res = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:30:00Z'));
    expect(driftChecks(res)).toEqual([]);
    // Only the finished up's TTL (24h) wakes it.
    expect(res.resyncAfterSeconds).toBe(24 * 3600 - 29 * 60);
    expect(res.status.lastDriftCheck).toBeUndefined();
  });

  it('asks to be called when the next check is due, counted from the last update', () => {
    const { stack, cluster } = deployed({ driftDetection: { schedule: '5m' } });
    const res = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:02:00Z'));
    expect(driftChecks(res)).toEqual([]);
    expect(res.resyncAfterSeconds).toBe(4 * 60);
    expect(condition(res.status, 'Ready')?.status).toBe('True');
  });

  it('starts a refresh preview when due, staying Ready; its Job asks the workspace for refresh --preview-only', () => {
    const { stack, cluster } = deployed({ driftDetection: { schedule: '5m' } });
    const res = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:06:00Z'));
    const [check] = driftChecks(res);
    expect(check).toBeDefined();
    expect(check!.metadata.name).toMatch(/^my-stack-refresh-[0-9a-f]{8}$/);
    expect(check!.spec).toMatchObject({ type: 'refresh', previewOnly: true, stackName: 'dev' });
    expect(check!.metadata.annotations?.[DRIFT_CHECK_ANNOTATION]).toBe('2026-11-22T10:06:00Z');
    expect(operationOf(childOf(res, 'Job', check!.metadata.name))).toMatchObject({
      type: 'refresh',
      previewOnly: true,
    });
    expect(condition(res.status, 'Ready')?.status).toBe('True');
    expect(res.status.currentUpdate).toBeUndefined();
    // The same sync again (a lost status write) names the same check.
    const again = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:06:30Z'));
    expect(driftChecks(again)[0]?.metadata.name).toBe(check!.metadata.name);
  });

  it('records drift: Drifted True with the count and URNs, lastDriftCheck, a Warning event', () => {
    const { stack, cluster } = deployed({ driftDetection: { schedule: '5m' } });
    const run = checkRuns(
      stack,
      cluster,
      '2026-11-22T10:06:00Z',
      { state: 'succeeded', message: 'refresh succeeded (1 to update)', changedResources: 1, changedUrns: [URN] },
      '2026-11-22T10:06:40Z',
    );
    expect(run.recorded.status.lastDriftCheck).toEqual({
      time: '2026-11-22T10:06:40Z',
      name: run.check.metadata.name,
      state: 'succeeded',
      message: 'refresh succeeded (1 to update)',
      drifted: true,
      changedResources: 1,
      urns: [URN],
    });
    expect(condition(run.recorded.status, 'Drifted')).toMatchObject({
      status: 'True',
      reason: 'DriftDetected',
      message: `1 resource changed outside Pulumi: ${URN}`,
      lastTransitionTime: '2026-11-22T10:06:40Z',
    });
    expect(condition(run.recorded.status, 'Ready')?.status).toBe('True');
    // The last update stays what it was: a check is not one of the Stack's operations.
    expect(run.recorded.status.lastUpdate?.type).toBe('up');
    const events = eventsOf(run.before, run.observed, run.recorded);
    expect(events.map((e) => [e.type, e.reason, e.related?.name])).toEqual([
      ['Warning', 'DriftDetected', run.check.metadata.name],
    ]);
    // Not reported when it started.
    expect(eventsOf(stack, cluster, run.started)).toEqual([]);
    // Without remediate, nothing runs: the next check is 5 minutes after this one.
    const next = syncStack(
      syncRequest(run.stack, applyChildren(run.observed, run.recorded.children)),
      at('2026-11-22T10:07:00Z'),
    );
    expect(next.status.currentUpdate).toBeUndefined();
    expect(condition(next.status, 'Ready')?.status).toBe('True');
    expect(next.resyncAfterSeconds).toBe(4 * 60 + 40);
  });

  it('records no drift: Drifted False, a Normal event', () => {
    const { stack, cluster } = deployed({ driftDetection: { schedule: '5m' } });
    const run = checkRuns(
      stack,
      cluster,
      '2026-11-22T10:06:00Z',
      { state: 'succeeded', changedResources: 0 },
      '2026-11-22T10:06:40Z',
    );
    expect(run.recorded.status.lastDriftCheck).toMatchObject({ drifted: false, changedResources: 0 });
    expect(condition(run.recorded.status, 'Drifted')).toMatchObject({ status: 'False', reason: 'NoDrift' });
    expect(eventsOf(run.before, run.observed, run.recorded).map((e) => [e.type, e.reason])).toEqual([
      ['Normal', 'NoDrift'],
    ]);
  });

  it('records a check that failed: Drifted Unknown, CheckFailed, and the next check on schedule', () => {
    const { stack, cluster } = deployed({ driftDetection: { schedule: '5m' } });
    const run = checkRuns(
      stack,
      cluster,
      '2026-11-22T10:06:00Z',
      { state: 'failed', message: 'refresh failed: provider unreachable' },
      '2026-11-22T10:06:40Z',
    );
    expect(condition(run.recorded.status, 'Drifted')).toMatchObject({ status: 'Unknown', reason: 'CheckFailed' });
    expect(run.recorded.status.lastDriftCheck?.drifted).toBeUndefined();
    expect(condition(run.recorded.status, 'Ready')?.status).toBe('True');
    expect(run.recorded.resyncAfterSeconds).toBe(5 * 60);
  });

  it('with remediate, drift found starts an up with refresh, and a check right after it', () => {
    const { stack, cluster } = deployed({ driftDetection: { schedule: '5m', remediate: true } });
    const run = checkRuns(
      stack,
      cluster,
      '2026-11-22T10:06:00Z',
      { state: 'succeeded', changedResources: 2, changedUrns: [URN, `${URN}2`] },
      '2026-11-22T10:06:40Z',
    );
    // Recorded first (status.currentUpdate), then made by the sync that follows that status write.
    expect(run.recorded.status.currentUpdate?.name).toMatch(/^my-stack-up-/);
    const made = startRecorded(
      run.stack,
      run.observed,
      run.recorded,
      [makeProgram()],
      new Date('2026-11-22T10:06:40Z'),
    );
    const up = made.res.children.find(
      (c) =>
        c.kind === 'Update' &&
        c.spec &&
        (c.spec as { type?: string }).type === 'up' &&
        c.metadata.name !== run.stack.status?.lastUpdate?.name,
    );
    expect(up?.spec).toMatchObject({
      type: 'up',
      refresh: true,
      message: 'Drift detected: 2 resources changed outside Pulumi',
    });
    expect(condition(run.recorded.status, 'Reconciling')?.status).toBe('True');
    // The up succeeds: the next check is due at once, to confirm the drift is gone.
    const done = jobFinishes(
      made.cluster,
      up!.metadata.name,
      { state: 'succeeded', outputs: {} },
      '2026-11-22T10:07:30Z',
    );
    const absorbed = syncStack(syncRequest(made.stack, done), at('2026-11-22T10:07:30Z'));
    expect(absorbed.status.lastUpdate).toMatchObject({ name: up!.metadata.name, state: 'succeeded' });
    expect(
      nextDriftCheck(withStatus(made.stack, absorbed), absorbed.status, at('2026-11-22T10:07:30Z').now)?.toISOString(),
    ).toBe('2026-11-22T10:07:30.000Z');
  });

  it('never overlaps an update: a spec change waits for the running check, then runs', () => {
    const { stack, cluster } = deployed({ driftDetection: { schedule: '5m' } });
    const started = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:06:00Z'));
    const check = driftChecks(started)[0]!;
    const s1 = withStatus(stack, started);
    const c1 = applyChildren(cluster, started.children);
    const changed: Stack = { ...s1, metadata: { ...s1.metadata, generation: 2 }, spec: { ...s1.spec, targets: ['x'] } };
    const waiting = syncStack(syncRequest(changed, c1), at('2026-11-22T10:06:10Z'));
    expect(waiting.children.filter((c) => c.kind === 'Update').map((c) => c.metadata.name)).toEqual(
      c1.filter((c) => c.kind === 'Update').map((c) => c.metadata.name),
    );
    expect(condition(waiting.status, 'Reconciling')).toMatchObject({
      status: 'True',
      message: `waiting for drift check ${check.metadata.name} to finish`,
    });
    const done = jobFinishes(
      c1,
      check.metadata.name,
      { type: 'refresh', state: 'succeeded', changedResources: 0 } as never,
      '2026-11-22T10:06:40Z',
    );
    const next = syncStack(syncRequest(withStatus(changed, waiting), done), at('2026-11-22T10:06:40Z'));
    expect(next.status.currentUpdate?.name).toMatch(/^my-stack-up-/);
    expect(next.status.lastDriftCheck?.name).toBe(check.metadata.name);
  });

  it('a real update that is due wins over a check that is due', () => {
    const { stack, cluster } = deployed({ driftDetection: { schedule: '5m' } });
    const changed: Stack = { ...stack, metadata: { ...stack.metadata, generation: 2 } };
    const res = syncStack(syncRequest(changed, cluster), at('2026-11-22T10:30:00Z'));
    expect(driftChecks(res)).toEqual([]);
    expect(res.status.currentUpdate?.name).toMatch(/^my-stack-up-/);
  });

  it.each(['+275760-09-13T00:00:00Z', '9999-12-31T23:59:59Z'])(
    'an operation that claims to end at %s: the end is unknown, the schedule runs from the clock, no wait exceeds a day',
    (endTime) => {
      const { stack, cluster, job } = toFirstJob(makeStack({ driftDetection: { schedule: '0 */6 * * *' } }));
      const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', outputs: {} }, endTime);
      const absorbed = syncStack(syncRequest(stack, done), at(UP_ENDED));
      // Unknown, as if the Job had not said: the Stack records when it saw the result.
      expect(absorbed.status.lastUpdate).toMatchObject({ state: 'succeeded', lastResyncTime: UP_ENDED });
      const update = absorbed.children.find((c) => c.kind === 'Update');
      expect((update?.status as { endTime?: string } | undefined)?.endTime).toBeUndefined();
      const later = syncStack(
        syncRequest(withStatus(stack, absorbed), applyChildren(done, absorbed.children)),
        at('2026-11-22T10:30:00Z'),
      );
      expect(later.resyncAfterSeconds).toBe(90 * 60);
      // Forged into the status itself: unknown too, so the next check is counted from the epoch (due now).
      const forged = withStatus(stack, absorbed);
      forged.status!.lastUpdate!.lastResyncTime = endTime;
      const due = syncStack(syncRequest(forged, applyChildren(done, absorbed.children)), at('2026-11-22T10:30:00Z'));
      expect(driftChecks(due)).toHaveLength(1);
      for (const res of [absorbed, later, due]) expect(res.resyncAfterSeconds ?? 0).toBeLessThanOrEqual(24 * 3600);
    },
  );

  it('follows a cron schedule (UTC)', () => {
    const { stack } = deployed({ driftDetection: { schedule: '0 */6 * * *' } });
    expect(nextDriftCheck(stack, stack.status!, NOW)?.toISOString()).toBe('2026-11-22T12:00:00.000Z');
  });

  it.each([
    ['10s', 'shorter than the minimum of 30s'],
    ['every day', 'neither a duration like "30m" nor a cron expression of 5 fields'],
    ['99 * * * *', 'is not a valid cron expression'],
  ])('a schedule %j is SpecInvalid naming the field', (schedule, why) => {
    const res = syncStack(syncRequest(makeStack({ driftDetection: { schedule } }), []), at('2026-11-22T10:00:00Z'));
    const stalled = condition(res.status, 'Stalled');
    expect(stalled).toMatchObject({ status: 'True', reason: 'SpecInvalid' });
    expect(stalled?.message).toContain('spec.driftDetection.schedule');
    expect(stalled?.message).toContain(why);
  });

  it('the schema rejects a driftDetection without a schedule or with unknown fields', () => {
    for (const driftDetection of [{}, { schedule: '5m', every: '1h' }, { schedule: '5m', remediate: 'yes' }]) {
      const res = syncStack(
        syncRequest(makeStack({ driftDetection } as unknown as Partial<StackSpec>), []),
        at('2026-11-22T10:00:00Z'),
      );
      expect(condition(res.status, 'Stalled')?.message).toContain('spec.driftDetection');
    }
  });

  it('keeps a finished check until the status has it and its TTL passed', () => {
    const { stack, cluster } = deployed({
      driftDetection: { schedule: '5m' },
      updateTemplate: { spec: { ttlAfterCompleted: '1m' } },
    });
    const run = checkRuns(
      stack,
      cluster,
      '2026-11-22T10:06:00Z',
      { state: 'succeeded', changedResources: 0 },
      '2026-11-22T10:06:40Z',
    );
    expect(find(run.recorded, 'Update', run.check.metadata.name)).toBeDefined();
    const later = syncStack(
      syncRequest(run.stack, applyChildren(run.observed, run.recorded.children)),
      at('2026-11-22T10:08:00Z'),
    );
    expect(find(later, 'Update', run.check.metadata.name)).toBeUndefined();
    expect(later.status.lastDriftCheck?.name).toBe(run.check.metadata.name);
  });
});

describe('drift checks and the rest of a Stack', () => {
  it("an updateTemplate annotation with the check's key does not make the Stack's ups checks", () => {
    const { stack, cluster } = deployed({
      driftDetection: { schedule: '5m' },
      updateTemplate: { metadata: { annotations: { [DRIFT_CHECK_ANNOTATION]: 'x' } } },
    });
    expect(stack.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });
    const res = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:06:00Z'));
    expect(driftChecks(res)).toHaveLength(1);
  });

  it('a branch keeps being polled while a check runs', () => {
    const git = { ...ctx(), lookups: new Map([['https://g.test/r.git#main', { sha: 'a'.repeat(40) }]]) };
    const gitAt = (iso: string) => ({ ...git, now: new Date(iso) });
    const stack = makeStack({ driftDetection: { schedule: '5m' } });
    delete stack.spec.programRef;
    Object.assign(stack.spec, { projectRepo: 'https://g.test/r.git', branch: 'main' });
    const r1 = syncStack(syncRequest(stack, []), gitAt('2026-11-22T10:00:00Z'));
    const c1 = workspaceBecomesReady(applyChildren([], r1.children));
    const recorded = syncStack(syncRequest(withStatus(stack, r1), c1), gitAt('2026-11-22T10:00:00Z'));
    const up = recorded.status.currentUpdate?.name ?? '';
    expect(up).toMatch(/^my-stack-up-/);
    // The sync on that status write makes the Update.
    const s2 = withStatus(stack, recorded);
    const r2 = syncStack(syncRequest(s2, applyChildren(c1, recorded.children)), gitAt('2026-11-22T10:00:00Z'));
    const c2 = applyChildren(applyChildren(c1, recorded.children), r2.children);
    const done = jobFinishes(c2, up, { state: 'succeeded', outputs: {} }, UP_ENDED);
    const r3 = syncStack(syncRequest(withStatus(s2, r2), done), gitAt(UP_ENDED));
    const deployedStack = withStatus(withStatus(s2, r2), r3);
    const c3 = applyChildren(done, r3.children);
    const started = syncStack(syncRequest(deployedStack, c3), gitAt('2026-11-22T10:06:00Z'));
    expect(driftChecks(started)).toHaveLength(1);
    expect(started.resyncAfterSeconds).toBe(60);
    const running = syncStack(
      syncRequest(withStatus(deployedStack, started), applyChildren(c3, started.children)),
      gitAt('2026-11-22T10:06:10Z'),
    );
    expect(condition(running.status, 'Ready')?.status).toBe('True');
    expect(running.resyncAfterSeconds).toBe(60);
  });
});
