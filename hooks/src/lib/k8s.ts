import { isRecord } from './json';

/** The parts of a Kubernetes object the hooks read. Objects arrive as JSON from Metacontroller. */
export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  generation?: number;
  resourceVersion?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: unknown[];
  finalizers?: string[];
  [key: string]: unknown;
}

export interface KObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec?: any;
  status?: any;
  data?: Record<string, string>;
  [key: string]: unknown;
}

/** Metacontroller's outer map key: `Kind.version` for the core group, `Kind.group/version` otherwise. */
export function mapKey(kind: string, apiVersion: string): string {
  return `${kind}.${apiVersion}`;
}

export type ObjectMap = Record<string, Record<string, KObject>>;

/** All objects of one kind in a Metacontroller children/related map, sorted by name (deterministic). */
export function objectsOf(map: ObjectMap | undefined, kind: string, apiVersion: string): KObject[] {
  const inner = map?.[mapKey(kind, apiVersion)];
  if (!inner) return [];
  return Object.values(inner)
    .filter((o): o is KObject => isRecord(o) && isRecord(o.metadata) && typeof o.metadata.name === 'string')
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
}

/** One object by namespace and name (v2 keys are `namespace/name`; v1 keys are `name`). */
export function findObject(
  map: ObjectMap | undefined,
  kind: string,
  apiVersion: string,
  namespace: string | undefined,
  name: string,
): KObject | undefined {
  return objectsOf(map, kind, apiVersion).find(
    (o) => o.metadata.name === name && (namespace === undefined || (o.metadata.namespace ?? namespace) === namespace),
  );
}

export const LAST_APPLIED_ANNOTATION = 'metacontroller.k8s.io/last-applied-configuration';

/**
 * The child exactly as the hooks last returned it, so that returning it again changes nothing.
 * With dynamic apply that is Metacontroller's last-applied annotation; under server-side apply (no
 * annotation) it is the observed object without server-populated fields. Used whenever a child
 * must be kept untouched: an invalid spec, an unavailable source, or a running operation.
 */
export function asLastApplied(observed: KObject): KObject {
  const raw = observed.metadata.annotations?.[LAST_APPLIED_ANNOTATION];
  if (raw !== undefined) {
    try {
      const parsed: unknown = JSON.parse(raw);
      if (isRecord(parsed) && isRecord(parsed.metadata) && parsed.metadata.name === observed.metadata.name) {
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
  return kept;
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

/** A condition from an object's status.conditions. */
export function conditionOf(
  obj: KObject | undefined,
  type: string,
): { status?: string; reason?: string; message?: string; lastTransitionTime?: string } | undefined {
  const conds: unknown = obj?.status?.conditions;
  if (!Array.isArray(conds)) return undefined;
  return conds.find((c) => isRecord(c) && c.type === type) as any;
}
