/**
 * A small, faithful Metacontroller for the e2e suite: it hosts our CompositeController and
 * DecoratorController objects and speaks Metacontroller's hook protocol against a real API
 * server. The spec is /work/shared/reference/metacontroller.md (cited as §n); the behaviour was
 * checked against Metacontroller v4.17.2's code (pkg/controller/composite, .../decorator,
 * .../common, pkg/dynamic/apply, pkg/hooks), default `--apply-strategy=dynamic-apply`.
 *
 *   const mc = await startMetacontroller({ kubeConfig, controllers: [cc, dc], hookUrl: (h) => `http://127.0.0.1:${port}${h.path}` });
 *   ...
 *   await mc.stop();
 *
 * Not modelled (none is used by manifests/metacontroller): Rolling* update strategies with
 * ControllerRevisions (refused at start), server-side apply, webhook TLS/auth/endpointConfigs
 * (refused), namespaceSelector related rules (refused), ETag caching (ignored: it is only a
 * cache), the 10 qps overall rate limit, event rate limiting, metrics and leader election.
 * docs/metacontroller-local.md lists these and how to run the suite with the real binary. The CompositeController/DecoratorController
 * objects are not read from the API server: they are given to startMetacontroller (the real
 * binary is run by metacontroller-harness.ts).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { Agent } from 'undici';
import { clone, deepEqual, type LabelSelector, selectorEmpty, selectorMatches } from './metacontroller/apply';
// prettier-ignore
import { aggregate, atomicUpdate, controllerRefOf, Customize, type Env, hasFinalizer, initGroup, insert, isNotFoundLike, makeControllerRef,
  manageChildren, type ObjMap, qualifiedName, RelatedNotSynced, shouldFinalize, syncFinalizer, toRequestMap, type UpdateMethod, updateStrategies } from './metacontroller/common';
import { Informer, objectKey } from './metacontroller/informer';
import {
  groupOf,
  isConflict,
  isGone,
  isNotFound,
  type KObject,
  Kube,
  type OwnerReference,
  type Resource,
  unless,
} from './metacontroller/kube';
import { WorkQueue } from './metacontroller/queue';
import { type HookSpec, type HookUrl, type ResponseShape, TooManyRequests, Webhook } from './metacontroller/webhook';

export type { HookUrl } from './metacontroller/webhook';

export interface MetacontrollerOptions {
  kubeConfig: KubeConfig;
  /** Parsed CompositeController / DecoratorController objects (metacontroller.k8s.io/v1alpha1). */
  controllers: unknown[];
  /** Maps a `service`+`path` webhook to a reachable URL (e.g. http://127.0.0.1:<port><path>). */
  hookUrl?: HookUrl;
  /** Floor of `resyncPeriodSeconds` (Metacontroller: 1 s). */
  resyncFloorMs?: number;
  /** Log lines (default: stderr when PKO_METACONTROLLER_LOG=1, else nothing). */
  log?: (line: string) => void;
  /** Give up waiting for the informers' first list after this long (default 30 s). */
  startTimeoutMs?: number;
}

export interface Metacontroller {
  /** Stops every controller, informer, timer and connection. Idempotent. */
  stop(): Promise<void>;
  /** Enqueues matching parents/targets now (all when no argument is given). */
  syncNow(kind?: string, namespace?: string, name?: string): void;
}

interface ResourceRule {
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
interface ControllerObject {
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
  };
}

const DECORATOR_ANNOTATION = 'metacontroller.k8s.io/decorator-controller';
const errMsg = (e: unknown): string => (e instanceof Error ? e.message : String(e));
/** Prefixes an error's message (Go's fmt.Errorf("...: %w")), keeping the requeue-only errors as they are. */
const wrap = <T>(p: Promise<T>, prefix: string): Promise<T> =>
  p.catch((e: unknown) => {
    throw e instanceof TooManyRequests || e instanceof RelatedNotSynced ? e : new Error(`${prefix}: ${errMsg(e)}`);
  });
const describe = (o: KObject): string => `${o.kind} ${objectKey(o)}`;

/** Status changes only (same generation, labels, annotations, no deletion): ignoreStatusChanges. */
const onlyStatusChanged = (old: KObject, cur: KObject): boolean =>
  old !== cur &&
  old.metadata.generation === cur.metadata.generation &&
  deepEqual(old.metadata.labels, cur.metadata.labels) &&
  deepEqual(old.metadata.annotations, cur.metadata.annotations) &&
  !cur.metadata.deletionTimestamp;

/** What both controller kinds share: the queue, its error handling, resync, hooks. */
abstract class Hosted {
  protected readonly queue: WorkQueue;
  protected readonly name: string;
  protected readonly hooks: { sync?: Webhook; finalize?: Webhook };
  protected customize!: Customize;
  protected stopped = false;
  private resyncTimer?: NodeJS.Timeout;

  constructor(
    protected readonly env: Env,
    protected readonly cc: ControllerObject,
    workers: number,
  ) {
    this.name = cc.metadata.name;
    const h = cc.spec.hooks;
    if (!h) throw new Error(`${cc.kind} ${this.name}: no hooks defined`);
    this.hooks = {
      sync: h.sync && new Webhook('sync', h.sync, env.hookUrl, env.hookAgent),
      finalize: h.finalize && new Webhook('finalize', h.finalize, env.hookUrl, env.hookAgent),
    };
    this.queue = new WorkQueue(workers, (key) => this.process(key));
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
      // Informer resync: every cached parent gets an update event (§1.1).
      this.resyncTimer = setInterval(() => this.syncNow(), Math.max(period * 1000, resyncFloorMs));
    }
  }

  /** Parent handlers: every add/update/delete enqueues, except status-only updates when ignored (§1.2). */
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

  /** processNextWorkItem + sync: errors → Warning event SyncError and rate-limited retry (§1.13, §4.2). */
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
  protected async callHook(
    finalizing: boolean,
    build: (version: string) => object,
    shape: ResponseShape,
    parent: KObject,
    childField: string,
  ): Promise<Record<string, any>> {
    const hook = finalizing ? this.hooks.finalize : this.hooks.sync;
    const type = finalizing ? 'finalize' : 'sync';
    if (!hook) throw new Error(`${type} hook nil//not defined for ${describe(parent)}`);
    const res = await wrap(
      hook.call({ ...build(hook.version), finalizing }, shape),
      `${type} hook failed (version=${hook.version})`,
    );
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
    return res;
  }

  /** Stops handing out keys and clears timers; resolves when in-flight syncs have ended. */
  stop(): Promise<void> {
    this.stopped = true;
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    return this.queue.shutdown();
  }
}

// =============================================================================================
// CompositeController (§1)

class Composite extends Hosted {
  informers: Informer[] = [];
  private parentResource!: Resource;
  private parentInformer!: Informer;
  private children: { rule: ResourceRule; resource: Resource; informer: Informer }[] = [];
  private methodOf!: (group: string, kind: string) => UpdateMethod;
  private readonly finalizer: string;

  constructor(env: Env, cc: ControllerObject, workers: number) {
    super(env, cc, workers);
    this.finalizer = `metacontroller.io/compositecontroller-${this.name}`;
  }

  async init(): Promise<void> {
    const spec = this.cc.spec;
    if (!spec.parentResource) throw new Error(`CompositeController ${this.name}: spec.parentResource is required`);
    for (const c of spec.childResources ?? []) {
      if (c.updateStrategy?.method?.startsWith('Rolling')) {
        throw new Error(
          `CompositeController ${this.name}: ${c.updateStrategy.method} (ControllerRevisions) is not implemented by the driver`,
        );
      }
    }
    const kube = this.env.kube;
    this.parentResource = await kube.resolve(spec.parentResource.apiVersion, {
      resource: spec.parentResource.resource,
    });
    await this.checkStatusSubresource();
    this.methodOf = await updateStrategies(kube, spec.childResources ?? []);
    this.parentInformer = this.env.informer(this.parentResource);
    for (const rule of spec.childResources ?? []) {
      const resource = await kube.resolve(rule.apiVersion, { resource: rule.resource });
      this.children.push({ rule, resource, informer: this.env.informer(resource) });
    }
    this.informers = [this.parentInformer];
    const parents = [{ informer: this.parentInformer, resource: this.parentResource }];
    this.customize = new Customize(this.env, this.cc, spec.hooks?.customize, parents, (p) => this.enqueue(p));
    this.watchParents(this.parentInformer, spec.parentResource.ignoreStatusChanges);
    for (const { informer } of this.children) this.watchChildren(informer, (o, deleted) => this.onChild(o, deleted));
  }

  /** A CompositeController parent must be a CRD with the status subresource (§1.2). */
  private async checkStatusSubresource(): Promise<void> {
    const r = this.parentResource;
    const crdName = `${r.resource}.${r.group}`;
    const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`;
    const crd = await wrap(
      this.env.kube.request<any>('GET', crdPath),
      `CompositeController ${this.name}: can't get CRD ${crdName}`,
    );
    const version = r.apiVersion.split('/')[1];
    const v = (crd.spec?.versions ?? []).find((x: any) => x.name === version);
    if (!v?.subresources?.status) {
      throw new Error(
        `CompositeController ${this.name}: CRD ${crdName} version ${version} does not have subresource 'Status' enabled`,
      );
    }
  }

  private matchesLabels(o: KObject): boolean {
    return selectorMatches(this.cc.spec.parentResource!.labelSelector, o.metadata.labels);
  }

  enqueue(o: KObject): void {
    if (!hasFinalizer(o, this.finalizer) && !this.matchesLabels(o)) return;
    this.queue.add(objectKey(o));
  }

  protected parentOf(key: string): KObject | undefined {
    const i = key.indexOf('/');
    return i < 0 ? this.parentInformer.get(undefined, key) : this.parentInformer.get(key.slice(0, i), key.slice(i + 1));
  }

  /** The child's controller, if it is one of our parents (resolveControllerRef). */
  private resolveControllerRef(child: KObject): KObject | undefined {
    const ref = controllerRefOf(child);
    if (!ref || groupOf(ref.apiVersion) !== this.parentResource.group || ref.kind !== this.parentResource.kind)
      return undefined;
    const parent = this.parentInformer.get(
      this.parentResource.namespaced ? child.metadata.namespace : undefined,
      ref.name,
    );
    if (!parent || parent.metadata.uid !== ref.uid) return undefined;
    return parent;
  }

  /** onChildAdd/Update/Delete: sync the owner, or every parent that could adopt an orphan. */
  private onChild(child: KObject, deleted: boolean): void {
    if (controllerRefOf(child)) {
      const parent = this.resolveControllerRef(child);
      if (parent) this.enqueue(parent);
      return;
    }
    if (deleted || child.metadata.deletionTimestamp) return; // orphans being deleted are never adopted
    for (const parent of this.parentInformer.list(
      this.parentResource.namespaced ? child.metadata.namespace : undefined,
    )) {
      try {
        const sel = this.selector(parent);
        if (selectorMatches(sel, child.metadata.labels)) this.enqueue(parent);
      } catch {
        // a parent without a usable selector cannot adopt
      }
    }
  }

  /** controller-uid=<uid> with generateSelector, else the parent's .spec.selector (§1.8). */
  private selector(parent: KObject): LabelSelector {
    if (this.cc.spec.generateSelector) return { matchLabels: { 'controller-uid': parent.metadata.uid! } };
    const sel = (parent as { spec?: { selector?: LabelSelector } }).spec?.selector;
    if (!sel || selectorEmpty(sel))
      throw new Error('.spec.selector must have either matchLabels, matchExpressions, or both');
    return sel;
  }

  /** syncParentObject (§1.13). */
  protected async syncObject(cached: KObject): Promise<void> {
    const kube = this.env.kube;
    const enabled = !!this.hooks.finalize;
    if (!hasFinalizer(cached, this.finalizer) && !this.matchesLabels(cached)) return;
    // Before anything else, our finalizer (§1.10).
    let parent = await wrap(
      syncFinalizer(kube, this.parentResource, cached, this.finalizer, enabled),
      `can't sync finalizer for ${describe(cached)}`,
    );
    if (!hasFinalizer(parent, this.finalizer) && !this.matchesLabels(parent)) return;

    const selector = this.selector(parent);
    const observed = await this.claimChildren(parent, selector);
    const related = await this.customize.related(parent, this.parentResource);

    const finalizing = enabled && (!!parent.metadata.deletionTimestamp || !this.matchesLabels(parent));
    const request = (version: string): object => ({
      controller: this.cc,
      parent,
      children: toRequestMap(observed, parent, version),
      related: toRequestMap(related, parent, version),
    });
    const shape: ResponseShape = {
      status: 'object',
      children: 'array',
      resyncAfterSeconds: 'number',
      finalized: 'boolean',
    };
    const res = await wrap(
      this.callHook(finalizing, request, shape, parent, 'children'),
      `sync hook failed for ${describe(parent)}`,
    );
    const desired = res.children as KObject[];

    if (typeof res.resyncAfterSeconds === 'number' && res.resyncAfterSeconds > 0) {
      this.queue.addAfter(objectKey(parent), res.resyncAfterSeconds * 1000);
    }
    // As the code does (not only for finalize calls): finalized → remove the finalizer (§1.10).
    if (res.finalized === true) {
      parent = await wrap(
        syncFinalizer(kube, this.parentResource, parent, this.finalizer, false),
        `can't remove finalizer for ${describe(parent)}`,
      );
    }

    // Every desired child carries the selector's labels (controller-uid added) (§1.6, §1.8).
    for (const c of desired) {
      if (this.cc.spec.generateSelector) {
        c.metadata.labels ??= {};
        c.metadata.labels['controller-uid'] ??= parent.metadata.uid!;
      }
      if (!selectorMatches(selector, c.metadata.labels)) {
        throw new Error(
          `labels on desired child ${c.kind} ${c.metadata.namespace ?? ''}/${c.metadata.name} don't match parent selector`,
        );
      }
    }

    let manageErr: Error | undefined;
    if (!parent.metadata.deletionTimestamp || shouldFinalize(parent, this.finalizer, enabled)) {
      const err = await manageChildren(this.env, parent, observed, desired, this.methodOf);
      if (err) manageErr = new Error(`can't reconcile children for ${describe(parent)}: ${err.message}`);
    }

    try {
      await this.updateStatus(parent, res.status as Record<string, unknown> | null | undefined);
    } catch (e) {
      if (isNotFoundLike(e) || isConflict(e)) return; // the next event retries
      throw new Error(`can't update status for ${describe(parent)}: ${errMsg(e)}`);
    }
    if (manageErr) throw manageErr;
  }

  /** Owned children, adopting matching orphans and releasing non-matching ones (§1.9). */
  private async claimChildren(parent: KObject, selector: LabelSelector): Promise<ObjMap> {
    const out: ObjMap = new Map();
    const errs: Error[] = [];
    const uid = parent.metadata.uid;
    const setRefs =
      (f: (refs: OwnerReference[]) => OwnerReference[]) =>
      (o: KObject): boolean => ((o.metadata.ownerReferences = f(o.metadata.ownerReferences ?? [])), true);
    let canAdopt: Promise<void> | undefined;
    const checkCanAdopt = (): Promise<void> =>
      (canAdopt ??= this.env.kube
        .get(this.parentResource, parent.metadata.namespace, parent.metadata.name)
        .then((fresh) => {
          if (fresh.metadata.uid !== uid)
            throw new Error(`original ${describe(parent)} is gone: got uid ${fresh.metadata.uid}, wanted ${uid}`);
          if (fresh.metadata.deletionTimestamp)
            throw new Error(`${objectKey(parent)} has just been deleted at ${fresh.metadata.deletionTimestamp}`);
        }));
    for (const { resource, informer } of this.children) {
      const group = initGroup(out, resource.apiVersion, resource.kind);
      const ns = this.parentResource.namespaced ? parent.metadata.namespace : undefined;
      for (const child of informer.list(ns)) {
        const ref = controllerRefOf(child);
        const match = selectorMatches(selector, child.metadata.labels);
        try {
          if (ref) {
            if (ref.uid !== uid) continue;
            if (match) {
              group.set(qualifiedName(child), child);
            } else if (!parent.metadata.deletionTimestamp) {
              this.env.log(`releasing ${describe(child)} from ${describe(parent)}`);
              const release = setRefs((refs) => refs.filter((r) => r.uid !== uid));
              await atomicUpdate(this.env.kube, resource, child, release).catch(unless(isNotFoundLike, isGone));
            }
            continue;
          }
          if (parent.metadata.deletionTimestamp || !match || child.metadata.deletionTimestamp) continue;
          await wrap(checkCanAdopt(), `can't adopt ${describe(child)} (${child.metadata.uid})`);
          this.env.log(`adopting ${describe(child)} into ${describe(parent)}`);
          const cref = makeControllerRef(parent);
          // addOwnerReference: a reference with our UID is replaced in place, else ours is appended
          const adopt = setRefs((refs) =>
            refs.some((r) => r.uid === cref.uid) ? refs.map((r) => (r.uid === cref.uid ? cref : r)) : [...refs, cref],
          );
          await atomicUpdate(this.env.kube, resource, child, adopt);
          insert(out, child);
        } catch (e) {
          if (isNotFoundLike(e)) continue;
          errs.push(e as Error);
        }
      }
    }
    const err = aggregate(errs);
    if (err) throw new Error(`can't claim children: ${err.message}`);
    return out;
  }

  /** The hook's status replaces .status, plus observedGeneration; written only on change (§1.7). */
  private async updateStatus(parent: KObject, hookStatus: Record<string, unknown> | null | undefined): Promise<void> {
    const status = { ...(hookStatus ?? {}), observedGeneration: parent.metadata.generation ?? 0 };
    const mutate = (cur: KObject): boolean => {
      if (deepEqual(cur.status, status)) return false;
      cur.status = clone(status);
      return true;
    };
    await atomicUpdate(
      this.env.kube,
      this.parentResource,
      parent,
      mutate,
      this.parentResource.hasStatus ? 'status' : undefined,
    );
  }
}

// =============================================================================================
// DecoratorController (§2)

class Decorator extends Hosted {
  informers: Informer[] = [];
  private targets: { rule: ResourceRule; resource: Resource; informer: Informer }[] = [];
  private attachments: { resource: Resource; informer: Informer }[] = [];
  private methodOf!: (group: string, kind: string) => UpdateMethod;
  private readonly finalizer: string;

  constructor(env: Env, dc: ControllerObject, workers: number) {
    super(env, dc, workers);
    this.finalizer = `metacontroller.io/decoratorcontroller-${this.name}`;
  }

  async init(): Promise<void> {
    const spec = this.cc.spec;
    const kube = this.env.kube;
    for (const rule of spec.resources ?? []) {
      const resource = await kube.resolve(rule.apiVersion, { resource: rule.resource });
      this.targets.push({ rule, resource, informer: this.env.informer(resource) });
    }
    if (this.targets.length === 0) throw new Error(`DecoratorController ${this.name}: spec.resources is required`);
    for (const rule of spec.attachments ?? []) {
      const resource = await kube.resolve(rule.apiVersion, { resource: rule.resource });
      this.attachments.push({ resource, informer: this.env.informer(resource) });
    }
    this.methodOf = await updateStrategies(kube, spec.attachments ?? []);
    this.informers = this.targets.map((t) => t.informer);
    this.customize = new Customize(this.env, this.cc, spec.hooks?.customize, this.targets, (p) => this.enqueue(p));
    for (const t of this.targets) this.watchParents(t.informer, t.rule.ignoreStatusChanges);
    for (const { informer } of this.attachments) this.watchChildren(informer, (o) => this.onAttachment(o));
  }

  private target(o: { apiVersion: string; kind: string }): (typeof this.targets)[number] | undefined {
    return this.targets.find((t) => t.resource.group === groupOf(o.apiVersion) && t.resource.kind === o.kind);
  }

  /** Label and annotation selectors of the object's kind, keyed by Kind.group (§2.1). */
  private matches(o: KObject): boolean {
    const t = this.target(o);
    if (!t) return false;
    const a = t.rule.annotationSelector;
    return (
      selectorMatches(t.rule.labelSelector, o.metadata.labels) &&
      selectorMatches(
        a && { matchLabels: a.matchAnnotations, matchExpressions: a.matchExpressions },
        o.metadata.annotations,
      )
    );
  }

  private static key = (o: KObject): string =>
    `${o.apiVersion}:${o.kind}:${o.metadata.namespace ?? ''}:${o.metadata.name}`;

  enqueue(o: KObject): void {
    if (this.matches(o) || hasFinalizer(o, this.finalizer)) this.queue.add(Decorator.key(o));
  }

  protected parentOf(key: string): KObject | undefined {
    const [apiVersion, kind, ns, ...rest] = key.split(':');
    const t = this.targets.find((x) => x.resource.apiVersion === apiVersion && x.resource.kind === kind);
    return t?.informer.get(ns || undefined, rest.join(':'));
  }

  private onAttachment(child: KObject): void {
    const ref = controllerRefOf(child);
    if (!ref) return;
    const t = this.target(ref);
    if (!t) return;
    const parent = t.informer.get(t.resource.namespaced ? child.metadata.namespace : undefined, ref.name);
    if (parent && parent.metadata.uid === ref.uid) this.enqueue(parent);
  }

  /** syncParentObject of pkg/controller/decorator (§2.3). */
  protected async syncObject(cached: KObject): Promise<void> {
    const kube = this.env.kube;
    const t = this.target(cached)!;
    const enabled = !!this.hooks.finalize;
    if (!this.matches(cached) && !hasFinalizer(cached, this.finalizer)) return;
    const parent = await wrap(
      syncFinalizer(kube, t.resource, cached, this.finalizer, enabled),
      `can't sync finalizer for ${describe(cached)}`,
    );
    if (!this.matches(parent) && !hasFinalizer(parent, this.finalizer)) return;

    // Attachments: controllerRef to this object and our annotation; decorators never adopt (§2.4).
    const observed: ObjMap = new Map();
    for (const { resource, informer } of this.attachments) {
      const group = initGroup(observed, resource.apiVersion, resource.kind);
      for (const o of informer.list(parent.metadata.namespace || undefined)) {
        if (
          controllerRefOf(o)?.uid !== parent.metadata.uid ||
          o.metadata.annotations?.[DECORATOR_ANNOTATION] !== this.name
        )
          continue;
        group.set(qualifiedName(o), o);
      }
    }
    const related = await this.customize.related(parent, t.resource);

    const finalizing = enabled && (!!parent.metadata.deletionTimestamp || !this.matches(parent));
    const request = (version: string): object => ({
      controller: this.cc,
      object: parent,
      attachments: toRequestMap(observed, parent, version),
      related: toRequestMap(related, parent, version),
    });
    // prettier-ignore
    const shape: ResponseShape = { labels: 'stringMap', annotations: 'stringMap', status: 'object', attachments: 'array', resyncAfterSeconds: 'number', finalized: 'boolean' };
    const res = await this.callHook(finalizing, request, shape, parent, 'attachments');
    const desired = res.attachments as KObject[];
    if (typeof res.resyncAfterSeconds === 'number' && res.resyncAfterSeconds > 0)
      this.queue.addAfter(Decorator.key(parent), res.resyncAfterSeconds * 1000);

    // Labels/annotations: null deletes, absent keys untouched; status: null leaves it (§2.3).
    const updated = clone(parent);
    const apply = (dest: Record<string, string>, updates: Record<string, string | null> | undefined): boolean => {
      let changed = false;
      for (const [k, v] of Object.entries(updates ?? {})) {
        if (v === null ? k in dest : dest[k] !== v) changed = true;
        if (v === null) delete dest[k];
        else dest[k] = v;
      }
      return changed;
    };
    const labels = { ...(updated.metadata.labels ?? {}) };
    const annotations = { ...(updated.metadata.annotations ?? {}) };
    const newStatus = res.status == null ? parent.status : res.status;
    const metaChanged = [apply(labels, res.labels), apply(annotations, res.annotations)].includes(true);
    const statusChanged = !deepEqual(parent.status, newStatus);
    if (metaChanged || statusChanged || (res.finalized === true && hasFinalizer(parent, this.finalizer))) {
      Object.assign(updated.metadata, { labels, annotations });
      updated.status = clone(newStatus);
      try {
        if (statusChanged && t.resource.hasStatus) {
          const written = await kube.update(t.resource, updated, 'status');
          updated.metadata.resourceVersion = written.metadata.resourceVersion;
        }
        if (res.finalized === true)
          updated.metadata.finalizers = (updated.metadata.finalizers ?? []).filter((f) => f !== this.finalizer);
        await kube.update(t.resource, updated);
      } catch (e) {
        if (isNotFound(e) || isConflict(e)) return; // swallowed: the next watch event retries
        throw new Error(`can't update ${describe(parent)}: ${errMsg(e)}`);
      }
    }

    for (const c of desired) {
      c.metadata.annotations ??= {};
      c.metadata.annotations[DECORATOR_ANNOTATION] = this.name;
    }
    if (!parent.metadata.deletionTimestamp || shouldFinalize(parent, this.finalizer, enabled)) {
      const err = await manageChildren(this.env, parent, observed, desired, this.methodOf);
      if (err) throw new Error(`can't reconcile children for ${describe(parent)}: ${err.message}`);
    }
  }
}

// =============================================================================================

export async function startMetacontroller(options: MetacontrollerOptions): Promise<Metacontroller> {
  const toStderr = (line: string): void =>
    void process.stderr.write(`${new Date().toISOString()} [metacontroller] ${line}\n`);
  const log = options.log ?? (process.env.PKO_METACONTROLLER_LOG === '1' ? toStderr : () => undefined);
  const kube = new Kube(options.kubeConfig);
  const hookAgent = new Agent({ keepAliveTimeout: 4_000 });
  const informers = new Map<string, Informer>();
  const env: Env = {
    kube,
    hookAgent,
    hookUrl: options.hookUrl,
    log,
    informer(r) {
      const key = `${r.apiVersion}/${r.resource}`;
      let inf = informers.get(key);
      if (!inf) informers.set(key, (inf = new Informer(kube, r, log)));
      return inf;
    },
  };
  const hosted: Hosted[] = [];
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    const drained = Promise.all(hosted.map((h) => h.stop()));
    for (const inf of informers.values()) inf.stop();
    // Closing the clients makes in-flight API and hook calls fail at once (no SyncError events
    // are written once stopped), so the drain below does not wait for hook timeouts.
    await kube.close();
    await hookAgent.destroy().catch(() => undefined);
    await drained;
  };

  try {
    const workers = 5; // Metacontroller's --workers default
    for (const raw of options.controllers) {
      const cc = clone(raw) as ControllerObject;
      const Kind =
        cc.kind === 'CompositeController' ? Composite : cc.kind === 'DecoratorController' ? Decorator : undefined;
      if (!Kind)
        throw new Error(`not a CompositeController or DecoratorController: ${JSON.stringify(cc).slice(0, 200)}`);
      const h = new Kind(env, cc, workers);
      hosted.push(h);
      await h.init();
    }
    // Wait for caches to sync before any worker runs (WaitForNamedCacheSync).
    const timeoutMs = options.startTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([...informers.values()].map((i) => i.synced)),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`informers did not sync within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    for (const h of hosted) h.start(options.resyncFloorMs ?? 1000);
  } catch (e) {
    await stop();
    throw e;
  }

  return {
    stop,
    syncNow: (kind, namespace, name) => hosted.forEach((h) => h.syncNow(kind, namespace, name)),
  };
}
