/**
 * What a Stack with `spec.selfHealing` says about an operation that was interrupted
 * (docs/self-healing.md): the workspace pod went away under it (the runner lost its connection:
 * `WorkspaceUnavailable`), its Job was deleted or signalled (`Aborted`), or the Job's pod died
 * before it could report (`JobFailed`). Such an operation is absorbed as a failed attempt and
 * retried with upstream's backoff (decision.ts), like any failure; here only the words change, so
 * that the Reconciling condition and the retry's event say what happened. The healing itself (a
 * stale lock, pending operations) is the workspace's, asked for by the Update's `selfHealing`.
 */
import type { Stack, StackUpdateState } from '../../../schemas/generated/types';
import { formatDuration } from '../lib/duration';
import { Reasons } from './conditions';
import { cooldownMs, MAX_UPDATE_FAILURES } from './decision';
import type { Mark } from '../lib/conditions';

/** The Update failure reasons that mean the operation was cut off rather than failed by Pulumi. */
const INTERRUPTED_REASONS = new Set(['Aborted', 'WorkspaceUnavailable', 'JobFailed']);

/** Whether the last operation of a self-healing Stack was interrupted (`reason`: its Update's Failed reason). */
function interrupted(stack: Stack, last: StackUpdateState | undefined, reason: string | undefined): boolean {
  return (
    stack.spec?.selfHealing === true &&
    last?.state === 'failed' &&
    reason !== undefined &&
    INTERRUPTED_REASONS.has(reason)
  );
}

/** The Reconciling mark while an interrupted operation waits for its retry; undefined: the usual mark. */
export function interruptedMark(
  stack: Stack,
  last: StackUpdateState | undefined,
  reason: string | undefined,
): Mark | undefined {
  if (!last || !interrupted(stack, last, reason)) return undefined;
  const failures = last.failures ?? 0;
  if (failures >= MAX_UPDATE_FAILURES) return undefined;
  const wait = formatDuration(cooldownMs(stack, failures));
  return {
    kind: 'reconciling',
    reason: Reasons.RetryingAfterFailure,
    message: `Interrupted: the ${last.type ?? 'operation'} of Update ${last.name ?? ''} did not finish (${reason}); retrying after ${wait} (${failures} earlier failure(s))`,
  };
}

/** The retry's message (its Update's `message`, the StackUpdateDetected event); undefined: the decision's. */
export function interruptedRetryMessage(
  stack: Stack,
  last: StackUpdateState | undefined,
  reason: string | undefined,
  decided: string,
): string | undefined {
  if (!last || !interrupted(stack, last, reason)) return undefined;
  return `Interrupted ${last.type ?? 'operation'} ${last.name ?? ''} (${reason}): retrying; ${decided}`;
}
