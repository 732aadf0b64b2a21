/**
 * The driver's DecoratorController: target informers with label and annotation selectors,
 * attachments, labels/annotations/status written back to the target
 * (https://metacontroller.github.io/metacontroller/api/decoratorcontroller.html, https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/decorator/controller.go).
 */
import { clone, deepEqual, selectorMatches } from './apply';
import {
  controllerRefOf,
  Customize,
  type Env,
  hasFinalizer,
  initGroup,
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
import type { Informer } from './informer';
import { groupOf, isConflict, isNotFound, type KObject, type Resource } from './kube';
import type { ResponseShape } from './webhook';

const DECORATOR_ANNOTATION = 'metacontroller.k8s.io/decorator-controller';

/** https://metacontroller.github.io/metacontroller/api/decoratorcontroller.html#sync-hook-response */
interface DecoratorResponse extends HookResponse {
  labels?: Record<string, string | null> | null;
  annotations?: Record<string, string | null> | null;
}

export class Decorator extends Hosted {
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
    await this.buildHooks();
    this.informers = this.targets.map((t) => t.informer);
    this.customize = new Customize(
      this.env,
      this.cc,
      await this.webhook('customize', spec.hooks?.customize),
      this.targets,
      (p) => this.enqueue(p),
    );
    for (const t of this.targets) this.watchParents(t.informer, t.rule.ignoreStatusChanges);
    for (const { informer } of this.attachments) this.watchChildren(informer, (o) => this.onAttachment(o));
  }

  private target(o: { apiVersion: string; kind: string }): (typeof this.targets)[number] | undefined {
    return this.targets.find((t) => t.resource.group === groupOf(o.apiVersion) && t.resource.kind === o.kind);
  }

  /**
   * Label and annotation selectors of the object's kind, keyed by Kind.group
   * (https://metacontroller.github.io/metacontroller/api/decoratorcontroller.html#label-selector, https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/decorator/selector.go).
   */
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

  /** syncParentObject (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/decorator/controller.go). */
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

    // Attachments: controllerRef to this object and our annotation; decorators never adopt
    // (getChildren in https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/decorator/controller.go).
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
    const res = await this.callHook<DecoratorResponse>(finalizing, request, shape, parent, 'attachments');
    const desired = res.attachments ?? [];
    if (typeof res.resyncAfterSeconds === 'number' && res.resyncAfterSeconds > 0)
      this.queue.addAfter(Decorator.key(parent), res.resyncAfterSeconds * 1000);

    // Labels/annotations: null deletes, absent keys untouched; status: null leaves it
    // (https://metacontroller.github.io/metacontroller/api/decoratorcontroller.html#sync-hook-response).
    const updated = clone(parent);
    const apply = (
      dest: Record<string, string>,
      updates: Record<string, string | null> | null | undefined,
    ): boolean => {
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
        throw new Error(`can't update ${describe(parent)}: ${errMsg(e)}`, { cause: e });
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
