/**
 * The Kubernetes Events about a Workspace, with upstream's reasons, types and messages
 * (https://github.com/pulumi/pulumi-kubernetes-operator/blob/v2.9.0/operator/api/auto/v1alpha1/events.go,
 * written by operator/internal/controller/auto/workspace_controller.go) where the Workspace sync sees
 * the same transition: the workspace pod initialised (Ready turns True) or its installation, stack
 * initialisation or callers' verification failing (Stalled with the agent's reason). A pure function
 * of the observed Workspace and the sync's answer (events/event.ts); the hook server writes them.
 */
import type { Workspace, WorkspaceStatus } from '../../../schemas/generated/types';
import { WORKSPACE_UNAUTHENTICATED } from '../../../contract';
import {
  conditionsFingerprint,
  eventsAbout,
  newStall,
  quoted,
  referenceTo,
  stackLabel,
  trueCondition,
  type HookEvent,
} from '../events/event';
import { isRecord } from '../lib/json';
import { workspaceName } from './pod';
import { AUTO_API_VERSION } from '../lib/api-versions';

/** Upstream's event reasons on Workspaces. */
export const WorkspaceEventReasons = {
  /** Normal: the workspace pod is installed and its stack selected and configured. */
  initialized: 'Initialized',
  /** Warning: `pulumi install` failed. */
  installationFailure: 'InstallationFailure',
  /** Warning: the stack could not be selected, created or configured, or the CLI is too old for its config. */
  stackInitializationFailure: 'StackInitializationFailure',
  /** Warning: the workspace cannot be called (here: it may not verify its callers). */
  connectionFailure: 'ConnectionFailure',
} as const;

/** The event of each Stalled reason the agent reports that upstream records one for (the rest: the reason itself). */
const STALL_EVENTS: Record<string, { reason: string; action: string }> = {
  InstallationFailed: { reason: WorkspaceEventReasons.installationFailure, action: 'Install' },
  InitializationFailed: { reason: WorkspaceEventReasons.stackInitializationFailure, action: 'Initialize' },
  IncompatibleConfiguration: { reason: WorkspaceEventReasons.stackInitializationFailure, action: 'Initialize' },
  [WORKSPACE_UNAUTHENTICATED]: { reason: WorkspaceEventReasons.connectionFailure, action: 'Connect' },
};

export interface WorkspaceEventsInput {
  /** The Workspace as observed: its status is a previous sync's answer, as written (not always the last). */
  workspace: Workspace;
  /** The status the sync answered. */
  status: WorkspaceStatus;
}

/**
 * The events of a Workspace sync: Initialized when Ready turns True (each pod the Workspace gets,
 * as upstream records it once per pod it initialises), and one Warning when it becomes Stalled (or
 * stalls for another reason, or still after a spec change), as the Stack's stalls are recorded.
 * None for a Workspace without a uid.
 */
export function workspaceEvents(input: WorkspaceEventsInput): HookEvent[] {
  const { workspace, status } = input;
  const regarding = referenceTo(workspace, AUTO_API_VERSION, 'Workspace');
  if (!regarding) return [];
  const previous = isRecord(workspace.status) ? workspace.status.conditions : undefined;
  const event = eventsAbout(regarding, stackLabel(regarding.name));
  // The observed conditions tell this Ready from an earlier one.
  const since = conditionsFingerprint(previous);
  const events: HookEvent[] = [];

  if (trueCondition(status.conditions, 'Ready') && !trueCondition(previous, 'Ready')) {
    events.push(
      event(
        { since },
        {
          type: 'Normal',
          reason: WorkspaceEventReasons.initialized,
          action: 'Initialize',
          message: `Initialized workspace pod ${quoted(`${workspaceName(regarding.name)}-0`)}`,
        },
      ),
    );
  }

  // Named by the answer's count of stalls, so a sync on a copy older than the last status names the same.
  const stalled = newStall(workspace.status, status);
  if (stalled) {
    const upstream = Object.hasOwn(STALL_EVENTS, stalled.reason) ? STALL_EVENTS[stalled.reason] : undefined;
    const stack = workspace.spec?.stacks?.[0]?.name ?? '';
    const message =
      stalled.reason === 'InitializationFailed'
        ? `Failed to initialize stack ${quoted(stack)}: ${stalled.message}`
        : stalled.message;
    events.push(
      event(stalled.about, {
        type: 'Warning',
        reason: upstream?.reason ?? stalled.reason,
        action: upstream?.action ?? 'Sync',
        message,
      }),
    );
  }
  return events;
}
