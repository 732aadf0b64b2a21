import type { Stack } from '../../../schemas/generated/types';
import { validateStack } from '../../../schemas';
import { FLUX_GROUP, FLUX_KINDS, hasGitSource, isFluxKind } from './validate';
import { secretsForLookup } from './source';
import { REFRESH_LABEL } from './prerequisites';
import { PULUMI_API_VERSION } from '../lib/api-versions';
import type { RelatedResourceRule } from '../lib/k8s';

/**
 * The objects a Stack's sync needs to see (Metacontroller watches them and re-syncs the Stack when
 * they change): its Program or Flux source, its prerequisites, the Secrets needed to resolve a git
 * branch of a private repository, refresh requests from dependents, and its Namespace when a destroy
 * runs on deletion. Nothing else: no Secret
 * the hooks do not strictly need. Cached by Metacontroller per Stack generation.
 */
export function customizeStack(stack: Stack): { relatedResources: RelatedResourceRule[] } {
  const ns = stack.metadata?.namespace as string;
  const name = stack.metadata.name;
  const rules: RelatedResourceRule[] = [];
  const refreshRequests: RelatedResourceRule = {
    apiVersion: 'v1',
    resource: 'configmaps',
    namespace: ns,
    labelSelector: { matchLabels: { [REFRESH_LABEL]: name } },
  };
  // A Stack that fails its schema will be Stalled by sync whatever its related objects are.
  if (!validateStack(stack).ok) return { relatedResources: name ? [refreshRequests] : [] };
  const spec = stack.spec;
  if (!hasGitSource(spec) && spec.fluxSource?.sourceRef) {
    const ref = spec.fluxSource.sourceRef;
    const resource = isFluxKind(ref.kind) ? FLUX_KINDS[ref.kind] : undefined;
    if (resource && typeof ref.apiVersion === 'string' && ref.apiVersion.startsWith(`${FLUX_GROUP}/`) && ref.name) {
      rules.push({ apiVersion: ref.apiVersion, resource, namespace: ns, names: [ref.name] });
    }
  } else if (!hasGitSource(spec) && spec.programRef?.name) {
    rules.push({ apiVersion: PULUMI_API_VERSION, resource: 'programs', namespace: ns, names: [spec.programRef.name] });
  }
  const prerequisites = [
    ...new Set((spec.prerequisites ?? []).map((p) => p?.name).filter((n): n is string => !!n)),
  ].sort();
  if (prerequisites.length)
    rules.push({ apiVersion: PULUMI_API_VERSION, resource: 'stacks', namespace: ns, names: prerequisites });
  const secrets = hasGitSource(spec) ? secretsForLookup(spec) : [];
  if (secrets.length) rules.push({ apiVersion: 'v1', resource: 'secrets', namespace: ns, names: secrets });
  // A destroy on deletion needs a workspace; seeing the namespace lets sync say why none can start
  // when the namespace itself is being deleted (Stalled/NamespaceTerminating, as upstream).
  if (spec.destroyOnFinalize === true) rules.push({ apiVersion: 'v1', resource: 'namespaces', names: [ns] });
  rules.push(refreshRequests);
  return { relatedResources: rules };
}
