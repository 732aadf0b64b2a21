import type { Update } from '../../../schemas/generated/types';
import type { RelatedResourceRule } from '../lib/k8s';
import { AUTO_API_VERSION } from '../lib/api-versions';

/**
 * An Update needs to see its Workspace (in its own namespace): to wait until it is ready before
 * starting, and to say in its conditions when it is missing or failed. Metacontroller re-syncs the
 * Update when the Workspace changes.
 */
export function customizeUpdate(update: Update): { relatedResources: RelatedResourceRule[] } {
  const workspace = update.spec?.workspaceName;
  const namespace = update.metadata.namespace;
  if (typeof workspace !== 'string' || workspace === '' || !namespace) return { relatedResources: [] };
  return {
    relatedResources: [{ apiVersion: AUTO_API_VERSION, resource: 'workspaces', namespace, names: [workspace] }],
  };
}
