import { cloneJson, isRecord } from './json';

/**
 * Kubernetes strategic merge patch, for the PodSpec-shaped templates users give in
 * workspaceTemplate and updateTemplate. Lists with a patch merge key (containers by name, ports by
 * containerPort, ...) merge item by item, new items appended; other lists are replaced; maps merge
 * recursively; a null value deletes the key; `$patch: delete` on a list item removes it and
 * `$patch: replace` on a map replaces it. Covers the merge keys of core/v1 PodSpec and
 * ObjectMeta, which is all these templates hold.
 */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  volumes: 'name',
  env: 'name',
  volumeMounts: 'mountPath',
  volumeDevices: 'devicePath',
  imagePullSecrets: 'name',
  hostAliases: 'ip',
  ports: 'containerPort',
  resourceClaims: 'name',
  topologySpreadConstraints: 'topologyKey',
  ownerReferences: 'uid',
};

export function strategicMerge<T>(base: T, patch: unknown): T {
  // Neither input is modified. The result shares unchanged parts of `base` (callers pass objects
  // they just built) but never a part of `patch` (the user's spec): every patch value is copied
  // as it is merged in, so editing the result cannot reach back into the request.
  return mergeValue(base, patch, undefined) as T;
}

/** A deep copy of a patch value, with its merge directives applied as to an absent base. */
function copyOf(value: unknown): unknown {
  return mergeValue(undefined, value, undefined);
}

function mergeValue(base: unknown, patch: unknown, field: string | undefined): unknown {
  if (patch === undefined) return base;
  if (isRecord(patch)) {
    if (patch.$patch === 'replace') {
      const rest = { ...patch };
      delete rest.$patch;
      return cloneJson(rest);
    }
    const out: Record<string, unknown> = isRecord(base) ? { ...base } : {};
    for (const [k, v] of Object.entries(patch)) {
      if (k === '$patch') continue;
      if (v === null) delete out[k];
      else out[k] = mergeValue(Object.hasOwn(out, k) ? out[k] : undefined, v, k); // own keys only: `constructor` is a key
    }
    return out;
  }
  if (Array.isArray(patch)) {
    const key = field !== undefined && Object.hasOwn(MERGE_KEYS, field) ? MERGE_KEYS[field] : undefined;
    if (key === undefined || !Array.isArray(base))
      return patch.filter((p) => !(isRecord(p) && p.$patch === 'delete')).map(copyOf);
    const out: unknown[] = [...(base as unknown[])];
    for (const item of patch) {
      if (!isRecord(item) || item[key] === undefined) {
        out.push(copyOf(item));
        continue;
      }
      const i = out.findIndex((b) => isRecord(b) && b[key] === item[key]);
      if (item.$patch === 'delete') {
        if (i >= 0) out.splice(i, 1);
      } else if (i >= 0) {
        out[i] = mergeValue(out[i], item, undefined);
      } else {
        out.push(copyOf(item));
      }
    }
    return out;
  }
  return patch;
}
