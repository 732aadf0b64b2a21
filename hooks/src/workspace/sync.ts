/**
 * The Workspace controller's sync hook (auto.pulumi.com/v1alpha1 Workspace, a CompositeController):
 * a pure function from the observed Workspace and its children to its StatefulSet, headless Service,
 * Role and status ConfigMap, and its status, as upstream's Workspace reconciler reports it
 * (https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/auto/workspace_controller.go).
 * Readiness comes from the rollout and from the agent's own report in the status ConfigMap.
 */
import type { V1StatefulSet } from '@kubernetes/client-node';
import type { Workspace, WorkspaceStatus } from '../../../schemas/generated/types';
import { validateWorkspace } from '../../../schemas';
import { Annotations } from '../../../contract';
import type { HookConfig } from '../config';
import { setConditions, type DesiredCondition } from '../lib/conditions';
import { stallsOf } from '../events/event';
import { MAX_NESTING, pathNestedDeeperThan, PROTOTYPE_KEY_PROBLEM, prototypeKeyPath, dottedPath } from '../lib/json';
import { objectsOf, type KObject, type ObjectMap } from '../lib/k8s';
import { checkAnswer, keptChild, recordDigests, recordedDigests, type ChildRule } from '../lib/kept-children';
import { desiredPod, workspaceAddress, workspaceName, workspaceStatusName, type DesiredPod } from './pod';
import { workspaceRbac } from './rbac';
import { workspaceReadiness, type WorkspaceReadiness } from './readiness';
import { agentReport, observedStatusConfigMap, workspaceStatusConfigMap } from './status-configmap';

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
  build?: (ws: Workspace, config: HookConfig) => DesiredPod;
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

/**
 * On a Workspace while one of its Stack's Updates runs (the Update's name; the Stack sets and clears
 * it): its StatefulSet, Service and Role are kept exactly as they are, whatever else changed (the
 * hook server's settings, say), so nothing rolls the pod under the operation.
 */
export const WORKSPACE_HOLD = 'pulumi.com/operation-in-progress';

/**
 * The kinds of child a Workspace keeps as they are when held or invalid, all InPlace
 * (manifests/metacontroller/workspace-controller.yaml); its status ConfigMap is always built anew.
 */
const CHILD_KINDS: [string, string][] = [
  ['StatefulSet', 'apps/v1'],
  ['Service', 'v1'],
  ['Role', 'rbac.authorization.k8s.io/v1'],
  ['RoleBinding', 'rbac.authorization.k8s.io/v1'],
];
const IN_PLACE_KINDS: ReadonlySet<string> = new Set(CHILD_KINDS.map(([kind]) => kind));

/**
 * What a Workspace's answer may hold (checkAnswer): each kind, named `<workspace>-workspace`, and
 * its status ConfigMap `<workspace>-workspace-status`.
 */
function childRules(workspace: string): ChildRule[] {
  return [
    ...CHILD_KINDS.map(([kind, apiVersion]) => ({
      kind,
      apiVersion,
      name: (n: string) => n === workspaceName(workspace),
    })),
    { kind: 'ConfigMap', apiVersion: 'v1', name: (n) => n === workspaceStatusName(workspace) },
  ];
}

/**
 * A Stack's values (config, podTemplate) may nest MAX_NESTING levels; in its Workspace they sit a
 * few levels deeper (`stacks[0].config[n].value`), which must not stall a valid Stack.
 */
const MAX_WORKSPACE_NESTING = MAX_NESTING + 8;

/** `<workspace>-workspace` names a StatefulSet, whose pods' revision label (name, `-`, 10 characters) has at most 63. */
const MAX_NAME = 42;

/** The Stalled reason of a Workspace with more than one entry in `spec.stacks` (ours: upstream initialises each). */
export const MULTIPLE_STACKS = 'MultipleStacksUnsupported';

/** How many of the stacks' names the message lists, and how much of each. */
const LISTED_STACKS = 5;
const LISTED_NAME = 100;

/**
 * Why a Workspace's spec cannot be built into a pod, if it cannot: nested deeper than any pod spec
 * (a hand-made one: the API server stores free-form values 10,000 levels deep, and the builder's
 * merge would overflow the stack), holding a key the hook server refuses, or naming more stacks
 * than the agent serves (one: docs/workspaces-and-updates.md says why).
 */
function specProblem(ws: Workspace): { reason: string; message: string } | undefined {
  const invalid = (message: string) => ({ reason: 'SpecInvalid', message });
  if (ws.metadata.name.length > MAX_NAME)
    return invalid(
      `metadata.name is ${ws.metadata.name.length} characters long; a Workspace's may have at most ${MAX_NAME} (its StatefulSet is <name>-workspace)`,
    );
  const tooDeep = pathNestedDeeperThan(ws.spec, MAX_WORKSPACE_NESTING, 'spec');
  if (tooDeep !== undefined)
    return invalid(`${tooDeep} is nested more than ${MAX_WORKSPACE_NESTING} levels deep; no workspace needs that many`);
  const key = prototypeKeyPath(ws.spec);
  if (key !== undefined) return invalid(`${dottedPath('spec', key)}: ${PROTOTYPE_KEY_PROBLEM}`);
  // The CRD's schema, as the API server checks it: a request it did not come through is read the same.
  const schema = validateWorkspace({
    apiVersion: ws.apiVersion,
    kind: ws.kind,
    metadata: { name: ws.metadata.name },
    spec: ws.spec,
  });
  if (!schema.ok) return invalid(schema.errors.map((e) => `${e.path} ${e.message}`).join('; '));
  const stacks = Array.isArray(ws.spec?.stacks) ? ws.spec.stacks : [];
  if (stacks.length > 1) {
    const names = stacks
      .slice(0, LISTED_STACKS)
      .map((s) => JSON.stringify(String(s?.name ?? '').slice(0, LISTED_NAME)))
      .join(', ');
    return {
      reason: MULTIPLE_STACKS,
      message:
        `spec.stacks has ${stacks.length} entries (${names}${stacks.length > LISTED_STACKS ? ', …' : ''}); ` +
        `a workspace here serves one stack. Make one Workspace per stack, each with this source and that stack ` +
        `alone in spec.stacks, and name it in the workspaceName of that stack's Updates`,
    };
  }
  return undefined;
}

export function syncWorkspace(req: WorkspaceSyncRequest, ctx: WorkspaceSyncContext): WorkspaceSyncResponse {
  const ws = req.parent;
  const name = ws.metadata.name;
  const namespace = ws.metadata.namespace ?? '';
  const generation = ws.metadata.generation;
  // Digests of children already known (the cached pod builder's, a verified kept child's).
  const known = new Map<KObject, string>();
  const answer = (status: WorkspaceStatus, children: KObject[]): WorkspaceSyncResponse => {
    checkAnswer(`Workspace ${namespace}/${name}`, namespace, children, childRules(name));
    const stalls = stallsOf(ws.status, status.conditions);
    if (stalls !== undefined) status.stalls = stalls;
    status.childDigests = recordDigests(children, namespace, IN_PLACE_KINDS, known);
    return { status, children };
  };
  // Each child kept as last answered, if the status's digest says that is what its copy is (else 409).
  const recorded = recordedDigests(ws.status);
  const keepAll = (): KObject[] =>
    CHILD_KINDS.flatMap(([kind, apiVersion]) =>
      objectsOf(req.children, kind, apiVersion)
        .filter((o) => o.metadata.name === workspaceName(name))
        .map((o) => {
          const kept = keptChild(o, { kind, apiVersion, name: o.metadata.name, namespace }, recorded);
          known.set(kept.child, kept.digest);
          return kept.child;
        }),
    );
  const statusConfigMap = observedStatusConfigMap(ws, req.children);
  // Kept, the status ConfigMap is still built anew (never the agent's data as observed), if it exists.
  const keptStatusConfigMap = statusConfigMap ? [workspaceStatusConfigMap(ws)] : [];
  const problem = specProblem(ws);
  if (problem !== undefined) {
    // Nothing is built from it; what the Workspace has stays as it is.
    const status: WorkspaceStatus = { address: workspaceAddress(name, namespace) };
    if (generation !== undefined) status.observedGeneration = generation;
    const failed = { status: 'False', ...problem } as const;
    status.conditions = setConditions(
      ws.status?.conditions,
      [
        { type: 'Ready', ...failed },
        { type: 'Stalled', ...failed, status: 'True' },
      ],
      generation,
      ctx.now,
    );
    return answer(status, [...keepAll(), ...keptStatusConfigMap]);
  }
  const observed = objectsOf<V1StatefulSet>(req.children, 'StatefulSet', 'apps/v1').find(
    (s) => s.metadata.name === workspaceName(name),
  );
  const held = ws.metadata.annotations?.[WORKSPACE_HOLD] !== undefined && observed !== undefined;
  const desired = held ? undefined : (ctx.build ?? desiredPod)(ws, ctx.config);
  // Held, the workspace is what runs: its readiness is the observed pod template's.
  const hash = desired?.hash ?? observed?.spec?.template?.metadata?.annotations?.[Annotations.workspaceHash] ?? '';
  const readiness = workspaceReadiness(observed, agentReport(observed, statusConfigMap), hash);
  const status: WorkspaceStatus = { address: workspaceAddress(name, namespace) };
  if (generation !== undefined) status.observedGeneration = generation;
  if (readiness.pulumiVersion) status.pulumiVersion = readiness.pulumiVersion;
  status.conditions = setConditions(ws.status?.conditions, conditionsOf(readiness), generation, ctx.now);
  if (!desired) return answer(status, [...keepAll(), ...keptStatusConfigMap]);
  known.set(desired.statefulSet, desired.digests.statefulSet);
  known.set(desired.service, desired.digests.service);
  return answer(status, [desired.statefulSet, desired.service, ...workspaceRbac(ws), workspaceStatusConfigMap(ws)]);
}
