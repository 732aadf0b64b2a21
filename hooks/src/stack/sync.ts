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
import { asLastApplied, asRetained, findObject, objectsOf, type KObject, type ObjectMap, type Typed } from '../lib/k8s';
import { observedCondition } from '../lib/conditions';
import { resyncAfter } from '../lib/time';
import {
  approvalGate,
  approvalRequired,
  heldByPlan,
  isPlanPreview,
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
import { jobOutcome } from '../update/job';
import { buildUpdate, identityOf, updateOutcome, type UpdateIdentity, type UpdateOutcome } from './update';
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

/** An observed Update with what it runs for (undefined: not one of ours) and its result (undefined: running). */
interface ObservedUpdate {
  update: KObject;
  id: UpdateIdentity | undefined;
  outcome: UpdateOutcome | undefined;
  /** A Job of an earlier version, which ran the operation itself: absorbed as an Update, never kept. */
  legacy?: true;
}

interface Observed {
  workspace?: Typed<Workspace>;
  updates: ObservedUpdate[];
  /** The Stack's drift checks (drift.ts): Updates outside its history of operations. */
  driftChecks: ObservedUpdate[];
  refreshRequests: Typed<V1ConfigMap>[];
  /**
   * Children of the versions before Workspace and Update objects (the StatefulSet, Service, Jobs
   * and Roles were the Stack's own): kept while one of those Jobs runs, then dropped.
   */
  legacy: KObject[];
  legacyRunning: boolean;
}

const LEGACY_KINDS: [string, string][] = [
  ['StatefulSet', 'apps/v1'],
  ['Service', 'v1'],
  ['Job', 'batch/v1'],
  ['ServiceAccount', 'v1'],
  ['Role', 'rbac.authorization.k8s.io/v1'],
  ['RoleBinding', 'rbac.authorization.k8s.io/v1'],
];

function observe(children: ObjectMap | undefined, stack: string, steps: SyncSteps, now: Date): Observed {
  const legacy = LEGACY_KINDS.flatMap(([kind, apiVersion]) => objectsOf(children, kind, apiVersion));
  // An earlier version's Job carries the same identity annotations as an Update, and its result.
  const legacyJobs = objectsOf<V1Job>(children, 'Job', 'batch/v1').map((job): ObservedUpdate => ({
    update: job,
    id: identityOf(job),
    outcome: jobOutcome(job, steps.updateResult(job.metadata.annotations?.[Annotations.updateResult]), now),
    legacy: true,
  }));
  const updates = objectsOf(children, 'Update', WORKSPACE_API_VERSION).map((update) => ({
    update,
    id: identityOf(update),
    outcome: updateOutcome(update, checkUpdateResult, now),
  }));
  return {
    workspace: objectsOf<Workspace>(children, 'Workspace', WORKSPACE_API_VERSION).find(
      (o) => o.metadata.name === stack,
    ),
    updates: [...updates.filter((o) => !isDriftCheck(o.update)), ...legacyJobs],
    driftChecks: updates.filter((o) => isDriftCheck(o.update)),
    refreshRequests: objectsOf<V1ConfigMap>(children, 'ConfigMap', 'v1'),
    legacy,
    legacyRunning: legacy.some(
      (o) =>
        o.kind === 'Job' &&
        observedCondition(o.status, 'Complete')?.status !== 'True' &&
        observedCondition(o.status, 'Failed')?.status !== 'True',
    ),
  };
}

/** Records a finished operation in the status (upstream's markStackSucceeded/markStackFailed). */
function absorb(status: StackStatus, update: KObject, id: UpdateIdentity, outcome: UpdateOutcome, now: Date): void {
  const prev = status.lastUpdate;
  const { result } = outcome;
  const succeeded = result.state === 'succeeded';
  const sameAttempt =
    prev !== undefined && prev.generation === id.generation && (prev.reconcileRequest ?? '') === id.reconcileRequest;
  const last: StackUpdateState = {
    generation: id.generation,
    reconcileRequest: id.reconcileRequest,
    name: update.metadata.name,
    type: result.type,
    state: result.state,
    message: result.message,
    lastAttemptedCommit: id.commit,
    lastSuccessfulCommit: succeeded ? id.commit : (prev?.lastSuccessfulCommit ?? ''),
    lastResyncTime: outcome.endTime ?? rfc3339(now),
    failures: succeeded ? 0 : sameAttempt ? (prev.failures ?? 0) + 1 : 0,
  };
  if (result.permalink) last.permalink = result.permalink;
  status.lastUpdate = last;
  if (succeeded && result.type === 'up') {
    recordOutputs(status, result, update.metadata.name, id.generation, last.lastResyncTime ?? rfc3339(now));
    recordOutputsTo(status, result, id.generation, last.lastResyncTime ?? rfc3339(now));
  }
  if (succeeded && result.projectInfo) status.projectInfo = { ...result.projectInfo };
  delete status.currentUpdate;
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
  const observed = observe(req.children, name, steps, now);

  const status: StackStatus = carriedStatus(stack.status);
  status.observedGeneration = generation;
  if (request !== '') status.observedReconcileRequest = request;

  const respond = (mark: Mark, children: KObject[], extra: Partial<StackSyncResponse> = {}): StackSyncResponse => {
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
  // The Update that follows lastUpdate: the one whose result the status does not have yet.
  const lastName = status.lastUpdate?.name ?? '';
  // (A preview that saved a plan follows only while the status names it: once its plan is recorded,
  // the plan's up is the one that follows.)
  const follows = ({ update, id }: ObservedUpdate): boolean =>
    update.metadata.name === status.currentUpdate?.name ||
    (id !== undefined && id.previous === lastName && update.metadata.name !== lastName && !isPlanPreview(update));
  // Finished Updates go once their result is in the observed status and their TTL has passed.
  // A drift check is absorbed once it is not the one whose result the status is yet to record.
  const unrecordedCheck = checkToRecord(observed.driftChecks, status, now);
  const retained = retainUpdates(
    [
      ...observed.updates
        .filter((o) => !o.legacy)
        .map((o) => ({ ...o, absorbed: !follows(o) && !heldByPlan(status, o.update.metadata.name) })),
      ...observed.driftChecks.map((o) => ({ ...o, absorbed: o !== unrecordedCheck })),
    ],
    now,
  );
  const keptUpdates = retained.kept.map(({ update }) => asRetained(update));
  const keptWorkspace = (): KObject[] => (observed.workspace ? [asLastApplied(observed.workspace)] : []);
  const keepAll = (): KObject[] => [...keptWorkspace(), ...keptUpdates, ...observed.refreshRequests.map(asLastApplied)];

  // 0. An operation of an earlier version (its own Job) still runs: wait for it, changing nothing.
  if (observed.legacyRunning) {
    return respond({ kind: 'reconciling', reason: Reasons.StackProcessing, message: 'stack is being processed' }, [
      ...keepAll(),
      ...observed.legacy.map((o) => (o.kind === 'Job' ? asRetained(o) : asLastApplied(o))),
    ]);
  }

  // 1. The operation that follows lastUpdate: absorb it when finished, wait while it runs.
  const current = observed.updates.find(follows);
  if (current) {
    const { update, id, outcome } = current;
    if (id && outcome) {
      if (!recordPlan(stack, status, update, id, outcome, now)) {
        absorb(status, update, id, outcome, now);
        recordApply(status, update, outcome, now);
      }
    } else if (id) {
      status.currentUpdate = {
        generation: id.generation,
        reconcileRequest: id.reconcileRequest,
        name: update.metadata.name,
        commit: id.commit,
      };
    }
  }
  if (!current) delete status.currentUpdate;
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
  if (deleting && (stack.spec?.destroyOnFinalize !== true || stack.spec?.preview === true)) {
    return respond({ kind: 'ready' }, keepAll(), { finalized: true });
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
    // A drift check runs: the update that is due starts when it ends; the Workspace stays as it is.
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
      return respond({ kind: 'reconciling', reason: Reasons.PrerequisiteNotSatisfied, message: pre.unmet.join('; ') }, [
        ...keptWorkspace(),
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

  // 8. Start the operation; the next sync sees it running.
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
  // The Workspace is held for the Update: kept as last applied, with the hold, until the Update ends.
  return respond({ kind: 'reconciling', reason: Reasons.StackProcessing, message: 'stack is being processed' }, [
    heldFor(workspace.workspace, startName),
    ...keptUpdates.filter((u) => u.metadata.name !== startName),
    update,
  ]);
}
