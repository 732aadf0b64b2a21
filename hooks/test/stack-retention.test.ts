import { syncStack, withControllerStatus } from './controllers';
import { stackEvents } from '../src/stack/events';
import { updateExpiry } from '../src/stack/update';
import type { KObject } from '../src/lib/k8s';
import { applyChildren, childrenMap, find, jobFinishes, makeStack, NOW, syncRequest, withStatus } from './builders';
import { ctx, toFirstJob } from './stories';

const ENDED = '2026-11-22T10:01:00Z';
const at = (iso: string) => ctx(new Date(iso));

/** A first up that succeeded at ENDED, with the Stack's TTL; the state before any sync saw it. */
function finishedUp(ttlAfterCompleted?: string) {
  const stack = makeStack(ttlAfterCompleted === undefined ? {} : { updateTemplate: { spec: { ttlAfterCompleted } } });
  const { stack: s, cluster, job } = toFirstJob(stack);
  const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', outputs: { url: 'u' }, endTime: ENDED });
  return { stack: s, cluster: done, name: job.metadata.name };
}

describe('finished Updates (and their Jobs, which go with them)', () => {
  it('stay while their result is not in the status, however short the TTL', () => {
    const { stack, cluster, name } = finishedUp('0s');
    // An hour late (the hooks were down, or the status write was lost): the result is still there.
    const res = syncStack(syncRequest(stack, cluster), at('2026-11-22T11:01:00Z'));
    expect(find(res, 'Update', name)).toBeDefined();
    expect(find(res, 'Job', name)).toBeDefined();
    expect(res.status.lastUpdate).toMatchObject({ name, state: 'succeeded', lastResyncTime: ENDED });
    expect(res.status.outputs).toEqual({ url: 'u' });
  });

  it('go with the next sync once the status has their result and the TTL has passed', () => {
    const { stack, cluster, name } = finishedUp('0s');
    const r1 = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:01:01Z'));
    const s1 = withStatus(stack, r1);
    const r2 = syncStack(syncRequest(s1, applyChildren(cluster, r1.children)), at('2026-11-22T10:01:01Z'));
    expect(find(r2, 'Update', name)).toBeUndefined();
    expect(find(r2, 'Job', name)).toBeUndefined();
    // What the status says stays.
    expect(r2.status.lastUpdate).toEqual(r1.status.lastUpdate);
    expect(r2.status.outputs).toEqual({ url: 'u' });
  });

  it('stay until their TTL, counted from when they finished, and the hooks ask to be called then', () => {
    const { stack, cluster, name } = finishedUp('1h');
    const r1 = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:01:30Z'));
    const s1 = withStatus(stack, r1);
    const c1 = applyChildren(cluster, r1.children);
    const early = syncStack(syncRequest(s1, c1), at('2026-11-22T10:30:00Z'));
    expect(find(early, 'Update', name)).toBeDefined();
    expect(early.resyncAfterSeconds).toBe(31 * 60);
    const due = syncStack(syncRequest(s1, c1), at('2026-11-22T11:01:00Z'));
    expect(find(due, 'Update', name)).toBeUndefined();
    expect(due.resyncAfterSeconds).toBeUndefined();
  });

  it('that go are recorded as upstream records them: UpdateExpired on the Update, once', () => {
    const { stack, cluster, name } = finishedUp('1h');
    // The API server gave the Update a uid; the event is about it.
    const observed = cluster.map((c) =>
      c.kind === 'Update' ? { ...c, metadata: { ...c.metadata, uid: 'update-uid' } } : c,
    );
    const r1 = syncStack(syncRequest(stack, observed), at('2026-11-22T10:01:30Z'));
    const s1 = withStatus(stack, r1);
    const c1 = applyChildren(observed, r1.children);
    const eventsAt = (iso: string) => {
      const res = syncStack(syncRequest(s1, c1), at(iso));
      // The children as the Stack's hook saw them: with the statuses their controllers wrote.
      const events = stackEvents({
        stack: s1,
        observed: childrenMap(...withControllerStatus(c1, at(iso))),
        status: res.status,
        children: res.children,
        finalizing: false,
        now: new Date(iso),
      });
      return events.filter((e) => e.regarding.kind === 'Update');
    };
    // Kept: nothing.
    expect(eventsAt('2026-11-22T10:30:00Z')).toEqual([]);
    const expired = eventsAt('2026-11-22T11:01:00Z');
    expect(expired.map((e) => e.name)).toEqual([expect.stringMatching(new RegExp(`^${name}\\.[0-9a-f]{16}$`))]);
    expect(expired.map((e) => ({ ...e, name: 'n' }))).toEqual([
      {
        name: 'n',
        namespace: 'team-a',
        type: 'Normal',
        reason: 'UpdateExpired',
        action: 'Delete',
        message: 'ttl expired and was deleted',
        regarding: {
          apiVersion: 'auto.pulumi.com/v1alpha1',
          kind: 'Update',
          name,
          namespace: 'team-a',
          uid: 'update-uid',
        },
        labels: { 'pulumi.com/stack-name': 'my-stack' },
      },
    ]);
    // Every sync until Metacontroller has deleted it names the same event.
    expect(eventsAt('2026-11-22T11:05:00Z')).toEqual(expired);
  });

  it('are kept 24h by default', () => {
    const { stack, cluster, name } = finishedUp();
    const r1 = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:01:30Z'));
    const s1 = withStatus(stack, r1);
    const c1 = applyChildren(cluster, r1.children);
    expect(find(syncStack(syncRequest(s1, c1), at('2026-11-23T10:00:59Z')), 'Update', name)).toBeDefined();
    expect(find(syncStack(syncRequest(s1, c1), at('2026-11-23T10:01:00Z')), 'Update', name)).toBeUndefined();
  });

  it('with a TTL the hooks cannot read are kept', () => {
    const { stack, cluster, name } = finishedUp('0s');
    const unreadable = cluster.map((c) =>
      c.kind === 'Update' ? { ...c, spec: { ...(c.spec as object), ttlAfterCompleted: 'soon' } } : c,
    );
    const r1 = syncStack(syncRequest(stack, unreadable), at('2026-11-22T10:01:30Z'));
    const r2 = syncStack(syncRequest(withStatus(stack, r1), unreadable), at('2026-11-25T00:00:00Z'));
    expect(find(r2, 'Update', name)).toBeDefined();
  });
});

describe('an Update expiry', () => {
  const update = (ttlAfterCompleted: string | undefined, status: object): KObject => ({
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Update',
    metadata: { name: 'u' },
    spec: ttlAfterCompleted === undefined ? {} : { ttlAfterCompleted },
    status,
  });
  const complete = (endTime?: string) => ({
    ...(endTime ? { endTime } : {}),
    conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: ENDED }],
  });

  it('is when it ended plus its TTL (24h when none is set)', () => {
    const ended = Date.parse(ENDED);
    expect(updateExpiry(update('60s', complete()), NOW)).toBe(ended + 60_000);
    expect(updateExpiry(update('0s', complete('2026-11-22T10:00:30Z')), NOW)).toBe(ended - 30_000);
    expect(updateExpiry(update(undefined, complete()), NOW)).toBe(ended + 24 * 3600_000);
  });

  it('is undefined while it runs, or with a TTL the hooks cannot read', () => {
    expect(updateExpiry(update('60s', { conditions: [{ type: 'Progressing', status: 'True' }] }), NOW)).toBeUndefined();
    const notComplete = { conditions: [{ type: 'Complete', status: 'False', lastTransitionTime: ENDED }] };
    expect(updateExpiry(update('60s', notComplete), NOW)).toBeUndefined();
    for (const ttl of ['', '-1', 'soon']) expect(updateExpiry(update(ttl, complete()), NOW)).toBeUndefined();
  });
});
