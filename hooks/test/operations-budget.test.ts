import type { Stack, StackStatus } from '../../schemas/generated/types';
import { admit, budgetFacts, fairShares, queueLengths, selfFacts, type BudgetFacts } from '../src/budget/operations';
import { mirrorTurn } from '../src/budget/gate';
import { configFromEnv } from '../src/config';
import type { SyncContext } from '../src/stack/sync';
import {
  condition,
  find,
  jobFinishes,
  jobsOf,
  makeStack,
  NOW,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { at } from './children';
import { syncStack } from './controllers';
import { ctx, step } from './stories';

const facts = (uid: string, phase: BudgetFacts['phase'], since?: string, namespace = 'team-a'): BudgetFacts =>
  since === undefined ? { namespace, uid, phase } : { namespace, uid, phase, since };

const waiting = (n: number, namespace = 'team-a', prefix = namespace): BudgetFacts[] =>
  Array.from({ length: n }, (_, i) =>
    facts(`${prefix}-${String(i).padStart(3, '0')}`, 'waiting', '2026-11-22T09:00:00Z', namespace),
  );

describe('a Stack as the operations budget sees it', () => {
  const stack = (status?: Stack['status'], meta: Record<string, unknown> = {}) =>
    makeStack({}, { creationTimestamp: '2026-11-22T08:00:00Z', ...meta }, status);
  const reconciling = (reason: string, since = '2026-11-22T09:30:00Z'): StackStatus => ({
    observedGeneration: 1,
    conditions: [
      { type: 'Ready', status: 'False', reason: 'NotReadyInProgress', message: '', lastTransitionTime: since },
      { type: 'Reconciling', status: 'True', reason, message: '', lastTransitionTime: since },
    ],
  });
  const ready: StackStatus = {
    observedGeneration: 1,
    conditions: [
      { type: 'Ready', status: 'True', reason: 'ProcessingCompleted', message: '', lastTransitionTime: 'x' },
    ],
  };

  it('waits from its creation until its first sync', () => {
    expect(budgetFacts(stack())).toMatchObject({ phase: 'waiting', since: '2026-11-22T08:00:00Z' });
  });
  it('operates while it processes an operation or has one recorded', () => {
    expect(budgetFacts(stack(reconciling('StackProcessing')))?.phase).toBe('operating');
    expect(budgetFacts(stack({ ...ready, currentUpdate: { name: 'my-stack-up-1' } }))?.phase).toBe('operating');
  });
  it('waits while queued, since its Reconciling condition turned True', () => {
    expect(budgetFacts(stack(reconciling('Queued')))).toMatchObject({
      phase: 'waiting',
      since: '2026-11-22T09:30:00Z',
    });
  });
  it('waits, from now, once its spec or reconciliation request is newer than its status', () => {
    const edited = budgetFacts(stack(ready, { generation: 2 }));
    expect(edited?.phase).toBe('waiting');
    expect(edited).not.toHaveProperty('since');
    const requested = stack(ready, { annotations: { 'pulumi.com/reconciliation-request': 'r1' } });
    expect(budgetFacts(requested)?.phase).toBe('waiting');
  });
  it('is idle when Ready, backing off, or stalled; and not counted without a uid', () => {
    expect(budgetFacts(stack(ready))?.phase).toBe('idle');
    expect(budgetFacts(stack(reconciling('RetryingAfterFailure')))?.phase).toBe('idle');
    expect(budgetFacts(makeStack({}, { uid: '' }))).toBeUndefined();
    expect(budgetFacts({ metadata: 'forged' })).toBeUndefined();
    expect(budgetFacts(null)).toBeUndefined();
  });
  it('about to start an operation, it waits since its Reconciling condition turned True, else now', () => {
    expect(selfFacts(stack(reconciling('RetryingAfterFailure')))).toMatchObject({
      phase: 'waiting',
      since: '2026-11-22T09:30:00Z',
    });
    expect(selfFacts(stack(ready, { generation: 2 }))).not.toHaveProperty('since');
    expect(selfFacts(stack(reconciling('StackProcessing')))?.phase).toBe('operating');
  });
});

describe('fair shares between namespaces', () => {
  it('give a namespace what it asks below an equal split, and split the rest', () => {
    expect(
      fairShares(
        new Map([
          ['a', 30],
          ['b', 1],
          ['c', 30],
        ]),
        10,
      ),
    ).toEqual(
      new Map([
        ['b', 1],
        ['a', 4],
        ['c', 5],
      ]),
    );
    expect(fairShares(new Map([['a', 3]]), 10)).toEqual(new Map([['a', 3]]));
  });
  it('give each namespace that asks at least one slot when there are more namespaces than slots', () => {
    expect([
      ...fairShares(
        new Map([
          ['a', 1],
          ['b', 1],
          ['c', 1],
        ]),
        2,
      ).values(),
    ]).toEqual([1, 1, 1]);
  });
});

describe('admission', () => {
  const budget = { max: 3 };

  it('admits while slots are free, queues the rest first come first served with their position', () => {
    const all = waiting(5);
    const outcome = all.map((self) => admit(self, all, budget, NOW));
    expect(outcome.map((a) => a.admitted)).toEqual([true, true, true, false, false]);
    expect(outcome[4]).toMatchObject({ admitted: false, position: 5, waiting: 5, running: 0, max: 3 });
  });
  it('never preempts an operation, and counts it against the budget', () => {
    const running = [facts('z1', 'operating'), facts('z2', 'operating'), facts('z3', 'operating')];
    expect(admit(running[0] as BudgetFacts, running, budget, NOW).admitted).toBe(true);
    const early = facts('a0', 'waiting', '2020-01-01T00:00:00Z');
    expect(admit(early, [...running, early], budget, NOW)).toMatchObject({ admitted: false, position: 1, running: 3 });
  });
  it('orders by when the need began, then uid; an unknown or future time counts as now', () => {
    const later = facts('a', 'waiting', '2026-11-22T09:59:00Z');
    const earlier = facts('b', 'waiting', '2026-11-22T09:00:00Z');
    const future = facts('0', 'waiting', '9999-01-01T00:00:00Z');
    const all = [later, earlier, future];
    expect(admit(earlier, all, { max: 1 }, NOW).admitted).toBe(true);
    expect(admit(later, all, { max: 1 }, NOW)).toMatchObject({ admitted: false, position: 2 });
    expect(admit(future, all, { max: 1 }, NOW)).toMatchObject({ admitted: false, position: 3 });
  });
  it('holds a namespace to its fair share while another waits: a latecomer gets the next slot', () => {
    const busy = [...waiting(4, 'big').map((f) => ({ ...f, phase: 'operating' as const })), ...waiting(20, 'big', 'q')];
    const small = facts('s', 'waiting', '2026-11-22T09:59:59Z', 'small');
    const all = [...busy, small];
    expect(admit(small, all, { max: 5 }, NOW).admitted).toBe(true);
    expect(admit(busy[4] as BudgetFacts, all, { max: 5 }, NOW)).toMatchObject({
      admitted: false,
      namespace: 'big',
      namespaceRunning: 4,
      namespaceShare: 4,
    });
  });
  it('is off at 0, and without a synced mirror admits everything', () => {
    expect(mirrorTurn({ max: 0 }, () => [])).toBeUndefined();
    const turn = mirrorTurn({ max: 1 }, () => undefined);
    expect(turn?.(makeStack(), NOW)).toBeUndefined();
  });
  it('reports the queue and the operations running', () => {
    expect(queueLengths([...waiting(3), facts('o', 'operating'), facts('i', 'idle')])).toEqual({
      queued: 3,
      running: 1,
    });
  });
});

describe('OPERATIONS_MAX', () => {
  it('defaults to 20, 0 turns it off, anything else is refused', () => {
    expect(configFromEnv({}, () => '').operationsMax).toBe(20);
    expect(configFromEnv({ OPERATIONS_MAX: '0' }, () => '').operationsMax).toBe(0);
    expect(() => configFromEnv({ OPERATIONS_MAX: '-1' }, () => '')).toThrow(/OPERATIONS_MAX/);
    expect(() => configFromEnv({ OPERATIONS_MAX: 'ten' }, () => '')).toThrow(/OPERATIONS_MAX/);
  });
});

describe('the Stack sync under a budget of one operation', () => {
  /** Stacks as the mirror holds them: the budget's view is theirs, as every replica's would be. */
  const mirror = new Map<string, Stack>();
  const budgeted: SyncContext = {
    ...ctx(),
    turn: mirrorTurn({ max: 1 }, () => [...mirror.values()].flatMap((s) => budgetFacts(s) ?? [])),
  };
  const stackNamed = (name: string, created: string): Stack =>
    makeStack({ workspaceReclaimPolicy: 'Delete' }, { name, uid: `uid-${name}`, creationTimestamp: created });

  it('starts the first Stack, queues the second without a workspace, and starts it once the first is Ready', () => {
    const first = stackNamed('first', '2026-11-22T09:00:00Z');
    const second = stackNamed('second', '2026-11-22T09:00:01Z');
    mirror.set('first', first).set('second', second);

    const one = step(first, [], undefined, budgeted);
    mirror.set('first', one.stack);
    expect(find(one.res, 'Workspace', 'first')).toBeDefined();
    expect(condition(one.res.status, 'Reconciling')?.reason).toBe('StackProcessing');

    const two = step(second, [], undefined, budgeted);
    mirror.set('second', two.stack);
    expect(find(two.res, 'Workspace')).toBeUndefined();
    const queued = condition(two.res.status, 'Reconciling');
    expect(queued?.reason).toBe('Queued');
    expect(queued?.message).toMatch(/^queued: position 1 of 1 waiting; 1 of 1 operations running/);
    expect(two.res.resyncAfterSeconds).toBe(5);
    // Asked again while the first still runs: still queued, still no workspace.
    expect(find(step(two.stack, two.cluster, undefined, budgeted).res, 'Workspace')).toBeUndefined();

    // The first's operation runs and succeeds: Ready, and its slot is free.
    const started = step(one.stack, workspaceBecomesReady(one.cluster), undefined, budgeted);
    const job = at(jobsOf(started.res), 0, 'Job');
    const done = jobFinishes(started.cluster, job.metadata.name, { state: 'succeeded', message: 'ok' });
    const absorbed = syncStack(syncRequest(started.stack, done), budgeted);
    expect(condition(absorbed.status, 'Ready')?.status).toBe('True');
    mirror.set('first', withStatus(started.stack, absorbed));

    const turn = step(two.stack, two.cluster, undefined, budgeted);
    expect(find(turn.res, 'Workspace', 'second')).toBeDefined();
    expect(condition(turn.res.status, 'Reconciling')?.reason).toBe('StackProcessing');
  });
});
