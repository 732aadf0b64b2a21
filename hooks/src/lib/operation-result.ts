/**
 * An operation's result as the controllers read it: the Job's `pulumi.com/update-result`
 * annotation (the Update controller's), and a Job's outcome (an Update's Job, or an earlier
 * version's Job the Stack ran itself).
 */
import type { V1Job } from '@kubernetes/client-node';
import { Labels, parseUpdateResult, type OperationType, type UpdateResult } from '../../../contract';
import {
  dottedPath,
  MAX_NESTING,
  pathNestedDeeperThan,
  PROTOTYPE_KEY_PROBLEM,
  prototypeKeyPath,
  tooDeepMessage,
} from './json';
import { conditionOf, type KObject, type Typed } from './k8s';
import { knownTime } from './time';

/**
 * A Job's `pulumi.com/update-result` annotation, parsed (undefined when absent or not a result),
 * with outputs the status can hold. Outputs nested deeper than MAX_NESTING, or holding a key the
 * hook server refuses in requests (`__proto__`), would break every later sync of the Stack once
 * written to status.outputs (a stack overflow serialising them, a 400 for the next request). So
 * such a result is recorded as a failed operation whose message names the output: the update is
 * retried, and stalls (UpdateFailed) with that message if it keeps producing it.
 */
export function readUpdateResult(text: string | undefined): UpdateResult | undefined {
  const result = parseUpdateResult(text);
  return result === undefined ? undefined : checkUpdateResult(result);
}

/** A result whose outputs the status can hold, or a failed one naming the output that it cannot. */
export function checkUpdateResult(result: UpdateResult): UpdateResult {
  if (result.outputs === undefined) return result;
  const tooDeep = pathNestedDeeperThan(result.outputs, MAX_NESTING, 'outputs');
  const problem =
    tooDeep !== undefined
      ? tooDeepMessage(tooDeep, 'Stack output')
      : prototypeKeyMessage(prototypeKeyPath(result.outputs));
  if (problem === undefined) return result;
  const failed: UpdateResult = {
    state: 'failed',
    type: result.type,
    reason: 'InvalidResult',
    message: `the ${result.type} finished (${result.state}), but its outputs cannot be recorded in the Stack's status: ${problem}`,
  };
  for (const key of ['permalink', 'startTime', 'endTime'] as const) {
    const value = result[key];
    if (value !== undefined) failed[key] = value;
  }
  return failed;
}

function prototypeKeyMessage(path: (string | number)[] | undefined): string | undefined {
  return path === undefined ? undefined : `${dottedPath('outputs', path)}: ${PROTOTYPE_KEY_PROBLEM}; rename it`;
}

/** The operation types an Update may name (upstream's UpdateType). */
export function operationType(value: unknown): OperationType | undefined {
  return value === 'up' || value === 'preview' || value === 'refresh' || value === 'destroy' ? value : undefined;
}

function jobType(job: KObject): OperationType | undefined {
  return operationType(job.metadata.labels?.[Labels.updateType]);
}

/** The result with only the start and end times that are known (lib/time.ts): the same object when both are. */
function withKnownTimes(result: UpdateResult, now: Date): UpdateResult {
  const start = knownTime(result.startTime, now);
  const end = knownTime(result.endTime, now);
  if (start === result.startTime && end === result.endTime) return result;
  const known: UpdateResult = { ...result };
  delete known.startTime;
  delete known.endTime;
  if (start !== undefined) known.startTime = start;
  if (end !== undefined) known.endTime = end;
  return known;
}

export interface JobOutcome {
  result: UpdateResult;
  /** When the operation ended: the result's end time, else the Job's; lastResyncTime. */
  endTime: string | undefined;
}

/**
 * A finished Job's result, or undefined while it runs. `result` is the Job's
 * `pulumi.com/update-result` annotation, parsed; a pod that died without reporting is a failure.
 */
export function jobOutcome(job: Typed<V1Job>, result: UpdateResult | undefined, now: Date): JobOutcome | undefined {
  const type = jobType(job) ?? 'up';
  const failed = conditionOf(job, 'Failed');
  const complete = conditionOf(job, 'Complete');
  const jobEnd =
    knownTime(job.status?.completionTime, now) ??
    knownTime(failed?.lastTransitionTime, now) ??
    knownTime(complete?.lastTransitionTime, now);
  if (result) {
    const known = withKnownTimes(result, now);
    return { result: known, endTime: known.endTime ?? jobEnd };
  }
  if (failed?.status === 'True') {
    const why = [failed.reason, failed.message].filter(Boolean).join(': ');
    return {
      result: {
        state: 'failed',
        type,
        reason: 'JobFailed',
        message: `the ${type} Job failed before reporting a result${why ? ` (${why})` : ''}`,
      },
      endTime: jobEnd,
    };
  }
  if (complete?.status === 'True') {
    return {
      result: {
        state: 'failed',
        type,
        reason: 'NoResult',
        message: `the ${type} Job completed without reporting a result`,
      },
      endTime: jobEnd,
    };
  }
  return undefined;
}
