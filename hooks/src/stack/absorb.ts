/**
 * The absorb phase of a Stack's sync: what finished since the last answer goes into the status
 * (the operation `status.currentUpdate` names, its plan, the drift check due), and which finished
 * Updates are kept. Returns the status so far; nothing here decides what runs next.
 */
import type { StackStatus, StackUpdateState } from '../../../schemas/generated/types';
import { rfc3339 } from '../../../contract';
import { ChildNotVerified } from '../lib/k8s';
import { childField } from '../lib/kept-children';
import { absorbPlan } from './approval';
import { absorbDriftCheck } from './drift';
import type { ObservedUpdate, StackView } from './observed';
import { recordOutputs } from './outputs';
import { recordOutputsTo } from './outputs-to';
import { retainUpdates, type RetainedUpdates } from './retention';
import type { UpdateOutcome } from './update';
import { operationType } from '../lib/operation-result';
import { typeInName, updateSpecOf } from '../lib/stack-updates';
import { AUTO_API_VERSION } from '../lib/api-versions';

export interface Absorbed {
  status: StackStatus;
  /** The Stack's operations still running. */
  running: ObservedUpdate[];
  /** The Update the status recorded and no one has made yet: the one to make if it is still the one to start. */
  pending: string | undefined;
  /** The Updates to keep answering (the others' results are absorbed and their TTL passed). */
  retained: RetainedUpdates<ObservedUpdate>;
}

/**
 * Absorbs what finished. Only the hooks start operations, and each is recorded before its Update
 * is made, so no other result is taken (one that is not the hooks' gets no answer: 409). While an
 * earlier version's Job still runs, nothing is absorbed: the Stack waits for it unchanged.
 */
export function absorb(view: StackView, now: Date): Absorbed {
  const { stack, carried, started } = view;
  // A drift check is absorbed once it is not the one whose result the status is yet to record.
  const drift = absorbDriftCheck(view.driftChecks, stack, carried, view.generation, now);
  const current = view.updates.find(({ update }) => update.metadata.name === started?.name) ?? view.legacyJob;
  const plan = absorbPlan(stack, carried.plan, current, now);
  // Finished Updates go once their result is in the observed status and their TTL has passed: all
  // but the one the status names (and a preview whose plan the status still refers to).
  const retained = retainUpdates(
    [
      ...view.updates.map((o) => ({
        ...o,
        absorbed: o.update.metadata.name !== started?.name && o.update.metadata.name !== plan.held,
      })),
      ...view.driftChecks.map((o) => ({ ...o, absorbed: o !== drift.unrecorded })),
    ],
    now,
  );
  const running = view.updates.filter(({ outcome }) => outcome === undefined);
  const pending = current ? undefined : started?.name;
  if (view.legacy.length > 0)
    return {
      status: withPlan(carried, absorbPlan(stack, carried.plan, undefined, now).plan),
      running,
      pending,
      retained,
    };
  if (current && (plan.foreign || (!current.legacy && !typeAsNamed(view, current))))
    throw foreignUpdate(
      current.update.metadata.name,
      view.namespace,
      'is not the Update the operator started: its spec.type or plan is not what status.currentUpdate and status.plan record',
    );

  let status = withPlan(carried, plan.plan);
  if (current?.outcome && started && plan.recordResult)
    status = recordResult(status, current.update.metadata.name, started, current.outcome, now);
  if (!current || current.outcome) status = withoutCurrent(status);
  status = drift.record(status);
  return { status, running, pending, retained };
}

/** Whether the Update's type is the one its name was made with. */
function typeAsNamed(view: StackView, current: ObservedUpdate): boolean {
  const { update } = current;
  return operationType(updateSpecOf(update).type) === typeInName(view.name, update.metadata.name);
}

/** The status with this plan, or none (the approval gate's plan exists only while the gate is on). */
export function withPlan(status: StackStatus, plan: StackStatus['plan']): StackStatus {
  const next = { ...status, plan };
  if (!plan) delete next.plan;
  return next;
}

function withoutCurrent(status: StackStatus): StackStatus {
  const next = { ...status };
  delete next.currentUpdate;
  return next;
}

/**
 * The status with a finished operation recorded (upstream's markStackSucceeded/markStackFailed):
 * what it ran for is what `status.currentUpdate` recorded when it started.
 */
function recordResult(
  status: StackStatus,
  name: string,
  started: NonNullable<StackStatus['currentUpdate']>,
  outcome: UpdateOutcome,
  now: Date,
): StackStatus {
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
  status = { ...status, lastUpdate: last };
  const time = last.lastResyncTime ?? rfc3339(now);
  if (succeeded && result.type === 'up') {
    status = recordOutputs(status, result, name, generation, time);
    status = recordOutputsTo(status, result, generation, time);
  }
  if (succeeded && result.projectInfo) status = { ...status, projectInfo: { ...result.projectInfo } };
  return status;
}

/** An Update of the Stack's that the hooks did not make as it is: answered with 409, its result never taken. */
export function foreignUpdate(name: string, namespace: string, why: string): ChildNotVerified {
  return new ChildNotVerified(
    childField('children', { kind: 'Update', apiVersion: AUTO_API_VERSION, name, namespace }),
    `${why}; nothing is taken from it and nothing is applied until it is deleted: kubectl delete update ${name} -n ${namespace}`,
  );
}
