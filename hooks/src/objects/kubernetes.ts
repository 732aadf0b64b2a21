/**
 * List and watch of pulumi.com/v1 Stacks and Programs and auto.pulumi.com/v1alpha1 Workspaces and
 * Updates in all namespaces, with the hooks' own identity (the ServiceAccount pulumi-mc-hooks; list
 * and watch is all its ClusterRole grants for them).
 */
import type * as k8s from '@kubernetes/client-node';
import type { Program } from '../../../schemas/generated/types';
import { abortAfter, k8sModule } from '../kube/access';
import { isRecord } from '../lib/json';
import type { ObjectsApi, WatchedResource } from './gauges';
import type { ListPage, ListWatch, WatchEvent } from './reflector';

/** Each resource's API group and version. */
const GROUP_VERSIONS: Record<WatchedResource, { group: string; version: string }> = {
  stacks: { group: 'pulumi.com', version: 'v1' },
  programs: { group: 'pulumi.com', version: 'v1' },
  workspaces: { group: 'auto.pulumi.com', version: 'v1alpha1' },
  updates: { group: 'auto.pulumi.com', version: 'v1alpha1' },
};

/** The list and watch calls for one resource, through a kubeconfig. */
export function kubeListWatch(kc: k8s.KubeConfig, plural: WatchedResource): ListWatch {
  const k = k8sModule();
  const custom = kc.makeApiClient(k.CustomObjectsApi);
  const watcher = new k.Watch(kc);
  const { group, version } = GROUP_VERSIONS[plural];
  return {
    async list(page): Promise<ListPage> {
      const answer = (await custom.listClusterCustomObject({
        group,
        version,
        plural,
        limit: page.limit,
        ...(page.continue ? { _continue: page.continue } : {}),
      })) as { items?: unknown; metadata?: { resourceVersion?: unknown; continue?: unknown } } | null;
      const items = Array.isArray(answer?.items) ? (answer.items as unknown[]) : [];
      const resourceVersion = answer?.metadata?.resourceVersion;
      if (typeof resourceVersion !== 'string' || resourceVersion === '')
        throw new Error(`the list of ${plural} has no resourceVersion`);
      const token = answer?.metadata?.continue;
      return { items, resourceVersion, ...(typeof token === 'string' && token !== '' ? { continue: token } : {}) };
    },
    watch(from, onEvent, signal): Promise<void> {
      return new Promise<void>((resolve, reject) => {
        let request: AbortController | undefined;
        let settled = false;
        const settle = (err: unknown) => {
          if (settled) return;
          settled = true;
          signal.removeEventListener('abort', onAbort);
          if (err && !signal.aborted) reject(err instanceof Error ? err : new Error('the watch failed'));
          else resolve();
        };
        // Settles at once, even while the request is still waiting for its answer (which
        // client-node gives no handle to abort): a watch that never answers cannot hold the mirror.
        const onAbort = () => {
          request?.abort();
          settle(undefined);
        };
        signal.addEventListener('abort', onAbort, { once: true });
        const done = (err: unknown) => settle(err);
        watcher
          .watch(
            `/apis/${group}/${version}/${plural}`,
            { resourceVersion: from.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: from.timeoutSeconds },
            (type: string, object: unknown) => onEvent({ type, object } satisfies WatchEvent),
            done,
          )
          .then(
            (controller) => {
              request = controller;
              if (signal.aborted) controller.abort();
            },
            (err: unknown) => done(err),
          );
      });
    },
  };
}

/** Every resource mirrored. */
export function kubeObjectsApi(kc: k8s.KubeConfig): ObjectsApi {
  return {
    stacks: kubeListWatch(kc, 'stacks'),
    programs: kubeListWatch(kc, 'programs'),
    workspaces: kubeListWatch(kc, 'workspaces'),
    updates: kubeListWatch(kc, 'updates'),
  };
}

/**
 * A Program as the API server holds it now, or undefined when there is none (get, granted to the
 * hooks for the program server: program/serve.ts). The API server bounds its size; `timeoutMs`
 * bounds the call (a download holds one of the program server's few slots meanwhile).
 */
export function kubeProgramGetter(
  kc: k8s.KubeConfig,
  timeoutMs = 10_000,
): (namespace: string, name: string) => Promise<Program | undefined> {
  const custom = kc.makeApiClient(k8sModule().CustomObjectsApi);
  const { group, version } = GROUP_VERSIONS.programs;
  return async (namespace, name) => {
    try {
      return (await custom.getNamespacedCustomObject(
        { group, version, namespace, plural: 'programs', name },
        abortAfter(timeoutMs),
      )) as Program;
    } catch (e) {
      if (isRecord(e) && e.code === 404) return undefined;
      throw e;
    }
  };
}
