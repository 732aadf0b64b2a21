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

/**
 * The Ready reasons of upstream's kstatus-compatible Ready/Reconciling/Stalled protocol (the
 * Mark*Condition methods of
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/api/pulumi/v1/stack_types.go#L114).
 */
export const ReadyReasons = {
  ProcessingCompleted: 'ProcessingCompleted',
  NotReadyInProgress: 'NotReadyInProgress',
  NotReadyStalled: 'NotReadyStalled',
} as const;

export type Mark =
  | { kind: 'ready'; message?: string }
  | { kind: 'reconciling'; reason: string; message: string }
  | { kind: 'stalled'; reason: string; message: string };

/**
 * Applies a mark to the observed conditions. Like apimachinery's SetStatusCondition: a condition
 * whose status did not change keeps its lastTransitionTime, so feeding the result back gives the
 * same bytes (Metacontroller re-syncs on its own status writes; a moving timestamp would hot-loop).
 */
export function applyMark(observed: unknown, mark: Mark, generation: number | undefined, now: Date): StatusCondition[] {
  let conditions: StatusCondition[] = Array.isArray(observed) ? observed.filter(isCondition).map(conditionFields) : [];
  const set = (type: string, status: StatusCondition['status'], reason: string, message: string) => {
    const existing = conditions.find((c) => c.type === type);
    const next: StatusCondition = {
      type,
      status,
      reason,
      message: printable(message),
      lastTransitionTime: existing && existing.status === status ? existing.lastTransitionTime : rfc3339(now),
    };
    if (generation !== undefined) next.observedGeneration = generation;
    conditions = existing ? conditions.map((c) => (c.type === type ? next : c)) : [...conditions, next];
  };
  const remove = (type: string) => {
    conditions = conditions.filter((c) => c.type !== type);
  };
  switch (mark.kind) {
    case 'ready':
      remove('Reconciling');
      remove('Stalled');
      set(
        'Ready',
        'True',
        ReadyReasons.ProcessingCompleted,
        mark.message ?? 'the stack has been processed and is up to date',
      );
      break;
    case 'reconciling':
      remove('Stalled');
      set('Ready', 'False', ReadyReasons.NotReadyInProgress, 'reconciliation is in progress');
      set('Reconciling', 'True', mark.reason, mark.message);
      break;
    case 'stalled':
      remove('Reconciling');
      set('Ready', 'False', ReadyReasons.NotReadyStalled, 'reconciliation is stalled');
      set('Stalled', 'True', mark.reason, mark.message);
      break;
  }
  return conditions;
}

/**
 * A copy of an observed condition with its own fields only, in their order (so an unchanged
 * condition gives the same bytes): anything else a status writer put there is dropped, however
 * deeply nested, rather than copied into the answer.
 */
function conditionFields(c: StatusCondition): StatusCondition {
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(c)) {
    if (CONDITION_FIELDS[key] === typeof value) copy[key] = key === 'message' ? printable(value as string) : value;
  }
  return copy as unknown as StatusCondition;
}

const CONDITION_FIELDS: Readonly<Record<string, string>> = Object.assign(Object.create(null) as object, {
  type: 'string',
  status: 'string',
  reason: 'string',
  message: 'string',
  lastTransitionTime: 'string',
  observedGeneration: 'number',
});

function isCondition(c: unknown): c is StatusCondition {
  return (
    isRecord(c) &&
    typeof c.type === 'string' &&
    typeof c.status === 'string' &&
    typeof c.lastTransitionTime === 'string'
  );
}
