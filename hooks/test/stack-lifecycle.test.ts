import { Annotations, SECRET_MASK } from '../../contract';
import { syncStack, type StackSyncResponse } from '../src/stack/sync';
import { customizeStack } from '../src/stack/customize';
import type { KObject } from '../src/lib/k8s';
import { stableStringify } from '../src/lib/json';
import {
  applyChildren,
  condition,
  find,
  jobFinishes,
  jobsOf,
  makeProgram,
  makeStack,
  noLookups,
  NOW,
  syncRequest,
  testConfig,
  withStatus,
  workspaceBecomesReady,
  workspaceFails,
} from './builders';
import { containerOf, envValue } from './children';

const ctx = (now = NOW) => ({ config: testConfig, now, lookups: noLookups });
const at = (iso: string) => ctx(new Date(iso));

/** Drives a Stack from creation to its first update's Job: returns the state just after the Job is created. */
function toFirstJob(stack = makeStack(), related: KObject[] = [makeProgram()]) {
  const r1 = syncStack(syncRequest(stack, [], related), ctx());
  const s1 = withStatus(stack, r1);
  const cluster1 = workspaceBecomesReady(applyChildren([], r1.children));
  const r2 = syncStack(syncRequest(s1, cluster1, related), ctx());
  const s2 = withStatus(s1, r2);
  const cluster2 = applyChildren(cluster1, r2.children);
  return { r1, r2, stack: s2, cluster: cluster2, job: jobsOf(r2)[0]! };
}

describe('a Program Stack from creation to Ready', () => {
  it('first creates the workspace and waits for it', () => {
    const res = syncStack(syncRequest(makeStack()), ctx());
    expect(find(res, 'StatefulSet', 'my-stack-workspace')).toBeDefined();
    expect(find(res, 'Service', 'my-stack-workspace')).toBeDefined();
    expect(jobsOf(res)).toHaveLength(0);
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'NotReadyInProgress' });
    expect(condition(res.status, 'Reconciling')).toMatchObject({
      status: 'True',
      reason: 'StackProcessing',
      message: 'waiting for workspace readiness',
    });
    expect(condition(res.status, 'Stalled')).toBeUndefined();
    expect(res.status.observedGeneration).toBe(1);
  });

  it('starts one up Job once the workspace is ready, and records it as currentUpdate', () => {
    const { r2, job } = toFirstJob();
    expect(jobsOf(r2)).toHaveLength(1);
    expect(job.metadata.name).toMatch(/^my-stack-up-[0-9a-f]{8}$/);
    const op = JSON.parse(containerOf(job).env?.find((e) => e.name === 'PULUMI_OPERATION')?.value ?? '');
    expect(op).toEqual({ type: 'up', stack: 'dev', message: 'Initial stack update' });
    expect(r2.status.currentUpdate).toEqual({
      generation: 1,
      reconcileRequest: '',
      name: job.metadata.name,
      commit: '1',
    });
    expect(condition(r2.status, 'Reconciling')).toMatchObject({
      reason: 'StackProcessing',
      message: 'stack is being processed',
    });
  });

  it('waits while the Job runs, without touching the workspace even if the spec changes', () => {
    const { stack, cluster } = toFirstJob();
    const edited = {
      ...stack,
      metadata: { ...stack.metadata!, generation: 2 },
      spec: { ...stack.spec, envRefs: { FOO: { type: 'Literal', literal: { value: 'bar' } } } },
    };
    const res = syncStack(syncRequest(edited, cluster), ctx());
    const sts = find(res, 'StatefulSet')!;
    const observedSts = cluster.find((c) => c.kind === 'StatefulSet')!;
    expect(sts).toEqual(
      JSON.parse(observedSts.metadata.annotations!['metacontroller.k8s.io/last-applied-configuration']!),
    );
    expect(jobsOf(res)).toHaveLength(1);
    expect(condition(res.status, 'Reconciling')?.message).toBe('stack is being processed');
  });

  it('absorbs a successful result: lastUpdate, masked outputs, projectInfo, Ready', () => {
    const { stack, cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, {
      state: 'succeeded',
      message: 'update succeeded',
      permalink: 'file:///state/.pulumi/stacks/dev',
      outputs: { url: 'https://example.test', password: SECRET_MASK },
      projectInfo: { name: 'my-program', runtime: 'yaml' },
      endTime: '2026-11-22T10:02:03Z',
    });
    const res = syncStack(syncRequest(stack, done), ctx());
    expect(res.status.lastUpdate).toEqual({
      generation: 1,
      reconcileRequest: '',
      name: job.metadata.name,
      type: 'up',
      state: 'succeeded',
      message: 'update succeeded',
      lastAttemptedCommit: '1',
      lastSuccessfulCommit: '1',
      permalink: 'file:///state/.pulumi/stacks/dev',
      lastResyncTime: '2026-11-22T10:02:03Z',
      failures: 0,
    });
    expect(res.status.outputs).toEqual({ password: '[secret]', url: 'https://example.test' });
    expect(res.status.projectInfo).toEqual({ name: 'my-program', runtime: 'yaml' });
    expect(res.status.currentUpdate).toBeUndefined();
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True', reason: 'ProcessingCompleted' });
    expect(condition(res.status, 'Reconciling')).toBeUndefined();
    // A Program source is watched, not polled.
    expect(res.resyncAfterSeconds).toBeUndefined();
    // The finished Job stays (until its TTL); the workspace stays (Retain).
    expect(find(res, 'Job', job.metadata.name)).toBeDefined();
    expect(find(res, 'StatefulSet')).toBeDefined();
  });

  it('is a fixpoint once Ready: the status fed back gives the same bytes', () => {
    const { stack, cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded' });
    const r1 = syncStack(syncRequest(stack, done), ctx());
    const s1 = withStatus(stack, r1);
    const later = at('2026-11-22T11:00:00Z');
    const r2 = syncStack(syncRequest(s1, applyChildren(done, r1.children)), later);
    const r3 = syncStack(syncRequest(withStatus(s1, r2), applyChildren(done, r2.children)), later);
    expect(stableStringify(r2.status)).toBe(stableStringify(r1.status));
    expect(JSON.stringify(r3)).toBe(JSON.stringify(r2));
  });

  it('answers the same request with the same bytes', () => {
    const { stack, cluster } = toFirstJob();
    const req = syncRequest(stack, cluster);
    expect(JSON.stringify(syncStack(req, ctx()))).toBe(JSON.stringify(syncStack(req, ctx())));
  });

  it('runs a new update for a new Program revision', () => {
    const { stack, cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded' });
    const r1 = syncStack(syncRequest(stack, done), ctx());
    const s1 = withStatus(stack, r1);
    const program2 = makeProgram('my-program', 2, 'sha256:' + 'b'.repeat(64));
    const r2 = syncStack(syncRequest(s1, applyChildren(done, r1.children), [program2]), ctx());
    // The workspace template changed (new digest): wait for it to roll out before running.
    expect(jobsOf(r2).filter((j) => !done.some((d) => d.metadata.name === j.metadata.name))).toHaveLength(0);
    const sts = find(r2, 'StatefulSet')!;
    expect(containerOf(sts, 0, true).env).toContainEqual({
      name: 'PROGRAM_DIGEST',
      value: 'sha256:' + 'b'.repeat(64),
    });
    const cluster3 = workspaceBecomesReady(applyChildren(done, r2.children));
    const r3 = syncStack(syncRequest(withStatus(s1, r2), cluster3, [program2]), ctx());
    const newJob = jobsOf(r3).find((j) => j.metadata.name !== job.metadata.name)!;
    expect(JSON.parse(envValue(containerOf(newJob))).message).toBe('New commit detected: "2"');
    expect(newJob.metadata.annotations!['pulumi.com/update-previous']).toBe(job.metadata.name);
  });

  it('adopts and absorbs a finished Job whose Stack status was never written', () => {
    const { cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded' });
    // The Stack as it was before the sync that created the Job: no currentUpdate.
    const res = syncStack(syncRequest(makeStack(), done), ctx());
    expect(res.status.lastUpdate?.name).toBe(job.metadata.name);
    expect(res.status.lastUpdate?.state).toBe('succeeded');
  });

  it('treats a Job that failed without a result as a failed update', () => {
    const { stack, cluster, job } = toFirstJob();
    const failed = cluster.map((c) =>
      c.kind === 'Job'
        ? {
            ...c,
            status: {
              failed: 1,
              conditions: [
                {
                  type: 'Failed',
                  status: 'True',
                  reason: 'BackoffLimitExceeded',
                  message: 'Job has reached the specified backoff limit',
                  lastTransitionTime: '2026-11-22T10:00:30Z',
                },
              ],
            },
          }
        : c,
    );
    const res = syncStack(syncRequest(stack, failed), ctx());
    expect(res.status.lastUpdate).toMatchObject({
      name: job.metadata.name,
      state: 'failed',
      failures: 0,
      lastResyncTime: '2026-11-22T10:00:30Z',
    });
    expect(res.status.lastUpdate?.message).toContain('BackoffLimitExceeded');
  });
});

/** Runs one failing attempt from a state where a Job was just created; returns the state after absorbing it. */
function failOnce(stack: ReturnType<typeof toFirstJob>['stack'], cluster: KObject[], jobName: string, endTime: string) {
  const done = jobFinishes(cluster, jobName, { state: 'failed', message: 'error: resource creation failed', endTime });
  const res = syncStack(syncRequest(stack, done), ctx(new Date(endTime)));
  return { res, stack: withStatus(stack, res), cluster: applyChildren(done, res.children) };
}

describe('failures, backoff and the failure budget', () => {
  it('retries with 10 s, 30 s, 90 s backoff and stalls after the fourth failure', () => {
    let { stack, cluster, job } = toFirstJob();
    const seen: { failures: number | undefined; reconciling?: string; stalled?: string; resync?: number }[] = [];
    let t = Date.parse('2026-11-22T10:01:00Z');
    let jobName = job.metadata.name;
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
      const retry = syncStack(syncRequest(stack, cluster), ctx(new Date(t)));
      const next = jobsOf(retry).find((j) => !cluster.some((c) => c.metadata.name === j.metadata.name))!;
      expect(JSON.parse(envValue(containerOf(next))).message).toBe(`Backoff time elapsed: ${shown}`);
      stack = withStatus(stack, retry);
      cluster = applyChildren(cluster, retry.children);
      jobName = next.metadata.name;
      t += 5000;
    }
    expect(seen).toEqual([
      { failures: 0, reconciling: '1 update failure(s)', stalled: undefined, resync: 10 },
      { failures: 1, reconciling: '2 update failure(s)', stalled: undefined, resync: 30 },
      { failures: 2, reconciling: '3 update failure(s)', stalled: undefined, resync: 90 },
      { failures: 3, reconciling: undefined, stalled: 'UpdateFailed', resync: undefined },
    ]);
    const stalled = syncStack(syncRequest(stack, cluster), ctx(new Date(t + 24 * 3600 * 1000)));
    expect(condition(stalled.status, 'Stalled')?.message).toBe(
      'up failed 4 times; not retrying until the spec or source changes',
    );
    expect(jobsOf(stalled)).toHaveLength(jobsOf({ children: cluster }).length);
    // The reconciliation-request annotation forces a new attempt and resets the counter.
    const forced = {
      ...stack,
      metadata: { ...stack.metadata!, annotations: { [Annotations.reconciliationRequest]: 'now' } },
    };
    const r = syncStack(syncRequest(forced, cluster), ctx(new Date(t + 1000)));
    const newJob = jobsOf(r).find((j) => !cluster.some((c) => c.metadata.name === j.metadata.name))!;
    expect(JSON.parse(envValue(containerOf(newJob))).message).toBe('Sync request: "now"');
    expect(r.status.observedReconcileRequest).toBe('now');
    expect(r.status.currentUpdate?.reconcileRequest).toBe('now');
  });

  it('caps the backoff at retryMaxBackoffDurationSeconds', () => {
    const base = toFirstJob(makeStack({ retryMaxBackoffDurationSeconds: 20 }));
    let { stack, cluster } = base;
    let after = failOnce(stack, cluster, base.job.metadata.name, '2026-11-22T10:01:00Z');
    expect(after.res.resyncAfterSeconds).toBe(10);
    const retry = syncStack(syncRequest(after.stack, after.cluster), ctx(new Date('2026-11-22T10:01:10Z')));
    const next = jobsOf(retry).find((j) => j.metadata.name !== base.job.metadata.name)!;
    stack = withStatus(after.stack, retry);
    cluster = applyChildren(after.cluster, retry.children);
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
      message: 'preview failed (1 attempt(s))',
    });
  });
});

describe('resync and polling', () => {
  function readyStack(spec: Parameters<typeof makeStack>[0]) {
    const { stack, cluster, job } = toFirstJob(makeStack(spec));
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', endTime: '2026-11-22T10:01:00Z' });
    const r = syncStack(syncRequest(stack, done), ctx(new Date('2026-11-22T10:01:00Z')));
    return { stack: withStatus(stack, r), cluster: applyChildren(done, r.children), res: r };
  }

  it('re-runs after resyncFrequencySeconds with continueResyncOnCommitMatch', () => {
    const { stack, cluster, res } = readyStack({ continueResyncOnCommitMatch: true, resyncFrequencySeconds: 120 });
    expect(res.resyncAfterSeconds).toBe(120);
    const early = syncStack(syncRequest(stack, cluster), ctx(new Date('2026-11-22T10:02:00Z')));
    expect(early.resyncAfterSeconds).toBe(60);
    const due = syncStack(syncRequest(stack, cluster), ctx(new Date('2026-11-22T10:03:00Z')));
    const job = jobsOf(due).find((j) => !cluster.some((c) => c.metadata.name === j.metadata.name))!;
    expect(JSON.parse(envValue(containerOf(job))).message).toBe('Resync time elapsed: 2m0s');
  });

  it('treats resyncFrequencySeconds below 60 as 60', () => {
    const { res } = readyStack({ continueResyncOnCommitMatch: true, resyncFrequencySeconds: 5 });
    expect(res.resyncAfterSeconds).toBe(60);
  });
});

describe('workspaceReclaimPolicy: Delete', () => {
  it('keeps the workspace during the update and deletes it after success', () => {
    const { stack, cluster, job, r2 } = toFirstJob(makeStack({ workspaceReclaimPolicy: 'Delete' }));
    expect(find(r2, 'StatefulSet')).toBeDefined();
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded' });
    const res = syncStack(syncRequest(stack, done), ctx());
    expect(find(res, 'StatefulSet')).toBeUndefined();
    expect(find(res, 'Service')).toBeUndefined();
    expect(find(res, 'Job', job.metadata.name)).toBeDefined();
    // The next update brings it back.
    const s = withStatus(stack, res);
    const edited = { ...s, metadata: { ...s.metadata!, generation: 2 } };
    const again = syncStack(syncRequest(edited, applyChildren(done, res.children)), ctx());
    expect(find(again, 'StatefulSet')).toBeDefined();
  });

  it('keeps the workspace after a failed update', () => {
    const { stack, cluster, job } = toFirstJob(makeStack({ workspaceReclaimPolicy: 'Delete' }));
    const after = failOnce(stack, cluster, job.metadata.name, '2026-11-22T10:01:00Z');
    expect(find(after.res, 'StatefulSet')).toBeDefined();
  });
});

describe('workspace failures', () => {
  it('maps an agent failure to Stalled WorkspaceFailed with the reason and message', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx());
    const failing = workspaceFails(applyChildren([], r1.children), 'InstallationFailed', 'npm install exited with 1');
    const res = syncStack(syncRequest(withStatus(stack, r1), failing), ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({
      reason: 'WorkspaceFailed',
      message: 'InstallationFailed: npm install exited with 1',
    });
    expect(find(res, 'StatefulSet')).toBeDefined();
  });

  it('maps IncompatibleConfiguration to PulumiVersionTooLow', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx());
    const failing = workspaceFails(
      applyChildren([], r1.children),
      'IncompatibleConfiguration',
      'structured config needs Pulumi 3.202.0',
    );
    const res = syncStack(syncRequest(withStatus(stack, r1), failing), ctx());
    expect(condition(res.status, 'Stalled')?.reason).toBe('PulumiVersionTooLow');
  });

  it('ignores a failure reported for an older template', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx());
    const cluster = applyChildren([], r1.children).map((c) =>
      c.kind === 'StatefulSet'
        ? {
            ...c,
            metadata: {
              ...c.metadata,
              annotations: {
                ...c.metadata.annotations,
                [Annotations.workspaceStatus]: JSON.stringify({
                  hash: 'old',
                  state: 'Failed',
                  reason: 'InstallationFailed',
                }),
              },
            },
          }
        : c,
    );
    const res = syncStack(syncRequest(withStatus(stack, r1), cluster), ctx());
    expect(condition(res.status, 'Reconciling')?.message).toBe('waiting for workspace readiness');
  });
});

describe('deletion', () => {
  function readyStack(spec: Parameters<typeof makeStack>[0]) {
    const { stack, cluster, job } = toFirstJob(makeStack(spec));
    const done = jobFinishes(cluster, job.metadata.name, {
      state: 'succeeded',
      projectInfo: { name: 'my-program', runtime: 'yaml' },
    });
    const r = syncStack(syncRequest(stack, done), ctx());
    return { stack: withStatus(stack, r), cluster: applyChildren(done, r.children) };
  }
  const deleting = (s: ReturnType<typeof readyStack>['stack']) => ({
    ...s,
    metadata: {
      ...s.metadata!,
      generation: (s.metadata!.generation as number) + 1,
      deletionTimestamp: '2026-11-22T10:05:00Z',
    },
  });

  it('finalizes at once without destroyOnFinalize', () => {
    const { stack, cluster } = readyStack({});
    const res = syncStack(syncRequest(deleting(stack), cluster, [makeProgram()], true), ctx());
    expect(res.finalized).toBe(true);
    expect(jobsOf(res).every((j) => cluster.some((c) => c.metadata.name === j.metadata.name))).toBe(true);
  });

  it('finalizes at once in preview mode even with destroyOnFinalize', () => {
    const { stack, cluster } = readyStack({ destroyOnFinalize: true, preview: true });
    expect(syncStack(syncRequest(deleting(stack), cluster, [makeProgram()], true), ctx()).finalized).toBe(true);
  });

  it('runs a source-less destroy and finalizes only after it succeeds', () => {
    const { stack, cluster } = readyStack({ destroyOnFinalize: true });
    const del = deleting(stack);
    // The Program is gone already: the destroy needs only projectInfo.
    const r1 = syncStack(syncRequest(del, cluster, [], true), ctx());
    expect(r1.finalized).toBe(false);
    const fetch = containerOf(find(r1, 'StatefulSet'), 0, true);
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'project-info']);
    expect(fetch.env).toEqual(
      expect.arrayContaining([
        { name: 'PROJECT_NAME', value: 'my-program' },
        { name: 'PROJECT_RUNTIME', value: 'yaml' },
      ]),
    );
    const ready = workspaceBecomesReady(applyChildren(cluster, r1.children));
    const r2 = syncStack(syncRequest(withStatus(del, r1), ready, [], true), ctx());
    const destroy = jobsOf(r2).find((j) => j.metadata.labels!['auto.pulumi.com/update-type'] === 'destroy')!;
    expect(destroy).toBeDefined();
    expect(JSON.parse(envValue(containerOf(destroy)))).toEqual({
      type: 'destroy',
      stack: 'dev',
      message: 'Stack marked for deletion',
    });
    expect(r2.finalized).toBe(false);
    const s2 = withStatus(del, r2);
    const c2 = applyChildren(ready, r2.children);
    // A failed destroy keeps the finalizer and says why.
    const failed = syncStack(
      syncRequest(
        s2,
        jobFinishes(c2, destroy.metadata.name, { state: 'failed', message: 'destroy failed: resource in use' }),
        [],
        true,
      ),
      ctx(),
    );
    expect(failed.finalized).toBe(false);
    expect(failed.status.lastUpdate).toMatchObject({
      type: 'destroy',
      state: 'failed',
      message: 'destroy failed: resource in use',
    });
    // A successful one releases it.
    const ok = syncStack(
      syncRequest(s2, jobFinishes(c2, destroy.metadata.name, { state: 'succeeded' }), [], true),
      ctx(),
    );
    expect(ok.finalized).toBe(true);
    expect(ok.status.lastUpdate).toMatchObject({ type: 'destroy', state: 'succeeded' });
  });

  it('releases a never-deployed Stack whose workspace cannot start', () => {
    const stack = makeStack({ destroyOnFinalize: true });
    const r1 = syncStack(syncRequest(stack), ctx());
    const failing = workspaceFails(applyChildren([], r1.children), 'InstallationFailed', 'boom');
    const del = {
      ...withStatus(stack, r1),
      metadata: { ...stack.metadata!, deletionTimestamp: '2026-11-22T10:05:00Z' },
    };
    const res = syncStack(syncRequest(del, failing, [makeProgram()], true), ctx());
    expect(res.finalized).toBe(true);
  });

  const terminatingNamespace = (name = 'team-a') =>
    ({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name, deletionTimestamp: '2026-11-22T10:04:00Z' },
      status: { phase: 'Terminating' },
    }) as KObject;

  it('asks to see its Namespace only when a destroy runs on deletion', () => {
    const rules = (spec: Parameters<typeof makeStack>[0]) =>
      customizeStack(makeStack(spec)).relatedResources.filter((r) => r.resource === 'namespaces');
    expect(rules({ destroyOnFinalize: true })).toEqual([
      { apiVersion: 'v1', resource: 'namespaces', names: ['team-a'] },
    ]);
    expect(rules({})).toEqual([]);
  });

  it('stalls with NamespaceTerminating, keeping the finalizer, when its namespace is deleted before the destroy could start', () => {
    const { stack, cluster } = readyStack({ destroyOnFinalize: true });
    // The namespace controller has removed the workspace and nothing can be created any more.
    const gone = cluster.filter((c) => c.kind !== 'StatefulSet' && c.kind !== 'Service');
    const res = syncStack(syncRequest(deleting(stack), gone, [makeProgram(), terminatingNamespace()], true), ctx());
    expect(res.finalized).toBe(false);
    expect(condition(res.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'NamespaceTerminating' });
    expect(condition(res.status, 'Stalled')!.message).toContain(
      `kubectl patch stack my-stack -n team-a --type=merge -p '{"metadata":{"finalizers":[]}}'`,
    );
    expect(res.resyncAfterSeconds).toBe(30);
    expect(jobsOf(res).map((j) => j.metadata.name)).toEqual(jobsOf({ children: gone }).map((j) => j.metadata.name));
  });

  it('is not stalled by another namespace terminating, nor while its workspace still runs the destroy', () => {
    const { stack, cluster } = readyStack({ destroyOnFinalize: true });
    const gone = cluster.filter((c) => c.kind !== 'StatefulSet' && c.kind !== 'Service');
    const other = syncStack(
      syncRequest(deleting(stack), gone, [makeProgram(), terminatingNamespace('team-b')], true),
      ctx(),
    );
    expect(condition(other.status, 'Stalled')).toBeUndefined();
    // The source-less destroy's workspace was up before the namespace began terminating.
    const r1 = syncStack(syncRequest(deleting(stack), cluster, [makeProgram()], true), ctx());
    const rolled = workspaceBecomesReady(applyChildren(cluster, r1.children));
    const running = syncStack(
      syncRequest(withStatus(deleting(stack), r1), rolled, [makeProgram(), terminatingNamespace()], true),
      ctx(),
    );
    expect(condition(running.status, 'Stalled')).toBeUndefined();
    expect(jobsOf(running).some((j) => j.metadata.labels!['auto.pulumi.com/update-type'] === 'destroy')).toBe(true);
  });

  it('releases a never-deployed Stack whose namespace is terminating', () => {
    const stack = makeStack({ destroyOnFinalize: true });
    const del = { ...stack, metadata: { ...stack.metadata!, deletionTimestamp: '2026-11-22T10:05:00Z' } };
    const res = syncStack(syncRequest(del, [], [makeProgram(), terminatingNamespace()], true), ctx());
    expect(res.finalized).toBe(true);
  });
});

export type { StackSyncResponse };
