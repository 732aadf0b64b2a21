import { rfc3339 } from '../../../contract';
import { isRecord } from './json';
import { printable } from './printable';

/** A status condition as the controllers write them (metav1.Condition's fields). */
export interface StatusCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export type DesiredCondition = Omit<StatusCondition, 'lastTransitionTime' | 'observedGeneration'> & {
  /** When the condition changed, if the caller knows it (a Job's end); else now, or kept while unchanged. */
  at?: string;
};

/**
 * Exactly `desired`, in order. As apimachinery's SetStatusCondition, a condition whose status did not
 * change keeps its observed lastTransitionTime, so feeding an answer back gives the same bytes
 * (Metacontroller calls the hook again after its own status write; a moving time would loop).
 */
/** metav1.Condition's rules for a reason (the CRDs validate them: a status breaking them is refused). */
const REASON = /^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;
const MAX_REASON = 1024;
const MAX_MESSAGE = 32768;

/** A reason the API server accepts: what an agent or a Job reported may be anything. */
function safeReason(reason: string): string {
  return reason.length <= MAX_REASON && REASON.test(reason) ? reason : 'Unknown';
}

export function setConditions(
  observed: unknown,
  desired: readonly DesiredCondition[],
  generation: number | undefined,
  now: Date,
): StatusCondition[] {
  const before = Array.isArray(observed) ? observed.filter(isRecord) : [];
  return desired.map(({ at, ...d }) => {
    const old = before.find((c) => c.type === d.type);
    const kept =
      old?.status === d.status && typeof old.lastTransitionTime === 'string' ? old.lastTransitionTime : undefined;
    const message = printable(d.message);
    const c: StatusCondition = {
      ...d,
      reason: safeReason(d.reason),
      message: message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 1)}…` : message,
      lastTransitionTime: at ?? kept ?? rfc3339(now),
    };
    if (generation !== undefined) c.observedGeneration = generation;
    return c;
  });
}

/** The condition of `type` in an observed object's status, if it is one. */
export function observedCondition(status: unknown, type: string): Partial<StatusCondition> | undefined {
  const conditions = isRecord(status) ? status.conditions : undefined;
  if (!Array.isArray(conditions)) return undefined;
  const found: unknown = conditions.find((c) => isRecord(c) && c.type === type);
  return isRecord(found) ? found : undefined;
}
