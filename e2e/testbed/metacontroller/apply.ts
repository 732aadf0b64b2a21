/**
 * Metacontroller's dynamic apply (https://metacontroller.github.io/metacontroller/api/apply.html#dynamic-apply,
 * https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/dynamic/apply/apply.go and ApplyUpdate in
 * pkg/controller/common/manage_children.go), plus the small pure helpers the driver shares:
 * reflect.DeepEqual on decoded JSON, Go's json.Marshal output, label selectors.
 */
import type { KObject } from './kube';

export const LAST_APPLIED = 'metacontroller.k8s.io/last-applied-configuration';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonMap = { [k: string]: Json };

const isMap = (v: unknown): v is JsonMap => typeof v === 'object' && v !== null && !Array.isArray(v);

export const clone = <T>(v: T): T => (v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T));

/** reflect.DeepEqual on JSON values: same key sets, same list order, same scalars. */
export function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isMap(a) && isMap(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && deepEqual(a[k], b[k]));
  }
  return false;
}

/** Go's json.Marshal of a map: keys sorted, <, >, &, U+2028 and U+2029 escaped. */
export function goJson(v: unknown): string {
  const sorted = (x: unknown): unknown =>
    Array.isArray(x)
      ? x.map(sorted)
      : isMap(x)
        ? Object.fromEntries(
            Object.keys(x)
              .sort()
              .map((k) => [k, sorted(x[k])]),
          )
        : x;
  return JSON.stringify(sorted(v)).replace(
    /[<>&\u2028\u2029]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

// ---------------------------------------------------------------------------------------------
// 3-way merge (apply.go Merge)

/** The conventional list-map keys, in precedence order (knownMergeKeys in https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/dynamic/apply/apply.go). */
const MERGE_KEYS = ['containerPort', 'port', 'mountPath', 'name', 'uid', 'ip', 'path'];

/** Returns a merged copy of observed with the change from lastApplied to desired applied. */
export function merge(observed: JsonMap, lastApplied: JsonMap | null, desired: JsonMap): JsonMap {
  return mergeValue('', clone(observed), lastApplied, desired) as JsonMap;
}

function mergeValue(
  path: string,
  dest: Json | undefined,
  last: Json | undefined,
  des: Json | undefined,
): Json | undefined {
  if (isMap(dest)) {
    if (last != null && !isMap(last))
      throw new Error(`lastApplied${path}: expecting map[string]interface, got ${typeof last}`);
    if (des != null && !isMap(des))
      throw new Error(`desired${path}: expecting map[string]interface, got ${typeof des}`);
    return mergeObject(path, dest, last ?? null, des ?? null);
  }
  if (Array.isArray(dest)) {
    if (last != null && !Array.isArray(last))
      throw new Error(`lastApplied${path}: expecting []interface, got ${typeof last}`);
    if (des != null && !Array.isArray(des)) throw new Error(`desired${path}: expecting []interface, got ${typeof des}`);
    const lastList = last ?? [];
    const desList = des ?? [];
    const key = detectListMapKey(dest, lastList, desList);
    // Not a list map: replaced wholesale by desired (a Go nil slice stays nil).
    if (key === '') return des;
    return mergeListMap(path, key, dest, lastList, desList);
  }
  // Scalar or null: take the desired value.
  return des;
}

function mergeObject(path: string, dest: JsonMap, last: JsonMap | null, des: JsonMap | null): JsonMap {
  // Fields present in lastApplied but no longer desired are removed; fields nobody ever applied
  // (other actors') are kept.
  for (const k of Object.keys(last ?? {})) if (!(des && k in des)) delete dest[k];
  for (const [k, v] of Object.entries(des ?? {})) {
    dest[k] = mergeValue(`${path}[${k}]`, dest[k], last?.[k], v) as Json;
  }
  return dest;
}

// Go's fmt %v: scalars as written; an object key (never seen in practice) by its JSON, so two differ.
const mergeKeyString = (v: Json | undefined): string =>
  typeof v === 'string' ? v : typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v);

function mergeListMap(path: string, key: string, dest: Json[], last: Json[], des: Json[]): Json[] {
  const toMap = (l: Json[]): JsonMap => {
    const m: JsonMap = {};
    for (const it of l) m[mergeKeyString((it as JsonMap)[key])] = it;
    return m;
  };
  const destMap = mergeObject(path, toMap(dest), toMap(last), toMap(des));
  // Existing items keep their order; new desired items are appended.
  const out: Json[] = [];
  const added = new Set<string>();
  for (const it of dest) {
    const k = mergeKeyString((it as JsonMap)[key]);
    if (k in destMap) {
      out.push(destMap[k]!);
      added.add(k);
    }
  }
  for (const it of des) {
    const k = mergeKeyString((it as JsonMap)[key]);
    if (!added.has(k)) {
      out.push(destMap[k]!);
      added.add(k);
    }
  }
  return out;
}

/** A list is a list map if every item of all versions is an object sharing a conventional key. */
function detectListMapKey(...lists: Json[][]): string {
  let common: Set<string> | undefined;
  for (const list of lists) {
    for (const it of list) {
      if (!isMap(it)) return '';
      if (!common) common = new Set(Object.keys(it));
      else for (const k of [...common]) if (!(k in it)) common.delete(k);
    }
  }
  return MERGE_KEYS.find((k) => common?.has(k)) ?? '';
}

// ---------------------------------------------------------------------------------------------
// ApplyUpdate (manage_children.go)

const SYSTEM_METADATA = [
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'managedFields',
];

export function getLastApplied(obj: KObject): JsonMap | null {
  const raw = obj.metadata.annotations?.[LAST_APPLIED];
  if (!raw) return null;
  try {
    return JSON.parse(raw) as JsonMap;
  } catch (e) {
    throw new Error(`can't unmarshal "${LAST_APPLIED}" annotation: ${(e as Error).message}`, { cause: e });
  }
}

/** Sets the last-applied annotation to (Go-marshalled) `lastApplied`. */
export function setLastApplied(obj: KObject, lastApplied: unknown): void {
  obj.metadata.annotations = { ...(obj.metadata.annotations ?? {}), [LAST_APPLIED]: goJson(lastApplied) };
}

/**
 * The full object to write for an update: 3-way merge of observed, last-applied and desired,
 * system metadata and status reset to observed, last-applied set to desired.
 */
export function applyUpdate(observed: KObject, desiredIn: KObject): KObject {
  const lastApplied = getLastApplied(observed);
  const desired = clone(desiredIn);
  if (desired.metadata.annotations && LAST_APPLIED in desired.metadata.annotations)
    delete desired.metadata.annotations[LAST_APPLIED];
  const merged = merge(
    observed as unknown as JsonMap,
    lastApplied,
    desired as unknown as JsonMap,
  ) as unknown as KObject;
  if (!isMap(merged.metadata)) (merged as { metadata: unknown }).metadata = {};
  for (const f of SYSTEM_METADATA) {
    if (f in observed.metadata) merged.metadata[f] = clone(observed.metadata[f]);
    else delete merged.metadata[f];
  }
  if ('status' in observed) merged.status = clone(observed.status);
  else delete merged.status;
  setLastApplied(merged, desired);
  return merged;
}

// ---------------------------------------------------------------------------------------------
// Label selectors (metav1.LabelSelector semantics)

export interface LabelSelector {
  matchLabels?: Record<string, string> | null;
  matchExpressions?: { key: string; operator: string; values?: string[] | null }[] | null;
}

/** Whether labels match; a missing selector matches everything, as Metacontroller treats it. */
export function selectorMatches(
  sel: LabelSelector | null | undefined,
  labels: Record<string, string> | undefined,
): boolean {
  if (!sel) return true;
  const l = labels ?? {};
  for (const [k, v] of Object.entries(sel.matchLabels ?? {})) if (l[k] !== v) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(l, e.key);
    const values = e.values ?? [];
    switch (e.operator) {
      case 'In':
        if (!has || !values.includes(l[e.key]!)) return false;
        break;
      case 'NotIn':
        if (has && values.includes(l[e.key]!)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default:
        throw new Error(`${JSON.stringify(e.operator)} is not a valid label selector operator`);
    }
  }
  return true;
}

export const selectorEmpty = (sel: LabelSelector): boolean =>
  Object.keys(sel.matchLabels ?? {}).length === 0 && (sel.matchExpressions ?? []).length === 0;
