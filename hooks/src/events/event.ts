/**
 * What the hooks' Events are made of, whichever sync implies them (stack/events.ts,
 * workspace/events.ts, update/events.ts): each a pure function of a sync's request and answer.
 * The hook server writes them (recorder.ts), off the hook's path.
 *
 * Metacontroller calls a sync hook again and again with the same observed state (resyncs, its own
 * writes, a status write that failed). So each event is a transition between the observed state
 * and the answer, and its name is a function of the object it is about, its reason and what
 * tells this occurrence from another: a repeated sync names the same event, whose creation the API
 * server refuses as AlreadyExists.
 */
import { Labels } from '../../../contract';
import { isRecord, shortHash } from '../lib/json';
import { printable } from '../lib/printable';

export interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid?: string;
  resourceVersion?: string;
}

/** One event, before the writer adds when and by whom. */
export interface HookEvent {
  /** `<object>.<hash>`: unique per object and transition, the same for every sync that implies it. */
  name: string;
  namespace: string;
  type: 'Normal' | 'Warning';
  reason: string;
  /** What was done or tried (the event's `action`): the operation, `Sync`, `Initialize`, … */
  action: string;
  message: string;
  /** The object the event is about (its `involvedObject`): always with its uid. */
  regarding: ObjectReference & { uid: string };
  /** Another object it concerns (an Update, say). */
  related?: ObjectReference;
  /** The event's labels: `pulumi.com/stack-name`, when the event belongs to a Stack or a workspace's stack. */
  labels: Record<string, string>;
}

/** The API server limits an event's message to 1 kB (when the event has an eventTime, as ours). */
export const MAX_MESSAGE_BYTES = 1024;

/** An event's name is a DNS subdomain: at most 253 characters, `.` and a 16-digit hash included. */
const MAX_NAME_PREFIX = 253 - 17;

/** The reference to an observed object, if it has what an event needs (a name and a uid from the API server). */
export function referenceTo(
  object: {
    apiVersion?: string;
    kind?: string;
    metadata: { name?: unknown; namespace?: unknown; uid?: unknown; resourceVersion?: unknown };
  },
  apiVersion: string,
  kind: string,
): (ObjectReference & { uid: string }) | undefined {
  const { name, uid, resourceVersion } = object.metadata;
  if (typeof name !== 'string' || name === '' || typeof uid !== 'string' || uid === '') return undefined;
  return {
    apiVersion: object.apiVersion ?? apiVersion,
    kind: object.kind ?? kind,
    name,
    namespace: typeof object.metadata.namespace === 'string' ? object.metadata.namespace : '',
    uid,
    ...(typeof resourceVersion === 'string' ? { resourceVersion } : {}),
  };
}

/** The `pulumi.com/stack-name` label with this value, when it is one a label may have (else none). */
export function stackLabel(stack: string | undefined): Record<string, string> {
  return stack !== undefined && LABEL_VALUE.test(stack) ? { [Labels.stackName]: stack } : {};
}
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/**
 * The maker of the events about one object: each named `<object>.<hash>` of the object's uid, the
 * reason and `about` (what tells this occurrence from another), its message with control
 * characters escaped (lib/printable.ts) and cut to what the API server accepts.
 */
export function eventsAbout(
  regarding: ObjectReference & { uid: string },
  labels: Record<string, string>,
): (about: Record<string, unknown>, e: Omit<HookEvent, 'name' | 'namespace' | 'regarding' | 'labels'>) => HookEvent {
  return (about, e) => ({
    name: `${regarding.name.slice(0, MAX_NAME_PREFIX)}.${shortHash({ uid: regarding.uid, reason: e.reason, ...about }, 16)}`,
    namespace: regarding.namespace,
    regarding,
    labels,
    ...e,
    message: truncateUtf8(printable(e.message), MAX_MESSAGE_BYTES),
  });
}

/** A condition of that type with status True: its reason, message and generation. */
export function trueCondition(
  conditions: unknown,
  type: string,
): { reason: string; message: string; observedGeneration: number | undefined } | undefined {
  if (!Array.isArray(conditions)) return undefined;
  const found: unknown = conditions.find((c) => isRecord(c) && c.type === type && c.status === 'True');
  if (!isRecord(found)) return undefined;
  return {
    reason: typeof found.reason === 'string' ? found.reason : '',
    message: typeof found.message === 'string' ? found.message : '',
    observedGeneration: typeof found.observedGeneration === 'number' ? found.observedGeneration : undefined,
  };
}

/**
 * Whether the answer's Stalled condition is news: newly True, True for another reason, or still
 * True after a spec change (a new generation). The one rule for the stalls of every kind.
 */
function newlyStalled(
  observedConditions: unknown,
  answeredConditions: unknown,
): { reason: string; message: string; observedGeneration: number | undefined } | undefined {
  const stalled = trueCondition(answeredConditions, 'Stalled');
  const was = trueCondition(observedConditions, 'Stalled');
  if (!stalled) return undefined;
  const same = was && was.reason === stalled.reason && was.observedGeneration === stalled.observedGeneration;
  return same ? undefined : stalled;
}

/** The most stalls a status counts (int32's maximum, as the CRDs' schema says); the next is 1 again. */
export const MAX_STALLS = 2 ** 31 - 1;

/**
 * The `status.stalls` of an answer: how many times the object has stalled (newlyStalled), counted
 * on from the observed status (the previous answer, as written); absent while none.
 *
 * It tells one stall from another. Metacontroller may call the hook from a copy of the object
 * older than the status it last wrote (its informer is behind its own status writes, which always
 * write the newest answer). Every copy between two stall answers has the same count, whatever
 * else its conditions say, so every sync that finds the object newly stalled names the same
 * stall; a stall after a recovery counts on from the status that recorded the previous one, so it
 * is a new one. The status is written by Metacontroller alone, but a count that is not one
 * (forged, out of range) counts as 0, and the count wraps: a forged one can at most make a stall
 * take the name of an earlier one, never make more events than there are stalls.
 */
export function stallsOf(observedStatus: unknown, answeredConditions: unknown): number | undefined {
  const observed = isRecord(observedStatus) ? observedStatus : {};
  const counted = observedStalls(observed.stalls);
  if (!newlyStalled(observed.conditions, answeredConditions)) return counted > 0 ? counted : undefined;
  return counted >= MAX_STALLS ? 1 : counted + 1;
}

function observedStalls(value: unknown): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && value <= MAX_STALLS ? value : 0;
}

/**
 * The stall an answer newly reports (newlyStalled), and what its event is named by (`about`): its
 * generation and the answer's `stalls` (stallsOf). Events of the stalls of every kind are named so.
 */
export function newStall(
  observedStatus: unknown,
  answered: { conditions?: unknown; stalls?: number },
): { reason: string; message: string; about: Record<string, unknown> } | undefined {
  const observed = isRecord(observedStatus) ? observedStatus : {};
  const stalled = newlyStalled(observed.conditions, answered.conditions);
  if (!stalled) return undefined;
  return {
    reason: stalled.reason,
    message: stalled.message,
    about: { generation: stalled.observedGeneration, stall: answered.stalls ?? 0 },
  };
}

/**
 * The observed conditions' types, statuses, reasons and transition times: they tell one
 * transition from an earlier one of the same kind, and stay the same for every sync until the
 * answer's status is written (but not for a sync on a copy older than that: stalls are told apart
 * by stallsOf).
 */
export function conditionsFingerprint(conditions: unknown): string {
  if (!Array.isArray(conditions)) return '';
  return shortHash(
    conditions
      .filter(isRecord)
      .map((c) => [c.type, c.status, c.reason, c.lastTransitionTime])
      .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    16,
  );
}

/** At most `max` bytes of UTF-8, cut at a character boundary, with an ellipsis when cut. */
export function truncateUtf8(text: string, max: number): string {
  if (Buffer.byteLength(text, 'utf8') <= max) return text;
  const ellipsis = '…';
  let bytes = max - Buffer.byteLength(ellipsis, 'utf8');
  const buf = Buffer.from(text, 'utf8');
  // Back up over UTF-8 continuation bytes (10xxxxxx) to a character's first byte.
  while (bytes > 0 && (buf[bytes]! & 0xc0) === 0x80) bytes--;
  return buf.subarray(0, bytes).toString('utf8') + ellipsis;
}

const ACTIONS: Record<string, string> = { up: 'Up', preview: 'Preview', refresh: 'Refresh', destroy: 'Destroy' };

/** The event action of an operation type (from a label or a spec anyone may edit: own keys only). */
export function operationAction(type: unknown): string {
  return typeof type === 'string' && Object.hasOwn(ACTIONS, type) ? ACTIONS[type]! : 'Up';
}

/** Go's %q of a string, as upstream's messages quote names. */
export function quoted(text: string): string {
  return JSON.stringify(text);
}
