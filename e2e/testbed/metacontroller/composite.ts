/**
 * The driver's CompositeController: parent and child informers, claiming, the sync/finalize hooks,
 * children and status (https://metacontroller.github.io/metacontroller/api/compositecontroller.html,
 * https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/composite/controller.go).
 */
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import { clone, deepEqual, type LabelSelector, selectorEmpty, selectorMatches } from './apply';
import {
  aggregate,
  atomicUpdate,
  controllerRefOf,
  Customize,
  type Env,
  hasFinalizer,
  initGroup,
  insert,
  isNotFoundLike,
  makeControllerRef,
  manageChildren,
  type ObjMap,
  qualifiedName,
  shouldFinalize,
  syncFinalizer,
  toRequestMap,
  type UpdateMethod,
  updateStrategies,
} from './common';
import { describe, errMsg, type ControllerObject, type HookResponse, Hosted, type ResourceRule, wrap } from './hosted';
import { type Informer, objectKey } from './informer';
import { groupOf, isConflict, isGone, type KObject, type OwnerReference, type Resource, unless } from './kube';
import type { ResponseShape } from './webhook';

export class Composite extends Hosted {
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
    await this.buildHooks();
    this.methodOf = await updateStrategies(kube, spec.childResources ?? []);
    this.parentInformer = this.env.informer(this.parentResource);
    for (const rule of spec.childResources ?? []) {
      const resource = await kube.resolve(rule.apiVersion, { resource: rule.resource });
      this.children.push({ rule, resource, informer: this.env.informer(resource) });
    }
    this.informers = [this.parentInformer];
    const parents = [{ informer: this.parentInformer, resource: this.parentResource }];
    this.customize = new Customize(
      this.env,
      this.cc,
      await this.webhook('customize', spec.hooks?.customize),
      parents,
      (p) => this.enqueue(p),
    );
    this.watchParents(this.parentInformer, spec.parentResource.ignoreStatusChanges);
    for (const { informer } of this.children) this.watchChildren(informer, (o, deleted) => this.onChild(o, deleted));
  }

  /** A CompositeController parent must be a CRD with the status subresource (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/composite/metacontroller.go). */
  private async checkStatusSubresource(): Promise<void> {
    const r = this.parentResource;
    const crdName = `${r.resource}.${r.group}`;
    const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName}`;
    const crd = await wrap(
      this.env.kube.request<V1CustomResourceDefinition>('GET', crdPath),
      `CompositeController ${this.name}: can't get CRD ${crdName}`,
    );
    const version = r.apiVersion.split('/')[1];
    const v = crd.spec.versions.find((x) => x.name === version);
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

  /**
   * controller-uid=<uid> with generateSelector, else the parent's .spec.selector
   * (https://metacontroller.github.io/metacontroller/api/compositecontroller.html#generate-selector).
   */
  private selector(parent: KObject): LabelSelector {
    if (this.cc.spec.generateSelector) return { matchLabels: { 'controller-uid': parent.metadata.uid! } };
    const sel = (parent as { spec?: { selector?: LabelSelector } }).spec?.selector;
    if (!sel || selectorEmpty(sel))
      throw new Error('.spec.selector must have either matchLabels, matchExpressions, or both');
    return sel;
  }

  /** syncParentObject (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/composite/controller.go). */
  protected async syncObject(cached: KObject): Promise<void> {
    const kube = this.env.kube;
    const enabled = !!this.hooks.finalize;
    if (!hasFinalizer(cached, this.finalizer) && !this.matchesLabels(cached)) return;
    // Before anything else, our finalizer (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/common/finalizer/finalizer.go).
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
      this.callHook<HookResponse>(finalizing, request, shape, parent, 'children'),
      `sync hook failed for ${describe(parent)}`,
    );
    const desired = res.children ?? [];

    if (typeof res.resyncAfterSeconds === 'number' && res.resyncAfterSeconds > 0) {
      this.queue.addAfter(objectKey(parent), res.resyncAfterSeconds * 1000);
    }
    // As the code does (not only for finalize calls): finalized → remove the finalizer.
    if (res.finalized === true) {
      parent = await wrap(
        syncFinalizer(kube, this.parentResource, parent, this.finalizer, false),
        `can't remove finalizer for ${describe(parent)}`,
      );
    }

    // Every desired child carries the selector's labels (controller-uid added)
    // (https://metacontroller.github.io/metacontroller/api/compositecontroller.html#label-selector).
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
      await this.updateStatus(parent, res.status);
    } catch (e) {
      if (isNotFoundLike(e) || isConflict(e)) return; // the next event retries
      throw new Error(`can't update status for ${describe(parent)}: ${errMsg(e)}`, { cause: e });
    }
    if (manageErr) throw manageErr;
  }

  /** Owned children, adopting matching orphans and releasing non-matching ones (claimChildren in https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/composite/controller.go). */
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

  /**
   * The hook's status replaces .status, plus observedGeneration; written only on change
   * (https://metacontroller.github.io/metacontroller/api/compositecontroller.html#sync-hook-response).
   */
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
