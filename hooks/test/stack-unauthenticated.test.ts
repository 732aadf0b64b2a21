/**
 * A workspace that cannot verify its callers (its ServiceAccount lacks system:auth-delegator): the
 * agent reports Failed/Unauthenticated in its status ConfigMap; the Stack stalls with that reason
 * and the fix, starts no Job the workspace would refuse, and recovers when the report turns Ready.
 */
import type { Stack } from '../../schemas/generated/types';
import { stackEvents } from '../src/stack/events';
import { syncStack } from './controllers';
import {
  applyChildren,
  childrenMap,
  condition,
  find,
  jobFinishes,
  jobsOf,
  makeStack,
  NOW,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
  workspaceFails,
} from './builders';
import { ctx, step, toFirstJob } from './stories';

const agentMessage =
  'the workspace cannot verify its callers: its ServiceAccount (system:serviceaccount:team-a:deployer) may not ' +
  'create tokenreviews.authentication.k8s.io or subjectaccessreviews.authorization.k8s.io, which the ClusterRole ' +
  'system:auth-delegator grants (checked again within 120 s, no restart needed)';
const fix =
  "To grant system:auth-delegator to the workspace's ServiceAccount team-a/deployer: kubectl create " +
  'clusterrolebinding pulumi-operator:auth-delegator:team-a:deployer --clusterrole=system:auth-delegator ' +
  '--serviceaccount=team-a:deployer';

/** A new Stack whose workspace reports Unauthenticated: the request's state and the answer. */
function unauthenticated(stack: Stack = makeStack({ serviceAccountName: 'deployer' })) {
  const r1 = syncStack(syncRequest(stack), ctx());
  const s1 = withStatus(stack, r1);
  const cluster = workspaceFails(applyChildren([], r1.children), 'Unauthenticated', agentMessage);
  const res = syncStack(syncRequest(s1, cluster), ctx());
  return { stack: s1, cluster, res };
}

describe('a workspace that cannot verify its callers', () => {
  it('stalls the Stack with reason Unauthenticated, what the agent found and the command that fixes it', () => {
    const { res } = unauthenticated();
    expect(condition(res.status, 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'Unauthenticated',
      message: `Unauthenticated: ${agentMessage}. ${fix}`,
    });
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'NotReadyStalled' });
    expect(condition(res.status, 'Reconciling')).toBeUndefined();
  });

  it('starts no Job and keeps the workspace, sync after sync', () => {
    const { stack, cluster, res } = unauthenticated();
    expect(jobsOf(res)).toHaveLength(0);
    expect(res.status.currentUpdate).toBeUndefined();
    expect(find(res, 'StatefulSet', 'my-stack-workspace')).toBeDefined();
    const again = syncStack(syncRequest(withStatus(stack, res), applyChildren(cluster, res.children)), ctx());
    expect(jobsOf(again)).toHaveLength(0);
    expect(condition(again.status, 'Stalled')?.reason).toBe('Unauthenticated');
    expect(again.status).toEqual(res.status);
  });

  it('names the account the workspace pod runs as (the namespace default without one)', () => {
    const { res } = unauthenticated(makeStack());
    expect(condition(res.status, 'Stalled')?.message).toContain(
      '--clusterrole=system:auth-delegator --serviceaccount=team-a:default',
    );
  });

  it('starts the update once the agent reports Ready (the binding was granted), without a spec change', () => {
    const { stack, cluster, res } = unauthenticated();
    const stalled = withStatus(stack, res);
    const granted = workspaceBecomesReady(applyChildren(cluster, res.children));
    const { res: next, recorded } = step(stalled, granted);
    expect(recorded && jobsOf(recorded)).toEqual([]);
    expect(jobsOf(next)).toHaveLength(1);
    expect(condition(next.status, 'Stalled')).toBeUndefined();
    expect(condition(next.status, 'Reconciling')).toMatchObject({ status: 'True', reason: 'StackProcessing' });
    expect(next.status.observedGeneration).toBe(stalled.metadata.generation);
  });

  it('records a Warning event with the reason and the fix, once', () => {
    const { stack, cluster, res } = unauthenticated();
    const events = stackEvents({
      stack,
      observed: childrenMap(...cluster),
      status: res.status,
      children: res.children,
      finalizing: false,
      now: NOW,
    });
    expect(events.map((e) => [e.type, e.reason, e.message])).toEqual([
      ['Warning', 'Unauthenticated', `Unauthenticated: ${agentMessage}. ${fix}`],
    ]);
    // Synced again with that status written: nothing new.
    const written = withStatus(stack, res);
    const again = syncStack(syncRequest(written, cluster), ctx());
    expect(
      stackEvents({
        stack: written,
        observed: childrenMap(...cluster),
        status: again.status,
        children: again.children,
        finalizing: false,
        now: NOW,
      }),
    ).toEqual([]);
  });

  it('stalls instead of retrying when the binding goes after a Job was refused', () => {
    // A Job ran and the workspace refused it (Unauthenticated); the agent now reports the same.
    const { stack, cluster, job } = toFirstJob(makeStack({ serviceAccountName: 'deployer' }));
    const refusedJob = jobFinishes(cluster, job.metadata.name, {
      state: 'failed',
      reason: 'Unauthenticated',
      message: 'unauthenticated: TokenReview API is unavailable',
    });
    const failing = workspaceFails(refusedJob, 'Unauthenticated', agentMessage);
    const res = syncStack(syncRequest(stack, failing), ctx(new Date('2026-11-22T10:01:30Z')));
    expect(res.status.lastUpdate).toMatchObject({ state: 'failed', name: job.metadata.name });
    expect(jobsOf(res).map((j) => j.metadata.name)).toEqual([job.metadata.name]);
    expect(condition(res.status, 'Stalled')?.reason).toBe('Unauthenticated');
  });
});
