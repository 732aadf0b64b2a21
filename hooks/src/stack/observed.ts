/**
 * What a Stack's sync starts from: the Stack, the status it carries over, and its children sorted
 * into what they are to it (its Workspace, its operations, its drift checks, its refresh requests,
 * an earlier version's Job and children).
 */
import type { V1ConfigMap, V1Job } from '@kubernetes/client-node';
import type { Stack, StackStatus, Workspace } from '../../../schemas/generated/types';
import { Annotations } from '../../../contract';
import { observedCondition } from '../lib/conditions';
import { objectsOf, type KObject, type ObjectMap, type Typed } from '../lib/k8s';
import type { ChildIdentity, ChildRule } from '../lib/kept-children';
import { carriedStatus } from './carried-status';
import { splitDriftChecks } from './drift';
import { withOutcomes, type UpdateOutcome } from './update';
import type { StackSyncRequest, SyncSteps } from './sync';
import { checkUpdateResult, jobOutcome } from '../lib/operation-result';
import { isUpdateName } from '../lib/stack-updates';
import { AUTO_API_VERSION } from '../lib/api-versions';
import { cacheClaimName } from './hibernation';

/** An observed Update (or an earlier version's Job) and its result (undefined: running). */
export interface ObservedUpdate {
  update: KObject;
  outcome: UpdateOutcome | undefined;
  /** A Job of an earlier version, which ran the operation itself: absorbed as an Update, never kept. */
  legacy?: true;
}

/** The Stack's request, sorted: everything the phases read, and nothing they write. */
export interface StackView {
  stack: Stack;
  name: string;
  namespace: string;
  generation: number;
  /** The `pulumi.com/reconciliation-request` annotation ("" without one). */
  request: string;
  deleting: boolean;
  related: ObjectMap | undefined;
  /** The observed status, as far as it can be the hooks' (carried-status.ts), observing this generation. */
  carried: StackStatus;
  /** The operation the observed status names: recorded before its Update was made. */
  started: StackStatus['currentUpdate'];
  workspace?: Typed<Workspace>;
  /** The Stack's operations: Updates named as the hooks name them (any other is not answered, so Metacontroller deletes it). */
  updates: ObservedUpdate[];
  /** The Stack's drift checks (drift.ts): Updates outside its history of operations. */
  driftChecks: ObservedUpdate[];
  refreshRequests: Typed<V1ConfigMap>[];
  /** The cache volume `<stack>-cache` (hibernation.ts), if Metacontroller reports it as the Stack's child. */
  cacheClaim?: KObject;
  /** The earlier version's Job that `status.currentUpdate` names, with its result once it ended. */
  legacyJob?: ObservedUpdate;
  /**
   * While that Job runs, the children of the versions before Workspace and Update objects (the
   * StatefulSet, Service, Jobs and Roles were the Stack's own), kept by identity until it ends.
   */
  legacy: ChildIdentity[];
}

/** The kinds of child earlier versions had (kept in stack-controller.yaml, OnDelete), and the names they gave them. */
function legacyKinds(stack: string): { kind: string; apiVersion: string; name: (n: string) => boolean }[] {
  const workspace = `${stack}-workspace`;
  const update = `${stack}-update`;
  const rbac = (n: string): boolean => n === workspace || n === update;
  return [
    { kind: 'StatefulSet', apiVersion: 'apps/v1', name: (n) => n === workspace },
    { kind: 'Service', apiVersion: 'v1', name: (n) => n === workspace },
    { kind: 'Job', apiVersion: 'batch/v1', name: (n) => isUpdateName(stack, n) },
    { kind: 'ServiceAccount', apiVersion: 'v1', name: (n) => n === update },
    { kind: 'Role', apiVersion: 'rbac.authorization.k8s.io/v1', name: rbac },
    { kind: 'RoleBinding', apiVersion: 'rbac.authorization.k8s.io/v1', name: rbac },
  ];
}

/**
 * What the Stack's answer may hold (checkAnswer): its Workspace, its Updates, its refresh requests,
 * and while an earlier version's Job runs, that version's children by identity only.
 */
export function stackChildRules(stack: string): ChildRule[] {
  return [
    { kind: 'Workspace', apiVersion: AUTO_API_VERSION, name: (n) => n === stack },
    { kind: 'Update', apiVersion: AUTO_API_VERSION, name: (n) => isUpdateName(stack, n) },
    { kind: 'ConfigMap', apiVersion: 'v1', name: (n) => n.startsWith(`${stack}-refresh-`) },
    { kind: 'PersistentVolumeClaim', apiVersion: 'v1', name: (n) => n === cacheClaimName(stack) },
    ...legacyKinds(stack).map((k) => ({ ...k, identityOnly: true as const })),
  ];
}

function cacheClaimOf(children: ObjectMap | undefined, stack: string): { cacheClaim?: KObject } {
  const claim = objectsOf(children, 'PersistentVolumeClaim', 'v1').find(
    (c) => c.metadata.name === cacheClaimName(stack),
  );
  return claim ? { cacheClaim: claim } : {};
}

export function observe(req: StackSyncRequest, steps: SyncSteps, now: Date): StackView {
  const stack = req.parent;
  const name = stack.metadata.name;
  const namespace = stack.metadata.namespace ?? '';
  const generation = stack.metadata.generation ?? 0;
  const request = stack.metadata.annotations?.[Annotations.reconciliationRequest] ?? '';
  const carried: StackStatus = carriedStatus(stack.status);
  carried.observedGeneration = generation;
  if (request !== '') carried.observedReconcileRequest = request;
  const started = carried.currentUpdate;
  const children = req.children;

  const updates = withOutcomes(
    objectsOf(children, 'Update', AUTO_API_VERSION).filter((update) => isUpdateName(name, update.metadata.name)),
    checkUpdateResult,
    now,
  );
  // An earlier version recorded its Job in status.currentUpdate before Metacontroller created it;
  // only that Job is its operation (anyone who may create Jobs can label one as the Stack's).
  const job =
    started?.name === undefined
      ? undefined
      : objectsOf<V1Job>(children, 'Job', 'batch/v1').find((j) => j.metadata.name === started.name);
  const legacyJob: ObservedUpdate | undefined = job && {
    update: job,
    outcome: jobOutcome(job, steps.updateResult(job.metadata.annotations?.[Annotations.updateResult]), now),
    legacy: true,
  };
  const legacyRunning =
    job !== undefined &&
    observedCondition(job.status, 'Complete')?.status !== 'True' &&
    observedCondition(job.status, 'Failed')?.status !== 'True';
  return {
    stack,
    name,
    namespace,
    generation,
    request,
    deleting: req.finalizing === true,
    related: req.related,
    carried,
    started,
    workspace: objectsOf<Workspace>(children, 'Workspace', AUTO_API_VERSION).find((o) => o.metadata.name === name),
    ...splitDriftChecks(updates),
    refreshRequests: objectsOf<V1ConfigMap>(children, 'ConfigMap', 'v1').filter((cm) =>
      cm.metadata.name.startsWith(`${name}-refresh-`),
    ),
    ...cacheClaimOf(children, name),
    ...(legacyJob ? { legacyJob } : {}),
    legacy: legacyRunning
      ? legacyKinds(name).flatMap(({ kind, apiVersion, name: named }) =>
          objectsOf(children, kind, apiVersion)
            .filter((o) => named(o.metadata.name))
            .map((o) => ({ kind, apiVersion, name: o.metadata.name, namespace })),
        )
      : [],
  };
}
