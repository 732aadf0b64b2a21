import { isRecord, stableStringify } from '../lib/json';
import { type KObject, mapKey, type ObjectMap, type RelatedResourceRule } from '../lib/k8s';
import { FLUX_KINDS } from '../stack/validate';
import { InputError } from './exit-codes';

/** Metacontroller's key of an object in a hook request (v2): `namespace/name`, or `name` when cluster-scoped. */
function objectKey(object: KObject): string {
  const ns = object.metadata.namespace;
  return typeof ns === 'string' && ns !== '' ? `${ns}/${object.metadata.name}` : object.metadata.name;
}

/** An object's identity: its type and its key. */
export function identity(object: KObject): string {
  return `${mapKey(object.kind, object.apiVersion)} ${objectKey(object)}`;
}

/** Objects grouped as Metacontroller sends them in `children` and `related`. */
export function objectMap(objects: readonly KObject[]): ObjectMap {
  const map: ObjectMap = {};
  for (const object of objects) {
    const type = mapKey(object.kind, object.apiVersion);
    const inner = Object.hasOwn(map, type) ? map[type]! : (map[type] = {});
    inner[objectKey(object)] = object;
  }
  return map;
}

/** Refuses two documents that are the same object: which one the cluster holds would be a guess. */
export function refuseDuplicates(objects: readonly KObject[], what: string): void {
  const seen = new Set<string>();
  for (const object of objects) {
    const id = identity(object);
    if (seen.has(id)) throw new InputError(`${what}: ${id} appears twice`);
    seen.add(id);
  }
}

/**
 * The kind behind each resource a customize rule can name (the discovery Metacontroller does):
 * the Stack's Program or Flux source, prerequisite Stacks, Secrets, refresh-request ConfigMaps
 * and the Namespace.
 */
const RESOURCE_KINDS: ReadonlyMap<string, string> = new Map([
  ['programs', 'Program'],
  ['stacks', 'Stack'],
  ['secrets', 'Secret'],
  ['configmaps', 'ConfigMap'],
  ['namespaces', 'Namespace'],
  ...Object.entries(FLUX_KINDS).map(([kind, resource]): [string, string] => [resource, kind]),
]);

/** Whether the hooks ever read objects of this kind (a related object a customize rule may name). */
export function isRelatedKind(kind: string): boolean {
  return [...RESOURCE_KINDS.values()].includes(kind);
}

function matchesRule(object: KObject, rule: RelatedResourceRule): boolean {
  if (object.apiVersion !== rule.apiVersion || object.kind !== RESOURCE_KINDS.get(rule.resource)) return false;
  if (rule.namespace !== undefined && object.metadata.namespace !== rule.namespace) return false;
  if (rule.names !== undefined && !rule.names.includes(object.metadata.name)) return false;
  const labels: unknown = object.metadata.labels;
  const wanted = Object.entries(rule.labelSelector?.matchLabels ?? {});
  return wanted.every(([key, value]) => isRecord(labels) && Object.hasOwn(labels, key) && labels[key] === value);
}

/** What Metacontroller would send as `related` for these rules (from the Stack's customize hook). */
export function selectRelated(rules: readonly RelatedResourceRule[], pool: readonly KObject[]): ObjectMap {
  return objectMap(pool.filter((object) => rules.some((rule) => matchesRule(object, rule))));
}

/** The observed objects a parent controls (Metacontroller's children: a controller ownerReference to it). */
export function ownedBy(parent: KObject, observed: readonly KObject[]): KObject[] {
  const uid = parent.metadata.uid;
  return observed.filter(
    (object) =>
      object.metadata.namespace === parent.metadata.namespace &&
      Array.isArray(object.metadata.ownerReferences) &&
      object.metadata.ownerReferences.some(
        (ref: unknown) =>
          isRecord(ref) &&
          ref.controller === true &&
          ref.kind === parent.kind &&
          ref.apiVersion === parent.apiVersion &&
          ref.name === parent.metadata.name &&
          (uid === undefined || ref.uid === uid),
      ),
  );
}

/** Everything of an object but its metadata and status: what the API server's generation counts. */
function content(object: KObject): string {
  const rest: Record<string, unknown> = { ...object };
  delete rest.metadata;
  delete rest.status;
  return stableStringify(rest);
}

/**
 * The object as the cluster would hold it once the desired document is applied over the observed
 * one: the document's content and labels, the observed uid and status, and the observed
 * generation, plus one when the content changed (the API server's rule for custom resources).
 */
export function appliedOver(desired: KObject, observed: KObject | undefined): KObject {
  if (observed === undefined) {
    return desired.metadata.generation === undefined
      ? { ...desired, metadata: { ...desired.metadata, generation: 1 } }
      : desired;
  }
  const metadata = { ...desired.metadata };
  if (observed.metadata.uid !== undefined) metadata.uid = observed.metadata.uid;
  const generation = observed.metadata.generation;
  if (typeof generation === 'number')
    metadata.generation = content(desired) === content(observed) ? generation : generation + 1;
  else metadata.generation ??= 1;
  const applied: KObject = { ...desired, metadata };
  if (observed.status !== undefined) applied.status = observed.status;
  else delete applied.status;
  return applied;
}
