/**
 * `status.plan` as the status records it (docs/approval.md): read back field by field from the
 * observed status, and reported as the AwaitingApproval condition. What the gate does with a plan
 * is approval.ts.
 */
import type { Stack, StackPlan, StackPlanSummary } from '../../../schemas/generated/types';
import { rfc3339 } from '../../../contract';
import { isRecord } from '../lib/json';
import type { Condition } from './conditions';

export const ApprovalAnnotations = {
  /** `kubectl annotate stack <name> pulumi.com/approve=<plan id>`: apply that plan. */
  approve: 'pulumi.com/approve',
  /** `kubectl annotate stack <name> pulumi.com/reject=<plan id>`: discard that plan. */
  reject: 'pulumi.com/reject',
} as const;

const AWAITING_APPROVAL = 'AwaitingApproval';

export const PlanReasons = {
  AwaitingApproval: 'AwaitingApproval',
  Previewing: 'Previewing',
  Approved: 'Approved',
  PlanApplied: 'PlanApplied',
  PlanFailed: 'PlanFailed',
  PlanRejected: 'PlanRejected',
  PlanExpired: 'PlanExpired',
  PlanSuperseded: 'PlanSuperseded',
  PlanLost: 'PlanLost',
} as const;

const STATES = [
  'Previewing',
  'AwaitingApproval',
  'Approved',
  'Applied',
  'Failed',
  'Rejected',
  'Expired',
  'Superseded',
  'Lost',
] as const;

export type PlanState = (typeof STATES)[number];

function isPlanState(state: unknown): state is PlanState {
  return (STATES as readonly unknown[]).includes(state);
}

const SUMMARY_KEYS = ['create', 'update', 'delete', 'replace', 'same'] as const;

/** The observed `status.plan`, field by field (carried-status.ts); undefined when it cannot be the hooks'. */
export function carriedPlan(observed: unknown): StackPlan | undefined {
  if (!isRecord(observed) || typeof observed.id !== 'string' || !isPlanState(observed.state)) return undefined;
  const plan: StackPlan = { id: observed.id, state: observed.state };
  if (typeof observed.generation === 'number') plan.generation = observed.generation;
  for (const key of [
    'reconcileRequest',
    'commit',
    'previous',
    'message',
    'createdAt',
    'expiresAt',
    'decidedAt',
  ] as const) {
    const v = observed[key];
    if (typeof v === 'string') plan[key] = v;
  }
  if (isRecord(observed.summary)) plan.summary = summaryOf(observed.summary);
  return plan;
}

/** A plan's counts of changes, from a preview's resourceChanges or an observed summary. */
export function summaryOf(changes: Record<string, unknown>): StackPlanSummary {
  const summary: StackPlanSummary = {};
  for (const key of SUMMARY_KEYS) {
    const n = changes[key];
    summary[key] = typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : 0;
  }
  // Pulumi counts a replacement's parts separately; a plan's reader wants "replace".
  const parts = changes['create-replacement'];
  if (summary.replace === 0 && typeof parts === 'number' && parts > 0) summary.replace = parts;
  return summary;
}

function kubectl(stack: Stack, key: string, id: string): string {
  const ns = stack.metadata.namespace ? ` -n ${stack.metadata.namespace}` : '';
  return `kubectl annotate stack ${stack.metadata.name}${ns} ${key}=${id} --overwrite`;
}

function describeSummary(summary: StackPlanSummary | undefined): string {
  if (!summary) return 'no summary';
  return SUMMARY_KEYS.map((k) => `${summary[k] ?? 0} to ${k === 'same' ? 'leave unchanged' : k}`).join(', ');
}

/** A note on an approval or rejection that names another plan: ignored, and said so. */
export function staleNote(stack: Stack, id: string): string {
  const notes: string[] = [];
  for (const key of [ApprovalAnnotations.approve, ApprovalAnnotations.reject]) {
    const value = stack.metadata.annotations?.[key];
    if (value !== undefined && value !== '' && value !== id)
      notes.push(`${key}=${JSON.stringify(value).slice(0, 80)} names another plan and was ignored`);
  }
  return notes.length > 0 ? `; ${notes.join('; ')}` : '';
}

/** The AwaitingApproval condition from `status.plan` (none without a plan). */
function approvalCondition(
  stack: Stack,
  plan: StackPlan | undefined,
): Omit<Condition, 'lastTransitionTime'> | undefined {
  if (!plan || !isPlanState(plan.state)) return undefined;
  const id = plan.id ?? '';
  const of = (reason: string, message: string) => ({
    type: AWAITING_APPROVAL,
    status: 'False' as const,
    reason,
    message,
  });
  switch (plan.state) {
    case 'AwaitingApproval':
      return {
        type: AWAITING_APPROVAL,
        status: 'True',
        reason: PlanReasons.AwaitingApproval,
        message:
          `plan ${id} (${describeSummary(plan.summary)})${plan.expiresAt ? `, expires ${plan.expiresAt}` : ''}. ` +
          `Approve: ${kubectl(stack, ApprovalAnnotations.approve, id)}; reject: ${kubectl(stack, ApprovalAnnotations.reject, id)}` +
          staleNote(stack, id),
      };
    case 'Previewing':
      return of(PlanReasons.Previewing, `previewing the change; its plan will be ${id}`);
    case 'Approved':
      return of(PlanReasons.Approved, `plan ${id} was approved; applying it`);
    case 'Applied':
      return of(PlanReasons.PlanApplied, `plan ${id} was applied`);
    case 'Failed':
      return of(PlanReasons.PlanFailed, plan.message ?? `plan ${id} failed`);
    case 'Rejected':
      return of(PlanReasons.PlanRejected, plan.message ?? `plan ${id} was rejected`);
    case 'Expired':
      return of(PlanReasons.PlanExpired, plan.message ?? `plan ${id} expired`);
    case 'Superseded':
      return of(PlanReasons.PlanSuperseded, plan.message ?? `plan ${id} was replaced`);
    case 'Lost':
      return of(
        PlanReasons.PlanLost,
        `the plan of ${id} was gone from the workspace (its pod was replaced since the preview); nothing was applied, and a new preview follows`,
      );
  }
}

/** The conditions with AwaitingApproval set from the plan (kept transition time when its status holds), or removed. */
export function withApprovalCondition(
  conditions: Condition[],
  stack: Stack,
  plan: StackPlan | undefined,
  generation: number | undefined,
  now: Date,
): Condition[] {
  const desired = approvalCondition(stack, plan);
  const existing = conditions.find((c) => c.type === AWAITING_APPROVAL);
  const rest = conditions.filter((c) => c.type !== AWAITING_APPROVAL);
  if (!desired) return rest;
  const next: Condition = {
    ...desired,
    lastTransitionTime: existing && existing.status === desired.status ? existing.lastTransitionTime : rfc3339(now),
  };
  if (generation !== undefined) next.observedGeneration = generation;
  return existing ? conditions.map((c) => (c.type === AWAITING_APPROVAL ? next : c)) : [...rest, next];
}
