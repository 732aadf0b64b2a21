import type { Stack } from '../../schemas/generated/types';
import type { KObject } from '../src/lib/k8s';
import { MAX_MESSAGE_BYTES, truncateUtf8, type HookEvent } from '../src/events/event';
import { stackEvents } from '../src/stack/events';
import { syncStack } from './controllers';
import type { StackSyncResponse } from '../src/stack/sync';
import {
  applyChildren,
  childrenMap,
  jobFinishes,
  jobsOf,
  makeStack,
  NOW,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
  workspaceFails,
} from './builders';
import { ctx, syncStarting, toFirstJob } from './stories';
import { hasControlCharacter } from './answers';

/** The events of one sync: the request (observed Stack and children) and its answer. */
function eventsOf(
  stack: Stack,
  observed: KObject[],
  res: StackSyncResponse,
  finalizing = false,
  now = NOW,
): HookEvent[] {
  return stackEvents({
    stack,
    observed: childrenMap(...observed),
    status: res.status,
    children: res.children,
    finalizing,
    now,
  });
}

/** Syncs and returns the answer with the events it implies. */
function sync(stack: Stack, observed: KObject[], now = NOW) {
  const res = syncStack(syncRequest(stack, observed), ctx(now));
  return { res, events: eventsOf(stack, observed, res, false, now) };
}

const brief = (events: HookEvent[]) => events.map((e) => ({ type: e.type, reason: e.reason, message: e.message }));

describe('events of a Stack sync', () => {
  it('an update that starts: StackUpdateDetected with the reason, about its Job, once', () => {
    const stack = makeStack();
    const first = sync(stack, []);
    // Waiting for the workspace: nothing to report.
    expect(first.events).toEqual([]);
    const s0 = withStatus(stack, first.res);
    const ready0 = workspaceBecomesReady(applyChildren([], first.res.children));
    // The operation is recorded first: no Update yet, nothing to report.
    const recorded = sync(s0, ready0);
    expect(recorded.res.status.currentUpdate?.name).toBeDefined();
    expect(recorded.events).toEqual([]);
    // The sync on that status write makes the Update: it starts now.
    const s1 = withStatus(s0, recorded.res);
    const ready = applyChildren(ready0, recorded.res.children);
    const started = sync(s1, ready);
    const job = jobsOf(started.res)[0]!;
    expect(started.events.map((e) => e.name)).toEqual([expect.stringMatching(/^my-stack\.[0-9a-f]{16}$/)]);
    expect(started.events.map((e) => ({ ...e, name: 'n' }))).toEqual([
      {
        name: 'n',
        namespace: 'team-a',
        type: 'Normal',
        reason: 'StackUpdateDetected',
        action: 'Up',
        message: 'Initial stack update',
        regarding: {
          apiVersion: 'pulumi.com/v1',
          kind: 'Stack',
          name: 'my-stack',
          namespace: 'team-a',
          uid: stack.metadata.uid,
        },
        related: {
          apiVersion: 'auto.pulumi.com/v1alpha1',
          kind: 'Update',
          name: job.metadata.name,
          namespace: 'team-a',
        },
        labels: { 'pulumi.com/stack-name': 'my-stack' },
      },
    ]);
    // Metacontroller calls again before it wrote anything: the same event, by name.
    expect(sync(s1, ready).events).toEqual(started.events);
    // Once the Job exists, nothing more.
    const s2 = withStatus(s1, started.res);
    expect(sync(s2, applyChildren(ready, started.res.children)).events).toEqual([]);
  });

  it('an update that succeeds: StackCreated, once', () => {
    const { stack, cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', message: 'ok' });
    const absorbed = sync(stack, done);
    expect(brief(absorbed.events)).toEqual([
      { type: 'Normal', reason: 'StackCreated', message: 'Successfully updated stack' },
    ]);
    expect(absorbed.events[0]?.related?.name).toBe(job.metadata.name);
    // The same answer again (the status write was lost): the same event.
    expect(sync(stack, done).events).toEqual(absorbed.events);
    // Resyncs after the status is written: nothing.
    const after = withStatus(stack, absorbed.res);
    const cluster2 = applyChildren(done, absorbed.res.children);
    expect(sync(after, cluster2).events).toEqual([]);
    expect(sync(after, cluster2, new Date('2026-11-22T11:00:00Z')).events).toEqual([]);
  });

  it('an update that fails: StackUpdateFailure with the failure, and a new event for each retry', () => {
    const { stack, cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, {
      state: 'failed',
      message: 'error: resource creation failed',
    });
    const failed = sync(stack, done, new Date('2026-11-22T10:01:00Z'));
    expect(brief(failed.events)).toEqual([
      {
        type: 'Warning',
        reason: 'StackUpdateFailure',
        message: 'Failed to update stack: error: resource creation failed',
      },
    ]);
    // The retry after the cooldown starts a new Job, announced with upstream's reason.
    const s = withStatus(stack, failed.res);
    const c = applyChildren(done, failed.res.children);
    const at = new Date('2026-11-22T10:01:10Z');
    const recorded = sync(s, c, at);
    expect(recorded.events).toEqual([]);
    const retry = sync(withStatus(s, recorded.res), applyChildren(c, recorded.res.children), at);
    expect(brief(retry.events)).toEqual([
      { type: 'Normal', reason: 'StackUpdateDetected', message: 'Backoff time elapsed: 10s' },
    ]);
    expect(retry.events[0]?.name).not.toBe(failed.events[0]?.name);
  });

  it('the failure budget spent: StackUpdateFailure and Stalled UpdateFailed together', () => {
    let { stack, cluster, job } = toFirstJob();
    let t = Date.parse('2026-11-22T10:01:00Z');
    let last: HookEvent[] = [];
    for (let attempt = 0; attempt < 4; attempt++) {
      const end = new Date(t).toISOString();
      const done = jobFinishes(cluster, job.metadata.name, { state: 'failed', message: 'boom', endTime: end });
      const absorbed = sync(stack, done, new Date(end));
      last = absorbed.events;
      stack = withStatus(stack, absorbed.res);
      cluster = applyChildren(done, absorbed.res.children);
      if (attempt === 3) break;
      t += [10, 30, 90][attempt]! * 1000;
      const retry = syncStarting(stack, cluster, undefined, new Date(t));
      job = jobsOf(retry.res).find((j) => !cluster.some((o) => o.metadata.name === j.metadata.name))!;
      ({ stack, cluster } = retry);
      t += 5000;
    }
    expect(brief(last)).toEqual([
      { type: 'Warning', reason: 'StackUpdateFailure', message: 'Failed to update stack: boom' },
      {
        type: 'Warning',
        reason: 'UpdateFailed',
        message: 'up failed 3 times; not retrying until the spec or source changes',
      },
    ]);
    // Stalled and synced again a day later: nothing new.
    expect(sync(stack, cluster, new Date(t + 24 * 3600 * 1000)).events).toEqual([]);
  });

  it('an invalid spec: StackConfigInvalid, once per generation', () => {
    const bad = makeStack({ workspaceReclaimPolicy: 'Sometimes' as 'Delete' });
    const first = sync(bad, []);
    expect(first.events.map((e) => [e.type, e.reason, e.action])).toEqual([['Warning', 'StackConfigInvalid', 'Sync']]);
    expect(first.events[0]?.message).toMatch(/spec\.workspaceReclaimPolicy must be one of/);
    expect(sync(bad, []).events).toEqual(first.events);
    const written = withStatus(bad, first.res);
    expect(sync(written, []).events).toEqual([]);
    // The user edits the spec and it is still invalid: reported again.
    const edited = { ...written, metadata: { ...written.metadata, generation: 2 } };
    const again = sync(edited, []);
    expect(brief(again.events).map((e) => e.reason)).toEqual(['StackConfigInvalid']);
    expect(again.events[0]?.name).not.toBe(first.events[0]?.name);
  });

  it('Stalled for another reason: the condition reason, as a Warning', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx());
    const failing = workspaceFails(applyChildren([], r1.children), 'InstallationFailed', 'npm install exited with 1');
    const stalled = sync(withStatus(stack, r1), failing);
    expect(brief(stalled.events)).toEqual([
      { type: 'Warning', reason: 'WorkspaceFailed', message: 'InstallationFailed: npm install exited with 1' },
    ]);
  });

  it('a stall seen again from a copy of the Stack older than its last status written is the same event', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx());
    const failing = workspaceFails(applyChildren([], r1.children), 'InstallationFailed', 'npm install exited with 1');
    // The workspace fails. Metacontroller syncs with the Stack as last written, and again from its
    // informer's copy, which does not have the first status yet: the same stall.
    const stalled = sync(withStatus(stack, r1), failing);
    expect(brief(stalled.events).map((e) => e.reason)).toEqual(['WorkspaceFailed']);
    expect(sync(stack, failing).events).toEqual(stalled.events);
    expect(stalled.res.status.stalls).toBe(1);
  });

  it('a second stall with the same reason and generation, after a recovery, is a new event', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx());
    const s1 = withStatus(stack, r1);
    const created = applyChildren([], r1.children);
    const failing = workspaceFails(created, 'InstallationFailed', 'npm install exited with 1');
    const firstStall = sync(s1, failing);
    const stalled = withStatus(s1, firstStall.res);
    // The workspace recovers (Reconciling again), then fails again.
    const recovered = syncStack(syncRequest(stalled, created), ctx(new Date('2026-11-22T10:05:00Z')));
    const s3 = withStatus(stalled, recovered);
    const secondStall = sync(s3, failing, new Date('2026-11-22T10:06:00Z'));
    expect(brief(secondStall.events).map((e) => e.reason)).toEqual(['WorkspaceFailed']);
    expect(secondStall.events[0]?.name).not.toBe(firstStall.events[0]?.name);
  });

  it('workspaceReclaimPolicy Delete: WorkspaceDeleted when the workspace goes after a success', () => {
    const { stack, cluster, job } = toFirstJob(makeStack({ workspaceReclaimPolicy: 'Delete' }));
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded' });
    const res = sync(stack, done);
    expect(brief(res.events)).toEqual([
      { type: 'Normal', reason: 'StackCreated', message: 'Successfully updated stack' },
      { type: 'Normal', reason: 'WorkspaceDeleted', message: 'Workspace deleted per reclaim policy' },
    ]);
    // Gone for good: later syncs see no workspace and say nothing.
    const after = withStatus(stack, res.res);
    expect(sync(after, applyChildren(done, res.res.children)).events).toEqual([]);
  });

  it('a destroy on deletion: StackUpdateDetected for the destroy Job, and no WorkspaceDeleted', () => {
    const { stack, cluster, job } = toFirstJob(makeStack({ destroyOnFinalize: true }));
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded' });
    const s = withStatus(stack, syncStack(syncRequest(stack, done), ctx()));
    const deleting = { ...s, metadata: { ...s.metadata, deletionTimestamp: '2026-11-22T10:10:00Z' } };
    const recorded = syncStack(syncRequest(deleting, done, undefined, true), ctx());
    expect(eventsOf(deleting, done, recorded, true)).toEqual([]);
    const made = withStatus(deleting, recorded);
    const applied = applyChildren(done, recorded.children);
    const res = syncStack(syncRequest(made, applied, undefined, true), ctx());
    const events = eventsOf(made, applied, res, true);
    expect(events.map((e) => ({ reason: e.reason, action: e.action, message: e.message }))).toEqual([
      { reason: 'StackUpdateDetected', action: 'Destroy', message: 'Stack marked for deletion' },
    ]);
  });

  it('nothing for a Stack without a uid (not from the API server)', () => {
    const stack = makeStack({ workspaceReclaimPolicy: 'Sometimes' as 'Delete' }, { uid: undefined });
    expect(sync(stack, []).events).toEqual([]);
  });

  it('names differ between Stacks, even for the same transition', () => {
    const failureEvents = (stack: Stack) => {
      const { stack: s, cluster, job } = toFirstJob(stack);
      return sync(s, jobFinishes(cluster, job.metadata.name, { state: 'failed' })).events;
    };
    const a = failureEvents(makeStack());
    const b = failureEvents(makeStack({}, { uid: '00000000-0000-4000-8000-000000000000' }));
    expect([...a, ...b].map((e) => e.reason)).toEqual(['StackUpdateFailure', 'StackUpdateFailure']);
    expect(a[0]?.name).not.toBe(b[0]?.name);
  });

  it('control characters from a spec key or a failure message are escaped in the condition and the event', () => {
    // ESC [31m (red), BEL and a newline that would forge a line of kubectl describe's output.
    const key = 'a\u001b[31m\u0007\nWarning  Forged  1s  event';
    const invalid = sync(makeStack({ secretsRef: { [key]: { type: 'Env' } } }), []);
    const escaped = 'spec.secretsRef.a\\x1b[31m\\x07\\nWarning  Forged  1s  event';
    const stalled = invalid.res.status.conditions?.find((c) => c.type === 'Stalled');
    expect(stalled?.message).toContain(escaped);
    expect(invalid.events[0]?.message).toContain(escaped);
    const { stack, cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, { state: 'failed', message: 'line 1\r\nline 2\u009b2J' });
    expect(brief(sync(stack, done).events)).toEqual([
      { type: 'Warning', reason: 'StackUpdateFailure', message: 'Failed to update stack: line 1\\r\\nline 2\\x9b2J' },
    ]);
    for (const text of [...(invalid.res.status.conditions ?? []).map((c) => c.message), invalid.events[0]?.message])
      expect(hasControlCharacter(text ?? '')).toBe(false);
  });

  it('a long failure message is cut to 1 kB at a character boundary', () => {
    const { stack, cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, { state: 'failed', message: 'é'.repeat(2000) });
    const [event] = sync(stack, done).events;
    const message = event?.message ?? '';
    expect(Buffer.byteLength(message, 'utf8')).toBeLessThanOrEqual(MAX_MESSAGE_BYTES);
    expect(message.startsWith('Failed to update stack: éé')).toBe(true);
    expect(message.endsWith('é…')).toBe(true);
  });
});

describe('truncateUtf8', () => {
  it('keeps short text and cuts long text within the byte budget', () => {
    expect(truncateUtf8('abc', 3)).toBe('abc');
    expect(truncateUtf8('abcdef', 5)).toBe('ab…');
    // '€' is three bytes: never half of one.
    for (let max = 4; max < 12; max++) {
      const cut = truncateUtf8('€€€€€€', max);
      expect(Buffer.byteLength(cut, 'utf8')).toBeLessThanOrEqual(max);
      expect(cut).toMatch(/^€*…$/);
    }
  });
});

describe('events of a sync whose observed status holds values nested 100,000 levels deep', () => {
  it('are computed without overflowing the stack', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const stack = makeStack(
      {},
      {},
      {
        lastUpdate: { name: deep as string, state: 'succeeded' },
        conditions: [{ type: deep as string, status: 'True', reason: 'R', message: 'm', lastTransitionTime: 't' }],
      },
    );
    const res = syncStack(syncRequest(stack), ctx());
    expect(() => eventsOf(stack, [], res)).not.toThrow();
  });
});
