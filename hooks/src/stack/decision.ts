import type { Stack, StackUpdateState } from '../../../schemas/generated/types';
import { formatDuration } from '../lib/duration';
import { observedTime } from '../lib/time';

/** Upstream's constants (maxUpdateFailures, cooldown and resyncFreq: https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L1084, #L1357, #L1384). */
export const MAX_UPDATE_FAILURES = 3;
const BACKOFF_BASE_MS = 10_000;
const BACKOFF_FACTOR = 3;
const DEFAULT_BACKOFF_CAP_MS = 24 * 3600 * 1000;
const MIN_RESYNC_MS = 60_000;
const MIN_REQUEUE_MS = 1000;

/** max(60 s, resyncFrequencySeconds). */
export function resyncFrequencyMs(stack: Stack): number {
  return Math.max(MIN_RESYNC_MS, (stack.spec.resyncFrequencySeconds ?? 0) * 1000);
}

/** min(10 s · 3^failures, cap); the first step is 10 s even when the cap is lower (upstream's edge). */
export function cooldownMs(stack: Stack, failures: number): number {
  const maxBackoffSeconds = stack.spec.retryMaxBackoffDurationSeconds ?? 0;
  const cap = maxBackoffSeconds > 0 ? maxBackoffSeconds * 1000 : DEFAULT_BACKOFF_CAP_MS;
  const step = BACKOFF_BASE_MS * Math.pow(BACKOFF_FACTOR, Math.max(0, failures));
  return failures <= 0 ? BACKOFF_BASE_MS : Math.min(step, cap);
}

export interface DecisionInput {
  stack: Stack;
  lastUpdate: StackUpdateState | undefined;
  /** The commit the source is at now ("" when the source has no commit). */
  commit: string;
  deleting: boolean;
  now: Date;
  /** `after-<lastUpdate.name>` requests from dependents whose succeededWithinDuration this Stack no longer meets. */
  refreshRequestedBy: string[];
}

export type Decision = { synced: true; requeueAfterMs?: number } | { synced: false; message: string };

/** How long ago an observed time was; an unknown one (lib/time.ts) is long ago. */
function since(now: Date, time: string | undefined): number {
  const t = observedTime(time, now);
  return t === undefined ? Number.POSITIVE_INFINITY : now.getTime() - t;
}

/**
 * Whether the Stack is in sync and, if not, the reason that becomes the operation's message
 * (upstream's isSynced: https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L1223).
 */
export function decideSync(input: DecisionInput): Decision {
  const { stack, lastUpdate: last, commit, deleting, now } = input;
  const generation = stack.metadata.generation;
  const request = stack.metadata.annotations?.['pulumi.com/reconciliation-request'];

  if (!last) return { synced: false, message: 'Initial stack update' };
  if (last.generation !== generation) {
    return { synced: false, message: deleting ? 'Stack marked for deletion' : `New stack generation: ${generation}` };
  }
  if ((last.reconcileRequest ?? '') !== (request ?? ''))
    return { synced: false, message: `Sync request: "${request ?? ''}"` };

  if (last.state === 'succeeded') {
    if (deleting)
      return last.type === 'destroy' ? { synced: true } : { synced: false, message: 'Stack marked for deletion' };
    if ((last.lastSuccessfulCommit ?? '') !== commit)
      return { synced: false, message: `New commit detected: "${commit}"` };
    const freq = resyncFrequencyMs(stack);
    if (stack.spec.continueResyncOnCommitMatch && since(now, last.lastResyncTime) >= freq) {
      return { synced: false, message: `Resync time elapsed: ${formatDuration(freq)}` };
    }
    if (input.refreshRequestedBy.length > 0) {
      return {
        synced: false,
        message: `Sync request: "after-${last.name}" from ${input.refreshRequestedBy.map((n) => `"${n}"`).join(', ')}`,
      };
    }
    return { synced: true, requeueAfterMs: requeueAfter(input) };
  }

  // Last operation failed.
  if ((last.lastAttemptedCommit ?? '') !== commit)
    return { synced: false, message: `New commit detected: "${commit}"` };
  const failures = last.failures ?? 0;
  if (failures >= MAX_UPDATE_FAILURES) return { synced: true, requeueAfterMs: requeueAfter(input) };
  const cooldown = cooldownMs(stack, failures);
  if (since(now, last.lastResyncTime) >= cooldown)
    return { synced: false, message: `Backoff time elapsed: ${formatDuration(cooldown)}` };
  return { synced: true, requeueAfterMs: requeueAfter(input) };
}

/**
 * When to look again while in sync (as upstream, https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L827):
 * the end of a failure's cooldown, the next resync with continueResyncOnCommitMatch, and the
 * branch polling period; the smallest wins.
 */
function requeueAfter(input: DecisionInput): number | undefined {
  const { stack, lastUpdate: last, now } = input;
  const terms: number[] = [];
  const elapsed = since(now, last?.lastResyncTime);
  if (last?.state === 'failed' && (last.failures ?? 0) < MAX_UPDATE_FAILURES && !input.deleting) {
    terms.push(cooldownMs(stack, last.failures ?? 0) - elapsed);
  }
  if (last?.state === 'succeeded' && stack.spec.continueResyncOnCommitMatch)
    terms.push(resyncFrequencyMs(stack) - elapsed);
  if (stack.spec.branch) terms.push(resyncFrequencyMs(stack));
  if (terms.length === 0) return undefined;
  return Math.max(MIN_REQUEUE_MS, Math.min(...terms.map((t) => (Number.isFinite(t) ? t : MIN_REQUEUE_MS))));
}
