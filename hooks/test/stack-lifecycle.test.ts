import { SECRET_MASK, WORKSPACE_STATUS_KEY } from '../../contract';
import { syncStack } from './controllers';
import { stableStringify } from '../src/lib/json';
import {
  applyChildren,
  condition,
  find,
  jobFinishes,
  jobsOf,
  makeProgram,
  makeStack,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
  workspaceFails,
} from './builders';
import { childOf, fetchContainerOf, operationOf } from './children';
import { ctx, failOnce, startRecorded, toFirstJob } from './stories';

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
    expect(operationOf(job)).toEqual({ type: 'up', stack: 'dev', message: 'Initial stack update' });
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
    const { stack, cluster, r2 } = toFirstJob();
    const edited = {
      ...stack,
      metadata: { ...stack.metadata, generation: 2 },
      spec: { ...stack.spec, envRefs: { FOO: { type: 'Literal', literal: { value: 'bar' } } } },
    };
    const res = syncStack(syncRequest(edited, cluster), ctx());
    // Kept as the hooks answered them when the Job started: the held Workspace, its StatefulSet.
    expect(childOf(res, 'Workspace')).toEqual(childOf(r2, 'Workspace'));
    expect(childOf(res, 'StatefulSet')).toEqual(childOf(r2, 'StatefulSet'));
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
    const later = ctx(new Date('2026-11-22T11:00:00Z'));
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
    expect(fetchContainerOf(childOf(r2, 'StatefulSet')).env).toContainEqual({
      name: 'PROGRAM_DIGEST',
      value: 'sha256:' + 'b'.repeat(64),
    });
    const cluster3 = workspaceBecomesReady(applyChildren(done, r2.children));
    const s2 = withStatus(s1, r2);
    const recorded = syncStack(syncRequest(s2, cluster3, [program2]), ctx());
    const { res: r3 } = startRecorded(withStatus(s2, recorded), cluster3, recorded, [program2]);
    const newJob = jobsOf(r3).find((j) => j.metadata.name !== job.metadata.name)!;
    expect(operationOf(newJob).message).toBe('New commit detected: "2"');
    expect(childOf(r3, 'Update', newJob.metadata.name).metadata.annotations?.['pulumi.com/update-previous']).toBe(
      job.metadata.name,
    );
  });

  it('takes no result from an Update its status never recorded, and makes no Update of that name', () => {
    const { cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded' });
    // The Stack as it was before the operation was recorded: the Update it would start exists
    // already, so someone else made it (the hooks make an Update only once its name is recorded).
    const stack = makeStack();
    expect(() => syncStack(syncRequest(stack, done), ctx())).toThrow(
      expect.objectContaining({
        field: ['children', 'Update.auto.pulumi.com/v1alpha1', `team-a/${job.metadata.name}`],
      }) as Error,
    );
    // Once it is deleted, the operation is recorded, then started again.
    const gone = done.filter((o) => o.kind !== 'Update' && o.kind !== 'Job');
    const recorded = syncStack(syncRequest(stack, gone), ctx());
    expect(recorded.status.lastUpdate).toBeUndefined();
    expect(recorded.status.currentUpdate?.name).toBe(job.metadata.name);
    expect(jobsOf(recorded)).toHaveLength(0);
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
    const at = new Date('2026-11-22T10:03:00Z');
    const recorded = syncStack(syncRequest(stack, cluster), ctx(at));
    expect(jobsOf(recorded).filter((j) => !cluster.some((c) => c.metadata.name === j.metadata.name))).toEqual([]);
    const { res: due } = startRecorded(withStatus(stack, recorded), cluster, recorded, [makeProgram()], at);
    const job = jobsOf(due).find((j) => !cluster.some((c) => c.metadata.name === j.metadata.name))!;
    expect(operationOf(job).message).toBe('Resync time elapsed: 2m0s');
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
    const edited = { ...s, metadata: { ...s.metadata, generation: 2 } };
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

  it('maps IncompatibleConfiguration to PulumiVersionTooLow, with the versions the agent names', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx());
    const agentMessage =
      "the workspace image's Pulumi CLI is v3.197.0; structured config (config set-all --json) needs v3.202.0 " +
      'or newer: use a newer Pulumi image in workspaceTemplate.spec.image';
    const failing = workspaceFails(applyChildren([], r1.children), 'IncompatibleConfiguration', agentMessage);
    const res = syncStack(syncRequest(withStatus(stack, r1), failing), ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({
      reason: 'PulumiVersionTooLow',
      message: `IncompatibleConfiguration: ${agentMessage}`,
    });
  });

  it('ignores a failure reported for an older template', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx());
    const cluster = applyChildren([], r1.children).map((c) =>
      c.kind === 'ConfigMap' && c.metadata.name === 'my-stack-workspace-status'
        ? {
            ...c,
            data: {
              [WORKSPACE_STATUS_KEY]: JSON.stringify({ hash: 'old', state: 'Failed', reason: 'InstallationFailed' }),
            },
          }
        : c,
    );
    // The same report for the current template stalls it.
    const current = workspaceFails(applyChildren([], r1.children), 'InstallationFailed', 'failed');
    const stalled = syncStack(syncRequest(withStatus(stack, r1), current), ctx());
    expect(condition(stalled.status, 'Stalled')).toMatchObject({ status: 'True' });
    const res = syncStack(syncRequest(withStatus(stack, r1), cluster), ctx());
    expect(condition(res.status, 'Reconciling')?.message).toBe('waiting for workspace readiness');
  });
});
