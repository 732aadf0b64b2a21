import type { V1ConfigMap, V1StatefulSet } from '@kubernetes/client-node';
import type { Workspace } from '../../../schemas/generated/types';
import { Annotations, Env, parseWorkspaceStatus, WORKSPACE_STATUS_KEY, type WorkspaceStatus } from '../../../contract';
import { objectsOf, type KObject, type ObjectMap, type Typed } from '../lib/k8s';
import { isRecord } from '../lib/json';
import { inheritedLabels, workspaceStatusName } from './pod';

/**
 * The ConfigMap `<workspace>-workspace-status`, in which the agent in the workspace pod reports its
 * state (WORKSPACE_STATUS_KEY), the one object the workspace's account may write (rbac.ts). It is
 * always answered as built here, metadata only, never from what is observed: the hooks never set
 * its data, so Metacontroller's three-way merge keeps what the agent wrote there.
 */
export function workspaceStatusConfigMap(ws: Workspace): KObject {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: workspaceStatusName(ws.metadata.name),
      namespace: ws.metadata.namespace ?? '',
      labels: inheritedLabels(ws),
    },
  };
}

/** The Workspace's status ConfigMap among its observed children. */
export function observedStatusConfigMap(
  ws: Workspace,
  children: ObjectMap | undefined,
): Typed<V1ConfigMap> | undefined {
  const name = workspaceStatusName(ws.metadata.name);
  return objectsOf<V1ConfigMap>(children, 'ConfigMap', 'v1').find((c) => c.metadata.name === name);
}

/**
 * Whether the observed pod template is of a release before the status ConfigMap: its agent is not
 * told of one (Env.workspaceStatusConfigMap), and reports on its StatefulSet instead.
 */
function reportsOnStatefulSet(observed: Typed<V1StatefulSet>): boolean {
  const containers: unknown = observed.spec?.template?.spec?.containers;
  if (!Array.isArray(containers)) return false;
  const pulumi: unknown = containers.find((c) => isRecord(c) && c.name === 'pulumi');
  if (!isRecord(pulumi) || !Array.isArray(pulumi.env)) return false;
  const env: unknown[] = pulumi.env;
  return !env.some((e) => isRecord(e) && e.name === Env.workspaceStatusConfigMap);
}

/**
 * What the agent reports on the observed workspace: from the status ConfigMap. The StatefulSet's
 * `pulumi.com/workspace-status` annotation is read only for a pod template of the earlier releases,
 * whose agent writes nothing else, until the pod rolls to the new template (docs/migration.md). For
 * any other template it is ignored: the workspace's account may no longer write it, so whoever wrote
 * it is not the agent.
 */
export function agentReport(
  observed: Typed<V1StatefulSet> | undefined,
  statusConfigMap: Typed<V1ConfigMap> | undefined,
): WorkspaceStatus | undefined {
  if (!observed) return undefined;
  if (reportsOnStatefulSet(observed))
    return parseWorkspaceStatus(observed.metadata.annotations?.[Annotations.workspaceStatus]);
  const raw: unknown = statusConfigMap?.data?.[WORKSPACE_STATUS_KEY];
  return typeof raw === 'string' ? parseWorkspaceStatus(raw) : undefined;
}
