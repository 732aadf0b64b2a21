/**
 * The Updates a Stack makes, as both the Stack's controller and the Update's events read them: the
 * names the hooks give them, and when a finished one may go.
 */
import type { UpdateSpec } from '../../../schemas/generated/types';
import type { OperationType } from '../../../contract';
import { observedCondition } from './conditions';
import { parseDuration } from './duration';
import { isRecord } from './json';
import type { KObject } from './k8s';
import { observedTime } from './time';

/** Upstream's TTL for Stack-created Updates. */
export const DEFAULT_TTL = '24h';

/** `<stack>-<type>-<8 hex>`: the names the hooks give a Stack's Updates (drift checks too), and earlier versions its Jobs. */
export function isUpdateName(stack: string, name: string): boolean {
  return typeInName(stack, name) !== undefined;
}

/** The operation type an Update's name says it runs (the hash after it is of what it runs for). */
export function typeInName(stack: string, name: string): OperationType | undefined {
  if (!name.startsWith(`${stack}-`)) return undefined;
  const match = /^(up|preview|refresh|destroy)-[0-9a-f]{8}$/.exec(name.slice(stack.length + 1));
  return match ? (match[1] as OperationType) : undefined;
}

/** When a finished Update may go (ms since the epoch): its end plus `ttlAfterCompleted`; undefined while it runs. */
export function updateExpiry(update: KObject, now: Date): number | undefined {
  const complete = observedCondition(update.status, 'Complete');
  if (complete?.status !== 'True') return undefined;
  const end =
    observedTime(isRecord(update.status) ? update.status.endTime : undefined, now) ??
    observedTime(complete.lastTransitionTime, now);
  if (end === undefined) return undefined;
  const ttl =
    isRecord(update.spec) && typeof update.spec.ttlAfterCompleted === 'string'
      ? update.spec.ttlAfterCompleted
      : undefined;
  const ms = parseDuration(ttl ?? DEFAULT_TTL);
  return ms === undefined ? undefined : end + ms;
}

/** An observed Update's spec, or nothing if it has none (read field by field by its callers). */
export function updateSpecOf(update: KObject): Partial<UpdateSpec> {
  return isRecord(update.spec) ? update.spec : {};
}
