/**
 * The decide phase of a Stack's sync: from the Stack and the status with what finished absorbed
 * (absorb.ts), what happens next, in upstream's order (the Reconcile function of
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L518):
 * wait for what runs, release a Stack being deleted, validate, resolve the source, decide whether
 * it is in sync (and what drift detection adds), check prerequisites, wait for the workspace, and
 * start the next operation. Returns a tagged step; answer.ts turns it into children and conditions.
 */
import type { V1Namespace } from '@kubernetes/client-node';
import type { Stack, StackStatus, StackUpdateState, Workspace } from '../../../schemas/generated/types';
import { WORKSPACE_UNAUTHENTICATED, type OperationType } from '../../../contract';
import { type Mark, observedCondition } from '../lib/conditions';
import { findObject, type KObject, type ObjectMap, type Typed } from '../lib/k8s';
import { foreignUpdate, withPlan, type Absorbed } from './absorb';
import { gateOperation } from './approval';
import { Reasons } from './conditions';
import { decideSync, MAX_UPDATE_FAILURES } from './decision';
import { driftStep } from './drift';
import type { ObservedUpdate, StackView } from './observed';
import { outputsToMark, outputsToRequest, withOutputsTo } from './outputs-to';
import { checkPrerequisites, refreshRequestsFor } from './prerequisites';
import { interruptedMark, interruptedRetryMessage } from './self-healing';
import { resolveSource } from './source';
import { queuedWait } from '../budget/gate';
import type { SyncContext, SyncSteps } from './sync';
import type { StackUpdate, UpdateIdentity } from './update';
import { stackWorkspaceReadiness, WORKSPACE_SPEC_HASH, type DesiredStackWorkspace } from './workspace';

/** How the answer gives the Stack's Workspace: kept as observed (with every other child), none, or the desired one. */
export type WorkspaceAnswer = 'as-observed' | 'none' | DesiredStackWorkspace;

/** What the Stack does next. */
export type NextStep =
  /** Wait: something runs, or must happen first (Reconciling). */
  | {
      kind: 'wait';
      reason: string;
      message: string;
      workspace: WorkspaceAnswer;
      /** Refresh requests to make of the Stack's prerequisites (prerequisites.ts). */
      refreshRequests?: KObject[];
      resyncAfterSeconds?: number;
    }
  /** Stall: nothing runs until the spec, the source or the workspace changes (Stalled). */
  | { kind: 'stall'; reason: string; message: string; workspace: WorkspaceAnswer; resyncAfterSeconds?: number }
  /** In sync: report the last operation's result; a drift check may start, held on the desired Workspace. */
  | {
      kind: 'synced';
      mark: Mark;
      workspace: WorkspaceAnswer;
      check?: KObject;
      resyncAfterSeconds?: number;
      finalized?: boolean;
    }
  /** Being deleted with nothing (more) to run: the Stack may go. */
  | { kind: 'released'; workspace: 'none' | DesiredStackWorkspace }
  /**
   * Start an operation, in two answers: the first records it in status.currentUpdate, the next
   * (Metacontroller calls again on its own status write) makes its Update (`make`), once the status
   * names it. So every Update of the Stack is recorded before it exists, and absorb takes no other result.
   */
  | { kind: 'start'; update: KObject; workspace: DesiredStackWorkspace; make: boolean };

export interface Decided {
  /** The status with what this step records (a started operation, the plan). */
  status: StackStatus;
  step: NextStep;
}

/** Upstream requeues a Stack whose source is unavailable after 30 s. */
const SOURCE_RETRY_SECONDS = 30;

const PROCESSING = 'stack is being processed';

export function decide(view: StackView, absorbed: Absorbed, ctx: SyncContext, steps: SyncSteps): Decided {
  const { stack, deleting } = view;
  const { now } = ctx;
  let status = absorbed.status;
  const decided = (step: NextStep): Decided => ({ status, step });
  const wait = (reason: string, message: string, workspace: WorkspaceAnswer = 'as-observed') =>
    decided({ kind: 'wait', reason, message, workspace });
  const stall = (reason: string, message: string, workspace: WorkspaceAnswer = 'as-observed') =>
    decided({ kind: 'stall', reason, message, workspace });

  // An operation of an earlier version (its own Job) still runs: wait for it, changing nothing.
  if (view.legacy.length > 0) return wait(Reasons.StackProcessing, PROCESSING);
  if (absorbed.running.length > 0) {
    // An Update still waiting for its Workspace, which has failed since it was created, waits for
    // what the Stack says: the Workspace's failure, as before an Update is created.
    const failed = waitingOnFailedWorkspace(absorbed.running, view.workspace);
    if (failed) return stall(workspaceFailureReason(failed.reason), failed.message);
    // One operation at a time. The Workspace stays exactly as it is, so nothing rolls the pod under it.
    return wait(Reasons.StackProcessing, PROCESSING);
  }

  // Deleting without destroy: nothing to run (upstream marks the Stack Ready and releases it).
  // Metacontroller applies no children once it has removed its finalizer, and garbage collection
  // takes them with the Stack: nothing is kept that would need verifying.
  if (deleting && (stack.spec?.destroyOnFinalize !== true || stack.spec?.preview === true))
    return decided({ kind: 'released', workspace: 'none' });

  // An invalid Stack stalls; its children stay exactly as they are.
  const problems = steps.validate(stack);
  if (problems.length > 0) return stall(Reasons.SpecInvalid, problems.join('; '));
  const spec = stack.spec;

  // Where the program comes from and which commit it is at.
  const sourceLessDestroy = deleting && spec.runProgram !== true && status.projectInfo !== undefined;
  const programsServed = ctx.config.programServer !== undefined;
  const source = resolveSource(stack, view.related, ctx.lookups, sourceLessDestroy, programsServed);
  if (!source.ok)
    return decided({
      kind: 'stall',
      reason: source.reason,
      message: source.message,
      workspace: 'as-observed',
      resyncAfterSeconds: SOURCE_RETRY_SECONDS,
    });

  // In sync? (upstream's isSynced order), and what drift detection adds.
  const decision = decideSync({
    stack,
    lastUpdate: status.lastUpdate,
    commit: source.commit,
    deleting,
    now,
    refreshRequestedBy: deleting ? [] : refreshRequestsFor(stack, view.related),
  });
  const workspace = steps.workspace(stack, source.source, ctx.config);
  const readiness = stackWorkspaceReadiness(view.workspace, workspace.hash);
  const drift = driftStep({
    stack,
    status,
    decision,
    deleting,
    now,
    checks: view.driftChecks,
    ready: readiness.state === 'ready',
  });
  // A drift check runs: the update that is due starts when it ends; the Workspace stays as it is
  // (kept, not computed: the spec it would be computed from is the one that changed).
  if (drift.wait) return wait(Reasons.StackProcessing, drift.wait);
  // Branch polling and retries go on while a check runs.
  const requeue =
    decision.synced && decision.requeueAfterMs !== undefined
      ? { resyncAfterSeconds: Math.ceil(decision.requeueAfterMs / 1000) }
      : {};
  // Ready as before: a check changes nothing, and the workspace is held for it.
  if (drift.check)
    return decided({ kind: 'synced', mark: resultMark(status.lastUpdate), workspace, check: drift.check, ...requeue });
  if (decision.synced && drift.running)
    return decided({ kind: 'synced', mark: resultMark(status.lastUpdate), workspace: 'as-observed', ...requeue });
  // The Failed reason of the last operation's Update, while it is kept (self-healing.ts).
  const lastFailureReason = (): string | undefined =>
    view.updates.find(({ update }) => update.metadata.name === status.lastUpdate?.name)?.outcome?.result.reason;
  if (decision.synced && drift.remediate === undefined) {
    status = withPlan(status, gateOperation({ stack, plan: status.plan, now }).plan);
    const reclaim = spec.workspaceReclaimPolicy === 'Delete' && status.lastUpdate?.state === 'succeeded';
    const requeueMs = Math.min(decision.requeueAfterMs ?? Infinity, drift.dueInMs ?? Infinity);
    return decided({
      kind: 'synced',
      mark:
        outputsToMark(stack, status) ??
        interruptedMark(stack, status.lastUpdate, lastFailureReason()) ??
        resultMark(status.lastUpdate),
      workspace: (!reclaim || drift.needsWorkspace) && !deleting ? workspace : 'none',
      ...(Number.isFinite(requeueMs) ? { resyncAfterSeconds: Math.ceil(requeueMs / 1000) } : {}),
      ...(deleting
        ? { finalized: status.lastUpdate?.type === 'destroy' && status.lastUpdate.state === 'succeeded' }
        : {}),
    });
  }

  // Prerequisites must be satisfied before anything runs (not while deleting).
  if (!deleting) {
    const pre = checkPrerequisites(stack, view.related, now);
    // Nothing runs: an existing Workspace follows the spec already, none is made until they are met.
    if (pre.unmet.length > 0)
      return decided({
        kind: 'wait',
        reason: Reasons.PrerequisiteNotSatisfied,
        message: pre.unmet.join('; '),
        workspace: view.workspace ? workspace : 'none',
        refreshRequests: pre.refreshRequests,
      });
  }

  // The workspace must run the desired template and be ready.
  if (readiness.state === 'failed') {
    // Never deployed and the workspace cannot start: nothing to destroy (upstream releases the Stack).
    if (deleting && status.lastUpdate === undefined) return decided({ kind: 'released', workspace });
    // Unauthenticated: no Job is started, since the workspace would refuse it; the agent's report
    // turns Ready (a new sync) once its ServiceAccount is granted system:auth-delegator.
    return stall(workspaceFailureReason(readiness.reason), readiness.message, workspace);
  }
  // The operations budget (budget/gate.ts): past it, the Stack waits its turn before its workspace
  // pod is made or used, so a burst never holds more pods than their Jobs can run beside.
  const queued = queuedWait(ctx.turn?.(stack, now));
  if (queued) return decided({ kind: 'wait', ...queued, workspace: view.workspace ? workspace : 'none' });
  if (readiness.state === 'waiting') {
    if (deleting && namespaceTerminating(stack, view.related)) {
      // No workspace can be created in a namespace being deleted, so the destroy cannot run.
      if (status.lastUpdate === undefined) return decided({ kind: 'released', workspace });
      return decided({
        kind: 'stall',
        reason: Reasons.NamespaceTerminating,
        message: namespaceTerminatingMessage(view.name, view.namespace),
        workspace,
        resyncAfterSeconds: SOURCE_RETRY_SECONDS,
      });
    }
    return wait(Reasons.StackProcessing, readiness.message, workspace);
  }

  // Start the operation; under the approval gate an `up` may first preview, or wait (approval.ts).
  const type: OperationType = deleting ? 'destroy' : spec.preview ? 'preview' : 'up';
  const id: UpdateIdentity = {
    generation: view.generation,
    reconcileRequest: view.request,
    commit: source.commit,
    previous: status.lastUpdate?.name ?? '',
  };
  const message =
    drift.remediate ??
    (decision.synced
      ? ''
      : (interruptedRetryMessage(stack, status.lastUpdate, lastFailureReason(), decision.message) ?? decision.message));
  const gate = gateOperation({ stack, plan: status.plan, now, run: { type, id, message } });
  status = withPlan(status, gate.plan);
  if ('mark' in gate) {
    const held = { reason: gate.mark.reason, message: gate.mark.message, workspace };
    const resync = gate.resyncAfterSeconds !== undefined ? { resyncAfterSeconds: gate.resyncAfterSeconds } : {};
    return decided(
      gate.mark.kind === 'stalled' ? { kind: 'stall', ...held, ...resync } : { kind: 'wait', ...held, ...resync },
    );
  }
  const start = operation(stack, status, gate, drift.remediate !== undefined);
  const name = start.metadata.name;
  status = { ...status, currentUpdate: recorded(id, name, gate.gated) };
  // An Update of that name before the hooks recorded it was made by someone else: no result of
  // it may count, and recording it would make it count.
  const make = absorbed.pending === name;
  if (!make && [...view.updates, ...view.driftChecks].some((o) => o.update.metadata.name === name))
    throw foreignUpdate(
      name,
      view.namespace,
      'exists, but the operator has not recorded starting it (status.currentUpdate), so it did not make it',
    );
  return decided({ kind: 'start', update: start, workspace, make });
}

/**
 * The Update to start: an `up` says where its outputs go (outputs-to.ts), and an operation that
 * undoes drift refreshes first: an up without refresh compares the program with a stale state (and
 * through the approval gate, its preview too, so that the plan is made from that state).
 */
function operation(
  stack: Stack,
  status: StackStatus,
  gate: { start: StackUpdate; gated: boolean },
  remediate: boolean,
): StackUpdate {
  const { start } = gate;
  const up = start.spec.type === 'up';
  const update = gate.gated && !up ? start : withOutputsTo(start, up ? outputsToRequest(stack, status) : undefined);
  return remediate ? { ...update, spec: { ...update.spec, refresh: true } } : update;
}

/** `status.currentUpdate` for an operation that starts (its fields in the order each path has always written them). */
function recorded(id: UpdateIdentity, name: string, gated: boolean): NonNullable<StackStatus['currentUpdate']> {
  const { generation, reconcileRequest, commit } = id;
  return gated ? { generation, reconcileRequest, commit, name } : { generation, reconcileRequest, name, commit };
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
  const readiness = stackWorkspaceReadiness(workspace, workspace.metadata.annotations?.[WORKSPACE_SPEC_HASH] ?? '');
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
