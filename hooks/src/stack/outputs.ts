/**
 * status.outputs from a successful `up`, and the condition that says when it holds only some of them.
 * The outputs keep upstream's shape (a map of output name to value, secrets masked) so that what
 * users read from it (`-o jsonpath='{.status.outputs.url}'`, GitOps tools) means the same; outputs
 * that did not fit in the Job's result are absent, never replaced by a placeholder, and the
 * condition names the Secret that has them all.
 */
import type { StackCondition, StackStatus } from '../../../schemas/generated/types';
import { MAX_OUTPUTS_ANNOTATION_BYTES, type UpdateResult } from '../../../contract';
import { isRecord } from '../lib/json';

/** Condition type, True while status.outputs holds only some of the stack's outputs. */
export const OUTPUTS_TRUNCATED = 'OutputsTruncated';
/** Its reason. */
export const OUTPUTS_TOO_LARGE = 'OutputsTooLarge';

/** The upstream name of a Job's outputs Secret, for results that do not name it. */
function outputsSecretOf(job: string, result: UpdateResult): string {
  return result.outputsSecret ?? `${job}-stack-outputs`;
}

function truncatedMessage(job: string, result: UpdateResult, kept: number): string {
  const total = result.outputsTotal;
  const held = total === undefined ? `${kept} of the stack's outputs` : `${kept} of the stack's ${total} outputs`;
  return (
    `status.outputs holds ${held}: together they exceed the ${MAX_OUTPUTS_ANNOTATION_BYTES / 1024} KiB ` +
    `an operation's result may carry, so the outputs that did not fit (taken in name order) are left out. ` +
    `All of them are in Secret ${outputsSecretOf(job, result)}, which is deleted with Job ${job} ` +
    `(spec.updateTemplate.spec.ttlAfterCompleted, 24h by default).`
  );
}

/**
 * Records the outputs of a successful `up` (`result`, from Job `job` run for `generation`, ended at
 * `time`): status.outputs becomes what the result carries, sorted by name, and the OutputsTruncated
 * condition is set when some were left out, removed otherwise. A result with no outputs at all
 * leaves both as they were.
 */
export function recordOutputs(
  status: StackStatus,
  result: UpdateResult,
  job: string,
  generation: number,
  time: string,
): StackStatus {
  if (result.outputs === undefined && result.outputsOmitted !== true) return status;
  const outputs = result.outputs ?? {};
  const names = Object.keys(outputs).sort();
  status = { ...status, outputs: Object.fromEntries(names.map((k) => [k, outputs[k]])) };
  // The observed status is not validated: skip anything that is not an object.
  const conditions = (status.conditions ?? []).filter((c) => isRecord(c));
  const others = conditions.filter((c) => c.type !== OUTPUTS_TRUNCATED);
  if (result.outputsOmitted !== true) {
    return conditions.some((c) => c.type === OUTPUTS_TRUNCATED) ? { ...status, conditions: others } : status;
  }
  const previous = conditions.find((c) => c.type === OUTPUTS_TRUNCATED && c.status === 'True');
  const condition: StackCondition = {
    type: OUTPUTS_TRUNCATED,
    status: 'True',
    reason: OUTPUTS_TOO_LARGE,
    message: truncatedMessage(job, result, names.length),
    // A condition that stays True keeps its transition time (as applyMark does for the others).
    lastTransitionTime: previous?.lastTransitionTime ?? time,
    observedGeneration: generation,
  };
  return { ...status, conditions: [...others, condition] };
}
