/**
 * The answer phase of a Stack's sync: the children and conditions of the step decide.ts chose.
 * Every answer is checked against what a Stack may own (checkAnswer), records the digests of its
 * in-place children for the next sync to keep them by, and says when to sync again.
 */
import type { StackStatus } from '../../../schemas/generated/types';
import type { KObject } from '../lib/k8s';
import { byIdentity, checkAnswer, keptChild, recordDigests, recordedDigests } from '../lib/kept-children';
import { resyncAfter } from '../lib/time';
import { Reasons } from './conditions';
import type { Absorbed } from './absorb';
import type { Decided, NextStep, WorkspaceAnswer } from './decide';
import { stackChildRules, type StackView } from './observed';
import { withApprovalCondition } from './plan';
import type { StackSyncResponse } from './sync';
import { heldFor } from './workspace';
import { AUTO_API_VERSION } from '../lib/api-versions';
import { applyMark, type Mark } from '../lib/conditions';
import { stallsOf } from '../events/event';

/** The Stack's children that Metacontroller updates in place: kept only as their digests in the status verify. */
const IN_PLACE_KINDS: ReadonlySet<string> = new Set(['Workspace', 'ConfigMap']);

export function answer(view: StackView, absorbed: Absorbed, decided: Decided, now: Date): StackSyncResponse {
  const { step } = decided;
  const { children, known } = childrenOf(view, absorbed, step);
  // The cache volume: OnDelete, so Metacontroller creates it once and never changes it.
  if (decided.cacheClaim) children.push(decided.cacheClaim);
  checkAnswer(`Stack ${view.namespace}/${view.name}`, view.namespace, children, stackChildRules(view.name));
  const status: StackStatus = {
    ...decided.status,
    // What this answer asks of each InPlace child, for the keep paths of the next syncs.
    childDigests: recordDigests(children, view.namespace, IN_PLACE_KINDS, known),
  };
  const conditions = withApprovalCondition(
    applyMark(status.conditions, markOf(step), view.generation, now),
    view.stack,
    status.plan,
    view.generation,
    now,
  );
  delete status.conditions; // re-added last, where every answer has it
  const stalls = stallsOf(view.stack.status, conditions);
  if (stalls !== undefined) status.stalls = stalls;
  status.conditions = conditions;
  // A finalize answer always says whether the Stack may go (absent would mean the same, but say it).
  const finalized = step.kind === 'released' ? true : step.kind === 'synced' ? step.finalized : undefined;
  const response: StackSyncResponse = {
    status,
    children,
    ...(view.deleting ? { finalized: finalized ?? false } : {}),
  };
  // Called again when the next finished Update's TTL runs out, unless something else comes first.
  const asked = 'resyncAfterSeconds' in step ? step.resyncAfterSeconds : undefined;
  const wake = absorbed.retained.resyncAfterSeconds;
  const wait = resyncAfter(wake !== undefined && (asked ?? Infinity) > wake ? wake : asked);
  if (wait !== undefined) response.resyncAfterSeconds = wait;
  return response;
}

function markOf(step: NextStep): Mark {
  switch (step.kind) {
    case 'wait':
      return { kind: 'reconciling', reason: step.reason, message: step.message };
    case 'stall':
      return { kind: 'stalled', reason: step.reason, message: step.message };
    case 'synced':
      return step.mark;
    case 'released':
      return { kind: 'ready' };
    case 'start':
      return { kind: 'reconciling', reason: Reasons.StackProcessing, message: 'stack is being processed' };
  }
}

/**
 * The children of a step, and the digests already known of its in-place ones (a cached Workspace's,
 * a verified kept child's). Every kept Update is answered by identity; the Workspace as the step says.
 */
function childrenOf(
  view: StackView,
  absorbed: Absorbed,
  step: NextStep,
): { children: KObject[]; known: Map<KObject, string> } {
  const { namespace } = view;
  const known = new Map<KObject, string>();
  const keptUpdates = absorbed.retained.kept.map(({ update }) =>
    byIdentity({ kind: 'Update', apiVersion: AUTO_API_VERSION, name: update.metadata.name, namespace }),
  );
  // Kept as last answered, if the status's digest says that is what the observed copy is (else 409).
  const recorded = recordedDigests(view.stack.status);
  const kept = (child: KObject, kind: string, apiVersion: string): KObject => {
    const verified = keptChild(child, { kind, apiVersion, name: child.metadata.name, namespace }, recorded);
    known.set(verified.child, verified.digest);
    return verified.child;
  };
  const workspace = (answer: WorkspaceAnswer): KObject[] => {
    if (answer === 'none') return [];
    if (answer === 'as-observed') return view.workspace ? [kept(view.workspace, 'Workspace', AUTO_API_VERSION)] : [];
    known.set(answer.workspace, answer.digest);
    return [answer.workspace];
  };
  const of = (children: KObject[]) => ({ children, known });
  if (step.kind === 'start') {
    // The Workspace is held for the Update from the first answer on: kept as answered, with the
    // hold, until the Update ends.
    const name = step.update.metadata.name;
    const others = keptUpdates.filter((u) => u.metadata.name !== name);
    return of([heldFor(step.workspace.workspace, name), ...others, ...(step.make ? [step.update] : [])]);
  }
  if (step.kind === 'synced' && step.check && step.workspace !== 'as-observed' && step.workspace !== 'none') {
    // A drift check starts: the workspace is held for it.
    return of([heldFor(step.workspace.workspace, step.check.metadata.name), ...keptUpdates, step.check]);
  }
  if (step.workspace === 'as-observed')
    return of([
      ...workspace('as-observed'),
      ...keptUpdates,
      ...view.refreshRequests.map((cm) => kept(cm, 'ConfigMap', 'v1')),
      ...view.legacy.map(byIdentity),
    ]);
  const refreshRequests = step.kind === 'wait' ? (step.refreshRequests ?? []) : [];
  return of([...workspace(step.workspace), ...keptUpdates, ...refreshRequests]);
}
