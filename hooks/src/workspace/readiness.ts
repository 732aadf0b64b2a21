import type { V1StatefulSet } from '@kubernetes/client-node';
import {
  Annotations,
  AUTH_DELEGATOR_CLUSTER_ROLE,
  WORKSPACE_UNAUTHENTICATED,
  type WorkspaceStatus,
} from '../../../contract';
import type { Typed } from '../lib/k8s';

/**
 * The command that grants the workspace's ServiceAccount what it needs to verify callers, as the
 * pod runs it (the observed template: a podTemplate may name another account than the spec). The
 * binding's name is the one manifests/stack-rbac.yaml and the chart give it.
 */
function authDelegatorFix(observed: Typed<V1StatefulSet>): string {
  const namespace = observed.metadata.namespace ?? 'default';
  const account = observed.spec?.template?.spec?.serviceAccountName || 'default';
  return (
    `To grant ${AUTH_DELEGATOR_CLUSTER_ROLE} to the workspace's ServiceAccount ${namespace}/${account}: ` +
    `kubectl create clusterrolebinding pulumi-operator:auth-delegator:${namespace}:${account} ` +
    `--clusterrole=${AUTH_DELEGATOR_CLUSTER_ROLE} --serviceaccount=${namespace}:${account}`
  );
}

const WAITING = 'waiting for workspace readiness';

export type WorkspaceReadiness =
  | { state: 'ready'; pulumiVersion?: string }
  | { state: 'waiting'; reason: string; message: string; pulumiVersion?: string }
  | { state: 'failed'; reason: string; message: string; pulumiVersion?: string };

/**
 * Whether the observed workspace runs the desired template and its agent is ready for operations.
 * The agent's own report (status-configmap.ts) carries failures the probe cannot; it counts only
 * for the template `hash`, so the report of an earlier pod never does.
 */
export function workspaceReadiness(
  observed: Typed<V1StatefulSet> | undefined,
  report: WorkspaceStatus | undefined,
  hash: string,
): WorkspaceReadiness {
  if (!observed) return { state: 'waiting', reason: 'WaitingForReplicas', message: WAITING };
  const version = report?.hash === hash && report.pulumiVersion ? { pulumiVersion: report.pulumiVersion } : {};
  if (report && report.hash === hash && report.state === 'Failed') {
    const reason = report.reason ?? 'InitializationFailed';
    let message = report.message ?? 'the workspace failed';
    if (reason === WORKSPACE_UNAUTHENTICATED) message += `. ${authDelegatorFix(observed)}`;
    return { state: 'failed', reason, message, ...version };
  }
  const observedHash = observed.spec?.template?.metadata?.annotations?.[Annotations.workspaceHash];
  const st = observed.status;
  const rolledOut =
    observedHash === hash &&
    (st?.observedGeneration ?? 0) >= (observed.metadata.generation ?? 0) &&
    (!st?.updateRevision || st.updateRevision === st.currentRevision) &&
    (st?.readyReplicas ?? 0) >= 1;
  if (rolledOut && report?.hash === hash && report.state === 'Ready') return { state: 'ready', ...version };
  if (!rolledOut)
    return {
      state: 'waiting',
      reason: observedHash === hash ? 'WaitingForReplicas' : 'RollingUpdate',
      message: WAITING,
      ...version,
    };
  return { state: 'waiting', reason: 'Installing', message: WAITING, ...version };
}
