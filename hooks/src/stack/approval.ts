/**
 * The manual approval gate of a Stack (`spec.approval`, docs/approval.md). Where the Stack would
 * run an `up`, it first runs a preview Update that saves an update plan in the workspace pod, and
 * records the plan's summary in `status.plan`; it waits (condition AwaitingApproval) until the
 * annotation `pulumi.com/approve` names that plan, then runs an `up` Update that applies exactly
 * it. The plan's id is the preview Update's name, a function of what it previews (generation,
 * reconcile request, commit, lastUpdate), so an approval of an older plan never matches a newer
 * one. Everything the gate decides is a function of the Stack, its status and its Updates.
 *
 * The Stack's sync enters here twice: {@link absorbPlan} when it absorbs what finished, and
 * {@link gateOperation} when it decides what runs next. How `status.plan` is read back and
 * reported is plan.ts.
 */
import type { Stack, StackPlan, UpdateSpec } from '../../../schemas/generated/types';
import { PLAN_NOT_FOUND, rfc3339, type OperationType } from '../../../contract';
import { parseDuration } from '../lib/duration';
import type { KObject } from '../lib/k8s';
import { observedDeadline, observedTime } from '../lib/time';
import { ApprovalAnnotations, PlanReasons, staleNote, summaryOf, type PlanState } from './plan';
import { updateSpecOf } from '../lib/stack-updates';
import { buildUpdate, type StackUpdate, type UpdateIdentity, type UpdateOutcome } from './update';
import type { Mark } from '../lib/conditions';

/** Whether the Stack's changes wait for approval. */
function approvalRequired(stack: Stack): boolean {
  return stack.spec?.approval?.required === true;
}

/** Whether an Update is a preview that saves a plan (the gate's, or a hand-made one). */
function isPlanPreview(spec: Partial<UpdateSpec>): boolean {
  return spec.type === 'preview' && spec.savePlan === true;
}

/** The plan an `up` applies (`spec.plan`), if any. */
function appliedPlan(spec: Partial<UpdateSpec>): string | undefined {
  return spec.type === 'up' && typeof spec.plan === 'string' ? spec.plan : undefined;
}

/** Whether the plan still refers to the Update of that name (awaiting approval of it, or applying it). */
function heldByPlan(plan: StackPlan | undefined, name: string): boolean {
  return plan?.id === name && (plan.state === 'AwaitingApproval' || plan.state === 'Approved');
}

function withState(plan: StackPlan, state: PlanState, now: Date, message?: string): StackPlan {
  return { ...plan, state, decidedAt: rfc3339(now), ...(message !== undefined ? { message } : {}) };
}

/**
 * Whether the plan fields of the Update `status.currentUpdate` names are the ones the gate gave it:
 * a preview saves a plan exactly when `status.plan` is its plan, and an `up` applies exactly the
 * plan that was approved.
 */
function planAsRecorded(plan: StackPlan | undefined, update: KObject): boolean {
  const spec = updateSpecOf(update);
  if (isPlanPreview(spec)) return plan?.id === update.metadata.name;
  const applied = appliedPlan(spec);
  if (applied !== undefined) return plan?.id === applied && plan.state === 'Approved';
  return plan?.id !== update.metadata.name;
}

/** What absorbing the Update `status.currentUpdate` names does to the plan. */
export interface PlanAbsorbed {
  /** The Update's plan fields are not the ones the gate gave it: it is not the operator's. */
  foreign: boolean;
  /** The finished Update the observed plan still refers to: kept whatever its TTL. */
  held: string | undefined;
  /** `status.plan` from now on (none while the gate is off). */
  plan: StackPlan | undefined;
  /** Whether the result goes into `lastUpdate` as any operation's does. */
  recordResult: boolean;
}

/**
 * The absorb phase's entry: what the finished Update `current` (the one `status.currentUpdate`
 * names, if any) does to the plan. A preview that saved the plan becomes the plan awaiting
 * approval (its result is not an operation's); a failed one fails the plan and is absorbed as any
 * failed operation, so the Stack's backoff retries it. Under the gate, a succeeded `up` counts
 * only if it applied the approved plan (one started before the gate was turned on does not);
 * the plan it applied becomes Applied, Lost or Failed.
 */
export function absorbPlan(
  stack: Stack,
  observed: StackPlan | undefined,
  current: { update: KObject; outcome: UpdateOutcome | undefined; legacy?: true } | undefined,
  now: Date,
): PlanAbsorbed {
  const held = observed && heldByPlan(observed, observed.id ?? '') ? observed.id : undefined;
  const gated = (plan: StackPlan | undefined, recordResult: boolean): PlanAbsorbed => ({
    foreign: false,
    held,
    plan: approvalRequired(stack) ? plan : undefined,
    recordResult,
  });
  if (!current) return gated(observed, false);
  const { update, outcome } = current;
  if (!current.legacy && !planAsRecorded(observed, update)) return { ...gated(observed, false), foreign: true };
  if (!outcome) return gated(observed, false);
  const spec = updateSpecOf(update);
  if (isPlanPreview(spec) && observed?.id === update.metadata.name) {
    if (outcome.result.state !== 'succeeded')
      return gated({ ...observed, state: 'Failed', message: outcome.result.message, decidedAt: rfc3339(now) }, true);
    return gated(awaitingApproval(stack, observed, outcome, now), false);
  }
  const { result } = outcome;
  const applied = appliedPlan(spec);
  if (approvalRequired(stack) && result.type === 'up' && result.state === 'succeeded') {
    if (observed?.state !== 'Approved' || applied !== observed.id) return gated(observed, false);
  }
  if (!observed || applied === undefined || applied !== observed.id) return gated(observed, true);
  if (result.state === 'succeeded') return gated(withState(observed, 'Applied', now, result.message), true);
  if (result.reason === PLAN_NOT_FOUND) return gated(withState(observed, 'Lost', now, result.message), true);
  return gated(withState(observed, 'Failed', now, result.message), true);
}

/** The plan a succeeded preview saved, awaiting approval until it expires. */
function awaitingApproval(stack: Stack, recorded: StackPlan, outcome: UpdateOutcome, now: Date): StackPlan {
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
  return plan;
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
function superseded(plan: StackPlan | undefined, now: Date, why: string): StackPlan | undefined {
  if (plan && (plan.state === 'Previewing' || plan.state === 'AwaitingApproval' || plan.state === 'Approved'))
    return withState(plan, 'Superseded', now, why);
  return plan;
}

/** An operation the Stack would start. */
export interface Run {
  type: OperationType;
  id: UpdateIdentity;
  /** Why the Stack is out of sync (the operation's message). */
  message: string;
}

/** The Update to start, and whether the gate made it (a preview saving a plan, or the `up` applying it). */
export interface Started {
  plan: StackPlan | undefined;
  start: StackUpdate;
  gated: boolean;
}

/** Start nothing; report this. */
export interface Held {
  plan: StackPlan | undefined;
  mark: Exclude<Mark, { kind: 'ready' }>;
  resyncAfterSeconds?: number;
}

/**
 * The decide phase's entry. In sync (no `run`), an open plan is superseded. An `up` under the
 * gate previews the change when no plan is for it yet, applies the plan once approved, else waits,
 * or stays stopped after a rejection or an expiry until the next change or reconciliation request.
 * Any other operation, or any operation without the gate, starts as asked.
 */
export function gateOperation(input: { stack: Stack; plan: StackPlan | undefined; now: Date }): {
  plan: StackPlan | undefined;
};
export function gateOperation(input: {
  stack: Stack;
  plan: StackPlan | undefined;
  now: Date;
  run: Run;
}): Started | Held;
export function gateOperation(input: {
  stack: Stack;
  plan: StackPlan | undefined;
  now: Date;
  run?: Run;
}): Started | Held | { plan: StackPlan | undefined } {
  const { stack, now, run } = input;
  if (!run) return { plan: superseded(input.plan, now, 'the stack is in sync without it') };
  if (run.type !== 'up' || !approvalRequired(stack))
    return { plan: input.plan, start: buildUpdate(stack, run.type, run.message, run.id), gated: false };
  return gateUp(stack, input.plan, run, now);
}

function gateUp(stack: Stack, observed: StackPlan | undefined, run: Run, now: Date): Started | Held {
  const { id, message } = run;
  let plan = observed;
  if (!plan || !isFor(plan, id) || !OPEN_OR_STOPPED.includes(plan.state ?? '')) {
    const preview = buildUpdate(stack, 'preview', message, id, { savePlan: true });
    const previewing = { ...planOf(preview.metadata.name, id), message: `previewing: ${message}` };
    return { plan: previewing, start: preview, gated: true };
  }
  const approved = stack.metadata.annotations?.[ApprovalAnnotations.approve] === plan.id;
  const rejected = stack.metadata.annotations?.[ApprovalAnnotations.reject] === plan.id;
  if (plan.state === 'Previewing') {
    // Recorded (the sync makes the Update on the next call), or its Update is gone: the same Update again.
    return { plan, start: buildUpdate(stack, 'preview', message, id, { savePlan: true }), gated: true };
  }
  if (plan.state === 'AwaitingApproval') {
    const expires = observedDeadline(plan.expiresAt);
    if (rejected) {
      plan = withState(
        plan,
        'Rejected',
        now,
        `plan ${plan.id} was rejected (${ApprovalAnnotations.reject}); nothing was applied`,
      );
    } else if (approved) {
      plan = withState(plan, 'Approved', now, `plan ${plan.id} was approved; applying it`);
    } else if (expires !== undefined && now.getTime() >= expires) {
      plan = withState(
        plan,
        'Expired',
        now,
        `plan ${plan.id} expired at ${plan.expiresAt} without an approval; nothing was applied`,
      );
    } else {
      const wait = expires === undefined ? undefined : (expires - now.getTime()) / 1000;
      return {
        plan,
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
    return { plan, start: buildUpdate(stack, 'up', message, id, { plan: plan.id }), gated: true };
  }
  // Rejected or Expired: stopped until something changes.
  const reason = plan.state === 'Rejected' ? PlanReasons.PlanRejected : PlanReasons.PlanExpired;
  return {
    plan,
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
