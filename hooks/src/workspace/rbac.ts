import type { Workspace } from '../../../schemas/generated/types';
import type { KObject } from '../lib/k8s';
import { inheritedLabels, workspaceName, workspacePodServiceAccount, workspaceStatusName } from './pod';

const RBAC_GROUP = 'rbac.authorization.k8s.io';

/**
 * The workspace pod's right to write its report in its status ConfigMap (status-configmap.ts) and
 * nothing else: the Role `<workspace>-workspace` and its binding to the account the pod runs as.
 * Nothing that shapes a pod: no StatefulSet or Pod, and no other ConfigMap (a pod may mount one).
 * `patch` is all the agent sends; `create` cannot be limited by name, so Metacontroller creates the
 * ConfigMap. Verifying callers needs `system:auth-delegator` besides, bound cluster-wide by the
 * user (manifests/stack-rbac.yaml), which a namespaced object cannot own.
 */
export function workspaceRbac(ws: Workspace): KObject[] {
  const name = workspaceName(ws.metadata.name);
  const namespace = ws.metadata.namespace ?? '';
  const labels = inheritedLabels(ws);
  return [
    {
      apiVersion: `${RBAC_GROUP}/v1`,
      kind: 'Role',
      metadata: { name, namespace, labels: { ...labels } },
      rules: [
        {
          apiGroups: [''],
          resources: ['configmaps'],
          verbs: ['patch'],
          resourceNames: [workspaceStatusName(ws.metadata.name)],
        },
      ],
    },
    {
      apiVersion: `${RBAC_GROUP}/v1`,
      kind: 'RoleBinding',
      metadata: { name, namespace, labels: { ...labels } },
      roleRef: { apiGroup: RBAC_GROUP, kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name: workspacePodServiceAccount(ws), namespace }],
    },
  ];
}
