import type { Workspace } from '../../../schemas/generated/types';
import type { KObject } from '../lib/k8s';
import { inheritedLabels, workspaceName, workspacePodServiceAccount } from './pod';

const RBAC_GROUP = 'rbac.authorization.k8s.io';

/**
 * The workspace pod's right to report on its own StatefulSet (the `pulumi.com/workspace-status`
 * annotation) and nothing else: the Role `<workspace>-workspace` and its binding to the account the
 * pod runs as. Verifying callers needs `system:auth-delegator` besides, bound cluster-wide by the
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
      rules: [{ apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['patch'], resourceNames: [name] }],
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
