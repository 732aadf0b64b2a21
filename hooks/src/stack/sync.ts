import type { Stack, StackStatus } from '../../../schemas/generated/types';
import type { UpdateResult } from '../../../contract';
import type { HookConfig } from '../config';
import type { KObject, ObjectMap } from '../lib/k8s';
import { absorb } from './absorb';
import { answer } from './answer';
import { decide } from './decide';
import { observe } from './observed';
import { validateStackObject } from './validate';
import { stackWorkspace, type DesiredStackWorkspace } from './workspace';
import type { FetchSource } from '../workspace/source';
import type { Turn } from '../budget/gate';
import type { RefLookup } from '../git/ref-lookup';
import { readUpdateResult } from '../lib/operation-result';

export interface StackSyncRequest {
  parent: Stack;
  children?: ObjectMap;
  related?: ObjectMap;
  finalizing?: boolean;
}

export interface StackSyncResponse {
  status: StackStatus;
  children: KObject[];
  resyncAfterSeconds?: number;
  finalized?: boolean;
}

/**
 * The steps of a sync that are pure functions of their arguments and costly enough to remember
 * between requests. The hook server hands in its cache (cache/sync-cache.ts); without one, each
 * step is computed ({@link computeSteps}). A remembered answer is the computed one, frozen.
 */
export interface SyncSteps {
  validate(stack: Stack): readonly string[];
  workspace(stack: Stack, source: FetchSource, config: HookConfig): DesiredStackWorkspace;
  /** A Job's `pulumi.com/update-result` annotation, parsed (the Update controller's). */
  updateResult(text: string | undefined): UpdateResult | undefined;
}

export const computeSteps: SyncSteps = {
  validate: validateStackObject,
  workspace: stackWorkspace,
  updateResult: readUpdateResult,
};

export interface SyncContext {
  config: HookConfig;
  now: Date;
  /** Git refs resolved by the lookup phase, keyed by refLookupKey(url, ref). */
  lookups: ReadonlyMap<string, RefLookup>;
  /** Where the costly steps' answers may be remembered; default: computed every time. */
  cache?: SyncSteps;
  /** Whether the Stack may start an operation now (budget/gate.ts); absent: always. */
  turn?: Turn;
}

/**
 * The Stack sync and finalize hook: a pure function of the request, the clock and the git lookups,
 * in three phases that each return a value. Absorb what finished (an operation's result, its plan,
 * a drift check) into the status; decide what happens next (wait, stall, in sync, released, or
 * start an operation); answer with that step's children and conditions.
 */
export function syncStack(req: StackSyncRequest, ctx: SyncContext): StackSyncResponse {
  const steps = ctx.cache ?? computeSteps;
  const view = observe(req, steps, ctx.now);
  const absorbed = absorb(view, ctx.now);
  const decided = decide(view, absorbed, ctx, steps);
  return answer(view, absorbed, decided, ctx.now);
}
