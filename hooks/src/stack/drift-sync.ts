/**
 * What drift detection adds to a Stack's sync once it knows whether the Stack is in sync
 * (`decision`): wait for a check that runs, undo drift a check found, or start the check that is
 * due. A check never overlaps an operation (it starts only when nothing runs, and an update that is
 * due waits for a running check to end), and never delays one: while an update is due, no check
 * starts.
 */
import type { Stack, StackStatus } from '../../../schemas/generated/types';
import type { KObject } from '../lib/k8s';
import type { Decision } from './decision';
import { buildDriftCheck, driftChecksApply, nextDriftCheck, remediationDue, remediationMessage } from './drift';
import type { UpdateOutcome } from './update';

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
