/**
 * A Stack's `spec.outputsTo` on the Stack's side (docs/outputs-to.md; its checks are in validate.ts):
 * what each `up`'s Update asks the runner to write (and to delete: the object an earlier `up` wrote,
 * once it is not the target any more), and what the Stack records of the runner's report: where the
 * outputs are (`status.outputsTo`), the outputs left out (condition `OutputsSkipped`), and a
 * conflict with an object that is not the Stack's (Stalled `OutputsConflict`, until an `up` writes).
 * The hooks never see an output's value.
 */
import type { OutputsToStatus, Stack, StackCondition, StackStatus } from '../../../schemas/generated/types';
import {
  isObjectName,
  OutputsToKeys,
  type OutputsToObject,
  type OutputsToReport,
  type OutputsToRequest,
  type OutputsToSkipped,
  type UpdateResult,
} from '../../../contract';
import { isRecord } from '../lib/json';
import type { KObject } from '../lib/k8s';
import type { Mark } from '../lib/conditions';

/** The Stalled reason while the object of spec.outputsTo is something else's. */
export const OUTPUTS_CONFLICT = 'OutputsConflict';
/** Condition type, True while the last `up` left some outputs out of the object. */
export const OUTPUTS_SKIPPED = 'OutputsSkipped';

function sameObject(a: OutputsToObject | undefined, b: OutputsToObject | undefined): boolean {
  return a !== undefined && b !== undefined && a.kind === b.kind && a.name === b.name;
}

/** The object the last `up` wrote, as the status records it (undefined: none, or not written). */
function writtenObject(status: StackStatus): OutputsToObject | undefined {
  const o = status.outputsTo;
  // The status is the hooks' own, but anyone may write it: a name no object can have names nothing to delete.
  if (o?.state !== 'written' || (o.kind !== 'Secret' && o.kind !== 'ConfigMap') || !isObjectName(o.name))
    return undefined;
  return { kind: o.kind, name: o.name };
}

/** The request for an `up` of `stack`: where to write, what to delete; undefined when there is nothing to do. */
export function outputsToRequest(stack: Stack, status: StackStatus): OutputsToRequest | undefined {
  const uid = stack.metadata.uid;
  if (!uid) return undefined;
  const wanted = stack.spec.outputsTo;
  const written = writtenObject(status);
  const request: OutputsToRequest = { stack: { name: stack.metadata.name, uid } };
  if (wanted) {
    request.target = { kind: wanted.kind, name: wanted.name };
    if (wanted.outputs !== undefined)
      request.target.outputs = wanted.outputs.map((e) => (e.key === undefined ? { name: e.name } : { ...e }));
  }
  if (written && !sameObject(written, request.target)) request.previous = written;
  return request.target || request.previous ? request : undefined;
}

/**
 * An Update with the request of its `up` as an annotation, or without one (an annotation of that
 * key from `updateTemplate.metadata` is dropped: only the hooks say what the runner writes).
 */
export function withOutputsTo<U extends KObject>(update: U, request: OutputsToRequest | undefined): U {
  const annotations = { ...update.metadata.annotations };
  delete annotations[OutputsToKeys.annotation];
  if (request) annotations[OutputsToKeys.annotation] = JSON.stringify(request);
  return { ...update, metadata: { ...update.metadata, annotations } };
}

function listed(names: string[] | undefined): string {
  return (names ?? []).map((n) => `"${n}"`).join(', ');
}

function skippedMessage(report: OutputsToReport, skipped: OutputsToSkipped): string {
  const parts: string[] = [];
  if (skipped.secret) parts.push(`secret outputs, which only a Secret may hold: ${listed(skipped.secret)}`);
  if (skipped.invalidKey)
    parts.push(
      `outputs whose names are not valid keys (list them in spec.outputsTo.outputs with a key): ${listed(skipped.invalidKey)}`,
    );
  if (skipped.missing) parts.push(`outputs the stack does not have: ${listed(skipped.missing)}`);
  const named = (skipped.secret?.length ?? 0) + (skipped.invalidKey?.length ?? 0) + (skipped.missing?.length ?? 0);
  const more = skipped.total > named ? ` (and ${skipped.total - named} more)` : '';
  return `${report.kind} ${report.name} does not hold ${skipped.total} output(s): ${parts.join('; ')}${more}`;
}

function skippedReason(skipped: OutputsToSkipped): string {
  if (skipped.secret) return 'SecretOutputs';
  if (skipped.invalidKey) return 'InvalidKeys';
  return 'OutputsNotFound';
}

/**
 * Records what the runner of a successful `up` reported (`result`, run for `generation`, ended at
 * `time`): status.outputsTo, and the OutputsSkipped condition when outputs were left out (removed
 * otherwise). A result without a report (no spec.outputsTo) removes both.
 */
export function recordOutputsTo(
  status: StackStatus,
  result: UpdateResult,
  generation: number,
  time: string,
): StackStatus {
  const report = result.outputsTo;
  if (report) {
    const recorded: OutputsToStatus = { kind: report.kind, name: report.name, state: report.state };
    status = { ...status, outputsTo: recorded };
  } else {
    status = { ...status };
    delete status.outputsTo;
  }
  // The observed status is not validated: skip anything that is not an object.
  const conditions = (status.conditions ?? []).filter((c) => isRecord(c));
  const others = conditions.filter((c) => c.type !== OUTPUTS_SKIPPED);
  const skipped = report?.state === 'written' ? report.skipped : undefined;
  if (!report || !skipped) {
    return others.length !== conditions.length ? { ...status, conditions: others } : status;
  }
  const previous = conditions.find((c) => c.type === OUTPUTS_SKIPPED && c.status === 'True');
  const condition: StackCondition = {
    type: OUTPUTS_SKIPPED,
    status: 'True',
    reason: skippedReason(skipped),
    message: skippedMessage(report, skipped),
    lastTransitionTime: previous?.lastTransitionTime ?? time,
    observedGeneration: generation,
  };
  return { ...status, conditions: [...others, condition] };
}

/** Stalled while the last successful `up` found the object of spec.outputsTo held by something else. */
export function outputsToMark(stack: Stack, status: StackStatus): Mark | undefined {
  const last = status.lastUpdate;
  const o = status.outputsTo;
  if (last?.state !== 'succeeded' || last.type !== 'up' || o?.state !== 'conflict') return undefined;
  const name = stack.metadata.name;
  const namespace = stack.metadata.namespace ?? '';
  return {
    kind: 'stalled',
    reason: OUTPUTS_CONFLICT,
    message:
      `${o.kind} ${o.name} exists and is not this Stack's (it has no owner reference to Stack ${name} and label ` +
      `${OutputsToKeys.label}=${name}), so the outputs were not written and it was left untouched. ` +
      `Choose another spec.outputsTo.name, or delete that ${o.kind} and run the up again: ` +
      `kubectl annotate stack ${name} -n ${namespace} pulumi.com/reconciliation-request="$(date)" --overwrite`,
  };
}
