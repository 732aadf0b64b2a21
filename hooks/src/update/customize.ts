import type { Update } from '../../../schemas/generated/types';
import type { RelatedResourceRule } from '../stack/customize';

export const AUTO_GROUP_VERSION = 'auto.pulumi.com/v1alpha1';

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
    relatedResources: [{ apiVersion: AUTO_GROUP_VERSION, resource: 'workspaces', namespace, names: [workspace] }],
  };
}
