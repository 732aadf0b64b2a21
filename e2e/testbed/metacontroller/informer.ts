/**
 * An informer in the client-go sense: list, then watch from the list's resourceVersion, keeping a
 * cache and calling handlers with add / update(old, cur) / delete. A relist (after 410 Gone)
 * replaces the cache: every surviving object gets an update, every vanished one a delete, as
 * client-go's DeltaFIFO Replace does. One informer per resource, shared by all controllers.
 */
import { isGone, type KObject, Kube, type Resource } from './kube';

export interface Handlers {
  add?(obj: KObject): void;
  update?(old: KObject, cur: KObject): void;
  delete?(obj: KObject): void;
}

export const objectKey = (o: { metadata: { namespace?: string; name: string } }): string =>
  o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;

export class Informer {
  private readonly cache = new Map<string, KObject>();
  private readonly handlers: Handlers[] = [];
  private resourceVersion = '';
  private stopped = false;
  private retryTimer?: NodeJS.Timeout;
  private wake?: () => void;
  hasSynced = false;
  readonly synced: Promise<void>;
  private markSynced!: () => void;

  constructor(
    private readonly kube: Kube,
    readonly resource: Resource,
    private readonly log: (msg: string) => void,
  ) {
    this.synced = new Promise((resolve) => (this.markSynced = resolve));
    void this.run();
  }

  addHandlers(h: Handlers): void {
    this.handlers.push(h);
    // Like AddEventHandler on a running informer: replay the cache as adds.
    if (this.hasSynced) for (const o of this.cache.values()) h.add?.(o);
  }

  get(namespace: string | undefined, name: string): KObject | undefined {
    return this.cache.get(namespace ? `${namespace}/${name}` : name);
  }

  /** Cached objects, in one namespace or (namespace undefined/empty) all. */
  list(namespace?: string): KObject[] {
    const all = [...this.cache.values()];
    return namespace ? all.filter((o) => o.metadata.namespace === namespace) : all;
  }

  private emit(fn: (h: Handlers) => void): void {
    for (const h of this.handlers) {
      try {
        fn(h);
      } catch (e) {
        this.log(`handler error on ${this.resource.resource}: ${(e as Error).stack ?? String(e)}`);
      }
    }
  }

  private async relist(): Promise<void> {
    const { items, resourceVersion } = await this.kube.list(this.resource);
    const seen = new Set<string>();
    for (const obj of items) {
      const key = objectKey(obj);
      seen.add(key);
      const old = this.cache.get(key);
      this.cache.set(key, obj);
      if (old) this.emit((h) => h.update?.(old, obj));
      else this.emit((h) => h.add?.(obj));
    }
    for (const [key, old] of [...this.cache]) {
      if (!seen.has(key)) {
        this.cache.delete(key);
        this.emit((h) => h.delete?.(old));
      }
    }
    this.resourceVersion = resourceVersion;
    if (!this.hasSynced) {
      this.hasSynced = true;
      this.markSynced();
    }
  }

  private onEvent(e: { type: string; object: KObject }): void {
    if (e.type === 'ERROR') {
      const status = e.object as KObject & { code?: number; message?: string };
      throw Object.assign(new Error(`watch error: ${status.message}`), { gone: status.code === 410 });
    }
    const obj = { ...e.object, apiVersion: this.resource.apiVersion, kind: this.resource.kind } as KObject;
    if (obj.metadata.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
    if (e.type === 'BOOKMARK') return;
    const key = objectKey(obj);
    const old = this.cache.get(key);
    if (e.type === 'DELETED') {
      this.cache.delete(key);
      this.emit((h) => h.delete?.(old ?? obj));
    } else {
      this.cache.set(key, obj);
      if (old) this.emit((h) => h.update?.(old, obj));
      else this.emit((h) => h.add?.(obj));
    }
  }

  private async run(): Promise<void> {
    let needList = true;
    let failures = 0;
    while (!this.stopped) {
      try {
        if (needList) await this.relist();
        needList = false;
        await this.kube.watch(this.resource, this.resourceVersion, (e) => this.onEvent(e));
        failures = 0;
      } catch (e) {
        if (this.stopped) return;
        needList = needList || isGone(e) || (e as { gone?: boolean }).gone === true;
        if (!needList) this.log(`watch ${this.resource.resource} failed: ${(e as Error).message}`);
        // Back off (200 ms doubling to 5 s) before listing or watching again.
        const delay = Math.min(5000, 200 * 2 ** failures++);
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          this.retryTimer = setTimeout(resolve, delay);
        });
      }
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.wake?.();
  }
}
