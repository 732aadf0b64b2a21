/**
 * Where the operations budget meets the Stack sync: the sync asks for its turn only when it is
 * about to make a workspace pod run an operation, so the queue is computed for Stacks at that step,
 * never for the rest (a resync of 10,000 idle Stacks computes none).
 */
import type { Stack } from '../../../schemas/generated/types';
import { Reasons } from '../stack/conditions';
import {
  admit,
  queuedMessage,
  queuedResyncSeconds,
  selfFacts,
  type Admission,
  type BudgetFacts,
  type OperationsBudget,
} from './operations';

/** The Stack's turn: admitted, or queued with its place; undefined when the budget cannot say (no mirror yet). */
export type Turn = (stack: Stack, now: Date) => Admission | undefined;

/**
 * The budget's answer from a mirror of every Stack's facts (objects/gauges.ts): `mirror` returns
 * undefined while it is not synced, and then every Stack is admitted (a replica just started
 * does not hold operations back on a partial view).
 */
export function mirrorTurn(
  budget: OperationsBudget,
  mirror: () => Iterable<BudgetFacts> | undefined,
): Turn | undefined {
  if (budget.max <= 0) return undefined;
  return (stack, now) => {
    const self = selfFacts(stack);
    const all = self && mirror();
    return all && self ? admit(self, all, budget, now) : undefined;
  };
}

/** The Queued wait and when to look again, for a Stack that is not admitted; undefined otherwise. */
export function queuedWait(
  turn: Admission | undefined,
): { reason: string; message: string; resyncAfterSeconds: number } | undefined {
  if (!turn || turn.admitted) return undefined;
  return { reason: Reasons.Queued, message: queuedMessage(turn), resyncAfterSeconds: queuedResyncSeconds(turn) };
}
