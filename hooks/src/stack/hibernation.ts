/**
 * Hibernation: a Stack whose workspace is reclaimed after each success (`workspaceReclaimPolicy:
 * Delete`, or the cluster's default WORKSPACE_RECLAIM_DEFAULT when the Stack names none) holds no
 * pod at rest; its per-Stack cache volume, the PersistentVolumeClaim `<stack>-cache`, stays, so the
 * next workspace starts with the plugins and download caches of the last one. Everything here is a
 * function of the Stack's spec and the hooks' settings: nothing observed of the claim is answered.
 */
import { posix } from 'node:path';
import type { EnvVar } from '../../../schemas/generated/types';
import type { Stack, WorkspaceSpec } from '../../../schemas/generated/types';
import type { HookConfig } from '../config';
import type { KObject } from '../lib/k8s';
import { strategicMerge } from '../lib/merge';
import { isRecord } from '../lib/json';
import { stackLabels } from '../workspace/pod';

export type ReclaimPolicy = 'Retain' | 'Delete';

/** The cache volume's settings (WORKSPACE_CACHE_SIZE, WORKSPACE_CACHE_STORAGE_CLASS, WORKSPACE_CACHE_RETAINED). */
export interface WorkspaceCacheSettings {
  /** The claim's requested size, a Kubernetes quantity. */
  size: string;
  /** The claim's StorageClass; absent: the cluster's default class. */
  storageClassName?: string;
  /** Whether retained workspaces get a cache volume too (upstream#858); hibernating ones always do. */
  retained: boolean;
}

/** Where the cache volume is mounted in the workspace container. */
export const CACHE_DIR = '/var/cache/pulumi-workspace';
/** The cache volume's name in the workspace pod. */
export const CACHE_VOLUME = 'pulumi-cache';

/**
 * What the cache holds: PULUMI_HOME (plugins, the CLI's cache), the download caches of the package
 * managers (npm; pip, uv, poetry and go build through XDG_CACHE_HOME; Go modules). The project's own
 * `node_modules` or virtualenv live in the fetched source, which each workspace fetches afresh.
 */
export const CACHE_ENV: readonly EnvVar[] = [
  { name: 'PULUMI_HOME', value: `${CACHE_DIR}/pulumi` },
  { name: 'XDG_CACHE_HOME', value: `${CACHE_DIR}/xdg` },
  { name: 'npm_config_cache', value: `${CACHE_DIR}/npm` },
  { name: 'GOMODCACHE', value: `${CACHE_DIR}/go/mod` },
];

/** The Stack's reclaim policy: its own, else the cluster's default (upstream's default is Retain). */
export function reclaimPolicy(stack: Stack, config: Pick<HookConfig, 'workspaceReclaimDefault'>): ReclaimPolicy {
  const own: unknown = isRecord(stack.spec) ? stack.spec.workspaceReclaimPolicy : undefined;
  if (own === 'Retain' || own === 'Delete') return own;
  return config.workspaceReclaimDefault ?? 'Retain';
}

/** `<stack>-cache`: derived from the Stack's name only, so no spec can point one Stack at another's. */
export function cacheClaimName(stack: string): string {
  return `${stack}-cache`;
}

/** The cache settings that apply to this Stack: the cluster's, for a hibernating Stack or (if so set) a retained one. */
export function cacheFor(
  stack: Stack,
  config: Pick<HookConfig, 'workspaceReclaimDefault' | 'workspaceCache'>,
): WorkspaceCacheSettings | undefined {
  const cache = config.workspaceCache;
  if (!cache) return undefined;
  return reclaimPolicy(stack, config) === 'Delete' || cache.retained ? cache : undefined;
}

/** The claim `<stack>-cache`, a child of the Stack: from the settings alone. */
export function cacheClaim(stack: Stack, cache: WorkspaceCacheSettings): KObject {
  const name = stack.metadata.name;
  const spec: Record<string, unknown> = {
    accessModes: ['ReadWriteOnce'],
    resources: { requests: { storage: cache.size } },
  };
  if (cache.storageClassName !== undefined) spec.storageClassName = cache.storageClassName;
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: cacheClaimName(name),
      namespace: stack.metadata.namespace ?? '',
      labels: stackLabels(name, 'cache'),
    },
    spec,
  };
}

/**
 * The Workspace spec with the cache mounted: the volume and its mount replace any of the same name
 * or path (the claim is always the Stack's own), the environment goes first so that the Stack's own
 * variables of the same names win.
 */
export function withCache(ws: WorkspaceSpec, stack: string): WorkspaceSpec {
  const merged = strategicMerge(ws, {
    podTemplate: {
      spec: {
        volumes: [
          { name: CACHE_VOLUME, persistentVolumeClaim: { claimName: cacheClaimName(stack) }, $patch: 'replace' },
        ],
        containers: [
          { name: 'pulumi', volumeMounts: [{ name: CACHE_VOLUME, mountPath: CACHE_DIR, $patch: 'replace' }] },
        ],
      },
    },
  });
  const own = merged.env ?? [];
  return { ...merged, env: [...CACHE_ENV.filter((e) => !own.some((o) => o.name === e.name)), ...own] };
}

/** Volume kinds whose files go with the pod: a file backend on one would lose the state with the workspace. */
const POD_LIFETIME_VOLUMES = ['emptyDir', 'ephemeral', 'configMap', 'secret', 'downwardAPI', 'projected'];

/**
 * Why this Stack may not hibernate, if it may not: its state would go with the pod. A `file://`
 * backend (spec.backend, or a literal PULUMI_BACKEND_URL in envRefs) must be on a volume the Stack's
 * workspaceTemplate mounts into the `pulumi` container, and not one that lives with the pod.
 */
export function hibernationProblem(
  stack: Stack,
  config: Pick<HookConfig, 'workspaceReclaimDefault'>,
): string | undefined {
  if (reclaimPolicy(stack, config) !== 'Delete') return undefined;
  const spec = stack.spec;
  const ref = spec.envRefs?.PULUMI_BACKEND_URL;
  const backend = spec.backend ?? (ref?.type === 'Literal' ? ref.literal?.value : undefined) ?? '';
  if (!backend.startsWith('file://')) return undefined;
  const path = posix.normalize(backend.slice('file://'.length));
  const podSpec = spec.workspaceTemplate?.spec?.podTemplate?.spec;
  const mounts = podSpec?.containers.find((c) => c.name === 'pulumi')?.volumeMounts ?? [];
  const onVolume = mounts.some((m) => {
    if (!within(path, m.mountPath)) return false;
    const volume = podSpec?.volumes?.find((v) => v.name === m.name);
    return volume !== undefined && !POD_LIFETIME_VOLUMES.some((kind) => Object.hasOwn(volume, kind));
  });
  if (onVolume) return undefined;
  return (
    `the workspace is deleted after each operation (workspaceReclaimPolicy: Delete), but the file backend ` +
    `${backend} is not on a volume the Stack mounts, so its state would be lost with the pod: mount a ` +
    `PersistentVolumeClaim at that path in workspaceTemplate (container "pulumi"), use another backend, ` +
    `or set workspaceReclaimPolicy: Retain`
  );
}

/** Whether `path` is `dir` or inside it (a `~` path is the pod's own home). */
function within(path: string, dir: string): boolean {
  if (!path.startsWith('/')) return false;
  const d = dir.endsWith('/') ? dir.slice(0, -1) : dir;
  return path === d || path.startsWith(`${d}/`);
}
