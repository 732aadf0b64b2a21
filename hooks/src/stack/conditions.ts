/**
 * Upstream's kstatus-compatible Ready/Reconciling/Stalled protocol (the Mark*Condition methods of
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/api/pulumi/v1/stack_types.go#L114).
 * Reason strings are part of the API: Argo CD's health check and users' alerts match on them.
 */
import { ReadyReasons, type StatusCondition } from '../lib/conditions';

export const Reasons = {
  // Reconciling
  StackProcessing: 'StackProcessing',
  PrerequisiteNotSatisfied: 'PrerequisiteNotSatisfied',
  RetryingAfterFailure: 'RetryingAfterFailure',
  PreviewFailed: 'PreviewFailed',
  /** Waiting for a slot of the operations budget (budget/operations.ts); the message says its position. */
  Queued: 'Queued',
  /** A hibernating Stack's cache claim is not (yet) its child (hibernation.ts): no workspace, and no budget slot held. */
  CacheVolumePending: 'CacheVolumePending',
  // Stalled
  SpecInvalid: 'SpecInvalid',
  SourceUnavailable: 'SourceUnavailable',
  PulumiVersionTooLow: 'PulumiVersionTooLow',
  WorkspaceFailed: 'WorkspaceFailed',
  UpdateFailed: 'UpdateFailed',
  NamespaceTerminating: 'NamespaceTerminating',
  /** The workspace cannot verify callers (no system:auth-delegator); clears when the agent's check passes. */
  Unauthenticated: 'Unauthenticated',
  // Ready
  ...ReadyReasons,
} as const;

export type Condition = StatusCondition;
