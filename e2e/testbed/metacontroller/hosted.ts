/**
 * What the driver's CompositeController and DecoratorController share: the controller objects'
 * types, the work queue with its error handling, resync, and the sync/finalize hook calls
 * (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/composite/controller.go and .../decorator/controller.go have
 * the same structure).
 */
import { deepEqual, type LabelSelector } from './apply';
import { type Customize, type Env, RelatedNotSynced } from './common';
import { type Informer, objectKey } from './informer';
import type { KObject } from './kube';
import { WorkQueue } from './queue';
import { type EndpointConfig, resolveEndpoint } from './endpoint';
import { type HookSpec, type ResponseShape, TooManyRequests, Webhook } from './webhook';

export interface ResourceRule {
  apiVersion: string;
  resource: string;
  labelSelector?: LabelSelector;
  annotationSelector?: {
    matchAnnotations?: Record<string, string>;
    matchExpressions?: LabelSelector['matchExpressions'];
  };
  ignoreStatusChanges?: boolean;
  updateStrategy?: { method?: string };
}
export interface ControllerObject {
  apiVersion?: string;
  kind: 'CompositeController' | 'DecoratorController';
  metadata: { name: string };
  spec: {
    parentResource?: ResourceRule;
    childResources?: ResourceRule[];
    resources?: ResourceRule[];
    attachments?: ResourceRule[];
    hooks?: { sync?: HookSpec; finalize?: HookSpec; customize?: HookSpec };
    resyncPeriodSeconds?: number;
    generateSelector?: boolean;
    endpointConfigs?: EndpointConfig[];
  };
}

/** The fields both hook responses have (https://metacontroller.github.io/metacontroller/api/compositecontroller.html#sync-hook-response). */
export interface HookResponse {
  status?: Record<string, unknown> | null;
  resyncAfterSeconds?: number | null;
  finalized?: boolean | null;
  children?: KObject[];
  attachments?: KObject[];
}

export const errMsg = (e: unknown): string => (e instanceof Error ? e.message : String(e));
/** Prefixes an error's message (Go's fmt.Errorf("...: %w")), keeping the requeue-only errors as they are. */
export const wrap = <T>(p: Promise<T>, prefix: string): Promise<T> =>
  p.catch((e: unknown) => {
    throw e instanceof TooManyRequests || e instanceof RelatedNotSynced
      ? e
      : new Error(`${prefix}: ${errMsg(e)}`, { cause: e });
  });
export const describe = (o: KObject): string => `${o.kind} ${objectKey(o)}`;

/** Status changes only (same generation, labels, annotations, no deletion): ignoreStatusChanges. */
const onlyStatusChanged = (old: KObject, cur: KObject): boolean =>
  old !== cur &&
  old.metadata.generation === cur.metadata.generation &&
  deepEqual(old.metadata.labels, cur.metadata.labels) &&
  deepEqual(old.metadata.annotations, cur.metadata.annotations) &&
  !cur.metadata.deletionTimestamp;

export abstract class Hosted {
  protected readonly queue: WorkQueue;
  protected readonly name: string;
  protected hooks: { sync?: Webhook; finalize?: Webhook } = {};
  /** Every webhook built, closed on stop. */
  private readonly webhooks: Webhook[] = [];
  protected customize!: Customize;
  protected stopped = false;
  private resyncTimer?: NodeJS.Timeout;

  constructor(
    protected readonly env: Env,
    protected readonly cc: ControllerObject,
    workers: number,
  ) {
    this.name = cc.metadata.name;
    if (!cc.spec.hooks) throw new Error(`${cc.kind} ${this.name}: no hooks defined`);
    this.queue = new WorkQueue(workers, (key) => this.process(key));
  }

  /**
   * The sync and finalize webhooks, with the Secrets and ConfigMaps of their TLS and auth settings
   * read now, once (newParentController / newDecoratorController in Metacontroller).
   */
  protected async buildHooks(): Promise<void> {
    const h = this.cc.spec.hooks ?? {};
    this.hooks = { sync: await this.webhook('sync', h.sync), finalize: await this.webhook('finalize', h.finalize) };
  }

  /** One webhook, its endpoint resolved (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/composite/controller.go). */
  protected async webhook(
    type: 'sync' | 'finalize' | 'customize',
    spec: HookSpec | undefined,
  ): Promise<Webhook | undefined> {
    if (!spec) return undefined;
    let endpoint;
    try {
      endpoint = spec.webhook && (await resolveEndpoint(this.env.kube, spec.webhook, this.cc.spec.endpointConfigs));
    } catch (e) {
      throw new Error(`can't resolve endpoint config for ${type} hook: ${errMsg(e)}`, { cause: e });
    }
    const hook = new Webhook(type, spec, this.env.hookUrl, this.env.hookAgent, endpoint);
    this.webhooks.push(hook);
    return hook;
  }

  abstract readonly informers: Informer[];
  protected abstract parentOf(key: string): KObject | undefined;
  protected abstract syncObject(parent: KObject): Promise<void>;
  abstract enqueue(obj: KObject): void;
  abstract init(): Promise<void>;

  start(resyncFloorMs: number): void {
    this.queue.start();
    const period = this.cc.spec.resyncPeriodSeconds;
    if (period !== undefined && period !== null) {
      // Informer resync: every cached parent gets an update event
      // (https://metacontroller.github.io/metacontroller/api/compositecontroller.html#resync-period).
      this.resyncTimer = setInterval(() => this.syncNow(), Math.max(period * 1000, resyncFloorMs));
    }
  }

  /**
   * Parent handlers: every add/update/delete enqueues, except status-only updates when ignored
   * (updateParentObject in https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/composite/controller.go).
   */
  protected watchParents(inf: Informer, ignoreStatusChanges: boolean | undefined): void {
    inf.addHandlers({
      add: (o) => this.enqueue(o),
      update: (old, cur) => (ignoreStatusChanges && onlyStatusChanged(old, cur) ? undefined : this.enqueue(cur)),
      delete: (o) => this.enqueue(o),
    });
  }

  /** Child handlers: updates that do not change the resourceVersion (relists) are dropped. */
  protected watchChildren(inf: Informer, onChild: (o: KObject, deleted: boolean) => void): void {
    inf.addHandlers({
      add: (o) => onChild(o, false),
      update: (old, cur) =>
        old.metadata.resourceVersion === cur.metadata.resourceVersion ? undefined : onChild(cur, false),
      delete: (o) => onChild(o, true),
    });
  }

  syncNow(kind?: string, namespace?: string, name?: string): void {
    for (const inf of this.informers) {
      if (kind !== undefined && inf.resource.kind !== kind) continue;
      for (const o of inf.list(namespace)) if (name === undefined || o.metadata.name === name) this.enqueue(o);
    }
  }

  /**
   * processNextWorkItem + sync: errors → Warning event SyncError and rate-limited retry
   * (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/composite/controller.go).
   */
  private async process(key: string): Promise<void> {
    const parent = this.parentOf(key);
    if (!parent) return this.queue.forget(key); // gone: nothing to do
    this.env.log(`${this.cc.kind} ${this.name}: sync ${key}`);
    try {
      await this.syncObject(parent);
      this.queue.forget(key);
    } catch (e) {
      if (this.stopped) return;
      if (e instanceof TooManyRequests) return this.queue.addAfter(key, e.afterSeconds * 1000);
      if (!(e instanceof RelatedNotSynced)) {
        this.env.log(`${this.cc.kind} ${this.name}: failed to sync '${key}': ${errMsg(e)}`);
        await this.env.kube
          .event(parent, 'Warning', 'SyncError', `Sync error: ${errMsg(e)}`)
          .catch((err) => this.env.log(`event: ${errMsg(err)}`));
      }
      this.queue.addRateLimited(key);
    }
  }

  /** Calls sync, or finalize when the object is going away; children get the parent's namespace. */
  protected async callHook<R extends HookResponse>(
    finalizing: boolean,
    build: (version: string) => object,
    shape: ResponseShape,
    parent: KObject,
    childField: 'children' | 'attachments',
  ): Promise<R> {
    const hook = finalizing ? this.hooks.finalize : this.hooks.sync;
    const type = finalizing ? 'finalize' : 'sync';
    if (!hook) throw new Error(`${type} hook nil//not defined for ${describe(parent)}`);
    const res = await wrap(
      hook.call({ ...build(hook.version), finalizing }, shape),
      `${type} hook failed (version=${hook.version})`,
    );
    // The shape check has made the field an array of objects (or null); kind is checked below.
    const children = (res[childField] ?? []) as KObject[];
    for (const c of children) {
      if (typeof c.kind !== 'string' || c.kind === '')
        throw new Error(
          `${type} hook failed (version=${hook.version}): Object 'Kind' is missing in ${JSON.stringify(c).slice(0, 200)}`,
        );
      c.metadata ??= { name: '' };
      if (!c.metadata.namespace && parent.metadata.namespace) c.metadata.namespace = parent.metadata.namespace;
    }
    res[childField] = children;
    // Every field of R was checked against `shape` by the webhook's decoder.
    return res as R;
  }

  /** Stops handing out keys and clears timers; resolves when in-flight syncs have ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    await this.queue.shutdown();
    await Promise.all(this.webhooks.map((w) => w.close()));
  }
}
