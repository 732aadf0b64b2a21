/**
 * How long a finished Update is kept: upstream deletes an Update `ttlAfterCompleted` after it
 * completed (24h by default). Here the Stack's sync stops returning it (Metacontroller deletes it,
 * and its Job and outputs Secret with it) once the observed status has absorbed its result and its
 * TTL, counted from when it ended, has passed: never before the Stack's status has the result,
 * whatever the TTL, and stateless (the TTL is the Update's spec, the end its status).
 */
import type { KObject } from '../lib/k8s';
import { updateExpiry } from './update';

export interface RetainedUpdates<U> {
  /** The Updates to keep returning. */
  kept: U[];
  /** Seconds until the next kept Update expires, if any does: when to sync again. */
  resyncAfterSeconds?: number;
}

/**
 * The Updates a Stack keeps at `now`: every Update but those whose result is already in the
 * observed status (`absorbed`) and whose TTL has passed.
 */
export function retainUpdates<U extends { update: KObject; absorbed: boolean }>(
  updates: readonly U[],
  now: Date,
): RetainedUpdates<U> {
  const kept: U[] = [];
  let next: number | undefined;
  for (const entry of updates) {
    const expiry = entry.absorbed ? updateExpiry(entry.update, now) : undefined;
    if (expiry === undefined) {
      kept.push(entry);
    } else if (expiry > now.getTime()) {
      kept.push(entry);
      next = Math.min(next ?? expiry, expiry);
    }
  }
  const retained: RetainedUpdates<U> = { kept };
  if (next !== undefined) retained.resyncAfterSeconds = Math.max(1, Math.ceil((next - now.getTime()) / 1000));
  return retained;
}
