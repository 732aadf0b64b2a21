/**
 * The Kubernetes Events about Updates, with upstream's reasons, types and messages
 * (https://github.com/pulumi/pulumi-kubernetes-operator/blob/v2.9.0/operator/api/auto/v1alpha1/events.go,
 * written by operator/internal/controller/auto/update_controller.go): an operation that succeeded or
 * failed, as the Update sync records its outcome; the Workspace that could not be reached, as the
 * Job's runner reported it; a finished Update let go after its TTL, as the Stack sync decides it.
 * Pure functions of a sync's request and answer (events/event.ts); the hook server writes them.
 */
import type { Update, UpdateStatus, Workspace } from '../../../schemas/generated/types';
import { Labels } from '../../../contract';
import {
  eventsAbout,
  operationAction,
  quoted,
  referenceTo,
  stackLabel,
  trueCondition,
  type HookEvent,
} from '../events/event';
import { observedCondition } from '../lib/conditions';
import { findObject, objectsOf, type KObject, type ObjectMap } from '../lib/k8s';
import { isUpdateName, updateExpiry } from '../stack/update';
import { AUTO_GROUP_VERSION } from './customize';
import { operationType, updateLabels } from './job';

/** Upstream's event reasons on Updates, and on the Workspace an Update could not reach. */
export const UpdateEventReasons = {
  /** Normal: the operation succeeded (`Updated stack "dev"`, `Previewed …`, `Refreshed …`, `Destroyed …`). */
  succeeded: 'UpdateSucceeded',
  /** Warning: the operation failed (`Failed to update stack "dev"`, …). */
  failed: 'UpdateFailed',
  /** Normal: a finished Update was deleted after its `ttlAfterCompleted`. */
  expired: 'UpdateExpired',
  /** Warning, on the Workspace: the operation could not reach the workspace. */
  connectionFailure: 'ConnectionFailure',
} as const;

/** Upstream's messages by operation type: what succeeded, what failed. */
const OUTCOME_MESSAGES: Record<string, { succeeded: string; failed: string }> = {
  up: { succeeded: 'Updated stack', failed: 'Failed to update stack' },
  preview: { succeeded: 'Previewed stack', failed: 'Failed to preview stack' },
  refresh: { succeeded: 'Refreshed stack', failed: 'Failed to refresh stack' },
  destroy: { succeeded: 'Destroyed stack', failed: 'Failed to destroy stack' },
};

/** The reason of a runner's result when it could not reach the workspace (agent/src/update/main.ts). */
const WORKSPACE_UNAVAILABLE = 'WorkspaceUnavailable';

export interface UpdateEventsInput {
  /** The Update as observed: its status is the previous sync's answer, as written. */
  update: Update;
  /** Its related objects as observed (its Workspace). */
  related: ObjectMap | undefined;
  /** The status the sync answered. */
  status: UpdateStatus;
}

/**
 * The events of an Update sync: the operation's outcome when the answer completes the Update
 * (once: a Complete Update never runs again), and ConnectionFailure on its Workspace when the
 * outcome is that the runner could not reach it. None for an Update without a uid.
 */
export function updateEvents(input: UpdateEventsInput): HookEvent[] {
  const { update, status } = input;
  const regarding = referenceTo(update, AUTO_GROUP_VERSION, 'Update');
  if (!regarding) return [];
  const wasComplete = observedCondition(update.status, 'Complete')?.status === 'True';
  if (wasComplete || trueCondition(status.conditions, 'Complete') === undefined) return [];

  const type = operationType(update.spec?.type);
  // The workspace's Stack, as the Update's Job is labelled.
  const labels = stackLabel(updateLabels(update, type ?? 'up')[Labels.stackName]);
  const failure = trueCondition(status.conditions, 'Failed');
  const words = OUTCOME_MESSAGES[type ?? 'up']!;
  const stack = quoted(update.spec?.stackName ?? '');
  const events: HookEvent[] = [
    eventsAbout(regarding, labels)(
      {},
      failure
        ? {
            type: 'Warning',
            reason: UpdateEventReasons.failed,
            action: operationAction(type),
            message: `${words.failed} ${stack}`,
          }
        : {
            type: 'Normal',
            reason: UpdateEventReasons.succeeded,
            action: operationAction(type),
            message: `${words.succeeded} ${stack}`,
          },
    ),
  ];

  // Upstream's update controller records a connection failure on the Workspace.
  const workspaceName = update.spec?.workspaceName ?? '';
  const workspace =
    failure?.reason === WORKSPACE_UNAVAILABLE && workspaceName !== ''
      ? findObject<Workspace>(input.related, 'Workspace', AUTO_GROUP_VERSION, regarding.namespace, workspaceName)
      : undefined;
  const workspaceRef = workspace && referenceTo(workspace, AUTO_GROUP_VERSION, 'Workspace');
  if (workspaceRef) {
    events.push(
      eventsAbout(workspaceRef, labels)(
        { update: regarding.uid },
        {
          type: 'Warning',
          reason: UpdateEventReasons.connectionFailure,
          action: 'Connect',
          message: failure?.message ?? '',
          related: regarding,
        },
      ),
    );
  }
  return events;
}

/**
 * UpdateExpired for each finished Update of a Stack that the Stack sync's answer lets go because
 * its TTL has passed at `now` (stack/retention.ts): Metacontroller deletes what the answer leaves
 * out. Once per Update: its uid names the event.
 */
export function expiredUpdateEvents(
  observed: ObjectMap | undefined,
  answered: readonly KObject[],
  stack: string,
  now: Date,
): HookEvent[] {
  const kept = new Set(answered.filter((c) => c.kind === 'Update').map((c) => c.metadata.name));
  return objectsOf<Update>(observed, 'Update', AUTO_GROUP_VERSION).flatMap((update) => {
    const name = update.metadata.name;
    if (kept.has(name) || !isUpdateName(stack, name)) return [];
    const expiry = updateExpiry(update, now);
    const regarding = referenceTo(update, AUTO_GROUP_VERSION, 'Update');
    if (expiry === undefined || expiry > now.getTime() || !regarding) return [];
    return [
      eventsAbout(regarding, stackLabel(stack))(
        {},
        {
          type: 'Normal',
          reason: UpdateEventReasons.expired,
          action: 'Delete',
          message: 'ttl expired and was deleted',
        },
      ),
    ];
  });
}
