/**
 * The Kubernetes Events a Stack sync implies, as upstream's stack controller records them
 * (reasons and types: https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/api/pulumi/v1/events.go).
 * A pure function of the observed Stack and children and of the sync's answer; the hook server
 * writes the result (hooks/src/events/), off the hook's path.
 *
 * Metacontroller calls the sync hook again and again with the same observed state (resyncs, its own
 * writes, a status write that failed). So each event is a transition between the observed state
 * and the answer, and its name is a function of what it is about: a repeated sync names the same
 * event, whose creation the API server refuses as AlreadyExists.
 */
import type { Stack, StackStatus } from '../../../schemas/generated/types';
import { Labels } from '../../../contract';
import { isRecord, shortHash } from '../lib/json';
import { objectsOf, type KObject, type ObjectMap } from '../lib/k8s';
import { printable } from '../lib/printable';
import { Reasons } from './conditions';
import { driftCheckEvent, isDriftCheck } from './drift';
import { WORKSPACE_API_VERSION } from './workspace';

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

/** One event about a Stack, before the writer adds when and by whom. */
export interface StackEvent {
  /** `<stack>.<hash>`: unique per Stack and transition, the same for every sync that implies it. */
  name: string;
  namespace: string;
  type: 'Normal' | 'Warning';
  reason: string;
  /** What was done or tried (the event's `action`): the operation, `Sync` or `DeleteWorkspace`. */
  action: string;
  message: string;
  /** The Stack (the event's `involvedObject`). */
  regarding: ObjectReference;
  /** The Update the event is about. */
  related?: ObjectReference;
}

export interface ObjectReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid?: string;
  resourceVersion?: string;
}

export interface StackEventsInput {
  /** The Stack as observed: its status is the previous sync's answer, as written. */
  stack: Stack;
  /** Its children as observed. */
  observed: ObjectMap | undefined;
  /** What the sync answered. */
  status: StackStatus;
  children: readonly KObject[];
  finalizing: boolean;
}

/** The API server limits an event's message to 1 kB (when the event has an eventTime, as ours). */
export const MAX_MESSAGE_BYTES = 1024;

const ACTIONS: Record<string, string> = { up: 'Up', preview: 'Preview', refresh: 'Refresh', destroy: 'Destroy' };

/** The event action of an operation type (a label anyone may edit: own keys only). */
function actionOf(type: unknown): string {
  return typeof type === 'string' && Object.hasOwn(ACTIONS, type) ? ACTIONS[type]! : 'Up';
}

/**
 * The events a sync implies: an update started (an Update the answer adds), an update finished (the
 * answer absorbs an Update's result into lastUpdate), the Stack became Stalled (or stalled for another
 * reason, or still stalls after a spec change), the workspace was reclaimed. None for a Stack
 * without a uid (not from the API server).
 */
export function stackEvents(input: StackEventsInput): StackEvent[] {
  const { stack, status } = input;
  const uid = stack.metadata.uid;
  const name = stack.metadata.name;
  const namespace = stack.metadata.namespace ?? '';
  if (!uid || !name) return [];
  const previous: Record<string, unknown> = isRecord(stack.status) ? stack.status : {};
  const regarding: ObjectReference = {
    apiVersion: stack.apiVersion ?? 'pulumi.com/v1',
    kind: stack.kind ?? 'Stack',
    name,
    namespace,
    uid,
    ...(typeof stack.metadata.resourceVersion === 'string' ? { resourceVersion: stack.metadata.resourceVersion } : {}),
  };
  const event = (
    about: Record<string, unknown>,
    e: Omit<StackEvent, 'name' | 'namespace' | 'regarding'>,
  ): StackEvent => ({
    name: `${name}.${shortHash({ uid, reason: e.reason, ...about }, 16)}`,
    namespace,
    regarding,
    ...e,
    message: truncateUtf8(printable(e.message), MAX_MESSAGE_BYTES),
  });
  const updateRef = (update: string): ObjectReference => ({
    apiVersion: WORKSPACE_API_VERSION,
    kind: 'Update',
    name: update,
    namespace,
  });
  const events: StackEvent[] = [];

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
          action: actionOf(last.type),
          message: succeeded ? 'Successfully updated stack' : `Failed to update stack: ${last.message ?? ''}`,
          related: updateRef(last.name),
        },
      ),
    );
  }

  // An update starts: the answer adds an Update. Its message is the sync's reason (upstream's isSynced).
  // Event names keep the key `job`, so they are the ones earlier versions wrote for the same operation.
  const observedUpdates = new Set(
    objectsOf(input.observed, 'Update', WORKSPACE_API_VERSION).map((j) => j.metadata.name),
  );
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
          action: actionOf(type),
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

  // Stalled: newly, for another reason, or still after a spec change (a new generation).
  const stalled = trueCondition(status.conditions, 'Stalled');
  const wasStalled = trueCondition(previous.conditions, 'Stalled');
  if (
    stalled &&
    !(
      wasStalled &&
      wasStalled.reason === stalled.reason &&
      wasStalled.observedGeneration === stalled.observedGeneration
    )
  ) {
    const reason = stalled.reason === Reasons.SpecInvalid ? EventReasons.configInvalid : stalled.reason;
    events.push(
      event(
        // The observed conditions tell this stall from an earlier one with the same reason and
        // generation, and stay the same for every sync until the answer's status is written.
        { generation: stalled.observedGeneration, since: conditionsFingerprint(previous.conditions) },
        { type: 'Warning', reason, action: 'Sync', message: stalled.message },
      ),
    );
  }

  // The workspace is reclaimed after a success (upstream's WorkspaceDeleted).
  const hadWorkspace = objectsOf(input.observed, 'Workspace', WORKSPACE_API_VERSION).some(
    (s) => s.metadata.name === name,
  );
  const keepsWorkspace = input.children.some((c) => c.kind === 'Workspace' && c.metadata.name === name);
  if (
    hadWorkspace &&
    !keepsWorkspace &&
    !input.finalizing &&
    stack.spec?.workspaceReclaimPolicy === 'Delete' &&
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
  return events;
}

/** A condition of that type with status True: its reason, message and generation. */
function trueCondition(
  conditions: unknown,
  type: string,
): { reason: string; message: string; observedGeneration: number | undefined } | undefined {
  if (!Array.isArray(conditions)) return undefined;
  const found: unknown = conditions.find((c) => isRecord(c) && c.type === type && c.status === 'True');
  if (!isRecord(found)) return undefined;
  return {
    reason: typeof found.reason === 'string' ? found.reason : '',
    message: typeof found.message === 'string' ? found.message : '',
    observedGeneration: typeof found.observedGeneration === 'number' ? found.observedGeneration : undefined,
  };
}

/** The observed conditions' types, statuses, reasons and transition times. */
function conditionsFingerprint(conditions: unknown): string {
  if (!Array.isArray(conditions)) return '';
  return shortHash(
    conditions
      .filter(isRecord)
      .map((c) => [c.type, c.status, c.reason, c.lastTransitionTime])
      .sort((a, b) => String(a[0]).localeCompare(String(b[0]))),
    16,
  );
}

/** The message the Update's operation carries (the sync's reason, or updateTemplate.spec.message). */
function operationMessage(update: KObject): string | undefined {
  const spec = isRecord(update.spec) ? update.spec : undefined;
  return typeof spec?.message === 'string' && spec.message !== '' ? spec.message : undefined;
}

/** At most `max` bytes of UTF-8, cut at a character boundary, with an ellipsis when cut. */
export function truncateUtf8(text: string, max: number): string {
  if (Buffer.byteLength(text, 'utf8') <= max) return text;
  const ellipsis = '…';
  let bytes = max - Buffer.byteLength(ellipsis, 'utf8');
  const buf = Buffer.from(text, 'utf8');
  // Back up over UTF-8 continuation bytes (10xxxxxx) to a character's first byte.
  while (bytes > 0 && (buf[bytes]! & 0xc0) === 0x80) bytes--;
  return buf.subarray(0, bytes).toString('utf8') + ellipsis;
}
