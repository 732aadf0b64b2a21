/**
 * Flux's kustomize-controller on the test bed: the toolchain's binary (e2e/toolchain/build.sh
 * component `kustomize-controller`), run as a process on the node next to source-controller (for
 * the same reasons: docs/testbed.md), with the CRD and the RBAC of its module as its
 * config/rbac/kustomization.yaml installs them: the ClusterRole `kustomize-manager-role` and
 * `cluster-admin` (`kustomize-cluster-reconciler`), both bound to its ServiceAccount
 * `flux-system/kustomize-controller`.
 *
 * It downloads artifacts from the URLs source-controller advertises, whose host is a cluster
 * Service name that a process on the node cannot resolve: `SOURCE_CONTROLLER_LOCALHOST` (the
 * controller's own override of that host, read in internal/controller/kustomization_controller.go)
 * names the artifact server's address instead.
 */
import * as k8s from '@kubernetes/client-node';
import type { Operator } from '../harness';
import {
  applyModuleCrds,
  createAll,
  createControllerAccount,
  FLUX_NAMESPACE,
  launchFluxController,
  moduleManifests,
  type ControllerProcess,
  type SourceController,
} from './source-controller';
import { requireToolchain } from './toolchain';

export const KUSTOMIZATIONS = {
  group: 'kustomize.toolkit.fluxcd.io',
  version: 'v1',
  plural: 'kustomizations',
} as const;

const NAME = 'kustomize-controller';
/** config/rbac/kustomization.yaml's `namePrefix`. */
const PREFIX = 'kustomize-';

/** The module's RBAC as its kustomization renders it: names prefixed, subjects its ServiceAccount. */
function rbac(): k8s.KubernetesObject[] {
  return moduleManifests(NAME, 'rbac').map((o) => {
    const named = { ...o, metadata: { ...o.metadata, name: `${PREFIX}${o.metadata!.name!}` } };
    if (o.kind !== 'ClusterRoleBinding') return named;
    const binding = named as k8s.V1ClusterRoleBinding;
    const roleName = binding.roleRef.name === 'cluster-admin' ? 'cluster-admin' : `${PREFIX}${binding.roleRef.name}`;
    const bound: k8s.V1ClusterRoleBinding = {
      ...binding,
      roleRef: { ...binding.roleRef, name: roleName },
      subjects: [{ kind: 'ServiceAccount', name: NAME, namespace: FLUX_NAMESPACE }],
    };
    return bound;
  });
}

/** Starts kustomize-controller, fetching from `source`'s artifact server; stop() before the control plane stops. */
export async function startKustomizeController(op: Operator, source: SourceController): Promise<ControllerProcess> {
  const tc = requireToolchain(['kubernetes', NAME]);
  await applyModuleCrds(op, NAME, () => op.custom.listClusterCustomObject({ ...KUSTOMIZATIONS }));
  await createControllerAccount(op, NAME);
  await createAll(op.objects, rbac());
  return launchFluxController(op, NAME, tc.binaries.kustomizeController, () => [], {
    SOURCE_CONTROLLER_LOCALHOST: source.artifactAddress,
  });
}
