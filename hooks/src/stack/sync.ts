import type { V1ConfigMap, V1Job, V1Namespace } from '@kubernetes/client-node';
import type { Stack, StackStatus, StackUpdateState, Workspace } from '../../../schemas/generated/types';
import {
  Annotations,
  rfc3339,
  WORKSPACE_UNAUTHENTICATED,
  type OperationType,
  type UpdateResult,
} from '../../../contract';
import type { HookConfig } from '../config';
import { ChildNotVerified, findObject, objectsOf, type KObject, type ObjectMap, type Typed } from '../lib/k8s';
import { isRecord } from '../lib/json';
import {
  byIdentity,
  checkAnswer,
  childField,
  keptChild,
  recordDigests,
  recordedDigests,
  type ChildIdentity,
  type ChildRule,
} from '../lib/kept-children';
import { observedCondition } from '../lib/conditions';
import { resyncAfter } from '../lib/time';
import {
  approvalGate,
  approvalRequired,
  heldByPlan,
  mayRecordSuccess,
  planAsRecorded,
  recordApply,
  recordPlan,
  supersedePlan,
  withApprovalCondition,
} from './approval';
import { carriedStatus } from './carried-status';
import { applyMark, Reasons, type Mark } from './conditions';
import { decideSync, MAX_UPDATE_FAILURES } from './decision';
import { checkToRecord, isDriftCheck, recordDriftCheck } from './drift';
import { driftStep } from './drift-sync';
import { recordOutputs } from './outputs';
import { outputsToMark, outputsToRequest, recordOutputsTo, withOutputsTo } from './outputs-to';
import { checkPrerequisites, refreshRequestsFor } from './prerequisites';
import { retainUpdates } from './retention';
import { interruptedMark, interruptedRetryMessage } from './self-healing';
import { resolveSource, type RefLookup } from './source';
import { jobOutcome, operationType } from '../update/job';
import {
  buildUpdate,
  isUpdateName,
  typeInName,
  updateOutcome,
  type UpdateIdentity,
  type UpdateOutcome,
} from './update';
import { checkUpdateResult, readUpdateResult } from './update-result';
import { validateStackObject } from './validate';
import {
  desiredWorkspace,
  heldFor,
  WORKSPACE_API_VERSION,
  WORKSPACE_SPEC_HASH,
  workspaceReadiness,
  type DesiredStackWorkspace,
} from './workspace';
import type { FetchSource } from '../workspace/source';

export interface StackSyncRequest {
  parent: Stack;
  children?: ObjectMap;
  related?: ObjectMap;
  finalizing?: boolean;
}

export interface StackSyncResponse {
  status: StackStatus;
  children: KObject[];
  resyncAfterSeconds?: number;
  finalized?: boolean;
}

/**
 * The steps of a sync that are pure functions of their arguments and costly enough to remember
 * between requests. The hook server hands in its cache (cache/sync-cache.ts); without one, each
 * step is computed ({@link computeSteps}). A remembered answer is the computed one, frozen.
 */
export interface SyncSteps {
  validate(stack: Stack): readonly string[];
  workspace(stack: Stack, source: FetchSource, config: HookConfig): DesiredStackWorkspace;
  /** A Job's `pulumi.com/update-result` annotation, parsed (the Update controller's). */
  updateResult(text: string | undefined): UpdateResult | undefined;
}

export const computeSteps: SyncSteps = {
  validate: validateStackObject,
  workspace: desiredWorkspace,
  updateResult: readUpdateResult,
};

export interface SyncContext {
  config: HookConfig;
  now: Date;
  /** Git refs resolved by the lookup phase, keyed by refLookupKey(url, ref). */
  lookups: ReadonlyMap<string, RefLookup>;
  /** Where the costly steps' answers may be remembered; default: computed every time. */
  cache?: SyncSteps;
}

/** Upstream requeues a Stack whose source is unavailable after 30 s. */
const SOURCE_RETRY_SECONDS = 30;

/** An observed Update (or an earlier version's Job) and its result (undefined: running). */
interface ObservedUpdate {
  update: KObject;
  outcome: UpdateOutcome | undefined;
  /** A Job of an earlier version, which ran the operation itself: absorbed as an Update, never kept. */
  legacy?: true;
}

interface Observed {
  workspace?: Typed<Workspace>;
  /** The Stack's operations: Updates named as the hooks name them (any other is not answered, so Metacontroller deletes it). */
  updates: ObservedUpdate[];
  /** The Stack's drift checks (drift.ts): Updates outside its history of operations. */
  driftChecks: ObservedUpdate[];
  refreshRequests: Typed<V1ConfigMap>[];
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
function stackChildRules(stack: string): ChildRule[] {
  return [
    { kind: 'Workspace', apiVersion: WORKSPACE_API_VERSION, name: (n) => n === stack },
    { kind: 'Update', apiVersion: WORKSPACE_API_VERSION, name: (n) => isUpdateName(stack, n) },
    { kind: 'ConfigMap', apiVersion: 'v1', name: (n) => n.startsWith(`${stack}-refresh-`) },
    ...legacyKinds(stack).map((k) => ({ ...k, identityOnly: true as const })),
  ];
}

/** The Stack's children that Metacontroller updates in place: kept only as their digests in the status verify. */
const IN_PLACE_KINDS: ReadonlySet<string> = new Set(['Workspace', 'ConfigMap']);

function observe(
  children: ObjectMap | undefined,
  stack: string,
  namespace: string,
  current: string | undefined,
  steps: SyncSteps,
  now: Date,
): Observed {
  const updates = objectsOf(children, 'Update', WORKSPACE_API_VERSION)
    .filter((update) => isUpdateName(stack, update.metadata.name))
    .map((update) => ({ update, outcome: updateOutcome(update, checkUpdateResult, now) }));
  // An earlier version recorded its Job in status.currentUpdate before Metacontroller created it;
  // only that Job is its operation (anyone who may create Jobs can label one as the Stack's).
  const job =
    current === undefined
      ? undefined
      : objectsOf<V1Job>(children, 'Job', 'batch/v1').find((j) => j.metadata.name === current);
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
    workspace: objectsOf<Workspace>(children, 'Workspace', WORKSPACE_API_VERSION).find(
      (o) => o.metadata.name === stack,
    ),
    updates: updates.filter((o) => !isDriftCheck(o.update)),
    driftChecks: updates.filter((o) => isDriftCheck(o.update)),
    refreshRequests: objectsOf<V1ConfigMap>(children, 'ConfigMap', 'v1').filter((cm) =>
      cm.metadata.name.startsWith(`${stack}-refresh-`),
    ),
    ...(legacyJob ? { legacyJob } : {}),
    legacy: legacyRunning
      ? legacyKinds(stack).flatMap(({ kind, apiVersion, name }) =>
          objectsOf(children, kind, apiVersion)
            .filter((o) => name(o.metadata.name))
            .map((o) => ({ kind, apiVersion, name: o.metadata.name, namespace })),
        )
      : [],
  };
}

/**
 * Records a finished operation in the status (upstream's markStackSucceeded/markStackFailed):
 * what it ran for is what `status.currentUpdate` recorded when it started.
 */
function absorb(
  status: StackStatus,
  name: string,
  started: NonNullable<StackStatus['currentUpdate']>,
  outcome: UpdateOutcome,
  now: Date,
): void {
  const prev = status.lastUpdate;
  const { result } = outcome;
  const succeeded = result.state === 'succeeded';
  const generation = started.generation ?? 0;
  const reconcileRequest = started.reconcileRequest ?? '';
  const commit = started.commit ?? '';
  const sameAttempt =
    prev !== undefined && prev.generation === generation && (prev.reconcileRequest ?? '') === reconcileRequest;
  const last: StackUpdateState = {
    generation,
    reconcileRequest,
    name,
    type: result.type,
    state: result.state,
    message: result.message,
    lastAttemptedCommit: commit,
    lastSuccessfulCommit: succeeded ? commit : (prev?.lastSuccessfulCommit ?? ''),
    lastResyncTime: outcome.endTime ?? rfc3339(now),
    failures: succeeded ? 0 : sameAttempt ? (prev.failures ?? 0) + 1 : 0,
  };
  if (result.permalink) last.permalink = result.permalink;
  status.lastUpdate = last;
  if (succeeded && result.type === 'up') {
    recordOutputs(status, result, name, generation, last.lastResyncTime ?? rfc3339(now));
    recordOutputsTo(status, result, generation, last.lastResyncTime ?? rfc3339(now));
  }
  if (succeeded && result.projectInfo) status.projectInfo = { ...result.projectInfo };
  delete status.currentUpdate;
}

/** An Update of the Stack's that the hooks did not make as it is: answered with 409, its result never taken. */
function foreignUpdate(name: string, namespace: string, why: string): ChildNotVerified {
  return new ChildNotVerified(
    childField('children', { kind: 'Update', apiVersion: WORKSPACE_API_VERSION, name, namespace }),
    `${why}; nothing is taken from it and nothing is applied until it is deleted: kubectl delete update ${name} -n ${namespace}`,
  );
}

/**
 * Whether the Update `status.currentUpdate` names is the one the hooks started: its type is the
 * one its name was made with, and its plan fields are the ones the approval gate gave it.
 */
function startedAsRecorded(stack: Stack, status: StackStatus, update: KObject): boolean {
  const spec = isRecord(update.spec) ? update.spec : {};
  return (
    operationType(spec.type) === typeInName(stack.metadata.name, update.metadata.name) && planAsRecorded(status, update)
  );
}

/**
 * The status mark that reports the last operation's result (upstream's markStackResult). The counts
 * are `lastUpdate.failures` as upstream prints them: the first failure of a generation says 0.
 */
function resultMark(last: StackUpdateState | undefined): Mark {
  if (!last || last.state === 'succeeded') return { kind: 'ready' };
  const failures = last.failures ?? 0;
  if (failures >= MAX_UPDATE_FAILURES) {
    return {
      kind: 'stalled',
      reason: Reasons.UpdateFailed,
      message: `${last.type} failed ${failures} times; not retrying until the spec or source changes`,
    };
  }
  if (last.type === 'preview')
    return {
      kind: 'reconciling',
      reason: Reasons.PreviewFailed,
      message: `preview failed (${failures} attempt(s))`,
    };
  return { kind: 'reconciling', reason: Reasons.RetryingAfterFailure, message: `${failures} update failure(s)` };
}

/** The failure of the Workspace a running Update still waits for (its Job not started), if it failed. */
function waitingOnFailedWorkspace(
  running: ObservedUpdate[],
  workspace: Typed<Workspace> | undefined,
): { reason: string; message: string } | undefined {
  const waiting = running.some(({ update }) => {
    const p = observedCondition(update.status, 'Progressing');
    return p?.status === 'False' && (p.reason === 'WorkspaceNotReady' || p.reason === 'WorkspaceNotFound');
  });
  if (!waiting || !workspace) return undefined;
  const readiness = workspaceReadiness(workspace, workspace.metadata.annotations?.[WORKSPACE_SPEC_HASH] ?? '');
  return readiness.state === 'failed' ? readiness : undefined;
}

/** The Stalled reason of a workspace failure the agent reported. */
function workspaceFailureReason(agentReason: string): string {
  if (agentReason === 'IncompatibleConfiguration') return Reasons.PulumiVersionTooLow;
  if (agentReason === WORKSPACE_UNAUTHENTICATED) return Reasons.Unauthenticated;
  return Reasons.WorkspaceFailed;
}

/** True when the Stack's namespace (a related object when destroyOnFinalize is set) is being deleted. */
function namespaceTerminating(stack: Stack, related: ObjectMap | undefined): boolean {
  const ns = findObject<V1Namespace>(related, 'Namespace', 'v1', undefined, stack.metadata.namespace ?? '');
  return ns !== undefined && (ns.status?.phase === 'Terminating' || ns.metadata.deletionTimestamp !== undefined);
}

function namespaceTerminatingMessage(name: string, namespace: string): string {
  return (
    `namespace ${namespace} is terminating, so no workspace can start to destroy the stack; ` +
    `delete its resources by other means (for example \`pulumi destroy\` against the same backend), ` +
    `then release the Stack: kubectl patch stack ${name} -n ${namespace} --type=merge -p '{"metadata":{"finalizers":[]}}'`
  );
}

/**
 * The Stack sync and finalize hook: a pure function of the request, the clock and the git lookups.
 * Reads top to bottom in upstream's order (the Reconcile function of
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L518):
 * absorb a finished operation, wait for one in flight, finalize without destroy, validate, resolve
 * the source, decide, check prerequisites, wait for the workspace, start the next operation.
 */
export function syncStack(req: StackSyncRequest, ctx: SyncContext): StackSyncResponse {
  const stack = req.parent;
  const { now } = ctx;
  const steps = ctx.cache ?? computeSteps;
  const name = stack.metadata.name;
  const namespace = stack.metadata.namespace ?? '';
  const generation = stack.metadata.generation ?? 0;
  const request = stack.metadata.annotations?.[Annotations.reconciliationRequest] ?? '';
  const deleting = req.finalizing === true;

  const status: StackStatus = carriedStatus(stack.status);
  status.observedGeneration = generation;
  if (request !== '') status.observedReconcileRequest = request;
  // The operation the observed status names: recorded before its Update was made (step 8).
  const started = status.currentUpdate;
  const observed = observe(req.children, name, namespace, started?.name, steps, now);

  // Digests of the InPlace children already known (a cached Workspace's, a verified kept child's).
  const known = new Map<KObject, string>();
  const respond = (mark: Mark, children: KObject[], extra: Partial<StackSyncResponse> = {}): StackSyncResponse => {
    checkAnswer(`Stack ${namespace}/${name}`, namespace, children, stackChildRules(name));
    // What this answer asks of each InPlace child, for the keep paths of the next syncs.
    status.childDigests = recordDigests(children, namespace, IN_PLACE_KINDS, known);
    // The approval gate's plan and condition exist only while the gate is on (docs/approval.md).
    if (!approvalRequired(stack)) delete status.plan;
    const conditions = withApprovalCondition(
      applyMark(status.conditions, mark, generation, now),
      stack,
      status.plan,
      generation,
      now,
    );
    delete status.conditions; // re-added last, where every answer has it
    status.conditions = conditions;
    // A finalize answer always says whether the Stack may go (absent would mean the same, but say it).
    const answer: StackSyncResponse = { status, children, ...(deleting ? { finalized: false } : {}), ...extra };
    // Called again when the next finished Update's TTL runs out, unless something else comes first.
    const wake = retained.resyncAfterSeconds;
    if (wake !== undefined && (answer.resyncAfterSeconds ?? Infinity) > wake) answer.resyncAfterSeconds = wake;
    const wait = resyncAfter(answer.resyncAfterSeconds);
    if (wait === undefined) delete answer.resyncAfterSeconds;
    else answer.resyncAfterSeconds = wait;
    return answer;
  };
  // Finished Updates go once their result is in the observed status and their TTL has passed: all
  // but the one the status names (and a preview whose plan the status still refers to).
  // A drift check is absorbed once it is not the one whose result the status is yet to record.
  const unrecordedCheck = checkToRecord(observed.driftChecks, stack, status, now);
  const retained = retainUpdates(
    [
      ...observed.updates.map((o) => ({
        ...o,
        absorbed: o.update.metadata.name !== started?.name && !heldByPlan(status, o.update.metadata.name),
      })),
      ...observed.driftChecks.map((o) => ({ ...o, absorbed: o !== unrecordedCheck })),
    ],
    now,
  );
  const keptUpdates = retained.kept.map(({ update }) =>
    byIdentity({ kind: 'Update', apiVersion: WORKSPACE_API_VERSION, name: update.metadata.name, namespace }),
  );
  // Kept as last answered, if the status's digest says that is what the observed copy is (else 409).
  const recorded = recordedDigests(stack.status);
  const kept = (child: KObject, kind: string, apiVersion: string): KObject => {
    const verified = keptChild(child, { kind, apiVersion, name: child.metadata.name, namespace }, recorded);
    known.set(verified.child, verified.digest);
    return verified.child;
  };
  const keptWorkspace = (): KObject[] =>
    observed.workspace ? [kept(observed.workspace, 'Workspace', WORKSPACE_API_VERSION)] : [];
  const keepAll = (): KObject[] => [
    ...keptWorkspace(),
    ...keptUpdates,
    ...observed.refreshRequests.map((cm) => kept(cm, 'ConfigMap', 'v1')),
  ];

  // 0. An operation of an earlier version (its own Job) still runs: wait for it, changing nothing.
  if (observed.legacy.length > 0) {
    return respond({ kind: 'reconciling', reason: Reasons.StackProcessing, message: 'stack is being processed' }, [
      ...keepAll(),
      ...observed.legacy.map(byIdentity),
    ]);
  }

  // 1. The operation the status names: absorb it when finished, wait while it runs. Only the
  // hooks start operations, and each is recorded before its Update is made, so no other result
  // is taken (one that is not the hooks' gets no answer: 409).
  const current = observed.updates.find(({ update }) => update.metadata.name === started?.name) ?? observed.legacyJob;
  // Recorded by the previous answer and not made yet: the Update step 8 makes if it is still the one to start.
  const pending = current ? undefined : started?.name;
  if (current && !current.legacy && !startedAsRecorded(stack, status, current.update))
    throw foreignUpdate(
      current.update.metadata.name,
      namespace,
      'is not the Update the operator started: its spec.type or plan is not what status.currentUpdate and status.plan record',
    );
  if (current?.outcome && started) {
    const { update, outcome } = current;
    if (!recordPlan(stack, status, update, outcome, now) && mayRecordSuccess(stack, status, update, outcome)) {
      absorb(status, update.metadata.name, started, outcome, now);
      recordApply(status, update, outcome, now);
    }
  }
  if (!current || current.outcome) delete status.currentUpdate;
  if (unrecordedCheck?.outcome)
    recordDriftCheck(status, unrecordedCheck.update.metadata.name, unrecordedCheck.outcome, generation);
  const running = observed.updates.filter(({ outcome }) => outcome === undefined);
  if (running.length > 0) {
    // An Update still waiting for its Workspace, which has failed since it was created, waits for
    // what the Stack says: the Workspace's failure, as before an Update is created (step 7).
    const stalled = waitingOnFailedWorkspace(running, observed.workspace);
    if (stalled) {
      return respond(
        { kind: 'stalled', reason: workspaceFailureReason(stalled.reason), message: stalled.message },
        keepAll(),
      );
    }
    // One operation at a time. The Workspace stays exactly as it is, so nothing rolls the pod under it.
    return respond(
      { kind: 'reconciling', reason: Reasons.StackProcessing, message: 'stack is being processed' },
      keepAll(),
    );
  }

  // The Failed reason of the last operation's Update, while it is kept (self-healing.ts).
  const lastFailureReason = (): string | undefined =>
    observed.updates.find(({ update }) => update.metadata.name === status.lastUpdate?.name)?.outcome?.result.reason;

  // 2. Deleting without destroy: nothing to run (upstream marks the Stack Ready and releases it).
  // Metacontroller applies no children once it has removed its finalizer, and garbage collection
  // takes them with the Stack: nothing is kept that would need verifying.
  if (deleting && (stack.spec?.destroyOnFinalize !== true || stack.spec?.preview === true)) {
    return respond({ kind: 'ready' }, keptUpdates, { finalized: true });
  }

  // 3. An invalid Stack stalls; its children stay exactly as they are.
  const problems = steps.validate(stack);
  if (problems.length > 0) {
    return respond({ kind: 'stalled', reason: Reasons.SpecInvalid, message: problems.join('; ') }, keepAll());
  }
  const spec = stack.spec;

  // 4. Where the program comes from and which commit it is at.
  const sourceLessDestroy = deleting && spec.runProgram !== true && status.projectInfo !== undefined;
  const source = resolveSource(stack, req.related, ctx.lookups, sourceLessDestroy);
  if (!source.ok) {
    return respond({ kind: 'stalled', reason: source.reason, message: source.message }, keepAll(), {
      resyncAfterSeconds: SOURCE_RETRY_SECONDS,
    });
  }

  // 5. In sync? (upstream's isSynced order)
  const decision = decideSync({
    stack,
    lastUpdate: status.lastUpdate,
    commit: source.commit,
    deleting,
    now,
    refreshRequestedBy: deleting ? [] : refreshRequestsFor(stack, req.related),
  });
  const workspace = steps.workspace(stack, source.source, ctx.config);
  known.set(workspace.workspace, workspace.digest);
  const drift = driftStep({
    stack,
    status,
    decision,
    deleting,
    now,
    checks: observed.driftChecks,
    ready: workspaceReadiness(observed.workspace, workspace.hash).state === 'ready',
  });
  if (drift.wait) {
    // A drift check runs: the update that is due starts when it ends; the Workspace stays as it is
    // (kept, not computed: the spec it would be computed from is the one that changed).
    return respond({ kind: 'reconciling', reason: Reasons.StackProcessing, message: drift.wait }, keepAll());
  }
  // Branch polling and retries go on while a check runs.
  const requeue =
    decision.synced && decision.requeueAfterMs !== undefined
      ? { resyncAfterSeconds: Math.ceil(decision.requeueAfterMs / 1000) }
      : {};
  if (drift.check) {
    // Ready as before: a check changes nothing, and the workspace is held for it.
    return respond(
      resultMark(status.lastUpdate),
      [heldFor(workspace.workspace, drift.check.metadata.name), ...keptUpdates, drift.check],
      requeue,
    );
  }
  if (decision.synced && drift.running) {
    return respond(resultMark(status.lastUpdate), keepAll(), requeue);
  }
  if (decision.synced && drift.remediate === undefined) {
    supersedePlan(status, now, 'the stack is in sync without it');
    const children: KObject[] = [...keptUpdates];
    const reclaim = spec.workspaceReclaimPolicy === 'Delete' && status.lastUpdate?.state === 'succeeded';
    if ((!reclaim || drift.needsWorkspace) && !deleting) children.unshift(workspace.workspace);
    const extra: Partial<StackSyncResponse> = {};
    const requeueMs = Math.min(decision.requeueAfterMs ?? Infinity, drift.dueInMs ?? Infinity);
    if (Number.isFinite(requeueMs)) extra.resyncAfterSeconds = Math.ceil(requeueMs / 1000);
    if (deleting) extra.finalized = status.lastUpdate?.type === 'destroy' && status.lastUpdate.state === 'succeeded';
    return respond(
      outputsToMark(stack, status) ??
        interruptedMark(stack, status.lastUpdate, lastFailureReason()) ??
        resultMark(status.lastUpdate),
      children,
      extra,
    );
  }

  // 6. Prerequisites must be satisfied before anything runs (not while deleting).
  if (!deleting) {
    const pre = checkPrerequisites(stack, req.related, now);
    if (pre.unmet.length > 0) {
      // Nothing runs: an existing Workspace follows the spec already, none is made until they are met.
      return respond({ kind: 'reconciling', reason: Reasons.PrerequisiteNotSatisfied, message: pre.unmet.join('; ') }, [
        ...(observed.workspace ? [workspace.workspace] : []),
        ...keptUpdates,
        ...pre.refreshRequests,
      ]);
    }
  }

  // 7. The workspace must run the desired template and be ready.
  const children: KObject[] = [workspace.workspace, ...keptUpdates];
  const readiness = workspaceReadiness(observed.workspace, workspace.hash);
  if (readiness.state === 'failed') {
    if (deleting && status.lastUpdate === undefined) {
      // Never deployed and the workspace cannot start: nothing to destroy (upstream releases the Stack).
      return respond({ kind: 'ready' }, children, { finalized: true });
    }
    // Unauthenticated: no Job is started, since the workspace would refuse it; the agent's report
    // turns Ready (a new sync) once its ServiceAccount is granted system:auth-delegator.
    return respond(
      { kind: 'stalled', reason: workspaceFailureReason(readiness.reason), message: readiness.message },
      children,
    );
  }
  if (readiness.state === 'waiting') {
    if (deleting && namespaceTerminating(stack, req.related)) {
      // No workspace can be created in a namespace being deleted, so the destroy cannot run.
      if (status.lastUpdate === undefined) return respond({ kind: 'ready' }, children, { finalized: true });
      return respond(
        {
          kind: 'stalled',
          reason: Reasons.NamespaceTerminating,
          message: namespaceTerminatingMessage(name, namespace),
        },
        children,
        {
          resyncAfterSeconds: SOURCE_RETRY_SECONDS,
        },
      );
    }
    return respond({ kind: 'reconciling', reason: Reasons.StackProcessing, message: readiness.message }, children);
  }

  // 8. Start the operation, in two answers: the first records it in status.currentUpdate, the next
  // (Metacontroller calls again on its own status write) makes its Update, once the status names
  // it. So every Update of the Stack is recorded before it exists, and step 1 takes no other result.
  const type: OperationType = deleting ? 'destroy' : spec.preview ? 'preview' : 'up';
  const id: UpdateIdentity = {
    generation,
    reconcileRequest: request,
    commit: source.commit,
    previous: status.lastUpdate?.name ?? '',
  };
  const message =
    drift.remediate ??
    (decision.synced
      ? ''
      : (interruptedRetryMessage(stack, status.lastUpdate, lastFailureReason(), decision.message) ?? decision.message));
  let update: KObject;
  if (type === 'up' && approvalRequired(stack)) {
    // The approval gate: a preview saving a plan, the approved plan's up, or waiting (approval.ts).
    const gate = approvalGate({ stack, status, id, message, now });
    if ('mark' in gate) {
      const extra = gate.resyncAfterSeconds !== undefined ? { resyncAfterSeconds: gate.resyncAfterSeconds } : {};
      return respond(gate.mark, children, extra);
    }
    const planned = (gate.start as { spec?: { type?: string } }).spec?.type === 'up';
    update = planned ? withOutputsTo(gate.start, outputsToRequest(stack, status)) : gate.start;
  } else {
    update = withOutputsTo(
      buildUpdate(stack, type, message, id),
      type === 'up' ? outputsToRequest(stack, status) : undefined,
    );
    status.currentUpdate = { generation, reconcileRequest: request, name: update.metadata.name, commit: source.commit };
  }
  // Undoing drift needs the refreshed state: an up without refresh compares the program with a stale
  // state (and through the approval gate, its preview too, so that the plan is made from that state).
  if (drift.remediate !== undefined) (update.spec as Record<string, unknown>).refresh = true;
  const startName = update.metadata.name;
  // The Workspace is held for the Update from the first answer on: kept as answered, with the
  // hold, until the Update ends.
  const processing: Mark = {
    kind: 'reconciling',
    reason: Reasons.StackProcessing,
    message: 'stack is being processed',
  };
  const held = heldFor(workspace.workspace, startName);
  if (pending !== startName) {
    // An Update of that name before the hooks recorded it was made by someone else: no result of
    // it may count, and recording it would make it count.
    if ([...observed.updates, ...observed.driftChecks].some((o) => o.update.metadata.name === startName))
      throw foreignUpdate(
        startName,
        namespace,
        'exists, but the operator has not recorded starting it (status.currentUpdate), so it did not make it',
      );
    return respond(processing, [held, ...keptUpdates]);
  }
  return respond(processing, [held, ...keptUpdates.filter((u) => u.metadata.name !== startName), update]);
}
