/**
 * How long a finished Job is kept: upstream deletes an Update `ttlAfterCompleted` after it completed
 * (24h by default). Here the hooks do it, not the Job controller's `ttlSecondsAfterFinished`, so that a
 * Job is never deleted before the Stack's status has its result: the TTL controller does not know
 * whether the result was absorbed, and with a short TTL it deletes the Job, its result annotation and
 * its outputs Secret before the next sync reads them. A Job is dropped from the desired children
 * (Metacontroller deletes it) once the observed status has absorbed its result and its TTL, counted
 * from when it finished, has passed. Stateless: the TTL rides on the Job (JobAnnotations.ttl).
 */
import type { V1Job } from '@kubernetes/client-node';
import { conditionOf, type Typed } from '../lib/k8s';
import { JobAnnotations } from './job';

/** When a Job finished (ms since the epoch), as the TTL controller reads it; undefined while it runs. */
function finishedAt(job: Typed<V1Job>): number | undefined {
  const done = [conditionOf(job, 'Complete'), conditionOf(job, 'Failed')].find((c) => c?.status === 'True');
  if (!done) return undefined;
  const at = Date.parse(done.lastTransitionTime ?? job.status?.completionTime ?? '');
  return Number.isNaN(at) ? undefined : at;
}

/**
 * When a finished Job may go (ms since the epoch), or undefined: still running, or no TTL of ours
 * (a Job made by an older version of the hooks has `ttlSecondsAfterFinished`: the TTL controller's).
 */
export function jobExpiry(job: Typed<V1Job>): number | undefined {
  const ttl = job.metadata.annotations?.[JobAnnotations.ttl];
  if (ttl === undefined || !/^\d{1,10}$/.test(ttl)) return undefined;
  const finished = finishedAt(job);
  return finished === undefined ? undefined : finished + Number(ttl) * 1000;
}

export interface RetainedJobs<J> {
  /** The Jobs to keep returning. */
  kept: J[];
  /** Seconds until the next kept Job expires, if any does: when to sync again. */
  resyncAfterSeconds?: number;
}

/**
 * The Jobs a Stack keeps at `now`: every Job but those whose result is already in the observed
 * status (`absorbed`) and whose TTL has passed.
 */
export function retainJobs<J extends { job: Typed<V1Job>; absorbed: boolean }>(
  jobs: readonly J[],
  now: Date,
): RetainedJobs<J> {
  const kept: J[] = [];
  let next: number | undefined;
  for (const entry of jobs) {
    const expiry = entry.absorbed ? jobExpiry(entry.job) : undefined;
    if (expiry === undefined) {
      kept.push(entry);
    } else if (expiry > now.getTime()) {
      kept.push(entry);
      next = Math.min(next ?? expiry, expiry);
    }
  }
  const retained: RetainedJobs<J> = { kept };
  if (next !== undefined) retained.resyncAfterSeconds = Math.max(1, Math.ceil((next - now.getTime()) / 1000));
  return retained;
}
