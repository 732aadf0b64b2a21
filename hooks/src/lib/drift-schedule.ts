/**
 * The schedule of `spec.driftDetection`, parsed: validation reports what is wrong with it, the
 * drift step counts the next check from it. One parser, so both read the same schedule.
 */
import { CronExpressionParser } from 'cron-parser';
import { parseDuration } from './duration';
import { errorMessage } from './errors';

/** The shortest interval a schedule may give: a check costs a refresh of every resource. */
export const MIN_DRIFT_INTERVAL_MS = 30_000;

export type DriftSchedule = { interval: number } | { cron: string };

/**
 * A schedule: a Go duration of at least MIN_DRIFT_INTERVAL_MS, or a 5-field cron expression (UTC);
 * a string says what is wrong with it.
 */
export function parseDriftSchedule(text: string): DriftSchedule | string {
  const ms = parseDuration(text);
  if (ms !== undefined) {
    return ms >= MIN_DRIFT_INTERVAL_MS
      ? { interval: ms }
      : `"${text}" is shorter than the minimum of ${MIN_DRIFT_INTERVAL_MS / 1000}s between checks`;
  }
  const fields = text.trim().split(/\s+/);
  if (fields.length !== 5)
    return `"${text}" is neither a duration like "30m" nor a cron expression of 5 fields like "0 */6 * * *"`;
  try {
    CronExpressionParser.parse(text, { tz: 'UTC', strict: false });
  } catch (e) {
    return `"${text}" is not a valid cron expression: ${errorMessage(e)}`;
  }
  return { cron: text.trim() };
}
