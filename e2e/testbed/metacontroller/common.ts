/**
 * What CompositeController and DecoratorController share (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/common):
 * object maps, the finalizer manager, atomic GET+PUT updates, ManageChildren and the customize
 * manager with related-object informers (https://metacontroller.github.io/metacontroller/api/customize.html).
 */
import type { Agent } from 'undici';
import { applyUpdate, clone, deepEqual, type LabelSelector, selectorMatches, setLastApplied } from './apply';
import { sleep } from '../helpers';
import type { Informer } from './informer';
import {
  groupOf,
  isAlreadyExists,
  isConflict,
  isNotFound,
  type KObject,
  type Kube,
  type OwnerReference,
  type Resource,
  unless,
} from './kube';
import { type HookUrl, TooManyRequests, type Webhook } from './webhook';

/** Shared by every hosted controller of one driver. */
export interface Env {
  kube: Kube;
  hookAgent: Agent;
  hookUrl?: HookUrl;
  informer(r: Resource): Informer;
  log(line: string): void;
}

// ---------------------------------------------------------------------------------------------
// Object maps: type key `Kind.apiVersion` → object key → object
// (https://metacontroller.github.io/metacontroller/api/compositecontroller.html#sync-hook-request, https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/common/api/object_map.go)

export type ObjMap = Map<string, Map<string, KObject>>;

export const typeKey = (apiVersion: string, kind: string): string => `${kind}.${apiVersion}`;
/** UniformObjectMap key: `namespace/name` for namespaced objects, `name` otherwise. */
export const qualifiedName = (o: KObject): string =>
  o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;

export function initGroup(m: ObjMap, apiVersion: string, kind: string): Map<string, KObject> {
  const k = typeKey(apiVersion, kind);
  let g = m.get(k);
  if (!g) m.set(k, (g = new Map<string, KObject>()));
  return g;
}
export function insert(m: ObjMap, o: KObject): void {
  initGroup(m, o.apiVersion, o.kind).set(qualifiedName(o), o);
}

/**
 * The map as a hook of `version` sees it: v2 keys are uniform; v1 keys are relative to the parent
 * (`name`, or `namespace/name` under a cluster-scoped parent) and a namespaced parent only sees
 * objects of its own namespace.
 */
export function toRequestMap(m: ObjMap, parent: KObject, version: string): Record<string, Record<string, KObject>> {
  const out: Record<string, Record<string, KObject>> = {};
  const pns = parent.metadata.namespace ?? '';
  for (const [tk, group] of m) {
    const g: Record<string, KObject> = (out[tk] = {});
    for (const [qn, o] of group) {
      if (version === 'v2') g[qn] = o;
      else if (pns === '') g[qn] = o;
      else if ((o.metadata.namespace ?? '') === pns) g[o.metadata.name] = o;
    }
  }
  return out;
}

export const controllerRefOf = (o: KObject): OwnerReference | undefined =>
  o.metadata.ownerReferences?.find((r) => r.controller === true);

export const makeControllerRef = (parent: KObject): OwnerReference => ({
  apiVersion: parent.apiVersion,
  kind: parent.kind,
  name: parent.metadata.name,
  uid: parent.metadata.uid!,
  controller: true,
  blockOwnerDeletion: true,
});

export const hasFinalizer = (o: KObject, name: string): boolean => (o.metadata.finalizers ?? []).includes(name);

/** utilerrors.NewAggregate's message. */
export function aggregate(errs: Error[]): Error | undefined {
  if (errs.length === 0) return undefined;
  return errs.length === 1 ? errs[0] : new Error(`[${errs.map((e) => e.message).join(', ')}]`);
}

/**
 * GET + mutate + PUT with the live resourceVersion, retried on conflict (client-go
 * retry.DefaultBackoff: 4 tries, 10 ms × 5^n); a replaced object (other UID) is NotFound.
 */
export async function atomicUpdate(
  kube: Kube,
  r: Resource,
  orig: KObject,
  mutate: (o: KObject) => boolean,
  sub?: 'status',
): Promise<KObject> {
  for (let attempt = 0; ; attempt++) {
    const cur = await kube.get(r, orig.metadata.namespace, orig.metadata.name);
    cur.apiVersion = r.apiVersion;
    cur.kind = r.kind;
    if (cur.metadata.uid !== orig.metadata.uid) {
      throw Object.assign(new Error(`${r.resource} "${orig.metadata.name}" not found (UID changed)`), { code: 404 });
    }
    if (!mutate(cur)) return cur;
    try {
      const out = await kube.update(r, cur, sub);
      return { ...out, apiVersion: r.apiVersion, kind: r.kind };
    } catch (e) {
      if (!isConflict(e) || attempt >= 3) throw e;
      await sleep(10 * 5 ** attempt * (1 + Math.random() * 0.1));
    }
  }
}
export const isNotFoundLike = (e: unknown): boolean => isNotFound(e) || (e as { code?: number }).code === 404;

/** finalizer.Manager.SyncObject (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/common/finalizer/finalizer.go): add before anything else, or remove when unused. */
export async function syncFinalizer(
  kube: Kube,
  r: Resource,
  obj: KObject,
  name: string,
  enabled: boolean,
): Promise<KObject> {
  if (hasFinalizer(obj, name) === enabled) return obj;
  if (enabled && obj.metadata.deletionTimestamp) return obj;
  return atomicUpdate(kube, r, obj, (o) => {
    const fins = o.metadata.finalizers ?? [];
    if (fins.includes(name) === enabled) return false;
    o.metadata.finalizers = enabled ? [...fins, name] : fins.filter((f) => f !== name);
    return true;
  });
}

/** Children are managed while the parent is being deleted only if our finalizer holds it. */
export function shouldFinalize(parent: KObject, finalizer: string, enabled: boolean): boolean {
  const fins = parent.metadata.finalizers ?? [];
  if (fins.includes('foregroundDeletion') || fins.includes('orphan')) return false;
  return enabled && fins.includes(finalizer);
}

// ---------------------------------------------------------------------------------------------
// ManageChildren (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/common/manage_children.go): deletes first, then creates
// and updates; errors collected.

export type UpdateMethod = 'OnDelete' | 'Recreate' | 'InPlace' | 'RollingRecreate' | 'RollingInPlace';

export async function manageChildren(
  env: Env,
  parent: KObject,
  observed: ObjMap,
  desired: KObject[],
  methodOf: (group: string, kind: string) => UpdateMethod,
): Promise<Error | undefined> {
  const errs: Error[] = [];
  const desiredMap: ObjMap = new Map();
  for (const d of desired) insert(desiredMap, d);
  const describe = (o: KObject): string => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  // The resource of a group's kind (any kind discovery knows, as dynClient.Kind does).
  const resourceOf = (group: Map<string, KObject>): Promise<Resource | undefined> => {
    const { apiVersion, kind } = group.values().next().value!;
    return env.kube.resolve(apiVersion, { kind }).catch((e: Error) => void errs.push(e));
  };

  for (const [tk, group] of observed) {
    const r = group.size > 0 ? await resourceOf(group) : undefined;
    for (const [qn, o] of r ? group : []) {
      if (o.metadata.deletionTimestamp || desiredMap.get(tk)?.has(qn)) continue;
      env.log(`deleting child ${describe(o)} of ${describe(parent)}`);
      await env.kube.delete(r!, o.metadata.namespace, o.metadata.name, o.metadata.uid).catch((e: Error) => {
        if (!isNotFound(e)) errs.push(new Error(`can't delete ${describe(o)}: ${e.message}`));
      });
    }
  }
  for (const [tk, group] of desiredMap) {
    const r = await resourceOf(group);
    for (const [qn, d] of r ? group : []) {
      const o = observed.get(tk)?.get(qn);
      const done = o
        ? updateChild(env, r!, o, d, methodOf(groupOf(d.apiVersion), d.kind))
        : createChild(env, r!, parent, d);
      await done.catch((e: Error) => errs.push(e));
    }
  }
  return aggregate(errs);
}

async function createChild(env: Env, r: Resource, parent: KObject, desired: KObject): Promise<void> {
  const obj = clone(desired);
  // The annotation holds the hook's object before anything else is added to it.
  setLastApplied(obj, clone(desired));
  const ref = makeControllerRef(parent);
  const refs = obj.metadata.ownerReferences ?? [];
  if (!refs.some((x) => x.uid === ref.uid)) obj.metadata.ownerReferences = [...refs, ref];
  env.log(`creating ${obj.kind} ${qualifiedName(obj)} for ${parent.kind} ${qualifiedName(parent)}`);
  await env.kube.create(r, obj).catch(unless(isAlreadyExists)); // AlreadyExists is swallowed (as manage_children.go does)
}

/**
 * DynamicApply.Apply on an existing child: no write when the merge changes nothing
 * (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/common/manage_children.go, https://metacontroller.github.io/metacontroller/api/apply.html#dynamic-apply).
 */
async function updateChild(
  env: Env,
  r: Resource,
  observed: KObject,
  desired: KObject,
  method: UpdateMethod,
): Promise<void> {
  const merged = applyUpdate(observed, desired);
  if (deepEqual(merged, observed) || observed.metadata.deletionTimestamp || method === 'OnDelete') return;
  if (method === 'Recreate' || method === 'RollingRecreate') {
    // Deleted now, created again by a later sync.
    env.log(`deleting ${observed.kind} ${qualifiedName(observed)} to recreate it`);
    await env.kube
      .delete(r, observed.metadata.namespace, observed.metadata.name, observed.metadata.uid)
      .catch(unless(isNotFound));
  } else {
    env.log(`updating ${observed.kind} ${qualifiedName(observed)} in place`);
    await env.kube.update(r, merged).catch(unless(isNotFound, isConflict));
  }
}

/** `Kind.group` → method, version ignored; OnDelete when unset (https://metacontroller.github.io/metacontroller/api/compositecontroller.html#child-update-methods). */
export async function updateStrategies(
  kube: Kube,
  rules: { apiVersion: string; resource: string; updateStrategy?: { method?: string } }[],
): Promise<(group: string, kind: string) => UpdateMethod> {
  const m = new Map<string, UpdateMethod>();
  for (const rule of rules) {
    const method = rule.updateStrategy?.method;
    if (!method || method === 'OnDelete') continue;
    if (!['Recreate', 'InPlace', 'RollingRecreate', 'RollingInPlace'].includes(method)) {
      throw new Error(`unknown update strategy method "${method}" for ${rule.resource}`);
    }
    const r = await kube.resolve(rule.apiVersion, { resource: rule.resource });
    m.set(`${r.kind}.${r.group}`, method as UpdateMethod);
  }
  return (group, kind) => m.get(`${kind}.${group}`) ?? 'OnDelete';
}

// ---------------------------------------------------------------------------------------------
// Customize manager (https://metacontroller.github.io/metacontroller/api/customize.html, https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/common/customize/manager.go)

interface RelatedRule {
  apiVersion: string;
  resource: string;
  labelSelector?: LabelSelector | null;
  namespaceSelector?: LabelSelector | null;
  namespace?: string;
  names?: string[] | null;
}
interface CustomizeResult {
  rules: RelatedRule[];
  version: string;
  expires: number;
}

export class RelatedNotSynced extends Error {
  constructor() {
    super('related informer not synced yet');
  }
}

const CUSTOMIZE_TTL_MS = 20 * 60_000;

export class Customize {
  private readonly cache = new Map<string, CustomizeResult>();
  private readonly watched = new Set<Informer>();

  constructor(
    private readonly env: Env,
    private readonly controller: unknown,
    /** The customize webhook (built by the controller, its endpoint resolved); none: no related objects. */
    private readonly hook: Webhook | undefined,
    /** The parents (their informers and resources), to find who a related object concerns. */
    private readonly parents: { informer: Informer; resource: Resource }[],
    private readonly enqueue: (parent: KObject) => void,
  ) {}

  /** Cached per (parent UID, generation) for 20 minutes. */
  async rules(parent: KObject): Promise<CustomizeResult | undefined> {
    if (!this.hook) return undefined;
    const key = `${parent.metadata.uid}/${parent.metadata.generation ?? 0}`;
    const hit = this.cache.get(key);
    if (hit && hit.expires > Date.now()) return hit;
    const res = await this.hook
      .call({ controller: this.controller, parent }, { relatedResources: 'array' })
      .catch((e: Error) => {
        throw e instanceof TooManyRequests
          ? e
          : new Error(`customize hook failed (version=${this.hook!.version}): ${e.message}`);
      });
    const result = {
      rules: (res.relatedResources ?? []) as RelatedRule[],
      version: this.hook.version,
      expires: Date.now() + CUSTOMIZE_TTL_MS,
    };
    this.cache.set(key, result);
    return result;
  }

  private informerFor(r: Resource): Informer {
    const inf = this.env.informer(r);
    if (!this.watched.has(inf)) {
      this.watched.add(inf);
      inf.addHandlers({
        add: (o) => this.notify([o]),
        update: (old, cur) => {
          if (old.metadata.resourceVersion !== cur.metadata.resourceVersion) this.notify([old, cur]);
        },
        delete: (o) => this.notify([o]),
      });
    }
    return inf;
  }

  /** determineSelectionType; namespaceSelector rules are not implemented by the driver (docs/metacontroller-local.md). */
  private static selectionType(rule: RelatedRule): 'labels' | 'nsAndLabels' | 'nsAndNames' {
    const hasNames = (rule.names ?? []).length > 0;
    if (rule.namespaceSelector)
      throw new Error(`related rule: namespaceSelector is not implemented by the driver: ${JSON.stringify(rule)}`);
    if (hasNames && rule.labelSelector) {
      throw new Error(
        `related rule cannot have both names and labelSelector/namespaceSelector specified: ${JSON.stringify(rule)}`,
      );
    }
    if (rule.labelSelector && rule.namespace) return 'nsAndLabels';
    return rule.namespace || hasNames ? 'nsAndNames' : 'labels';
  }

  /**
   * Whether a rule selects an object (the listing of GetRelatedObjects and matchesRelatedRule in
   * one). A v1 customize hook with a namespaced parent sees its own namespace only: always when
   * matching an event, and for label rules when listing (customize/manager.go).
   */
  private static selects(
    rule: RelatedRule,
    r: Resource,
    v1Scoped: boolean,
    parent: KObject,
    o: KObject,
    event: boolean,
  ): boolean {
    const type = Customize.selectionType(rule);
    const rns = o.metadata.namespace ?? '';
    if (v1Scoped && r.namespaced && rns !== (parent.metadata.namespace ?? '') && (event || type === 'labels'))
      return false;
    if (type !== 'labels' && r.namespaced && rule.namespace && rns !== rule.namespace) return false;
    if (type === 'nsAndNames') return (rule.names ?? []).length === 0 || rule.names!.includes(o.metadata.name);
    return selectorMatches(rule.labelSelector, o.metadata.labels);
  }

  /** The related objects of a parent (GetRelatedObjects): one group per rule, even if empty. */
  async related(parent: KObject, parentResource: Resource): Promise<ObjMap> {
    const out: ObjMap = new Map();
    const res = await this.rules(parent);
    if (!res) return out;
    const v1Scoped = res.version !== 'v2' && parentResource.namespaced;
    for (const rule of res.rules) {
      const r = await this.env.kube.resolve(rule.apiVersion, { resource: rule.resource });
      const inf = this.informerFor(r);
      if (!inf.hasSynced) throw new RelatedNotSynced();
      const pns = parent.metadata.namespace ?? '';
      if (
        v1Scoped &&
        r.namespaced &&
        Customize.selectionType(rule) !== 'labels' &&
        rule.namespace &&
        rule.namespace !== pns
      ) {
        throw new Error(
          `requested related object namespace ${rule.namespace} differs from parent object namespace ${pns}`,
        );
      }
      const group = initGroup(out, r.apiVersion, r.kind);
      for (const o of inf.list())
        if (Customize.selects(rule, r, v1Scoped, parent, o, false)) group.set(qualifiedName(o), o);
    }
    return out;
  }

  /** Re-enqueues every parent whose cached (or freshly fetched) rules match a related object. */
  private notify(related: KObject[]): void {
    void (async () => {
      for (const { informer, resource } of this.parents) {
        for (const parent of informer.list()) {
          try {
            const res = await this.rules(parent);
            if (!res) continue;
            const v1Scoped = res.version !== 'v2' && resource.namespaced;
            let hit = false;
            for (const rule of res.rules) {
              const r = await this.env.kube.resolve(rule.apiVersion, { resource: rule.resource });
              const ofRule = (rel: KObject): boolean => rel.apiVersion === rule.apiVersion && rel.kind === r.kind;
              if (related.some((rel) => ofRule(rel) && Customize.selects(rule, r, v1Scoped, parent, rel, true)))
                hit = true;
            }
            if (hit) this.enqueue(parent);
          } catch {
            // skipped for now; a later event or resync tries again (as Metacontroller does)
          }
        }
      }
    })();
  }
}
