import { syncStack } from './controllers';
import {
  applyChildren,
  condition,
  jobFinishes,
  jobsOf,
  makeProgram,
  makeStack,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { at, childOf, fetchContainerOf } from './children';
import { syncStarting, withChildren, ctx } from './stories';

describe('an unavailable source', () => {
  it('a missing Program is Stalled/SourceUnavailable, retried in 30 s, children kept', () => {
    const { stack, cluster } = withChildren();
    const res = syncStack(syncRequest(stack, cluster, []), ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({
      reason: 'SourceUnavailable',
      message: 'unable to retrieve program for stack: Program team-a/my-program not found',
    });
    expect(res.resyncAfterSeconds).toBe(30);
    expect(res.children).toHaveLength(cluster.length);
  });

  it('a Program without an artifact is Stalled/SourceUnavailable', () => {
    const program = { ...makeProgram(), status: {} };
    const res = syncStack(syncRequest(makeStack(), [], [program]), ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({
      reason: 'SourceUnavailable',
      message: 'Program team-a/my-program has no artifact',
    });
  });

  it('a Flux source without an artifact is Stalled/SourceUnavailable', () => {
    const stack = makeStack({
      programRef: undefined,
      fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'OCIRepository', name: 'oci' } },
    });
    const oci = {
      apiVersion: 'source.toolkit.fluxcd.io/v1',
      kind: 'OCIRepository',
      metadata: { name: 'oci', namespace: 'team-a' },
      status: {},
    };
    expect(condition(syncStack(syncRequest(stack, [], [oci]), ctx()).status, 'Stalled')?.message).toBe(
      'Flux source OCIRepository team-a/oci has no artifact',
    );
    expect(condition(syncStack(syncRequest(stack, [], []), ctx()).status, 'Stalled')?.message).toMatch(
      /unable to retrieve Flux source OCIRepository team-a\/oci/,
    );
  });

  it("a Flux source that failed without an artifact: the Stalled message carries the source's Ready message", () => {
    const stack = makeStack({
      programRef: undefined,
      fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'app' } },
    });
    const failed =
      'failed to checkout and determine revision: unable to clone: couldn\'t find remote ref "refs/heads/nope"';
    const source = (ready: { status: string; reason: string; message: string }) => ({
      apiVersion: 'source.toolkit.fluxcd.io/v1',
      kind: 'GitRepository',
      metadata: { name: 'app', namespace: 'team-a' },
      status: { conditions: [{ type: 'Ready', lastTransitionTime: '2026-01-01T00:00:00Z', ...ready }] },
    });
    const stalled = (ready: { status: string; reason: string; message: string }) =>
      condition(syncStack(syncRequest(stack, [], [source(ready)]), ctx()).status, 'Stalled');
    expect(stalled({ status: 'False', reason: 'GitOperationFailed', message: failed })).toMatchObject({
      reason: 'SourceUnavailable',
      message: `Flux source GitRepository team-a/app has no artifact: ${failed}`,
    });
    // Still working on its first artifact: nothing to add.
    expect(stalled({ status: 'Unknown', reason: 'Progressing', message: 'reconciliation in progress' })?.message).toBe(
      'Flux source GitRepository team-a/app has no artifact',
    );
  });

  it('a branch that cannot be resolved is Stalled/SourceUnavailable with the lookup error', () => {
    const stack = makeStack({ programRef: undefined, projectRepo: 'https://g.test/r.git', branch: 'main' });
    const lookups = new Map([
      ['https://g.test/r.git#main', { error: 'timed out after 2000 ms resolving "main" in https://g.test/r.git' }],
    ]);
    const res = syncStack(syncRequest(stack, [], []), { ...ctx(), lookups });
    expect(condition(res.status, 'Stalled')).toMatchObject({
      reason: 'SourceUnavailable',
      message: 'timed out after 2000 ms resolving "main" in https://g.test/r.git',
    });
    expect(res.resyncAfterSeconds).toBe(30);
  });
});

describe('branch tracking', () => {
  it('runs at the resolved commit and polls every resync period', () => {
    const stack = makeStack({
      programRef: undefined,
      projectRepo: 'https://g.test/r.git',
      branch: 'main',
      resyncFrequencySeconds: 90,
    });
    const sha1 = '1'.repeat(40);
    const sha2 = '2'.repeat(40);
    const look = (sha: string) => ({ ...ctx(), lookups: new Map([['https://g.test/r.git#main', { sha }]]) });
    const r1 = syncStack(syncRequest(stack, [], []), look(sha1));
    const c1 = workspaceBecomesReady(applyChildren([], r1.children));
    const { res: r2, stack: s2, cluster: started } = syncStarting(withStatus(stack, r1), c1, [], look(sha1));
    const job = at(jobsOf(r2), 0, 'Job');
    expect(r2.status.currentUpdate?.commit).toBe(sha1);
    const c2 = jobFinishes(started, job.metadata.name ?? '', {
      state: 'succeeded',
      message: 'ok',
    });
    const r3 = syncStack(syncRequest(s2, c2), look(sha1));
    expect(r3.status.lastUpdate).toMatchObject({ lastSuccessfulCommit: sha1, name: job.metadata.name });
    expect(r3.resyncAfterSeconds).toBe(90);
    // A push: the next poll sees a new commit and rolls the workspace to it.
    const r4 = syncStack(syncRequest(withStatus(stack, r3), applyChildren(c2, r3.children)), look(sha2));
    expect(fetchContainerOf(childOf(r4, 'StatefulSet')).env).toContainEqual({
      name: 'GIT_REVISION',
      value: sha2,
    });
    expect(condition(r4.status, 'Reconciling')?.message).toBe('waiting for workspace readiness');
  });
});
