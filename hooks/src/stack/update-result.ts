import { parseUpdateResult, type UpdateResult } from '../../../contract';
import { dottedPath, MAX_NESTING, pathNestedDeeperThan, PROTOTYPE_KEY_PROBLEM, prototypeKeyPath } from '../lib/json';
import { tooDeepMessage } from './validate';

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
