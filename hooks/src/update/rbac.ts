import type { Update } from '../../../schemas/generated/types';
import type { KObject } from '../lib/k8s';
import { outputsToRules } from './outputs-to';

/**
 * The operation Job's own identity: the ServiceAccount, Role and RoleBinding `<update>`, owned by the
 * Update and gone with it. The Role lets it call the Update's workspace (verb `use` on
 * `workspaces/rpc`, what the workspace's SubjectAccessReview asks), patch its own Job (the result
 * annotation) and create Secrets (the outputs; `create` cannot be limited by name). So the user's
 * program, which runs in the workspace with the user's account, can neither call other workspaces
 * nor write results or Secrets, and a Job can reach no other workspace (docs/security.md).
 */
export function updateServiceAccountName(update: string): string {
  return update;
}

const RBAC_GROUP = 'rbac.authorization.k8s.io';

export function updateRbac(update: Update, labels: Record<string, string>): [KObject, KObject, KObject] {
  const name = update.metadata.name;
  const namespace = update.metadata.namespace ?? '';
  const workspace = update.spec?.workspaceName ?? '';
  const account = updateServiceAccountName(name);
  return [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: account, namespace, labels: { ...labels } } },
    {
      apiVersion: `${RBAC_GROUP}/v1`,
      kind: 'Role',
      metadata: { name, namespace, labels: { ...labels } },
      rules: [
        // The workspace authorises callers for its own name (upstream's Workspace object).
        { apiGroups: ['auto.pulumi.com'], resources: ['workspaces/rpc'], verbs: ['use'], resourceNames: [workspace] },
        { apiGroups: ['batch'], resources: ['jobs'], verbs: ['patch'], resourceNames: [name] },
        { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
        // A Stack's spec.outputsTo: exactly the objects its request names (outputs-to.ts).
        ...outputsToRules(update),
      ],
    },
    {
      apiVersion: `${RBAC_GROUP}/v1`,
      kind: 'RoleBinding',
      metadata: { name, namespace, labels: { ...labels } },
      roleRef: { apiGroup: RBAC_GROUP, kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name: account, namespace }],
    },
  ];
}
