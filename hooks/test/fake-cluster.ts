/**
 * A stand-in for the API server's Stacks, Programs, Workspaces and Updates, for the tests of the
 * gauges and the events derived from them: objects with resourceVersions, paged lists, watches that replay the history after a
 * resourceVersion and then stream live changes, compaction (410 Gone), refused lists and broken
 * watches, as the in-memory ListWatch the mirror takes. (The client-node calls against a real API
 * server are tested by e2e/object-metrics.e2e.ts: the unit tests' jest cannot load client-node.)
 */
import type { ListPage, ListWatch, WatchEvent } from '../src/objects/reflector';
import type { ObjectsApi, WatchedResource } from '../src/objects/gauges';

interface Obj {
  metadata: { namespace: string; name: string; resourceVersion?: string; [k: string]: unknown };
  [k: string]: unknown;
}

interface Change {
  rv: number;
  resource: WatchedResource;
  event: WatchEvent;
}

interface Watcher {
  resource: WatchedResource;
  send(event: WatchEvent): void;
  end(err?: Error): void;
}

/** An API error as client-node reports one: the HTTP status as `code`. */
class ApiError extends Error {
  constructor(readonly code: number) {
    super(`HTTP-Code: ${code}`);
  }
}

export class FakeCluster {
  private rv = 1000;
  private compactedRv = 0;
  private readonly objects: Record<WatchedResource, Map<string, Obj>> = {
    stacks: new Map(),
    programs: new Map(),
    workspaces: new Map(),
    updates: new Map(),
  };
  private history: Change[] = [];
  private readonly watchers = new Set<Watcher>();
  private readonly refusals: Record<WatchedResource, number[]> = {
    stacks: [],
    programs: [],
    workspaces: [],
    updates: [],
  };
  /** Calls made, for assertions on what the mirror asked. */
  readonly calls: { resource: WatchedResource; op: 'list' | 'watch'; from?: string; limit?: number }[] = [];

  /** Creates or replaces an object (a new resourceVersion; ADDED or MODIFIED to the watches). */
  put(resource: WatchedResource, object: Obj): void {
    const key = `${object.metadata.namespace}/${object.metadata.name}`;
    const type = this.objects[resource].has(key) ? 'MODIFIED' : 'ADDED';
    const stored = structuredClone(object);
    stored.metadata.resourceVersion = String(++this.rv);
    this.objects[resource].set(key, stored);
    this.emit(resource, { type, object: stored });
  }

  delete(resource: WatchedResource, namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    const old = this.objects[resource].get(key);
    if (!old) return;
    this.objects[resource].delete(key);
    const gone = { ...structuredClone(old), metadata: { ...old.metadata, resourceVersion: String(++this.rv) } };
    this.emit(resource, { type: 'DELETED', object: gone });
  }

  /** The next `times` lists of resource fail with HTTP `code`. */
  refuseLists(resource: WatchedResource, code: number, times = 1): void {
    for (let i = 0; i < times; i++) this.refusals[resource].push(code);
  }

  /** Forgets the history: open watches get a 410 ERROR event, and so does any watch from before now. */
  compact(): void {
    this.compactedRv = this.rv;
    this.history = [];
    for (const w of [...this.watchers]) {
      w.send({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' } });
      w.end();
    }
  }

  /** Breaks every open watch (a connection reset). */
  breakWatches(): void {
    for (const w of [...this.watchers]) w.end(new Error('socket hang up'));
  }

  /** Ends every open watch as the server does at its timeout. */
  endWatches(): void {
    for (const w of [...this.watchers]) w.end();
  }

  get openWatches(): number {
    return this.watchers.size;
  }

  /** Sends a bookmark (a newer resourceVersion, no object change) to the open watches. */
  bookmark(resource: WatchedResource): void {
    const version = String(++this.rv);
    for (const w of this.watchers)
      if (w.resource === resource) w.send({ type: 'BOOKMARK', object: { metadata: { resourceVersion: version } } });
  }

  private emit(resource: WatchedResource, event: WatchEvent): void {
    this.history.push({ rv: this.rv, resource, event });
    for (const w of this.watchers) if (w.resource === resource) w.send(event);
  }

  list(resource: WatchedResource, limit: number, token?: string): ListPage {
    this.calls.push({ resource, op: 'list', limit });
    const refusal = this.refusals[resource].shift();
    if (refusal !== undefined) throw new ApiError(refusal);
    const all = [...this.objects[resource].values()].sort((a, b) =>
      `${a.metadata.namespace}/${a.metadata.name}`.localeCompare(`${b.metadata.namespace}/${b.metadata.name}`),
    );
    const start = token ? Number(token) : 0;
    const items = all.slice(start, start + limit).map((o) => structuredClone(o));
    const next = start + limit < all.length ? String(start + limit) : undefined;
    return { items, resourceVersion: String(this.rv), ...(next ? { continue: next } : {}) };
  }

  /**
   * Opens a watch: replays the changes after `from`, then streams; a 410 ERROR event if `from` is
   * compacted. Returns the open watch (its end() closes it), undefined if it ended at once.
   */
  openWatch(resource: WatchedResource, from: string, watcher: Omit<Watcher, 'resource'>): Watcher | undefined {
    this.calls.push({ resource, op: 'watch', from });
    if (Number(from) < this.compactedRv) {
      watcher.send({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old' } });
      watcher.end();
      return undefined;
    }
    for (const c of this.history) if (c.resource === resource && c.rv > Number(from)) watcher.send(c.event);
    const w: Watcher = {
      resource,
      send: watcher.send,
      end: (err) => {
        if (this.watchers.delete(w)) watcher.end(err);
      },
    };
    this.watchers.add(w);
    return w;
  }

  /** The in-memory ListWatch of one resource. */
  listWatch(resource: WatchedResource): ListWatch {
    return {
      list: (page) => Promise.resolve().then(() => this.list(resource, page.limit, page.continue)),
      watch: (from, onEvent, signal) =>
        new Promise<void>((resolve, reject) => {
          let ended = false;
          let stop = () => undefined as void;
          const open = this.openWatch(resource, from.resourceVersion, {
            send: (event) => {
              if (!ended) onEvent(structuredClone(event));
            },
            end: (err) => {
              if (ended) return;
              ended = true;
              signal.removeEventListener('abort', stop);
              if (err) reject(err);
              else resolve();
            },
          });
          if (!open) return;
          stop = () => open.end();
          signal.addEventListener('abort', stop, { once: true });
        }),
    };
  }

  api(): ObjectsApi {
    return {
      stacks: this.listWatch('stacks'),
      programs: this.listWatch('programs'),
      workspaces: this.listWatch('workspaces'),
      updates: this.listWatch('updates'),
    };
  }
}

/** A Stack as the API server holds it; `state` is status.lastUpdate.state (none: no operation yet). */
export function stackObject(namespace: string, name: string, state?: 'failed' | 'succeeded'): Obj {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { namespace, name },
    spec: { stack: 'dev', projectRepo: 'https://git.example/x.git', branch: 'main' },
    status: state
      ? {
          lastUpdate: { state, type: 'up', name: `${name}-u`, generation: 1 },
          conditions: [
            { type: 'Ready', status: state === 'succeeded' ? 'True' : 'False', reason: 'x' },
            ...(state === 'failed' ? [{ type: 'Reconciling', status: 'True', reason: 'RetryingAfterFailure' }] : []),
          ],
        }
      : {},
  };
}

export function programObject(namespace: string, name: string): Obj {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { namespace, name },
    program: { resources: {} },
  };
}
