/**
 * The Update controller's sync hook (auto.pulumi.com/v1alpha1 Update, a CompositeController): a
 * pure function from the observed Update, its Job and identity, and its Workspace to the Job that
 * runs the operation once, and the Update's status as upstream's Update reconciler reports it
 * (https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/auto/update_controller.go):
 * Progressing, Failed and Complete, start and end, permalink, message, outputs.
 */
import type { V1Job } from '@kubernetes/client-node';
import type { Update, UpdateStatus, Workspace } from '../../../schemas/generated/types';
import { Annotations, type OperationType, type UpdateResult } from '../../../contract';
import type { HookConfig } from '../config';
import { observedCondition, setConditions, type DesiredCondition } from '../lib/conditions';
import {
  dottedPath,
  isRecord,
  MAX_NESTING,
  pathNestedDeeperThan,
  PROTOTYPE_KEY_PROBLEM,
  prototypeKeyPath,
} from '../lib/json';
import { findObject, objectsOf, type KObject, type ObjectMap } from '../lib/k8s';
import { checkAnswer, type ChildRule } from '../lib/kept-children';
import { knownTime, resyncAfter } from '../lib/time';
import { buildJob, updateLabels } from './job';
import { outputsToProblem } from './outputs-to';
import { planProblem } from './plan';
import { updateRbac } from './rbac';
import { type JobOutcome, jobOutcome, operationType, readUpdateResult } from '../lib/operation-result';
import { AUTO_API_VERSION } from '../lib/api-versions';

export interface UpdateSyncRequest {
  parent: Update;
  children?: ObjectMap;
  related?: ObjectMap;
}

export interface UpdateSyncResponse {
  status: UpdateStatus;
  children: KObject[];
  resyncAfterSeconds?: number;
}

export interface UpdateSyncContext {
  config: HookConfig;
  now: Date;
  /** A Job's `pulumi.com/update-result` annotation, parsed (default: readUpdateResult, uncached). */
  updateResult?: (text: string | undefined) => UpdateResult | undefined;
}

/** How often an Update waiting for its Workspace looks again, besides the Workspace's own changes. */
const WAIT_SECONDS = 10;

const progressing = (reason: string, message: string): DesiredCondition[] => [
  { type: 'Progressing', status: 'True', reason, message },
  { type: 'Failed', status: 'False', reason: 'Progressing', message: '' },
  { type: 'Complete', status: 'False', reason: 'Progressing', message: '' },
];

const waiting = (reason: string, message: string): DesiredCondition[] => [
  { type: 'Progressing', status: 'False', reason, message },
  { type: 'Failed', status: 'False', reason: 'Progressing', message: '' },
  { type: 'Complete', status: 'False', reason: 'Progressing', message: '' },
];

/** Upstream's conditions for a finished operation; the transition is when it ended. */
function finished(outcome: JobOutcome): DesiredCondition[] {
  const { result, endTime } = outcome;
  const at = endTime !== undefined ? { at: endTime } : {};
  const failed: DesiredCondition =
    result.state === 'failed'
      ? { type: 'Failed', status: 'True', reason: result.reason ?? 'UpdateFailed', message: result.message, ...at }
      : { type: 'Failed', status: 'False', reason: 'UpdateSucceeded', message: '', ...at };
  return [
    { type: 'Progressing', status: 'False', reason: 'Complete', message: '', ...at },
    failed,
    { type: 'Complete', status: 'True', reason: 'Updated', message: result.message, ...at },
  ];
}

/** What the status records of a finished operation: upstream's fields, then the outputs (ours). */
function resultFields(status: UpdateStatus, name: string, job: KObject, outcome: JobOutcome, now: Date): void {
  const { result } = outcome;
  const started = knownTime(isRecord(job.status) ? job.status.startTime : undefined, now);
  const start = result.startTime ?? started;
  if (start) status.startTime = start;
  if (outcome.endTime) status.endTime = outcome.endTime;
  if (result.permalink) status.permalink = result.permalink;
  status.message = result.message;
  if (result.outputs !== undefined || result.outputsOmitted === true) {
    status.outputs = result.outputsSecret ?? `${name}-stack-outputs`;
    if (result.outputs !== undefined) status.outputValues = result.outputs;
    if (result.outputsOmitted === true) status.outputsOmitted = true;
    if (result.outputsTotal !== undefined) status.outputsTotal = result.outputsTotal;
  }
  if (result.outputsTo) status.outputsTo = structuredClone(result.outputsTo);
  if (result.projectInfo) status.projectInfo = { ...result.projectInfo };
  if (result.changedResources !== undefined) status.changedResources = result.changedResources;
  if (result.changedUrns !== undefined) status.changedResourceUrns = [...result.changedUrns];
  if (result.resourceChanges) status.resourceChanges = { ...result.resourceChanges };
}

/** Whether a Workspace reports Ready for its current generation; else why not, in its words. */
function workspaceState(ws: Workspace): { ready: true } | { ready: false; message: string } {
  const ready = observedCondition(ws.status, 'Ready');
  const current = ws.status?.observedGeneration === ws.metadata.generation;
  if (current && ready?.status === 'True') return { ready: true };
  const stalled = observedCondition(ws.status, 'Stalled');
  const why = current && stalled?.status === 'True' ? stalled : ready;
  const detail = why?.reason ? `${why.reason}${why.message ? `: ${why.message}` : ''}` : 'not ready yet';
  return { ready: false, message: `workspace ${ws.metadata.name} is not ready (${detail})` };
}

/** The label value limit: the Job controller labels each pod `job-name: <job>`, and the Job is named as the Update. */
const MAX_NAME = 63;

/** Why an Update cannot run, if it cannot: an unknown type, a name no Job can have, a spec no operation has. */
function specProblem(update: Update, type: OperationType | undefined): string | undefined {
  if (update.metadata.name.length > MAX_NAME)
    return `metadata.name is ${update.metadata.name.length} characters long: its Job, named as the Update, may have at most ${MAX_NAME}`;
  const tooDeep = pathNestedDeeperThan(update.spec, MAX_NESTING, 'spec');
  if (tooDeep !== undefined) return `${tooDeep} is nested more than ${MAX_NESTING} levels deep`;
  const key = prototypeKeyPath(update.spec);
  if (key !== undefined) return `${dottedPath('spec', key)}: ${PROTOTYPE_KEY_PROBLEM}`;
  if (type === undefined)
    return `spec.type must be one of up, preview, refresh, destroy; got ${JSON.stringify(update.spec?.type ?? '')}`;
  const deadline: unknown = update.spec?.activeDeadlineSeconds;
  if (deadline !== undefined && !(typeof deadline === 'number' && Number.isInteger(deadline) && deadline > 0))
    return `spec.activeDeadlineSeconds must be a positive integer; got ${JSON.stringify(deadline)}`;
  return planProblem(update.spec, type) ?? outputsToProblem(update);
}

/** What an Update's answer may hold (checkAnswer): its Job and the Job's identity, each named as the Update. */
function childRules(update: string): ChildRule[] {
  const named = (n: string): boolean => n === update;
  return [
    { kind: 'Job', apiVersion: 'batch/v1', name: named },
    { kind: 'ServiceAccount', apiVersion: 'v1', name: named },
    { kind: 'Role', apiVersion: 'rbac.authorization.k8s.io/v1', name: named },
    { kind: 'RoleBinding', apiVersion: 'rbac.authorization.k8s.io/v1', name: named },
  ];
}

export function syncUpdate(req: UpdateSyncRequest, ctx: UpdateSyncContext): UpdateSyncResponse {
  const update = req.parent;
  const name = update.metadata.name;
  const namespace = update.metadata.namespace ?? '';
  const spec = update.spec ?? {};
  const generation = update.metadata.generation;
  const status: UpdateStatus = {};
  if (generation !== undefined) status.observedGeneration = generation;
  const answer = (conditions: DesiredCondition[], children: KObject[], resync?: number): UpdateSyncResponse => {
    checkAnswer(`Update ${namespace}/${name}`, namespace, children, childRules(name));
    status.conditions = setConditions(update.status?.conditions, conditions, generation, ctx.now);
    const wait = resyncAfter(resync);
    return { status, children, ...(wait !== undefined ? { resyncAfterSeconds: wait } : {}) };
  };

  const type = operationType(spec.type);
  const problem = specProblem(update, type);
  if (problem !== undefined || type === undefined) {
    const message = problem ?? 'spec.type is missing';
    return answer(
      [
        { type: 'Progressing', status: 'False', reason: 'Complete', message: '' },
        { type: 'Failed', status: 'True', reason: 'InvalidSpec', message },
        { type: 'Complete', status: 'True', reason: 'Updated', message },
      ],
      [],
    );
  }
  const identity = updateRbac(update, updateLabels(update, type));
  const job = objectsOf<V1Job>(req.children, 'Job', 'batch/v1').find((j) => j.metadata.name === name);

  // Running or finished: the Job is returned as it is built (OnDelete: never updated) with its identity.
  if (job) {
    const read = ctx.updateResult ?? readUpdateResult;
    const outcome = jobOutcome(job, read(job.metadata.annotations?.[Annotations.updateResult]), ctx.now);
    const children = [buildJob(update, type, ctx.config), ...identity];
    if (!outcome) {
      // When it started, as far as anyone knows: also the mark that its Job existed (below).
      const started = knownTime(job.status?.startTime, ctx.now) ?? knownTime(job.metadata.creationTimestamp, ctx.now);
      if (started !== undefined) status.startTime = started;
      return answer(progressing('Progressing', `the ${type} is running`), children);
    }
    resultFields(status, name, job, outcome, ctx.now);
    return answer(finished(outcome), children);
  }

  // Finished before (its Job was deleted since): the outcome stays; nothing runs twice.
  if (observedCondition(update.status, 'Complete')?.status === 'True' && update.status) {
    return { status: { ...update.status, ...status, conditions: update.status.conditions ?? [] }, children: [] };
  }

  // Its Job was seen running and is gone without a result (deleted, to stop it): it is over, as
  // upstream's Aborted, and never runs a second time.
  if (update.status?.startTime) {
    status.startTime = update.status.startTime;
    const message = `the ${type} was stopped: its Job was deleted before it reported a result`;
    return answer(
      [
        { type: 'Progressing', status: 'False', reason: 'Failed', message: '' },
        { type: 'Failed', status: 'True', reason: 'Aborted', message },
        { type: 'Complete', status: 'True', reason: 'Failed', message },
      ],
      [],
    );
  }

  // Not started: the Workspace must exist and be ready, and the Job's identity must exist first
  // (a pod naming a ServiceAccount that does not exist yet is refused, and retried only after a backoff).
  const workspaceName = spec.workspaceName ?? '';
  const ws = workspaceName
    ? findObject<Workspace>(req.related, 'Workspace', AUTO_API_VERSION, namespace, workspaceName)
    : undefined;
  if (!ws) {
    const message = workspaceName ? `workspace ${workspaceName} not found` : 'spec.workspaceName is empty';
    return answer(waiting('WorkspaceNotFound', message), [], WAIT_SECONDS);
  }
  const state = workspaceState(ws);
  if (!state.ready) return answer(waiting('WorkspaceNotReady', state.message), [], WAIT_SECONDS);
  // In steps, each only once the previous is observed as this Update's own child: the binding never
  // names an account or a Role that existed before (Metacontroller does not take those over, and a
  // create that finds one already there is not an error).
  const own = (o: KObject): boolean =>
    objectsOf(req.children, o.kind, o.apiVersion).some((c) => c.metadata.name === o.metadata.name);
  const [account, role, binding] = identity;
  if (!own(account) || !own(role)) return answer(progressing('Progressing', `starting the ${type}`), [account, role]);
  if (!own(binding)) return answer(progressing('Progressing', `starting the ${type}`), identity);
  return answer(progressing('Progressing', `the ${type} is starting`), [
    buildJob(update, type, ctx.config),
    ...identity,
  ]);
}
