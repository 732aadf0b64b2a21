/**
 * The Kubernetes Events a Stack sync implies, as upstream's stack controller records them
 * (reasons and types: https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/api/pulumi/v1/events.go),
 * and the expiry of its finished Updates, as upstream's update controller records it
 * (update/events.ts). A pure function of the observed Stack and children and of the sync's answer
 * (events/event.ts says how each is named once per transition); the hook server writes the result
 * (events/recorder.ts), off the hook's path.
 */
import type { Stack, StackStatus } from '../../../schemas/generated/types';
import { Labels } from '../../../contract';
import {
  eventsAbout,
  newStall,
  operationAction,
  referenceTo,
  stackLabel,
  type HookEvent,
  type ObjectReference,
} from '../events/event';
import { isRecord } from '../lib/json';
import { objectsOf, type KObject, type ObjectMap } from '../lib/k8s';
import { expiredUpdateEvents } from '../update/events';
import { Reasons } from './conditions';
import { driftCheckEvent, isDriftCheck } from './drift';
import { AUTO_API_VERSION, PULUMI_API_VERSION } from '../lib/api-versions';
import { reclaimPolicy, type ReclaimPolicy } from './hibernation';

/** Upstream's event reasons on Stacks (upstream's constant names differ for two of them). */
export const EventReasons = {
  /** Normal: an update starts; the message says why. */
  updateDetected: 'StackUpdateDetected',
  /** Normal: an update succeeded (upstream's StackUpdateSuccessful is spelled `StackCreated`). */
  updateSucceeded: 'StackCreated',
  /** Warning: an update failed. */
  updateFailed: 'StackUpdateFailure',
  /** Warning: the spec is invalid (upstream records it with Stalled/SpecInvalid). */
  configInvalid: 'StackConfigInvalid',
  /** Normal: the workspace was deleted after a success (`workspaceReclaimPolicy: Delete`). */
  workspaceDeleted: 'WorkspaceDeleted',
} as const;

export interface StackEventsInput {
  /** The Stack as observed: its status is a previous sync's answer, as written (not always the last). */
  stack: Stack;
  /** Its children as observed. */
  observed: ObjectMap | undefined;
  /** What the sync answered. */
  status: StackStatus;
  children: readonly KObject[];
  finalizing: boolean;
  /** The sync's clock: when its finished Updates expire. */
  now: Date;
  /** The reclaim policy of a Stack that names none (WORKSPACE_RECLAIM_DEFAULT; default Retain). */
  workspaceReclaimDefault?: ReclaimPolicy;
}

/**
 * The events a sync implies: an update started (an Update the answer adds), an update finished (the
 * answer absorbs an Update's result into lastUpdate), the Stack became Stalled (or stalled for another
 * reason, or still stalls after a spec change), the workspace was reclaimed, finished Updates
 * expired. None for a Stack without a uid (not from the API server).
 */
export function stackEvents(input: StackEventsInput): HookEvent[] {
  const { stack, status } = input;
  const regarding = referenceTo(stack, PULUMI_API_VERSION, 'Stack');
  if (!regarding) return [];
  const { name, namespace } = regarding;
  const previous: Record<string, unknown> = isRecord(stack.status) ? stack.status : {};
  const event = eventsAbout(regarding, stackLabel(name));
  const updateRef = (update: string): ObjectReference => ({
    apiVersion: AUTO_API_VERSION,
    kind: 'Update',
    name: update,
    namespace,
  });
  const events: HookEvent[] = [];

  // An update finished: its result is absorbed now (upstream's markStackSucceeded/markStackFailed).
  const last = status.lastUpdate;
  const before = isRecord(previous.lastUpdate) ? previous.lastUpdate.name : undefined;
  if (last?.name && last.name !== before && (last.state === 'succeeded' || last.state === 'failed')) {
    const succeeded = last.state === 'succeeded';
    events.push(
      event(
        { job: last.name },
        {
          type: succeeded ? 'Normal' : 'Warning',
          reason: succeeded ? EventReasons.updateSucceeded : EventReasons.updateFailed,
          action: operationAction(last.type),
          message: succeeded ? 'Successfully updated stack' : `Failed to update stack: ${last.message ?? ''}`,
          related: updateRef(last.name),
        },
      ),
    );
  }

  // An update starts: the answer adds an Update. Its message is the sync's reason (upstream's isSynced).
  // Event names keep the key `job`, so they are the ones earlier versions wrote for the same operation.
  const observedUpdates = new Set(objectsOf(input.observed, 'Update', AUTO_API_VERSION).map((j) => j.metadata.name));
  for (const job of input.children) {
    // A drift check is reported when it ends (below), not when it starts.
    if (job.kind !== 'Update' || observedUpdates.has(job.metadata.name) || isDriftCheck(job)) continue;
    const type = job.metadata.labels?.[Labels.updateType] ?? '';
    events.push(
      event(
        { job: job.metadata.name },
        {
          type: 'Normal',
          reason: EventReasons.updateDetected,
          action: operationAction(type),
          message: operationMessage(job) ?? `Starting ${type || 'an update'}`,
          related: updateRef(job.metadata.name),
        },
      ),
    );
  }

  // A drift check ended: its result is recorded now (ours: DriftDetected, NoDrift, CheckFailed).
  const check = status.lastDriftCheck;
  const checkBefore = isRecord(previous.lastDriftCheck) ? previous.lastDriftCheck.name : undefined;
  if (check?.name && check.name !== checkBefore) {
    events.push(
      event({ job: check.name }, { ...driftCheckEvent(check), action: 'Refresh', related: updateRef(check.name) }),
    );
  }

  // Stalled: newly, for another reason, or still after a spec change (a new generation). Named by
  // the answer's count of stalls, so a sync on a copy older than the last status names the same.
  const stalled = newStall(previous, status);
  if (stalled) {
    const reason = stalled.reason === Reasons.SpecInvalid ? EventReasons.configInvalid : stalled.reason;
    events.push(event(stalled.about, { type: 'Warning', reason, action: 'Sync', message: stalled.message }));
  }

  // The workspace is reclaimed after a success (upstream's WorkspaceDeleted).
  const hadWorkspace = objectsOf(input.observed, 'Workspace', AUTO_API_VERSION).some((s) => s.metadata.name === name);
  const keepsWorkspace = input.children.some((c) => c.kind === 'Workspace' && c.metadata.name === name);
  if (
    hadWorkspace &&
    !keepsWorkspace &&
    !input.finalizing &&
    reclaimPolicy(stack, input) === 'Delete' &&
    last?.state === 'succeeded'
  ) {
    events.push(
      event(
        { after: last.name ?? '' },
        {
          type: 'Normal',
          reason: EventReasons.workspaceDeleted,
          action: 'DeleteWorkspace',
          message: 'Workspace deleted per reclaim policy',
        },
      ),
    );
  }

  // Finished Updates the answer lets go because their TTL has passed (upstream's UpdateExpired).
  events.push(...expiredUpdateEvents(input.observed, input.children, name, input.now));
  return events;
}

/** The message the Update's operation carries (the sync's reason, or updateTemplate.spec.message). */
function operationMessage(update: KObject): string | undefined {
  const spec = isRecord(update.spec) ? update.spec : undefined;
  return typeof spec?.message === 'string' && spec.message !== '' ? spec.message : undefined;
}
