/**
 * The manual approval gate of a Stack (`spec.approval`, docs/approval.md). Where the Stack would
 * run an `up`, it first runs a preview Update that saves an update plan in the workspace pod, and
 * records the plan's summary in `status.plan`; it waits (condition AwaitingApproval) until the
 * annotation `pulumi.com/approve` names that plan, then runs an `up` Update that applies exactly
 * it. The plan's id is the preview Update's name, a function of what it previews (generation,
 * reconcile request, commit, lastUpdate), so an approval of an older plan never matches a newer
 * one. Everything the gate decides is a function of the Stack, its status and its Updates.
 */
import type { Stack, StackPlan, StackPlanSummary, StackStatus, UpdateSpec } from '../../../schemas/generated/types';
import { PLAN_NOT_FOUND, rfc3339 } from '../../../contract';
import { parseDuration } from '../lib/duration';
import { isRecord } from '../lib/json';
import type { KObject } from '../lib/k8s';
import { observedDeadline, observedTime } from '../lib/time';
import type { Condition, Mark } from './conditions';
import { buildUpdate, type UpdateIdentity, type UpdateOutcome } from './update';

export const ApprovalAnnotations = {
  /** `kubectl annotate stack <name> pulumi.com/approve=<plan id>`: apply that plan. */
  approve: 'pulumi.com/approve',
  /** `kubectl annotate stack <name> pulumi.com/reject=<plan id>`: discard that plan. */
  reject: 'pulumi.com/reject',
} as const;

export const AWAITING_APPROVAL = 'AwaitingApproval';

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

type PlanState =
  | 'Previewing'
  | 'AwaitingApproval'
  | 'Approved'
  | 'Applied'
  | 'Failed'
  | 'Rejected'
  | 'Expired'
  | 'Superseded'
  | 'Lost';

/** Whether the Stack's changes wait for approval. */
export function approvalRequired(stack: Stack): boolean {
  return stack.spec?.approval?.required === true;
}

/** Semantic checks of `spec.approval` (the schema checks the types and the duration's form). */
export function approvalProblems(stack: Stack): string[] {
  const after = stack.spec?.approval?.expiresAfter;
  if (after === undefined) return [];
  const ms = parseDuration(after);
  if (ms === undefined || ms <= 0)
    return [`spec.approval.expiresAfter: "${after}" is not a positive duration like "24h"`];
  return [];
}

/** Whether an Update is a preview that saves a plan (the gate's, or a hand-made one). */
export function isPlanPreview(update: KObject): boolean {
  const spec = update.spec as UpdateSpec | undefined;
  return isRecord(spec) && spec.type === 'preview' && spec.savePlan === true;
}

/** The plan an `up` applies (`spec.plan`), if any. */
function appliedPlan(update: KObject): string | undefined {
  const spec = update.spec as UpdateSpec | undefined;
  return isRecord(spec) && spec.type === 'up' && typeof spec.plan === 'string' ? spec.plan : undefined;
}

/** Whether a finished Update must be kept because the plan in the status still refers to it. */
export function heldByPlan(status: StackStatus, name: string): boolean {
  const plan = status.plan;
  return plan?.id === name && (plan.state === 'AwaitingApproval' || plan.state === 'Approved');
}

const STATES: readonly string[] = [
  'Previewing',
  'AwaitingApproval',
  'Approved',
  'Applied',
  'Failed',
  'Rejected',
  'Expired',
  'Superseded',
  'Lost',
];
const SUMMARY_KEYS = ['create', 'update', 'delete', 'replace', 'same'] as const;

/** The observed `status.plan`, field by field (carried-status.ts); undefined when it cannot be the hooks'. */
export function carriedPlan(observed: unknown): StackPlan | undefined {
  if (!isRecord(observed) || typeof observed.id !== 'string' || !STATES.includes(String(observed.state)))
    return undefined;
  const plan: StackPlan = { id: observed.id, state: observed.state as string };
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

function summaryOf(changes: Record<string, unknown>): StackPlanSummary {
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

function setState(plan: StackPlan, state: PlanState, now: Date, message?: string): void {
  plan.state = state;
  plan.decidedAt = rfc3339(now);
  if (message !== undefined) plan.message = message;
}

/**
 * A finished preview that saved a plan, the Update the status follows (its plan is `status.plan`,
 * recorded when it started): a success becomes the plan awaiting approval (true: nothing to absorb
 * into lastUpdate); a failure is absorbed as any failed operation (false), so the Stack's backoff
 * retries it.
 */
export function recordPlan(
  stack: Stack,
  status: StackStatus,
  update: KObject,
  outcome: UpdateOutcome,
  now: Date,
): boolean {
  const recorded = status.plan;
  if (!isPlanPreview(update) || recorded?.id !== update.metadata.name) return false;
  if (outcome.result.state !== 'succeeded') {
    status.plan = { ...recorded, state: 'Failed', message: outcome.result.message, decidedAt: rfc3339(now) };
    return false;
  }
  const createdAt = outcome.endTime ?? rfc3339(now);
  const plan: StackPlan = {
    ...recorded,
    state: 'AwaitingApproval',
    summary: summaryOf(outcome.result.resourceChanges ?? {}),
    message: outcome.result.message,
    createdAt,
  };
  delete plan.decidedAt;
  delete plan.expiresAt;
  const after = stack.spec?.approval?.expiresAfter;
  const ms = after !== undefined ? parseDuration(after) : undefined;
  const created = observedTime(createdAt, now);
  if (ms !== undefined && ms > 0 && created !== undefined) plan.expiresAt = rfc3339(new Date(created + ms));
  status.plan = plan;
  delete status.currentUpdate;
  return true;
}

/**
 * Whether the plan fields of the Update `status.currentUpdate` names are the ones the gate gave it:
 * a preview saves a plan exactly when `status.plan` is its plan, and an `up` applies exactly the
 * plan that was approved.
 */
export function planAsRecorded(status: StackStatus, update: KObject): boolean {
  const plan = status.plan;
  if (isPlanPreview(update)) return plan?.id === update.metadata.name;
  const applied = appliedPlan(update);
  if (applied !== undefined) return plan?.id === applied && plan.state === 'Approved';
  return plan?.id !== update.metadata.name;
}

/**
 * Under the gate, a result may make the Stack's last update a succeeded `up` only if that `up`
 * applied the approved plan (one started before the gate was turned on does not count).
 */
export function mayRecordSuccess(stack: Stack, status: StackStatus, update: KObject, outcome: UpdateOutcome): boolean {
  if (!approvalRequired(stack) || outcome.result.type !== 'up' || outcome.result.state !== 'succeeded') return true;
  const plan = status.plan;
  return plan?.state === 'Approved' && appliedPlan(update) === plan.id;
}

/** After an `up` that applied the plan in the status was absorbed: what became of the plan. */
export function recordApply(status: StackStatus, update: KObject, outcome: UpdateOutcome, now: Date): void {
  const plan = status.plan;
  const applied = appliedPlan(update);
  if (!plan || applied === undefined || applied !== plan.id) return;
  const { result } = outcome;
  if (result.state === 'succeeded') setState(plan, 'Applied', now, result.message);
  else if (result.reason === PLAN_NOT_FOUND) setState(plan, 'Lost', now, result.message);
  else setState(plan, 'Failed', now, result.message);
}

function planOf(name: string, id: UpdateIdentity): StackPlan {
  return {
    id: name,
    state: 'Previewing',
    generation: id.generation,
    reconcileRequest: id.reconcileRequest,
    commit: id.commit,
    previous: id.previous,
  };
}

function isFor(plan: StackPlan, id: UpdateIdentity): boolean {
  return (
    plan.generation === id.generation &&
    (plan.reconcileRequest ?? '') === id.reconcileRequest &&
    (plan.commit ?? '') === id.commit &&
    (plan.previous ?? '') === id.previous
  );
}

/** A plan still open (previewing, awaiting or approved) is superseded: the Stack no longer needs it. */
export function supersedePlan(status: StackStatus, now: Date, why: string): void {
  const plan = status.plan;
  if (plan && (plan.state === 'Previewing' || plan.state === 'AwaitingApproval' || plan.state === 'Approved'))
    setState(plan, 'Superseded', now, why);
}

export interface GateInput {
  stack: Stack;
  status: StackStatus;
  /** What the `up` would run for. */
  id: UpdateIdentity;
  /** Why the Stack is out of sync (the operation's message). */
  message: string;
  now: Date;
}

/** What the gate does instead of starting a plain `up`. */
export type GateAnswer =
  /** Start this Update (a preview saving a plan, or the `up` applying the approved plan). */
  | { start: KObject }
  /** Start nothing; report this. */
  | { mark: Mark; resyncAfterSeconds?: number };

function kubectl(stack: Stack, key: string, id: string): string {
  const ns = stack.metadata.namespace ? ` -n ${stack.metadata.namespace}` : '';
  return `kubectl annotate stack ${stack.metadata.name}${ns} ${key}=${id} --overwrite`;
}

function describeSummary(summary: StackPlanSummary | undefined): string {
  if (!summary) return 'no summary';
  return SUMMARY_KEYS.map((k) => `${summary[k] ?? 0} to ${k === 'same' ? 'leave unchanged' : k}`).join(', ');
}

/** A note on an approval or rejection that names another plan: ignored, and said so. */
function staleNote(stack: Stack, id: string): string {
  const notes: string[] = [];
  for (const key of [ApprovalAnnotations.approve, ApprovalAnnotations.reject]) {
    const value = stack.metadata.annotations?.[key];
    if (value !== undefined && value !== '' && value !== id)
      notes.push(`${key}=${JSON.stringify(value).slice(0, 80)} names another plan and was ignored`);
  }
  return notes.length > 0 ? `; ${notes.join('; ')}` : '';
}

/**
 * The gate, where the Stack would start an `up` (its workspace ready): preview the change when no
 * plan is for it yet, apply the plan once approved, else wait, or stay stopped after a rejection
 * or an expiry until the next change or reconciliation request.
 */
export function approvalGate(input: GateInput): GateAnswer {
  const { stack, status, id, message, now } = input;
  let plan = status.plan;
  if (!plan || !isFor(plan, id) || !OPEN_OR_STOPPED.includes(plan.state ?? '')) {
    supersedePlan(status, now, 'a newer change replaced this plan');
    const preview = buildUpdate(stack, 'preview', message, id);
    (preview.spec as UpdateSpec).savePlan = true;
    const name = preview.metadata.name;
    status.plan = { ...planOf(name, id), message: `previewing: ${message}` };
    status.currentUpdate = { ...currentOf(id), name };
    return { start: preview };
  }
  plan = status.plan!;
  const approved = stack.metadata.annotations?.[ApprovalAnnotations.approve] === plan.id;
  const rejected = stack.metadata.annotations?.[ApprovalAnnotations.reject] === plan.id;
  if (plan.state === 'Previewing') {
    // Recorded (sync.ts makes the Update on the next call), or its Update is gone: the same Update again.
    const preview = buildUpdate(stack, 'preview', message, id);
    (preview.spec as UpdateSpec).savePlan = true;
    status.currentUpdate = { ...currentOf(id), name: preview.metadata.name };
    return { start: preview };
  }
  if (plan.state === 'AwaitingApproval') {
    const expires = observedDeadline(plan.expiresAt);
    if (rejected) {
      setState(
        plan,
        'Rejected',
        now,
        `plan ${plan.id} was rejected (${ApprovalAnnotations.reject}); nothing was applied`,
      );
    } else if (approved) {
      setState(plan, 'Approved', now, `plan ${plan.id} was approved; applying it`);
    } else if (expires !== undefined && now.getTime() >= expires) {
      setState(
        plan,
        'Expired',
        now,
        `plan ${plan.id} expired at ${plan.expiresAt} without an approval; nothing was applied`,
      );
    } else {
      const wait = expires === undefined ? undefined : (expires - now.getTime()) / 1000;
      return {
        mark: {
          kind: 'reconciling',
          reason: PlanReasons.AwaitingApproval,
          message: `plan ${plan.id} awaits approval${staleNote(stack, plan.id ?? '')}`,
        },
        ...(wait !== undefined ? { resyncAfterSeconds: wait } : {}),
      };
    }
  }
  if (plan.state === 'Approved') {
    const up = buildUpdate(stack, 'up', message, id);
    (up.spec as UpdateSpec).plan = plan.id;
    status.currentUpdate = { ...currentOf(id), name: up.metadata.name };
    return { start: up };
  }
  // Rejected or Expired: stopped until something changes.
  const reason = plan.state === 'Rejected' ? PlanReasons.PlanRejected : PlanReasons.PlanExpired;
  return {
    mark: {
      kind: 'stalled',
      reason,
      message:
        `${plan.message ?? `plan ${plan.id} ${(plan.state ?? '').toLowerCase()}`}; a new commit, spec change or ` +
        `\`kubectl annotate stack ${stack.metadata.name} pulumi.com/reconciliation-request="$(date)" --overwrite\` previews again`,
    },
  };
}

/** The states in which a plan for the same change is still the one to act on. */
const OPEN_OR_STOPPED: readonly string[] = ['Previewing', 'AwaitingApproval', 'Approved', 'Rejected', 'Expired'];

function currentOf(id: UpdateIdentity): NonNullable<StackStatus['currentUpdate']> {
  return { generation: id.generation, reconcileRequest: id.reconcileRequest, commit: id.commit };
}

/** The AwaitingApproval condition from `status.plan` (none without a plan). */
export function approvalCondition(
  stack: Stack,
  plan: StackPlan | undefined,
): Omit<Condition, 'lastTransitionTime'> | undefined {
  if (!plan) return undefined;
  const id = plan.id ?? '';
  const of = (reason: string, message: string) => ({
    type: AWAITING_APPROVAL,
    status: 'False' as const,
    reason,
    message,
  });
  switch (plan.state as PlanState) {
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
