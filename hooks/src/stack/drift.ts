/**
 * Drift detection (ours, opt-in with `spec.driftDetection`): on a schedule, a Stack that is Ready
 * runs a drift check, an Update of type `refresh` with `previewOnly` (`pulumi refresh
 * --preview-only`: the state is not changed), and records what it found in `status.lastDriftCheck`
 * and the condition `Drifted`; with `remediate`, drift found is followed by an `up` with refresh.
 *
 * Stateless, as the rest of the sync: when the next check is due follows from the schedule, the
 * last check's time and the last update's end, all in the status; a check's Update is named after
 * the time it was due, so every sync that starts it names the same one.
 */
import { CronExpressionParser } from 'cron-parser';
import type { DriftCheckState, Stack, StackCondition, StackStatus } from '../../../schemas/generated/types';
import { MAX_CHANGED_URNS, rfc3339 } from '../../../contract';
import { parseDriftSchedule } from '../lib/drift-schedule';
import { isRecord, shortHash } from '../lib/json';
import type { KObject } from '../lib/k8s';
import { observedTime } from '../lib/time';
import type { Decision } from './decision';
import { buildUpdate, UpdateAnnotations, type UpdateOutcome } from './update';

/** On a drift check's Update: the time the check was due (what it runs for). */
export const DRIFT_CHECK_ANNOTATION = 'pulumi.com/drift-check';

/** The condition type, and its reasons. */
export const DRIFTED = 'Drifted';
export const DriftReasons = {
  detected: 'DriftDetected',
  none: 'NoDrift',
  failed: 'CheckFailed',
} as const;

/** How many URNs the condition's message names (the status keeps up to MAX_CHANGED_URNS). */
const URNS_IN_MESSAGE = 5;

/**
 * Whether an Update is one of the Stack's drift checks: it has the check's key and no identity (an
 * `updateTemplate.metadata.annotations` with the key cannot turn the Stack's operations into checks).
 */
export function isDriftCheck(update: KObject): boolean {
  const annotations = update.metadata.annotations;
  return (
    typeof annotations?.[DRIFT_CHECK_ANNOTATION] === 'string' && annotations[UpdateAnnotations.generation] === undefined
  );
}

/** The Stack's Updates split into its operations (`updates`) and its drift checks: the observe phase's one call. */
export function splitDriftChecks<U extends { update: KObject }>(all: readonly U[]): { updates: U[]; driftChecks: U[] } {
  return {
    updates: all.filter((o) => !isDriftCheck(o.update)),
    driftChecks: all.filter((o) => isDriftCheck(o.update)),
  };
}

/** An observed time (lib/time.ts); an unknown one is earlier than any. */
const time = (t: string | undefined, now: Date): number => observedTime(t, now) ?? -Infinity;

/**
 * Whether drift checks may run for the Stack now: enabled and the last operation an `up` that
 * succeeded (a stack that failed or was never deployed has nothing to compare with).
 */
export function driftChecksApply(stack: Stack, status: StackStatus): boolean {
  const last = status.lastUpdate;
  return stack.spec.driftDetection !== undefined && last?.state === 'succeeded' && last.type === 'up';
}

/**
 * When the next check is due, counted from the later of the last check and the last update (an
 * `up` has just compared program and resources). Right away after an update that followed a check
 * that found drift: to confirm that it is gone. Undefined when the schedule is invalid.
 */
export function nextDriftCheck(stack: Stack, status: StackStatus, now: Date): Date | undefined {
  const schedule = parseDriftSchedule(stack.spec?.driftDetection?.schedule ?? '');
  if (typeof schedule === 'string') return undefined;
  const check = status.lastDriftCheck;
  const updated = time(status.lastUpdate?.lastResyncTime, now);
  const checked = time(check?.time, now);
  if (check?.drifted === true && updated > checked) return new Date(updated);
  const base = Math.max(updated, checked, 0);
  if ('interval' in schedule) return new Date(base + schedule.interval);
  return CronExpressionParser.parse(schedule.cron, { tz: 'UTC', currentDate: new Date(base) })
    .next()
    .toDate();
}

/** The Update that runs the check due at `due`: a refresh preview, with the Stack's updateTemplate. */
export function buildDriftCheck(stack: Stack, due: Date): KObject {
  const dueAt = rfc3339(due);
  const id = { generation: stack.metadata.generation ?? 0, reconcileRequest: '', commit: '', previous: '' };
  const update = buildUpdate(stack, 'refresh', 'Drift check', id);
  update.metadata.name = driftCheckName(stack, due);
  // Not an operation the Stack's history follows (lastUpdate): no identity, the check's own key.
  const annotations = { ...update.metadata.annotations };
  for (const key of Object.values(UpdateAnnotations)) delete annotations[key];
  annotations[DRIFT_CHECK_ANNOTATION] = dueAt;
  update.metadata.annotations = annotations;
  const spec = update.spec as Record<string, unknown>;
  spec.previewOnly = true;
  spec.message = 'Drift check';
  // A check that fails on changes would report drift as a failure.
  delete spec.expectNoChanges;
  return update;
}

/** Whether the Stack should run `up` now to undo drift that its last check found. */
export function remediationDue(stack: Stack, status: StackStatus, now: Date): boolean {
  const check = status.lastDriftCheck;
  return (
    stack.spec.driftDetection?.remediate === true &&
    check?.state === 'succeeded' &&
    check.drifted === true &&
    time(status.lastUpdate?.lastResyncTime, now) < time(check.time, now)
  );
}

/** The `up` message of a remediation (upstream's isSynced reasons are such sentences). */
export function remediationMessage(status: StackStatus): string {
  const n = status.lastDriftCheck?.changedResources ?? 0;
  return `Drift detected: ${n} resource${n === 1 ? '' : 's'} changed outside Pulumi`;
}

/** The name of the check due at `due` (buildDriftCheck): a function of the Stack and that time. */
function driftCheckName(stack: Stack, due: Date): string {
  return `${stack.metadata.name}-refresh-${shortHash({ uid: stack.metadata.uid ?? '', drift: rfc3339(due) }, 8)}`;
}

/**
 * A finished check whose result the status has not recorded yet: only the check the hooks started,
 * named after the time the status and the schedule say it was due (nothing it found was recorded
 * since, so that time has not moved). Any other check's result is not taken.
 */
function checkToRecord<C extends { update: KObject; outcome: UpdateOutcome | undefined }>(
  checks: readonly C[],
  stack: Stack,
  status: StackStatus,
  now: Date,
): C | undefined {
  const due = nextDriftCheck(stack, status, now);
  if (due === undefined) return undefined;
  const name = driftCheckName(stack, due);
  if (name === status.lastDriftCheck?.name) return undefined;
  return checks.find((c) => c.outcome !== undefined && c.update.metadata.name === name);
}

function listUrns(urns: readonly string[], total: number): string {
  const named = urns.slice(0, URNS_IN_MESSAGE);
  const more = total - named.length;
  return named.join(', ') + (more > 0 ? ` and ${more} more` : '');
}

/** The Drifted condition a recorded check implies (its status, reason and message). */
function driftCondition(check: DriftCheckState): Pick<StackCondition, 'status' | 'reason' | 'message'> {
  if (check.state !== 'succeeded')
    return { status: 'Unknown', reason: DriftReasons.failed, message: `drift check failed: ${check.message ?? ''}` };
  const n = check.changedResources ?? 0;
  if (n === 0)
    return { status: 'False', reason: DriftReasons.none, message: 'no resource differs from the stack state' };
  return {
    status: 'True',
    reason: DriftReasons.detected,
    message: `${n} resource${n === 1 ? '' : 's'} changed outside Pulumi: ${listUrns(check.urns ?? [], n)}`,
  };
}

/** The status with a finished check recorded in `status.lastDriftCheck` and the Drifted condition. */
function recordDriftCheck(status: StackStatus, name: string, outcome: UpdateOutcome, generation: number): StackStatus {
  const { result } = outcome;
  const check: DriftCheckState = {
    // The outcome's end is a known time (update.ts), or there is none.
    time: outcome.endTime ?? '',
    name,
    state: result.state,
    message: result.message,
  };
  if (result.state === 'succeeded') {
    check.drifted = (result.changedResources ?? 0) > 0;
    check.changedResources = result.changedResources ?? 0;
    if (result.changedUrns?.length) check.urns = result.changedUrns.slice(0, MAX_CHANGED_URNS);
  }
  const conditions = (status.conditions ?? []).filter((c) => isRecord(c));
  const previous = conditions.find((c) => c.type === DRIFTED);
  const next = driftCondition(check);
  const condition: StackCondition = {
    type: DRIFTED,
    ...next,
    // A condition whose status stays keeps its transition time (as applyMark does for the others).
    lastTransitionTime:
      previous?.status === next.status ? previous.lastTransitionTime : check.time || rfc3339(new Date(0)),
    observedGeneration: generation,
  };
  return {
    ...status,
    lastDriftCheck: check,
    conditions: [...conditions.filter((c) => c.type !== DRIFTED), condition],
  };
}

/**
 * The absorb phase's entry: the check whose result the status is yet to record (checkToRecord,
 * against the observed status), and a status that records it once it finished.
 */
export function absorbDriftCheck<C extends { update: KObject; outcome: UpdateOutcome | undefined }>(
  checks: readonly C[],
  stack: Stack,
  observed: StackStatus,
  generation: number,
  now: Date,
): { unrecorded: C | undefined; record: (status: StackStatus) => StackStatus } {
  const unrecorded = checkToRecord(checks, stack, observed, now);
  const outcome = unrecorded?.outcome;
  return {
    unrecorded,
    record: (status) =>
      unrecorded && outcome ? recordDriftCheck(status, unrecorded.update.metadata.name, outcome, generation) : status,
  };
}

/** The event a newly recorded check implies. */
export function driftCheckEvent(check: DriftCheckState): {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
} {
  const { reason, message } = driftCondition(check);
  return { type: reason === DriftReasons.none ? 'Normal' : 'Warning', reason, message };
}

/**
 * The sync's entry (decide.ts): what drift detection adds to a Stack's sync once it knows whether the Stack is in sync
 * (`decision`): wait for a check that runs, undo drift a check found, or start the check that is
 * due. A check never overlaps an operation (it starts only when nothing runs, and an update that is
 * due waits for a running check to end), and never delays one: while an update is due, no check
 * starts.
 */
export interface DriftStepInput {
  stack: Stack;
  /** The status so far (a finished check already recorded). */
  status: StackStatus;
  decision: Decision;
  deleting: boolean;
  now: Date;
  /** The Stack's drift check Updates as observed. */
  checks: readonly { update: KObject; outcome: UpdateOutcome | undefined }[];
  /** Whether the Workspace runs the desired template and is ready for an operation. */
  ready: boolean;
}

export interface DriftStep {
  /** A check runs and an update is due: the Reconciling message while the update waits for it. */
  wait?: string;
  /** A check runs; the Stack is in sync. */
  running?: true;
  /** The check to start now. */
  check?: KObject;
  /** Run `up` (with refresh) to undo the drift the last check found: its message. */
  remediate?: string;
  /** A check is due but the workspace is not ready (reclaimed, or rolling): keep it, wait for it. */
  needsWorkspace?: true;
  /** Milliseconds until the next check is due. */
  dueInMs?: number;
}

export function driftStep(input: DriftStepInput): DriftStep {
  const { stack, status, decision, now } = input;
  const running = input.checks.find((c) => c.outcome === undefined);
  if (running) {
    if (!decision.synced) return { wait: `waiting for drift check ${running.update.metadata.name} to finish` };
    return { running: true };
  }
  if (input.deleting || !driftChecksApply(stack, status)) return {};
  // An update that is due for any other reason runs first; the check waits until it is done.
  if (!decision.synced) return {};
  if (remediationDue(stack, status, now)) return { remediate: remediationMessage(status) };
  const due = nextDriftCheck(stack, status, now);
  if (due === undefined) return {};
  const inMs = due.getTime() - now.getTime();
  if (inMs > 0) return { dueInMs: inMs };
  if (!input.ready) return { needsWorkspace: true };
  return { check: buildDriftCheck(stack, due) };
}
