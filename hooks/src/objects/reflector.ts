import { abortableSleep } from '../lib/sleep';
import { isRecord } from '../lib/json';

/**
 * A list+watch mirror of one kind of object, keeping only a small projection of each (a key and
 * a value), so that 10,000 Stacks cost a map of 10,000 short entries, not 10,000 objects. It is
 * what client-go's reflector does, reduced to what the gauges need:
 * - list every page (bounded pages), swap the new map in, and the mirror is synced;
 * - watch from the list's resourceVersion, with bookmarks, and apply ADDED/MODIFIED/DELETED;
 * - when the stream ends, watch again from the last resourceVersion; when it has expired (410),
 *   list again; when the list or the watch fails, back off and list again; a failed list makes
 *   the mirror unsynced (its numbers would be stale) until a list succeeds.
 */

/** One page of a list, across all namespaces. */
export interface ListPage {
  items: unknown[];
  resourceVersion: string;
  /** The token of the next page; absent on the last. */
  continue?: string;
}

/** A watch event as the API server sends it. */
export interface WatchEvent {
  type: string;
  object: unknown;
}

/** The two calls the mirror makes, for one resource (the real one: objects/kubernetes.ts). */
export interface ListWatch {
  list(page: { limit: number; continue?: string }): Promise<ListPage>;
  /**
   * Streams the changes after resourceVersion to onEvent. Resolves when the stream ends (the
   * server's timeout) or signal aborts; rejects when it cannot start or breaks (an HTTP 410 as
   * an error whose `code` or `statusCode` is 410).
   */
  watch(
    from: { resourceVersion: string; timeoutSeconds: number },
    onEvent: (event: WatchEvent) => void,
    signal: AbortSignal,
  ): Promise<void>;
}

export type Operation = 'list' | 'watch';

export interface ReflectorOptions<V> {
  api: ListWatch;
  /** What to keep of an object; undefined: the object is not kept (no name, not an object). */
  project(object: unknown): { key: string; value: V } | undefined;
  /**
   * An object the watch added or changed, with what the mirror kept of it before (undefined: nothing).
   * Not called for what a list brings: only changes seen as they happen.
   */
  onWatched?(before: V | undefined, after: V): void;
  /** A list or watch failed; the mirror retries by itself. */
  onFailure(operation: Operation, err: unknown): void;
  /** Objects per list page (default 500: a page of Stacks is a few MB at most). */
  pageSize?: number;
  /** Waits before a retry; resolves early when signal aborts (tests pass one that does not wait). */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** The server-side timeout of one watch (default 5 to 10 minutes, spread like client-go's). */
  watchTimeoutSeconds?: () => number;
  /** How long one list page may take before it counts as failed (default 60 s). */
  listTimeoutMs?: number;
}

const MIN_RETRY_MS = 1000;
const MAX_RETRY_MS = 30_000;
/** How long past its server-side timeout a silent watch is given before it is dropped. */
const WATCH_GRACE_MS = 30_000;

/** The HTTP status of a client-node or fetch error, if it carries one. */
function statusOf(err: unknown): number | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  if ('code' in err && typeof err.code === 'number') return err.code;
  if ('statusCode' in err && typeof err.statusCode === 'number') return err.statusCode;
  return undefined;
}

/** The watch said its resourceVersion is too old: list again, nothing failed. */
class Expired extends Error {}

export class Reflector<V> {
  private items = new Map<string, V>();
  private synced = false;
  private started = false;
  private readonly stopping = new AbortController();
  private running: Promise<void> = Promise.resolve();
  private retryMs = MIN_RETRY_MS;
  private syncWaiters: (() => void)[] = [];
  private changeWaiters: (() => void)[] = [];
  private readonly pageSize: number;
  private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  private readonly watchTimeoutSeconds: () => number;

  constructor(private readonly options: ReflectorOptions<V>) {
    this.pageSize = options.pageSize ?? 500;
    this.sleep = options.sleep ?? abortableSleep;
    this.watchTimeoutSeconds = options.watchTimeoutSeconds ?? (() => 300 + Math.floor(Math.random() * 300));
  }

  /** True once a list has succeeded and no list has failed since: the entries are the cluster's. */
  get isSynced(): boolean {
    return this.synced;
  }

  /** The projection of every object, by key. */
  get entries(): ReadonlyMap<string, V> {
    return this.items;
  }

  /** Starts listing and watching in the background; idempotent. */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.running = this.run();
  }

  /** Stops the watch and waits for the loop to end; idempotent. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
    for (const wake of this.syncWaiters.splice(0)) wake();
    this.notifyChange();
  }

  /**
   * Resolves at the mirror's next change (an object added, changed or removed, a list swapped in),
   * when it stops, or when `signal` aborts.
   */
  changed(signal: AbortSignal): Promise<void> {
    if (signal.aborted || this.stopping.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        const i = this.changeWaiters.indexOf(done);
        if (i >= 0) this.changeWaiters.splice(i, 1);
        resolve();
      };
      this.changeWaiters.push(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  private notifyChange(): void {
    if (this.changeWaiters.length === 0) return;
    for (const wake of this.changeWaiters.slice()) wake();
  }

  /** Resolves when the mirror is synced (at once if it is), or when it stops. */
  whenSynced(): Promise<void> {
    if (this.synced || this.stopping.signal.aborted) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  private async run(): Promise<void> {
    const signal = this.stopping.signal;
    while (!signal.aborted) {
      let resourceVersion: string;
      try {
        resourceVersion = await this.relist();
      } catch (err) {
        if (signal.aborted) return;
        this.synced = false;
        this.options.onFailure('list', err);
        await this.backOff();
        continue;
      }
      try {
        for (;;) {
          const { lastVersion, events } = await this.watchOnce(resourceVersion);
          if (signal.aborted) return;
          resourceVersion = lastVersion;
          this.retryMs = MIN_RETRY_MS;
          // A stream that ends at once with nothing in it, over and over, must not spin.
          if (events === 0) await this.sleep(MIN_RETRY_MS, signal);
        }
      } catch (err) {
        if (signal.aborted) return;
        if (!(err instanceof Expired)) {
          this.options.onFailure('watch', err);
          await this.backOff();
        }
      }
    }
  }

  private async backOff(): Promise<void> {
    await this.sleep(this.retryMs, this.stopping.signal);
    this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
  }

  /** Lists every page into a new map and swaps it in; returns the list's resourceVersion. */
  private async relist(): Promise<string> {
    const fresh = new Map<string, V>();
    let token: string | undefined;
    let resourceVersion: string;
    do {
      const page = await this.listPage({ limit: this.pageSize, ...(token ? { continue: token } : {}) });
      if (this.stopping.signal.aborted) throw new Error('stopped');
      for (const item of Array.isArray(page.items) ? page.items : []) {
        const kept = this.options.project(item);
        if (kept) fresh.set(kept.key, kept.value);
      }
      resourceVersion = page.resourceVersion;
      token = page.continue || undefined;
    } while (token);
    this.items = fresh;
    this.synced = true;
    this.retryMs = MIN_RETRY_MS;
    for (const wake of this.syncWaiters.splice(0)) wake();
    this.notifyChange();
    return resourceVersion;
  }

  /** One page, or a failure if the API server does not answer in time (a hung list must not hold the mirror). */
  private listPage(page: { limit: number; continue?: string }): Promise<ListPage> {
    const ms = this.options.listTimeoutMs ?? 60_000;
    return new Promise<ListPage>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer to a list in ${ms} ms`)), ms);
      timer.unref();
      this.options.api.list(page).then(
        (answer) => {
          clearTimeout(timer);
          resolve(answer);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err instanceof Error ? err : new Error('the list failed'));
        },
      );
    });
  }

  /** One watch stream; returns the last resourceVersion it saw and how many events it carried. */
  private async watchOnce(from: string): Promise<{ lastVersion: string; events: number }> {
    let lastVersion = from;
    let events = 0;
    let expired = false;
    let broken: Error | undefined;
    const timeoutSeconds = this.watchTimeoutSeconds();
    const stream = new AbortController();
    const onStop = () => stream.abort();
    this.stopping.signal.addEventListener('abort', onStop, { once: true });
    // The server ends the stream after timeoutSeconds; one that stays silent past that is dead.
    const watchdog = setTimeout(() => stream.abort(), timeoutSeconds * 1000 + WATCH_GRACE_MS);
    watchdog.unref();
    const onEvent = (event: WatchEvent) => {
      if (stream.signal.aborted) return;
      events++;
      const version = versionOf(event.object);
      if (event.type === 'ERROR') {
        // A Status object: 410 Gone (too old a resourceVersion) means list again.
        if (statusOf(event.object) === 410) expired = true;
        else broken = new Error(`watch error: ${messageOf(event.object)}`);
        stream.abort();
        return;
      }
      if (event.type === 'ADDED' || event.type === 'MODIFIED') {
        const kept = this.options.project(event.object);
        if (kept) {
          const before = this.items.get(kept.key);
          this.items.set(kept.key, kept.value);
          this.options.onWatched?.(before, kept.value);
        }
        this.notifyChange();
      } else if (event.type === 'DELETED') {
        const kept = this.options.project(event.object);
        if (kept) this.items.delete(kept.key);
        this.notifyChange();
      }
      if (version) lastVersion = version;
    };
    try {
      await this.options.api.watch({ resourceVersion: from, timeoutSeconds }, onEvent, stream.signal);
    } catch (err) {
      // Stopping, or a stream this side aborted (the watchdog, an ERROR event): not a failure.
      if (this.stopping.signal.aborted) return { lastVersion, events };
      if (statusOf(err) === 410) throw new Expired();
      if (!stream.signal.aborted) throw err;
    } finally {
      clearTimeout(watchdog);
      this.stopping.signal.removeEventListener('abort', onStop);
    }
    if (expired) throw new Expired();
    if (broken !== undefined) throw broken;
    return { lastVersion, events };
  }
}

function versionOf(object: unknown): string | undefined {
  const metadata = isRecord(object) ? object.metadata : undefined;
  const v = isRecord(metadata) ? metadata.resourceVersion : undefined;
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function messageOf(object: unknown): string {
  const m = isRecord(object) ? object.message : undefined;
  return typeof m === 'string' ? m.slice(0, 200) : 'no message';
}
