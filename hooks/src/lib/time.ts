/**
 * Times the hooks read from observed objects (an operation's end, a condition's transition, a
 * status the hooks wrote before) come from other clocks and from anyone allowed to write those
 * objects, who may put a time in year 9999 there. One rule for all of them: a time is known when
 * it is RFC 3339 with a four-digit year, not before 1970, and not more than a day after the hooks'
 * clock (it has happened, give or take clock skew); any other is unknown, as if absent. So no
 * observed time can push a schedule (drift checks, retention, backoff) beyond what the clock allows,
 * or into dates no API server would store.
 */

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/;

/** How far ahead of the hooks' clock an observed time may be (other nodes' clocks). */
export const MAX_CLOCK_SKEW_MS = 24 * 3600_000;

/** The longest wait any answer asks for (`resyncAfterSeconds`): the hooks look again at least daily. */
export const MAX_RESYNC_SECONDS = 24 * 3600;

function parsed(text: unknown): number | undefined {
  if (typeof text !== 'string' || !RFC3339.test(text)) return undefined;
  const ms = Date.parse(text);
  return Number.isNaN(ms) || ms < 0 ? undefined : ms;
}

/** An observed time that has happened, in ms since the epoch; undefined when unknown (above). */
export function observedTime(text: unknown, now: Date): number | undefined {
  const ms = parsed(text);
  return ms !== undefined && ms <= now.getTime() + MAX_CLOCK_SKEW_MS ? ms : undefined;
}

/** The observed time as written, when it is known; for answers that carry it (an Update's endTime). */
export function knownTime(text: unknown, now: Date): string | undefined {
  return observedTime(text, now) === undefined ? undefined : (text as string);
}

/**
 * An observed deadline (a moment to wait for, such as a plan's expiry): any RFC 3339 time from
 * 1970 on. However far ahead, the wait is asked for a day at a time ({@link resyncAfter}).
 */
export function observedDeadline(text: unknown): number | undefined {
  return parsed(text);
}

/** The `resyncAfterSeconds` of an answer: whole seconds, at least 1, at most MAX_RESYNC_SECONDS. */
export function resyncAfter(seconds: number | undefined): number | undefined {
  if (seconds === undefined || Number.isNaN(seconds)) return undefined;
  return Math.min(MAX_RESYNC_SECONDS, Math.max(1, Math.ceil(seconds)));
}
