import type { KubernetesObject, ObjectsByType } from '../../../schemas/generated/types';
import { isRecord } from './json';

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

/** Where Metacontroller's dynamic apply keeps each child as the hooks last answered it. */
export const LAST_APPLIED_ANNOTATION = 'metacontroller.k8s.io/last-applied-configuration';

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
 * A child the hooks must keep as it is (they cannot compute it now: an invalid spec, a running
 * operation) but cannot verify as theirs: its last-applied configuration is not what the parent's
 * status records the hooks answered (kept-children.ts). The hook server answers 409 naming `field`
 * (path segments into the body) with `reason`; Metacontroller changes nothing and calls again.
 */
export class ChildNotVerified extends Error {
  constructor(
    readonly field: readonly string[],
    readonly reason: string,
  ) {
    super(`${field.join('.')} ${reason}`);
    this.name = 'ChildNotVerified';
  }
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
