/**
 * The Update objects a Stack creates, one per operation (upstream's Stack → Update mapping), and
 * what the Stack reads back from them: what each ran for (annotations written here) and its outcome
 * (the status the Update controller wrote).
 */
import type { Stack, Update, UpdateSpec } from '../../../schemas/generated/types';
import {
  Labels,
  parseOutputsToReport,
  MAX_CHANGED_URNS,
  parseResourceChanges,
  type OperationRequest,
  type OperationType,
  type UpdateResult,
} from '../../../contract';
import { observedCondition } from '../lib/conditions';
import { isRecord, shortHash } from '../lib/json';
import type { KObject } from '../lib/k8s';
import { strategicMerge } from '../lib/merge';
import { knownTime } from '../lib/time';
import { operationType } from '../lib/operation-result';
import { AUTO_API_VERSION } from '../lib/api-versions';
import { DEFAULT_TTL } from '../lib/stack-updates';

/**
 * Annotations on each Update: what it runs for, for whoever reads the Update. The Stack reads
 * none of them back: what an operation ran for is what `status.currentUpdate` recorded before its
 * Update was made (sync.ts), as anyone allowed to patch an Update could write these.
 */
export const UpdateAnnotations = {
  generation: 'pulumi.com/update-generation',
  reconcileRequest: 'pulumi.com/update-reconcile-request',
  commit: 'pulumi.com/update-commit',
  /** `lastUpdate.name` when the Update was created: the Update that follows it in the Stack's history. */
  previous: 'pulumi.com/update-previous',
} as const;

/** What an Update runs for: the fields of upstream's `status.currentUpdate`. */
export interface UpdateIdentity {
  generation: number;
  reconcileRequest: string;
  commit: string;
  previous: string;
}

/**
 * `<stack>-<type>-<hash>`: readable in `kubectl get updates`, at most 42+1+7+1+8 = 59 characters, and
 * a function of what it runs for, so the same request yields the same Update and each retry a new one.
 */
export function updateName(stack: Stack, type: OperationType, id: UpdateIdentity): string {
  const uid = stack.metadata.uid ?? '';
  return `${stack.metadata.name}-${type}-${shortHash({ uid, type, ...id }, 8)}`;
}

/**
 * The operation, from the Stack and its updateTemplate (upstream's newUp and applyUpdateTemplate:
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L1794).
 */
export function operationFor(stack: Stack, type: OperationType, message: string): OperationRequest {
  const spec = stack.spec;
  const op: OperationRequest = { type, stack: spec.stack, message };
  if (type === 'up' || type === 'preview') {
    if (spec.targets?.length) op.target = [...spec.targets];
    if (spec.targetDependents) op.targetDependents = true;
    if (spec.refresh) op.refresh = true;
  }
  if (type === 'destroy' && spec.runProgram) op.runProgram = true;
  if (spec.selfHealing === true) op.selfHealing = true;
  const t = spec.updateTemplate?.spec;
  if (t) {
    if (t.parallel !== undefined) op.parallel = t.parallel;
    if (t.message !== undefined) op.message = t.message;
    if (t.expectNoChanges !== undefined) op.expectNoChanges = t.expectNoChanges;
    if (t.refresh !== undefined) op.refresh = t.refresh;
    if (t.continueOnError !== undefined) op.continueOnError = t.continueOnError;
    if (t.target !== undefined) op.target = [...t.target];
    if (t.targetDependents !== undefined) op.targetDependents = t.targetDependents;
    if (t.replace !== undefined) op.replace = [...t.replace];
    if (t.remove !== undefined) op.remove = t.remove;
    if (t.runProgram !== undefined) op.runProgram = t.runProgram;
  }
  return op;
}

/** An Update as the Stack makes it: its spec is known, so no caller needs to cast it. */
export type StackUpdate = KObject & Update & { spec: UpdateSpec };

/** The plan fields only the approval gate sets (approval.ts). */
type PlanFields = Pick<UpdateSpec, 'savePlan' | 'plan'>;

/** The Update that runs one operation of the Stack in its Workspace. */
export function buildUpdate(
  stack: Stack,
  type: OperationType,
  message: string,
  id: UpdateIdentity,
  plan: PlanFields = {},
): StackUpdate {
  const name = stack.metadata.name;
  const namespace = stack.metadata.namespace ?? '';
  const op: Partial<OperationRequest> = operationFor(stack, type, message);
  const stackName = op.stack;
  delete op.type;
  delete op.stack;
  const spec: UpdateSpec = {
    workspaceName: name,
    stackName,
    type,
    ttlAfterCompleted: stack.spec.updateTemplate?.spec?.ttlAfterCompleted ?? DEFAULT_TTL,
    // operationFor sets no plan fields: the approval gate sets them on the Update (approval.ts).
    ...(op as Omit<typeof op, 'savePlan' | 'plan'>),
  };
  const deadline = stack.spec.updateTemplate?.spec?.activeDeadlineSeconds;
  if (deadline !== undefined) spec.activeDeadlineSeconds = deadline;
  Object.assign(spec, plan);
  let update: StackUpdate = {
    apiVersion: AUTO_API_VERSION,
    kind: 'Update',
    metadata: {
      name: updateName(stack, type, id),
      namespace,
      labels: { [Labels.stackName]: name, [Labels.workspaceComponent]: 'update', [Labels.updateType]: type },
      annotations: identityAnnotations(id),
    },
    spec,
  };
  const userMeta = stack.spec.updateTemplate?.metadata;
  if (userMeta) {
    update = strategicMerge(update, { metadata: { labels: userMeta.labels, annotations: userMeta.annotations } });
    // Our keys win: they identify the Update.
    update.metadata.labels = {
      ...update.metadata.labels,
      [Labels.stackName]: name,
      [Labels.workspaceComponent]: 'update',
      [Labels.updateType]: type,
    };
    update.metadata.annotations = { ...update.metadata.annotations, ...identityAnnotations(id) };
  }
  return update;
}

function identityAnnotations(id: UpdateIdentity): Record<string, string> {
  return {
    [UpdateAnnotations.generation]: String(id.generation),
    [UpdateAnnotations.reconcileRequest]: id.reconcileRequest,
    [UpdateAnnotations.commit]: id.commit,
    [UpdateAnnotations.previous]: id.previous,
  };
}

export interface UpdateOutcome {
  result: UpdateResult;
  /** When the operation ended: lastResyncTime. */
  endTime: string | undefined;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Each observed Update with its outcome (undefined while it runs): the observe phase's one call. */
export function withOutcomes(
  updates: readonly KObject[],
  check: (result: UpdateResult) => UpdateResult,
  now: Date,
): { update: KObject; outcome: UpdateOutcome | undefined }[] {
  return updates.map((update) => ({ update, outcome: updateOutcome(update, check, now) }));
}

/**
 * A finished Update's result as the Update controller recorded it (Complete=True), or undefined
 * while it runs. The status is read field by field: it is the hooks' own, but any status writer
 * may have touched it, and the outputs go through the same checks as a Job's result (`check`).
 */
function updateOutcome(
  update: KObject,
  check: (result: UpdateResult) => UpdateResult,
  now: Date,
): UpdateOutcome | undefined {
  const complete = observedCondition(update.status, 'Complete');
  if (complete?.status !== 'True') return undefined;
  const status = isRecord(update.status) ? update.status : {};
  const spec = isRecord(update.spec) ? update.spec : {};
  const failed = observedCondition(status, 'Failed');
  const result: UpdateResult = {
    state: failed?.status === 'True' ? 'failed' : 'succeeded',
    type: operationType(spec.type) ?? 'up',
    message: str(status.message) ?? str(complete.message) ?? '',
  };
  if (failed?.status === 'True' && str(failed.reason)) result.reason = failed.reason;
  const permalink = str(status.permalink);
  if (permalink !== undefined) result.permalink = permalink;
  for (const key of ['startTime', 'endTime'] as const) {
    const v = knownTime(status[key], now);
    if (v !== undefined) result[key] = v;
  }
  const info = status.projectInfo;
  if (isRecord(info) && typeof info.name === 'string' && typeof info.runtime === 'string')
    result.projectInfo = { name: info.name, runtime: info.runtime };
  if (isRecord(status.outputValues)) result.outputs = status.outputValues;
  if (status.outputsOmitted === true) result.outputsOmitted = true;
  if (typeof status.outputsTotal === 'number') result.outputsTotal = status.outputsTotal;
  const secret = str(status.outputs);
  if (secret !== undefined) result.outputsSecret = secret;
  const outputsTo = parseOutputsToReport(status.outputsTo);
  if (outputsTo) result.outputsTo = outputsTo;
  const changed = status.changedResources;
  if (typeof changed === 'number' && Number.isSafeInteger(changed) && changed >= 0) result.changedResources = changed;
  if (Array.isArray(status.changedResourceUrns))
    result.changedUrns = status.changedResourceUrns
      .filter((u): u is string => typeof u === 'string')
      .slice(0, MAX_CHANGED_URNS);
  const changes = parseResourceChanges(status.resourceChanges);
  if (changes) result.resourceChanges = changes;
  return { result: check(result), endTime: result.endTime ?? knownTime(complete.lastTransitionTime, now) };
}
