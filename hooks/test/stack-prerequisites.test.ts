import { syncStack } from './controllers';
import type { KObject } from '../src/lib/k8s';
import {
  applyChildren,
  condition,
  find,
  jobsOf,
  makeProgram,
  makeStack,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { operationOf } from './children';
import { step, ctx } from './stories';

function prerequisite(
  name: string,
  lastUpdate: Record<string, unknown> | undefined,
  meta: Record<string, unknown> = {},
): KObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: 'team-a', generation: 2, ...meta },
    spec: { stack: name },
    status: lastUpdate ? { lastUpdate } : {},
  };
}
const succeeded = {
  generation: 2,
  reconcileRequest: '',
  name: 'base-up-12345678',
  type: 'up',
  state: 'succeeded',
  lastResyncTime: '2026-11-22T09:30:00Z',
};

describe('prerequisites', () => {
  const dependent = makeStack({ prerequisites: [{ name: 'base' }] });

  it.each([
    ['missing', [], 'prerequisite not satisfied for "base": stacks.pulumi.com "base" not found'],
    [
      'never run',
      [prerequisite('base', undefined)],
      'prerequisite not satisfied for "base": prerequisite has not run to completion',
    ],
    [
      'out of date generation',
      [prerequisite('base', { ...succeeded, generation: 1 })],
      'prerequisite not satisfied for "base": prerequisite has not run to completion',
    ],
    [
      'pending a request',
      [prerequisite('base', succeeded, { annotations: { 'pulumi.com/reconciliation-request': 'x' } })],
      'prerequisite not satisfied for "base": prerequisite has not run to completion',
    ],
    [
      'failed',
      [prerequisite('base', { ...succeeded, state: 'failed' })],
      'prerequisite not satisfied for "base": prerequisite failed',
    ],
  ])('block the update while the prerequisite is %s', (_case, related, message) => {
    const res = syncStack(syncRequest(dependent, [], [makeProgram(), ...related]), ctx());
    expect(condition(res.status, 'Reconciling')).toMatchObject({ reason: 'PrerequisiteNotSatisfied', message });
    expect(find(res, 'StatefulSet')).toBeUndefined();
    expect(jobsOf(res)).toHaveLength(0);
  });

  it('name every unmet prerequisite', () => {
    const stack = makeStack({ prerequisites: [{ name: 'a' }, { name: 'b' }] });
    const res = syncStack(syncRequest(stack, [], [makeProgram()]), ctx());
    expect(condition(res.status, 'Reconciling')?.message).toMatch(/^multiple prerequisites were not satisfied a, b/);
  });

  it('let the update run once the prerequisite succeeded', () => {
    const res = syncStack(syncRequest(dependent, [], [makeProgram(), prerequisite('base', succeeded)]), ctx());
    expect(find(res, 'StatefulSet')).toBeDefined();
    expect(condition(res.status, 'Reconciling')?.reason).toBe('StackProcessing');
  });

  it('are not evaluated while deleting', () => {
    const stack = makeStack(
      { prerequisites: [{ name: 'gone' }], destroyOnFinalize: true },
      {
        deletionTimestamp: '2026-11-22T10:00:00Z',
      },
    );
    const res = syncStack(syncRequest(stack, [], [makeProgram()], true), ctx());
    expect(condition(res.status, 'Reconciling')?.reason).toBe('StackProcessing');
  });

  describe('with succeededWithinDuration', () => {
    const fresh = makeStack({
      prerequisites: [{ name: 'base', requirement: { succeededWithinDuration: '1h' } }],
    });

    it('accept a recent success', () => {
      const res = syncStack(syncRequest(fresh, [], [makeProgram(), prerequisite('base', succeeded)]), ctx());
      expect(find(res, 'StatefulSet')).toBeDefined();
    });

    it('ask an out-of-date prerequisite to run again, and the prerequisite does', () => {
      const later = ctx(new Date('2026-11-22T11:00:00Z'));
      const res = syncStack(syncRequest(fresh, [], [makeProgram(), prerequisite('base', succeeded)]), later);
      expect(condition(res.status, 'Reconciling')?.message).toMatch(/prerequisite is out of date/);
      const request = find(res, 'ConfigMap')!;
      expect(request.metadata.name).toBe('my-stack-refresh-base');
      expect(request.metadata.labels).toMatchObject({ 'pulumi.com/refresh-requested-for': 'base' });
      expect(request.data).toEqual({ after: 'after-base-up-12345678', requestedBy: 'my-stack' });

      // The prerequisite sees the request as a related object and runs an update.
      const base = makeStack(
        {},
        { name: 'base', generation: 2 },
        { lastUpdate: { ...succeeded, lastSuccessfulCommit: '1', lastAttemptedCommit: '1', failures: 0 } },
      );
      const r1 = syncStack(syncRequest(base, [], [makeProgram(), request]), later);
      const ready = workspaceBecomesReady(applyChildren([], r1.children));
      const { res: r2 } = step(withStatus(base, r1), ready, [makeProgram(), request], later.now);
      const job = jobsOf(r2)[0]!;
      expect(operationOf(job).message).toBe('Sync request: "after-base-up-12345678" from "my-stack"');
      // Without the request, the same prerequisite is in sync.
      const idle = syncStack(syncRequest(withStatus(base, r1), ready, [makeProgram()]), later);
      expect(jobsOf(idle)).toHaveLength(0);
      expect(condition(idle.status, 'Ready')?.status).toBe('True');
    });
  });
});
