/**
 * Writes the events the syncs imply (events/event.ts) to the API server, off the hook's
 * path: record() only queues, and a bounded number of writes run in the background. Nothing here
 * can delay or fail a hook answer: a full queue drops events, a failed write is logged.
 *
 * An event is written only about an object (a Stack, Workspace or Update) the hooks' own watch
 * holds (objects/gauges.ts), with the same kind, namespace, name and uid: a request that names any
 * other (forged by whoever reached the hook port) writes nothing. An object not there yet (just
 * created, the watch a moment behind Metacontroller's) is waited for, a bounded time, off the
 * write slots.
 *
 * Each event has a name that every sync implying it computes again, so the API server answers a
 * repeated one with 409 AlreadyExists: that is the deduplication, and it is not logged as a failure.
 */
import { hostname } from 'node:os';
import type { ObjectMirror } from '../objects/gauges';
import { abortableSleep } from '../lib/sleep';
import { isRecord } from '../lib/json';
import type { HookEvent } from './event';

/** Who reports the events (`source.component` and `reportingComponent`, kubectl describe's "From"). */
export const REPORTING_CONTROLLER = 'pulumi-mc-operator/hooks';

/**
 * A core/v1 Event as sent (JSON). Core v1, not events.k8s.io/v1: `kubectl describe` sorts events
 * by `lastTimestamp`, which events.k8s.io/v1 refuses to set on create (docs/design.md, "Events").
 */
export interface EventBody {
  apiVersion: 'v1';
  kind: 'Event';
  metadata: { name: string; namespace: string; labels: Record<string, string> };
  involvedObject: HookEvent['regarding'];
  related?: HookEvent['related'];
  type: string;
  reason: string;
  action: string;
  message: string;
  /** When: the second-precision times kubectl sorts by, and the microsecond eventTime. */
  firstTimestamp: string;
  lastTimestamp: string;
  eventTime: string;
  /** Each event is written once: never counted up (docs/design.md). */
  count: 1;
  source: { component: string };
  reportingComponent: string;
  reportingInstance: string;
}

/** Creates one Event; a refusal rejects with an error carrying the HTTP status as `code`. */
export interface EventsApi {
  create(event: EventBody): Promise<void>;
}

interface Log {
  warn(obj: object, msg: string): void;
  debug(obj: object, msg: string): void;
}

export interface RecorderOptions {
  log: Log;
  /** The event's `reportingInstance`: the pod's name (its hostname). */
  reportingInstance?: string;
  /** Events waiting to be written, or for their object to show in the mirror, at most; more are dropped. */
  capacity?: number;
  /** The objects the hooks watch; without it (no list and watch of them), every event is written. */
  mirror?: ObjectMirror;
  /** How long an event waits for its object to show in the mirror (default 30 s); then it is dropped. */
  mirrorWaitMs?: number;
  /** Writes in flight at most. */
  concurrency?: number;
  /** Tries per event on a transient failure (network, 429, 5xx). */
  attempts?: number;
  retryDelayMs?: number;
  /** Failures are logged at most once per this period (with how many were not). */
  warnEveryMs?: number;
  clock?: () => Date;
}

/** eventTime is a MicroTime: the API server wants exactly six fractional digits. */
export function microTime(microseconds: number): string {
  const ms = Math.floor(microseconds / 1000);
  const extra = String(microseconds - ms * 1000).padStart(3, '0');
  return new Date(ms).toISOString().replace(/Z$/, `${extra}Z`);
}

/** A Time: RFC 3339 in seconds. */
function seconds(microseconds: number): string {
  return new Date(Math.floor(microseconds / 1e6) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export function eventBody(e: HookEvent, microseconds: number, reportingInstance: string): EventBody {
  const body: EventBody = {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: e.name, namespace: e.namespace, labels: { ...e.labels } },
    involvedObject: e.regarding,
    type: e.type,
    reason: e.reason,
    action: e.action,
    message: e.message,
    firstTimestamp: seconds(microseconds),
    lastTimestamp: seconds(microseconds),
    eventTime: microTime(microseconds),
    count: 1,
    source: { component: REPORTING_CONTROLLER },
    reportingComponent: REPORTING_CONTROLLER,
    reportingInstance,
  };
  if (e.related) body.related = e.related;
  return body;
}

/** The HTTP status of a failed API call (client-node's ApiException has `code`); undefined: no answer. */
export function httpStatusOf(e: unknown): number | undefined {
  if (typeof e !== 'object' || e === null || !('code' in e)) return undefined;
  return typeof e.code === 'number' ? e.code : undefined;
}

/** A short description of a failure: the HTTP status and the Status message, never the request. */
function describeFailure(e: unknown): string {
  const status = httpStatusOf(e);
  if (status === undefined) return e instanceof Error ? e.message : String(e);
  const body = typeof e === 'object' && e !== null && 'body' in e ? e.body : undefined;
  let message: unknown;
  try {
    const parsed: unknown = typeof body === 'string' ? JSON.parse(body) : undefined;
    message = isRecord(parsed) ? parsed.message : undefined;
  } catch {
    message = undefined;
  }
  return `HTTP ${status}${typeof message === 'string' ? `: ${message.slice(0, 300)}` : ''}`;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class EventRecorder {
  private readonly queue: HookEvent[] = [];
  private inFlight = 0;
  /** Events waiting for their object to show in the mirror. */
  private awaiting = 0;
  private closed = false;
  private readonly closing = new AbortController();
  private idleWaiters: (() => void)[] = [];
  private lastWarnAt = Number.NEGATIVE_INFINITY;
  private lastEventMicros = 0;
  private unlogged = 0;
  private readonly capacity: number;
  private readonly concurrency: number;
  private readonly attempts: number;
  private readonly retryDelayMs: number;
  private readonly warnEveryMs: number;
  private readonly clock: () => Date;
  private readonly instance: string;
  /** Counts by outcome, for tests and logs; `unknownObject`: about an object the mirror does not hold. */
  readonly counts = { written: 0, duplicate: 0, failed: 0, dropped: 0, unknownObject: 0 };

  constructor(
    private readonly api: EventsApi,
    private readonly options: RecorderOptions,
  ) {
    this.capacity = options.capacity ?? 500;
    this.concurrency = options.concurrency ?? 4;
    this.attempts = options.attempts ?? 3;
    this.retryDelayMs = options.retryDelayMs ?? 1000;
    this.warnEveryMs = options.warnEveryMs ?? 60_000;
    this.clock = options.clock ?? (() => new Date());
    this.instance = (options.reportingInstance ?? hostname()).slice(0, 128) || 'pulumi-mc-hooks';
  }

  /** Queues events to be written; returns at once. */
  record(events: readonly HookEvent[]): void {
    const mirror = this.options.mirror;
    for (const e of events) {
      if (this.closed || this.queue.length + this.awaiting >= this.capacity) {
        this.counts.dropped++;
        this.warn({ event: e.name, reason: e.reason }, 'event dropped: the event queue is full');
        continue;
      }
      if (mirror && !mirror.holds(e.regarding)) {
        this.awaiting++;
        void this.inMirror(mirror, e).then((known) => {
          this.awaiting--;
          if (this.closed) this.counts.dropped++;
          else if (known) this.enqueue(e);
          else {
            this.counts.unknownObject++;
            const { kind, namespace, name, uid } = e.regarding;
            this.warn(
              { event: e.name, reason: e.reason, regarding: `${kind} ${namespace}/${name}`, uid },
              'event dropped: what it is about is not an object the hooks watch (a request that named another)',
            );
          }
          this.wakeIfIdle();
        });
        continue;
      }
      this.enqueue(e);
    }
  }

  private enqueue(e: HookEvent): void {
    this.queue.push(e);
    this.pump();
  }

  /** Whether the mirror holds the event's object, now or within mirrorWaitMs. */
  private async inMirror(mirror: ObjectMirror, e: HookEvent): Promise<boolean> {
    const deadline = Date.now() + (this.options.mirrorWaitMs ?? 30_000);
    for (;;) {
      if (mirror.holds(e.regarding)) return true;
      const left = deadline - Date.now();
      if (left <= 0 || this.closing.signal.aborted) return false;
      // The next change of the mirror or the deadline, whichever comes first; both let go after.
      const wait = new AbortController();
      const stop = () => wait.abort();
      this.closing.signal.addEventListener('abort', stop, { once: true });
      await Promise.race([mirror.changed(wait.signal), abortableSleep(left, wait.signal)]);
      wait.abort();
      this.closing.signal.removeEventListener('abort', stop);
    }
  }

  /** Resolves when nothing is queued, awaited or being written. */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return this.queue.length === 0 && this.inFlight === 0 && this.awaiting === 0;
  }

  private wakeIfIdle(): void {
    if (!this.isIdle()) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /** Stops accepting events, drops those waiting for the mirror and waits (at most `timeoutMs`) for the queued ones. */
  async close(timeoutMs = 2000): Promise<void> {
    this.closed = true;
    this.closing.abort();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.idle(), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  private pump(): void {
    while (this.inFlight < this.concurrency) {
      const e = this.queue.shift();
      if (e === undefined) break;
      this.inFlight++;
      void this.write(e).finally(() => {
        this.inFlight--;
        this.pump();
        this.wakeIfIdle();
      });
    }
  }

  private async write(e: HookEvent): Promise<void> {
    const body = eventBody(e, this.nextEventTime(), this.instance);
    const about = {
      event: e.name,
      regarding: `${e.regarding.kind} ${e.namespace}/${e.regarding.name}`,
      reason: e.reason,
    };
    for (let attempt = 1; ; attempt++) {
      try {
        await this.api.create(body);
        this.counts.written++;
        return;
      } catch (err) {
        const status = httpStatusOf(err);
        if (status === 409) {
          // An earlier sync wrote it: the same transition, seen again.
          this.counts.duplicate++;
          return;
        }
        const transient = status === undefined || status === 429 || status >= 500;
        if (transient && attempt < this.attempts) {
          await sleep(this.retryDelayMs * attempt);
          continue;
        }
        this.counts.failed++;
        if (status === 404) {
          // The namespace is gone (deleted with what the event is about): nobody can read the event anyway.
          this.options.log.debug({ ...about, error: describeFailure(err) }, 'event not written');
        } else {
          this.warn({ ...about, error: describeFailure(err) }, 'event not written');
        }
        return;
      }
    }
  }

  /**
   * The clock's time in microseconds, made strictly increasing: events recorded in order (those of
   * one sync, say an update's end and the next one's start) keep their order by eventTime.
   */
  private nextEventTime(): number {
    this.lastEventMicros = Math.max(this.clock().getTime() * 1000, this.lastEventMicros + 1);
    return this.lastEventMicros;
  }

  /** A warning, at most one per warnEveryMs; the next one says how many were not logged. */
  private warn(fields: object, msg: string): void {
    const now = Date.now();
    if (now - this.lastWarnAt < this.warnEveryMs) {
      this.unlogged++;
      return;
    }
    this.lastWarnAt = now;
    this.options.log.warn({ ...fields, ...(this.unlogged > 0 ? { notLogged: this.unlogged } : {}) }, msg);
    this.unlogged = 0;
  }
}
