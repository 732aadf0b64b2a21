import type { V1Job } from '@kubernetes/client-node';
import { syncStack } from '../src/stack/sync';
import { jobExpiry } from '../src/stack/retention';
import type { Typed } from '../src/lib/k8s';
import { applyChildren, find, jobFinishes, makeStack, syncRequest, withStatus } from './builders';
import { childOf } from './children';
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

/** The names of the Jobs the update Role lets the runner patch. */
function patchableJobs(res: Parameters<typeof childOf>[0]): string[] {
  const role = childOf(res, 'Role', 'my-stack-update');
  return role.rules?.find((r) => r.resources?.includes('jobs'))?.resourceNames ?? [];
}

describe('finished Jobs', () => {
  it('stay while their result is not in the status, however short the TTL', () => {
    const { stack, cluster, name } = finishedUp('0s');
    // An hour late (the hooks were down, or the status write was lost): the result is still there.
    const res = syncStack(syncRequest(stack, cluster), at('2026-11-22T11:01:00Z'));
    expect(find(res, 'Job', name)).toBeDefined();
    expect(res.status.lastUpdate).toMatchObject({ name, state: 'succeeded', lastResyncTime: ENDED });
    expect(res.status.outputs).toEqual({ url: 'u' });
  });

  it('go with the next sync once the status has their result and the TTL has passed', () => {
    const { stack, cluster, name } = finishedUp('0s');
    const r1 = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:01:01Z'));
    const s1 = withStatus(stack, r1);
    const r2 = syncStack(syncRequest(s1, applyChildren(cluster, r1.children)), at('2026-11-22T10:01:01Z'));
    expect(find(r2, 'Job', name)).toBeUndefined();
    expect(patchableJobs(r2)).not.toContain(name);
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
    expect(find(early, 'Job', name)).toBeDefined();
    expect(early.resyncAfterSeconds).toBe(31 * 60);
    const due = syncStack(syncRequest(s1, c1), at('2026-11-22T11:01:00Z'));
    expect(find(due, 'Job', name)).toBeUndefined();
    expect(due.resyncAfterSeconds).toBeUndefined();
  });

  it('are kept 24h by default', () => {
    const { stack, cluster, name } = finishedUp();
    const r1 = syncStack(syncRequest(stack, cluster), at('2026-11-22T10:01:30Z'));
    const s1 = withStatus(stack, r1);
    const c1 = applyChildren(cluster, r1.children);
    expect(find(syncStack(syncRequest(s1, c1), at('2026-11-23T10:00:59Z')), 'Job', name)).toBeDefined();
    expect(find(syncStack(syncRequest(s1, c1), at('2026-11-23T10:01:00Z')), 'Job', name)).toBeUndefined();
  });

  it('made by an older version (no TTL annotation) are left to the TTL controller', () => {
    const { stack, cluster, name } = finishedUp('0s');
    const old = cluster.map((c) => {
      if (c.kind !== 'Job') return c;
      const annotations = { ...c.metadata.annotations };
      delete annotations['pulumi.com/update-ttl-seconds'];
      return { ...c, metadata: { ...c.metadata, annotations } };
    });
    const r1 = syncStack(syncRequest(stack, old), at('2026-11-22T10:01:30Z'));
    const r2 = syncStack(syncRequest(withStatus(stack, r1), old), at('2026-11-25T00:00:00Z'));
    expect(find(r2, 'Job', name)).toBeDefined();
  });
});

describe('a Job expiry', () => {
  const job = (annotations: Record<string, string>, status: Typed<V1Job>['status']): Typed<V1Job> => ({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: 'j', annotations },
    status,
  });
  const complete = { conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: ENDED }] };

  it('is when it finished (Complete or Failed) plus its TTL', () => {
    const ended = Date.parse(ENDED);
    expect(jobExpiry(job({ 'pulumi.com/update-ttl-seconds': '60' }, complete))).toBe(ended + 60_000);
    const failed = { conditions: [{ type: 'Failed', status: 'True', lastTransitionTime: ENDED }] };
    expect(jobExpiry(job({ 'pulumi.com/update-ttl-seconds': '0' }, failed))).toBe(ended);
  });

  it('is undefined while it runs, or without a TTL the hooks can read', () => {
    expect(jobExpiry(job({ 'pulumi.com/update-ttl-seconds': '60' }, { active: 1 }))).toBeUndefined();
    const suspended = { conditions: [{ type: 'Complete', status: 'False', lastTransitionTime: ENDED }] };
    expect(jobExpiry(job({ 'pulumi.com/update-ttl-seconds': '60' }, suspended))).toBeUndefined();
    for (const ttl of ['', '-1', '1.5', 'soon'])
      expect(jobExpiry(job({ 'pulumi.com/update-ttl-seconds': ttl }, complete))).toBeUndefined();
    expect(jobExpiry(job({}, complete))).toBeUndefined();
  });
});
