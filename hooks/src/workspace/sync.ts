/**
 * The Workspace controller's sync hook (auto.pulumi.com/v1alpha1 Workspace, a CompositeController):
 * a pure function from the observed Workspace and its children to its StatefulSet, headless Service
 * and Role, and its status, as upstream's Workspace reconciler reports it
 * (https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/auto/workspace_controller.go).
 * Readiness comes from the rollout and from the agent's own report on the StatefulSet.
 */
import type { V1StatefulSet } from '@kubernetes/client-node';
import type { Workspace, WorkspaceStatus } from '../../../schemas/generated/types';
import type { HookConfig } from '../config';
import { setConditions, type DesiredCondition } from '../lib/conditions';
import { objectsOf, type KObject, type ObjectMap } from '../lib/k8s';
import { desiredWorkspace, workspaceAddress, workspaceName, type DesiredWorkspace } from './pod';
import { workspaceRbac } from './rbac';
import { workspaceReadiness, type WorkspaceReadiness } from './readiness';

export interface WorkspaceSyncRequest {
  parent: Workspace;
  children?: ObjectMap;
}

export interface WorkspaceSyncResponse {
  status: WorkspaceStatus;
  children: KObject[];
}

export interface WorkspaceSyncContext {
  config: HookConfig;
  now: Date;
  /** Where the pod builder's answers may be remembered; default: computed every time. */
  build?: (ws: Workspace, config: HookConfig) => DesiredWorkspace;
}

/** Upstream's Ready and Stalled conditions for a readiness. */
function conditionsOf(readiness: WorkspaceReadiness): DesiredCondition[] {
  switch (readiness.state) {
    case 'ready':
      return [{ type: 'Ready', status: 'True', reason: 'Succeeded', message: 'the workspace is ready' }];
    case 'waiting':
      return [{ type: 'Ready', status: 'False', reason: readiness.reason, message: readiness.message }];
    case 'failed':
      return [
        { type: 'Ready', status: 'False', reason: readiness.reason, message: readiness.message },
        { type: 'Stalled', status: 'True', reason: readiness.reason, message: readiness.message },
      ];
  }
}

export function syncWorkspace(req: WorkspaceSyncRequest, ctx: WorkspaceSyncContext): WorkspaceSyncResponse {
  const ws = req.parent;
  const name = ws.metadata.name;
  const namespace = ws.metadata.namespace ?? '';
  const generation = ws.metadata.generation;
  const desired = (ctx.build ?? desiredWorkspace)(ws, ctx.config);
  const observed = objectsOf<V1StatefulSet>(req.children, 'StatefulSet', 'apps/v1').find(
    (s) => s.metadata.name === workspaceName(name),
  );
  const readiness = workspaceReadiness(observed, desired.hash);
  const status: WorkspaceStatus = { address: workspaceAddress(name, namespace) };
  if (generation !== undefined) status.observedGeneration = generation;
  if (readiness.pulumiVersion) status.pulumiVersion = readiness.pulumiVersion;
  status.conditions = setConditions(ws.status?.conditions, conditionsOf(readiness), generation, ctx.now);
  return { status, children: [desired.statefulSet, desired.service, ...workspaceRbac(ws)] };
}
