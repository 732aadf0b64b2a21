import { syncStack } from './controllers';
import { customizeStack } from '../src/stack/customize';
import type { KObject } from '../src/lib/k8s';
import {
  applyChildren,
  condition,
  jobFinishes,
  jobsOf,
  makeProgram,
  makeStack,
  NOW,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
  workspaceFails,
} from './builders';
import { childOf, fetchContainerOf, operationOf } from './children';
import { ctx, step, toFirstJob } from './stories';

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
      ...s.metadata,
      generation: (s.metadata.generation ?? 0) + 1,
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
    const fetch = fetchContainerOf(childOf(r1, 'StatefulSet'));
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'project-info']);
    expect(fetch.env).toEqual(
      expect.arrayContaining([
        { name: 'PROJECT_NAME', value: 'my-program' },
        { name: 'PROJECT_RUNTIME', value: 'yaml' },
      ]),
    );
    const ready = workspaceBecomesReady(applyChildren(cluster, r1.children));
    const { res: r2, stack: s2, cluster: c2 } = step(withStatus(del, r1), ready, [], NOW, true);
    const destroy = jobsOf(r2).find((j) => j.metadata.labels!['auto.pulumi.com/update-type'] === 'destroy')!;
    expect(destroy).toBeDefined();
    expect(operationOf(destroy)).toEqual({
      type: 'destroy',
      stack: 'dev',
      message: 'Stack marked for deletion',
    });
    expect(r2.finalized).toBe(false);
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
      metadata: { ...stack.metadata, deletionTimestamp: '2026-11-22T10:05:00Z' },
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
    const { res: running } = step(
      withStatus(deleting(stack), r1),
      rolled,
      [makeProgram(), terminatingNamespace()],
      NOW,
      true,
    );
    expect(condition(running.status, 'Stalled')).toBeUndefined();
    expect(jobsOf(running).some((j) => j.metadata.labels!['auto.pulumi.com/update-type'] === 'destroy')).toBe(true);
  });

  it('releases a never-deployed Stack whose namespace is terminating', () => {
    const stack = makeStack({ destroyOnFinalize: true });
    const del = { ...stack, metadata: { ...stack.metadata, deletionTimestamp: '2026-11-22T10:05:00Z' } };
    const res = syncStack(syncRequest(del, [], [makeProgram(), terminatingNamespace()], true), ctx());
    expect(res.finalized).toBe(true);
  });
});
