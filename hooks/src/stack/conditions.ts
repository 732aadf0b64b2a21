/**
 * Upstream's kstatus-compatible Ready/Reconciling/Stalled protocol (the Mark*Condition methods of
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/api/pulumi/v1/stack_types.go#L114).
 * Reason strings are part of the API: Argo CD's health check and users' alerts match on them.
 */
import { rfc3339 } from '../../../contract';
import type { StatusCondition } from '../lib/conditions';
import { printable } from '../lib/printable';

export const Reasons = {
  // Reconciling
  StackProcessing: 'StackProcessing',
  PrerequisiteNotSatisfied: 'PrerequisiteNotSatisfied',
  RetryingAfterFailure: 'RetryingAfterFailure',
  PreviewFailed: 'PreviewFailed',
  // Stalled
  SpecInvalid: 'SpecInvalid',
  SourceUnavailable: 'SourceUnavailable',
  PulumiVersionTooLow: 'PulumiVersionTooLow',
  WorkspaceFailed: 'WorkspaceFailed',
  UpdateFailed: 'UpdateFailed',
  NamespaceTerminating: 'NamespaceTerminating',
  /** The workspace cannot verify callers (no system:auth-delegator); clears when the agent's check passes. */
  Unauthenticated: 'Unauthenticated',
  // Ready
  ProcessingCompleted: 'ProcessingCompleted',
  NotReadyInProgress: 'NotReadyInProgress',
  NotReadyStalled: 'NotReadyStalled',
} as const;

export type Condition = StatusCondition;

export type Mark =
  | { kind: 'ready'; message?: string }
  | { kind: 'reconciling'; reason: string; message: string }
  | { kind: 'stalled'; reason: string; message: string };

/**
 * Applies a mark to the observed conditions. Like apimachinery's SetStatusCondition: a condition
 * whose status did not change keeps its lastTransitionTime, so feeding the result back gives the
 * same bytes (Metacontroller re-syncs on its own status writes; a moving timestamp would hot-loop).
 */
export function applyMark(observed: unknown, mark: Mark, generation: number | undefined, now: Date): Condition[] {
  let conditions: Condition[] = Array.isArray(observed) ? observed.filter(isCondition).map(conditionFields) : [];
  const set = (type: string, status: Condition['status'], reason: string, message: string) => {
    const existing = conditions.find((c) => c.type === type);
    const next: Condition = {
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
        Reasons.ProcessingCompleted,
        mark.message ?? 'the stack has been processed and is up to date',
      );
      break;
    case 'reconciling':
      remove('Stalled');
      set('Ready', 'False', Reasons.NotReadyInProgress, 'reconciliation is in progress');
      set('Reconciling', 'True', mark.reason, mark.message);
      break;
    case 'stalled':
      remove('Reconciling');
      set('Ready', 'False', Reasons.NotReadyStalled, 'reconciliation is stalled');
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
function conditionFields(c: Condition): Condition {
  const copy: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(c)) {
    if (CONDITION_FIELDS[key] === typeof value) copy[key] = key === 'message' ? printable(value as string) : value;
  }
  return copy as unknown as Condition;
}

const CONDITION_FIELDS: Readonly<Record<string, string>> = Object.assign(Object.create(null) as object, {
  type: 'string',
  status: 'string',
  reason: 'string',
  message: 'string',
  lastTransitionTime: 'string',
  observedGeneration: 'number',
});

function isCondition(c: unknown): c is Condition {
  if (typeof c !== 'object' || c === null) return false;
  const o = c as Record<string, unknown>;
  return typeof o.type === 'string' && typeof o.status === 'string' && typeof o.lastTransitionTime === 'string';
}
