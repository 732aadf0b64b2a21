import type { KObject } from '../lib/k8s';
import { stackLabels, workspaceName } from './workspace';

/**
 * Least privilege, per Stack. The hooks give each Stack two identities, each allowed to touch only
 * the Stack's own objects (resourceNames):
 *
 * - the workspace pod runs as the user's ServiceAccount (`spec.serviceAccountName`, as upstream,
 *   so cloud workload identities keep working); the Role `<stack>-workspace` lets it patch its own
 *   StatefulSet (the `pulumi.com/workspace-status` annotation) and nothing else. It still needs
 *   `system:auth-delegator` (TokenReview, SubjectAccessReview) bound cluster-wide by the user,
 *   which a namespaced Stack cannot own (manifests/stack-rbac.yaml).
 * - the operation Jobs run as the ServiceAccount `<stack>-update`, made here: the Role
 *   `<stack>-update` lets it call this Stack's workspace (verb `use` on `workspaces/rpc`, the
 *   workspace's SubjectAccessReview), patch this Stack's current Jobs (the result annotation) and
 *   create Secrets (the outputs; `create` cannot be limited by name).
 *
 * So the user's program, which runs in the workspace with the user's account, can neither call
 * other workspaces nor write results or Secrets, and a Job can reach no other Stack.
 */
export function updateServiceAccountName(stack: string): string {
  return `${stack}-update`;
}

const RBAC_GROUP = 'rbac.authorization.k8s.io';

export function stackRbac(
  stack: string,
  namespace: string,
  workspaceServiceAccount: string,
  jobNames: string[],
): KObject[] {
  const labels = (): Record<string, string> => ({ ...stackLabels(stack, 'rbac') });
  const ws = workspaceName(stack);
  const update = updateServiceAccountName(stack);
  const role = (name: string, rules: unknown[]): KObject => ({
    apiVersion: `${RBAC_GROUP}/v1`,
    kind: 'Role',
    metadata: { name, namespace, labels: labels() },
    rules,
  });
  const binding = (name: string, subject: string): KObject => ({
    apiVersion: `${RBAC_GROUP}/v1`,
    kind: 'RoleBinding',
    metadata: { name, namespace, labels: labels() },
    roleRef: { apiGroup: RBAC_GROUP, kind: 'Role', name },
    subjects: [{ kind: 'ServiceAccount', name: subject, namespace }],
  });
  const jobs = [...new Set(jobNames)].sort();
  const updateRules: unknown[] = [
    // The workspace authorises callers for its Stack's name, as upstream's Workspace object is named.
    { apiGroups: ['auto.pulumi.com'], resources: ['workspaces/rpc'], verbs: ['use'], resourceNames: [stack] },
    { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
  ];
  // An empty resourceNames list would mean "every Job": only name Jobs that exist.
  if (jobs.length > 0)
    updateRules.splice(1, 0, { apiGroups: ['batch'], resources: ['jobs'], verbs: ['patch'], resourceNames: jobs });
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: update, namespace, labels: labels() } },
    role(ws, [{ apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['patch'], resourceNames: [ws] }]),
    binding(ws, workspaceServiceAccount),
    role(update, updateRules),
    binding(update, update),
  ];
}
