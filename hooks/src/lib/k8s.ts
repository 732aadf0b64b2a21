import type { KubernetesObject, ObjectsByType } from '../../../schemas/generated/types';
import { isRecord, MAX_NESTING, nestedDeeperThan, pathNestedDeeperThan } from './json';

/**
 * A Kubernetes object as Metacontroller sends it and as the hooks return it: apiVersion, kind and
 * metadata (checked by the request schema), the rest depending on the kind.
 */
export type KObject = KubernetesObject & { metadata: { [key: string]: unknown } };

/** A `@kubernetes/client-node` model as it travels in JSON: its times are RFC 3339 strings, not Dates. */
export type Json<T> = T extends Date
  ? string
  : T extends (infer U)[]
    ? Json<U>[]
    : T extends object
      ? { [K in keyof T]: Json<T[K]> }
      : T;

/** An object of a known kind (a client-node model, or one of schemas/generated/types.ts) as a KObject. */
export type Typed<T> = Json<T> & KObject;

/** Metacontroller's children, related objects or attachments: by `Kind.apiVersion`, then by key. */
export type ObjectMap = ObjectsByType;

/** Metacontroller's outer map key: `Kind.version` for the core group, `Kind.group/version` otherwise. */
export function mapKey(kind: string, apiVersion: string): string {
  return `${kind}.${apiVersion}`;
}

/**
 * All objects of one kind in a Metacontroller children/related map, sorted by name (deterministic),
 * typed as that kind: Metacontroller files each object under its own kind.
 */
export function objectsOf<T = object>(map: ObjectMap | undefined, kind: string, apiVersion: string): Typed<T>[] {
  // Own keys only: a kind named by a user (a Flux source's) is never found on Object.prototype.
  const key = mapKey(kind, apiVersion);
  const inner = map !== undefined && Object.hasOwn(map, key) ? map[key] : undefined;
  if (!isRecord(inner)) return [];
  return Object.values(inner)
    .filter((o): o is Typed<T> => isRecord(o) && isRecord(o.metadata) && typeof o.metadata.name === 'string')
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
}

/** One object by namespace and name (v2 keys are `namespace/name`; v1 keys are `name`). */
export function findObject<T = object>(
  map: ObjectMap | undefined,
  kind: string,
  apiVersion: string,
  namespace: string | undefined,
  name: string,
): Typed<T> | undefined {
  return objectsOf<T>(map, kind, apiVersion).find(
    (o) => o.metadata.name === name && (namespace === undefined || (o.metadata.namespace ?? namespace) === namespace),
  );
}

export const LAST_APPLIED_ANNOTATION = 'metacontroller.k8s.io/last-applied-configuration';

/**
 * The child exactly as the hooks last returned it, so that returning it again changes nothing.
 * With dynamic apply that is Metacontroller's last-applied annotation; under server-side apply (no
 * annotation) it is the observed object without server-populated fields. Used whenever a child
 * must be kept untouched: an invalid spec, an unavailable source, or a running operation. An
 * annotation nested deeper than MAX_NESTING is not the hooks' (no child of theirs nests that deep;
 * returned, it would overflow the answer's serialiser) and is ignored like one that is not JSON.
 */
export function asLastApplied(observed: KObject): KObject {
  const raw = observed.metadata.annotations?.[LAST_APPLIED_ANNOTATION];
  if (raw !== undefined) {
    try {
      const parsed: unknown = JSON.parse(raw);
      if (
        isRecord(parsed) &&
        isRecord(parsed.metadata) &&
        parsed.metadata.name === observed.metadata.name &&
        !nestedDeeperThan(parsed, MAX_NESTING)
      ) {
        return parsed as KObject;
      }
    } catch {
      // fall through to the observed copy
    }
  }
  const { annotations, labels, name, namespace } = observed.metadata;
  const kept: KObject = { apiVersion: observed.apiVersion, kind: observed.kind, metadata: { name } };
  if (namespace !== undefined) kept.metadata.namespace = namespace;
  if (labels !== undefined) kept.metadata.labels = { ...labels };
  if (annotations !== undefined) {
    const rest = { ...annotations };
    delete rest[LAST_APPLIED_ANNOTATION];
    kept.metadata.annotations = rest;
  }
  for (const [k, v] of Object.entries(observed)) {
    if (k !== 'apiVersion' && k !== 'kind' && k !== 'metadata' && k !== 'status') kept[k] = v;
  }
  // The API server types every kind of child, and none nests this deep: not a request Metacontroller sent.
  const tooDeep = pathNestedDeeperThan(kept, MAX_NESTING, '');
  if (tooDeep !== undefined) {
    const key = namespace === undefined ? name : `${namespace}/${name}`;
    throw new MalformedRequest(
      ['children', mapKey(observed.kind, observed.apiVersion), String(key)],
      `is nested more than ${MAX_NESTING} levels deep (at ${tooDeep.slice(1)}); no child of a Stack is`,
    );
  }
  return kept;
}

/**
 * A request Metacontroller could not have sent, found while answering it: the hook server answers
 * 400 naming `field` (path segments into the body) with `reason` (http/errors.ts).
 */
export class MalformedRequest extends Error {
  constructor(
    readonly field: readonly string[],
    readonly reason: string,
  ) {
    super(`${field.join('.')} ${reason}`);
    this.name = 'MalformedRequest';
  }
}

/**
 * A child whose update strategy is OnDelete (our Jobs), returned so Metacontroller keeps it:
 * Metacontroller never updates such a child, it only checks that it is still desired (by name)
 * and that its labels match the selector. So the spec is left out: it would cost every sync a
 * serialisation of each finished Job's pod template for nothing, and if the Job vanished between
 * Metacontroller's look and its apply (TTL), a spec-less object cannot be created again by mistake.
 */
export function asRetained(observed: KObject): KObject {
  const { name, namespace, labels } = observed.metadata;
  const kept: KObject = { apiVersion: observed.apiVersion, kind: observed.kind, metadata: { name } };
  if (namespace !== undefined) kept.metadata.namespace = namespace;
  if (labels !== undefined) kept.metadata.labels = labels;
  return kept;
}

/** The fields of a status condition the hooks read, whatever the object's kind. */
export interface ObservedCondition {
  type: string;
  status?: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

/** A condition from an object's status.conditions (fields that are not strings are left out). */
export function conditionOf(obj: KObject | undefined, type: string): ObservedCondition | undefined {
  const status = obj?.status;
  const conds = isRecord(status) ? status.conditions : undefined;
  if (!Array.isArray(conds)) return undefined;
  const found: unknown = conds.find((c) => isRecord(c) && c.type === type);
  if (!isRecord(found)) return undefined;
  const condition: ObservedCondition = { type };
  for (const key of ['status', 'reason', 'message', 'lastTransitionTime'] as const) {
    const value = found[key];
    if (typeof value === 'string') condition[key] = value;
  }
  return condition;
}
