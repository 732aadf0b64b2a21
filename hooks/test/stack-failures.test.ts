import { Annotations } from '../../contract';
import { syncStack } from './controllers';
import { condition, jobsOf, makeProgram, makeStack, syncRequest } from './builders';
import { operationOf } from './children';
import { ctx, failOnce, syncStarting, toFirstJob } from './stories';

describe('failures, backoff and the failure budget', () => {
  it('retries with 10 s, 30 s, 90 s backoff and stalls after the fourth failure', () => {
    const first = toFirstJob();
    let { stack, cluster } = first;
    const seen: { failures: number | undefined; reconciling?: string; stalled?: string; resync?: number }[] = [];
    let t = Date.parse('2026-11-22T10:01:00Z');
    let jobName = first.job.metadata.name;
    for (let attempt = 0; attempt < 4; attempt++) {
      const end = new Date(t).toISOString().replace(/\.\d{3}Z$/, 'Z');
      const after = failOnce(stack, cluster, jobName, end);
      const r = after.res;
      seen.push({
        failures: r.status.lastUpdate?.failures,
        reconciling: condition(r.status, 'Reconciling')?.message,
        stalled: condition(r.status, 'Stalled')?.reason,
        resync: r.resyncAfterSeconds,
      });
      stack = after.stack;
      cluster = after.cluster;
      if (attempt === 3) break;
      const cooldown = [10, 30, 90][attempt]!;
      const shown = ['10s', '30s', '1m30s'][attempt]!;
      // One second before the cooldown ends: still waiting.
      const early = syncStack(syncRequest(stack, cluster), ctx(new Date(t + (cooldown - 1) * 1000)));
      expect(jobsOf(early)).toHaveLength(jobsOf({ children: cluster }).length);
      expect(early.resyncAfterSeconds).toBe(1);
      // Cooldown over: a new attempt with upstream's message.
      t += cooldown * 1000;
      const retry = syncStarting(stack, cluster, [makeProgram()], new Date(t));
      const next = jobsOf(retry.res).find((j) => !cluster.some((c) => c.metadata.name === j.metadata.name))!;
      expect(operationOf(next).message).toBe(`Backoff time elapsed: ${shown}`);
      ({ stack, cluster } = retry);
      jobName = next.metadata.name;
      t += 5000;
    }
    expect(seen).toEqual([
      { failures: 0, reconciling: '0 update failure(s)', stalled: undefined, resync: 10 },
      { failures: 1, reconciling: '1 update failure(s)', stalled: undefined, resync: 30 },
      { failures: 2, reconciling: '2 update failure(s)', stalled: undefined, resync: 90 },
      // Stalled: nothing to retry; the only wake-up is the first Job's TTL (24h after it ended, 145 s before).
      { failures: 3, reconciling: undefined, stalled: 'UpdateFailed', resync: 24 * 3600 - 145 },
    ]);
    const stalled = syncStack(syncRequest(stack, cluster), ctx(new Date(t + 24 * 3600 * 1000)));
    expect(condition(stalled.status, 'Stalled')?.message).toBe(
      'up failed 3 times; not retrying until the spec or source changes',
    );
    // No new attempt (the Jobs past their TTL are gone, retention.ts).
    expect(jobsOf(stalled).every((j) => cluster.some((c) => c.metadata.name === j.metadata.name))).toBe(true);
    // The reconciliation-request annotation forces a new attempt and resets the counter.
    const forced = {
      ...stack,
      metadata: { ...stack.metadata, annotations: { [Annotations.reconciliationRequest]: 'now' } },
    };
    const { res: r } = syncStarting(forced, cluster, [makeProgram()], new Date(t + 1000));
    const newJob = jobsOf(r).find((j) => !cluster.some((c) => c.metadata.name === j.metadata.name))!;
    expect(operationOf(newJob).message).toBe('Sync request: "now"');
    expect(r.status.observedReconcileRequest).toBe('now');
    expect(r.status.currentUpdate?.reconcileRequest).toBe('now');
  });

  it('caps the backoff at retryMaxBackoffDurationSeconds', () => {
    const base = toFirstJob(makeStack({ retryMaxBackoffDurationSeconds: 20 }));
    let { stack, cluster } = base;
    let after = failOnce(stack, cluster, base.job.metadata.name, '2026-11-22T10:01:00Z');
    expect(after.res.resyncAfterSeconds).toBe(10);
    const retry = syncStarting(after.stack, after.cluster, [makeProgram()], new Date('2026-11-22T10:01:10Z'));
    const next = jobsOf(retry.res).find((j) => j.metadata.name !== base.job.metadata.name)!;
    ({ stack, cluster } = retry);
    after = failOnce(stack, cluster, next.metadata.name, '2026-11-22T10:01:20Z');
    // 10 s · 3 = 30 s, capped at 20 s.
    expect(after.res.resyncAfterSeconds).toBe(20);
  });

  it('retries at once on a new commit after a failure, without resetting the counter', () => {
    const { stack, cluster, job } = toFirstJob();
    const after = failOnce(stack, cluster, job.metadata.name, '2026-11-22T10:01:00Z');
    const res = syncStack(
      syncRequest(after.stack, after.cluster, [makeProgram('my-program', 2, 'sha256:' + 'c'.repeat(64))]),
      ctx(new Date('2026-11-22T10:01:01Z')),
    );
    // Not waiting for the cooldown: the workspace rolls for the new revision.
    expect(condition(res.status, 'Reconciling')?.message).toBe('waiting for workspace readiness');
  });

  it('reports preview failures as PreviewFailed', () => {
    const { stack, cluster, job } = toFirstJob(makeStack({ preview: true }));
    expect(job.metadata.labels!['auto.pulumi.com/update-type']).toBe('preview');
    const after = failOnce(stack, cluster, job.metadata.name, '2026-11-22T10:01:00Z');
    expect(condition(after.res.status, 'Reconciling')).toMatchObject({
      reason: 'PreviewFailed',
      message: 'preview failed (0 attempt(s))',
    });
  });
});
