/**
 * How the hooks keep a child they cannot compute now (an invalid spec, a running operation, a held
 * workspace) without ever taking what the child says as what they want. Anyone who may patch a
 * child (a namespace editor a ConfigMap or a StatefulSet) may write its annotations,
 * Metacontroller's last-applied copy included, so that copy alone proves nothing:
 *
 * - an OnDelete child (Updates, Jobs, the kinds of earlier versions) is kept by identity only: the
 *   hooks write its kind, name and namespace themselves ({@link byIdentity}); Metacontroller never
 *   updates such a child, and a spec-less object it might create if the child vanished meanwhile
 *   is refused by the API server (or, a ServiceAccount or ConfigMap, grants nothing);
 * - an InPlace child is kept as its last-applied copy only when that copy is, by digest, what the
 *   hooks last answered: every answer records a digest of each such child in the parent's status
 *   (`status.childDigests`, which only Metacontroller writes: {@link recordDigests}), and a keep
 *   path answers the copy only if it matches ({@link keptChild}); otherwise the request fails with
 *   {@link ChildNotVerified} (409), and Metacontroller changes nothing;
 * - every answer passes {@link checkAnswer}: each child in the parent's namespace, of a kind that
 *   controller makes, named as it names them. A violation is a bug in the hooks (500).
 */
import { createHash } from 'node:crypto';
import { isRecord, MAX_NESTING, nestedDeeperThan, stableStringify } from './json';
import { ChildNotVerified, LAST_APPLIED_ANNOTATION, mapKey, type KObject } from './k8s';

/** The label Metacontroller adds to every desired child with `generateSelector`, and to its last-applied copy. */
const CONTROLLER_UID_LABEL = 'controller-uid';
/** The annotation a DecoratorController adds to every attachment, and to its last-applied copy. */
const DECORATOR_ANNOTATION = 'metacontroller.k8s.io/decorator-controller';

/** `status.childDigests`: `<Kind>/<name>` → `sha256:<hex>` of each InPlace child the answer holds. */
export type ChildDigests = Record<string, string>;

/** How many recorded digests are read: far more than any parent has (a Stack: its Workspace and a refresh request per prerequisite). */
const MAX_CHILD_DIGESTS = 1024;
const DIGEST = /^sha256:[0-9a-f]{64}$/;

export function digestKey(kind: string, name: string): string {
  return `${kind}/${name}`;
}

/**
 * The child as Metacontroller records it in its last-applied annotation, less what Metacontroller
 * adds itself (github.com/metacontroller/metacontroller v4.17.2: the parent's namespace when the
 * child names none, pkg/controller/composite/hooks.go and decorator/hooks.go; `controller-uid`,
 * composite/controller.go; the decorator's annotation, decorator/controller.go; the annotation
 * itself, common/manage_children.go) and empty label and annotation maps: the hooks' answer and
 * that copy give the same value.
 */
function normalised(child: KObject, namespace: string): KObject {
  const metadata: Record<string, unknown> = { ...child.metadata };
  if (metadata.namespace === undefined || metadata.namespace === '') metadata.namespace = namespace;
  const without = (key: 'labels' | 'annotations', drop: readonly string[]): void => {
    const map = metadata[key];
    if (!isRecord(map)) return;
    const rest = { ...map };
    for (const k of drop) delete rest[k];
    if (Object.keys(rest).length === 0) delete metadata[key];
    else metadata[key] = rest;
  };
  without('labels', [CONTROLLER_UID_LABEL]);
  without('annotations', [LAST_APPLIED_ANNOTATION, DECORATOR_ANNOTATION]);
  return { ...child, metadata } as KObject;
}

/** `sha256:<hex>` of the child's canonical JSON (keys sorted), normalised as Metacontroller records it. */
export function childDigest(child: KObject, namespace: string): string {
  const json = stableStringify(normalised(child, namespace));
  return `sha256:${createHash('sha256').update(json).digest('hex')}`;
}

/**
 * The digests an answer records of its InPlace children (`kinds`); `known` has those already
 * computed (a cached Workspace's, a verified kept child's), so each child is hashed once.
 */
export function recordDigests(
  children: readonly KObject[],
  namespace: string,
  kinds: ReadonlySet<string>,
  known: ReadonlyMap<KObject, string> = new Map(),
): ChildDigests {
  const digests: ChildDigests = {};
  for (const child of children) {
    if (!kinds.has(child.kind)) continue;
    digests[digestKey(child.kind, child.metadata.name)] = known.get(child) ?? childDigest(child, namespace);
  }
  return digests;
}

/** The digests an observed status records: well-formed entries only, at most MAX_CHILD_DIGESTS. */
export function recordedDigests(status: unknown): ReadonlyMap<string, string> {
  const recorded = new Map<string, string>();
  const digests = isRecord(status) ? status.childDigests : undefined;
  if (!isRecord(digests)) return recorded;
  for (const [key, value] of Object.entries(digests)) {
    if (recorded.size >= MAX_CHILD_DIGESTS) break;
    if (typeof value === 'string' && DIGEST.test(value)) recorded.set(key, value);
  }
  return recorded;
}

/** What a parent may have as a child: its kind, apiVersion and name, in the parent's namespace. */
export interface ChildIdentity {
  kind: string;
  apiVersion: string;
  name: string;
  namespace: string;
}

/** An OnDelete child kept by identity: what the hooks look for, written by them, nothing observed copied. */
export function byIdentity({ kind, apiVersion, name, namespace }: ChildIdentity): KObject {
  return { apiVersion, kind, metadata: { name, namespace } };
}

/** The request field of an observed child: `children` (or `attachments`), its map key, `namespace/name`. */
export function childField(map: 'children' | 'attachments', id: ChildIdentity): string[] {
  return [map, mapKey(id.kind, id.apiVersion), `${id.namespace}/${id.name}`];
}

/**
 * An InPlace child kept exactly as the hooks last answered it: the observed child's last-applied
 * copy, normalised, when it names the child `id` and its digest is the one the parent's status
 * records. Anything else throws ChildNotVerified: a copy someone else wrote, none, or no record of
 * it (a status written before digests were recorded).
 */
export function keptChild(
  observed: KObject,
  id: ChildIdentity,
  recorded: ReadonlyMap<string, string>,
  map: 'children' | 'attachments' = 'children',
): { child: KObject; digest: string } {
  const refuse = (why: string): never => {
    throw new ChildNotVerified(
      childField(map, id),
      `cannot be kept: ${why}. It was changed by someone other than the operator, or was last written ` +
        `by an earlier version. Until that is resolved nothing is applied: delete the ${id.kind} ` +
        `${id.name} in namespace ${id.namespace} (the operator makes it again), or fix the spec of its ` +
        `parent so that the operator can compute it again (docs/troubleshooting.md#409-a-child-was-changed)`,
    );
  };
  const raw = observed.metadata.annotations?.[LAST_APPLIED_ANNOTATION];
  if (typeof raw !== 'string') return refuse(`it has no ${LAST_APPLIED_ANNOTATION} annotation`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return refuse(`its ${LAST_APPLIED_ANNOTATION} annotation is not JSON`);
  }
  // No child of the hooks nests this deep; hashing and answering it would walk all of it.
  if (!isRecord(parsed) || !isRecord(parsed.metadata) || nestedDeeperThan(parsed, MAX_NESTING))
    return refuse(`its ${LAST_APPLIED_ANNOTATION} annotation is not an object the operator writes`);
  const child = normalised(parsed as KObject, id.namespace);
  if (
    child.kind !== id.kind ||
    child.apiVersion !== id.apiVersion ||
    child.metadata.name !== id.name ||
    child.metadata.namespace !== id.namespace
  )
    return refuse(`its ${LAST_APPLIED_ANNOTATION} annotation names another object`);
  const expected = recorded.get(digestKey(id.kind, id.name));
  if (expected === undefined) return refuse(`the parent's status.childDigests records no digest of it`);
  const digest = childDigest(child, id.namespace);
  if (digest !== expected)
    return refuse(`its ${LAST_APPLIED_ANNOTATION} annotation is not what the operator last applied`);
  return { child, digest };
}

/** What a controller makes: a kind, and which names it gives that kind. */
export interface ChildRule {
  kind: string;
  apiVersion: string;
  name: (name: string) => boolean;
  /** Kept by identity only: nothing but apiVersion, kind, name and namespace. */
  identityOnly?: true;
}

/**
 * The last check of every answer: each child is in the parent's namespace, of a kind the
 * controller makes (`rules`), named as it names that kind, and an identity-only kind carries
 * nothing else. A child that breaks this is a bug in the hooks: thrown (500), never answered.
 */
export function checkAnswer(
  parent: string,
  namespace: string,
  children: readonly KObject[],
  rules: readonly ChildRule[],
): void {
  for (const child of children) {
    const { name } = child.metadata;
    const what = `${parent}: the answer's ${String(child.kind)} ${String(name)}`;
    const rule = rules.find((r) => r.kind === child.kind && r.apiVersion === child.apiVersion);
    if (!rule) throw new Error(`${what} is of a kind this controller does not make`);
    if (child.metadata.namespace !== namespace) throw new Error(`${what} is not in the parent's namespace`);
    if (typeof name !== 'string' || !rule.name(name))
      throw new Error(`${what} has a name this controller does not give`);
    if (
      rule.identityOnly &&
      (Object.keys(child).length !== 3 || Object.keys(child.metadata).some((k) => k !== 'name' && k !== 'namespace'))
    )
      throw new Error(`${what} is kept by identity only, yet carries more`);
  }
}
