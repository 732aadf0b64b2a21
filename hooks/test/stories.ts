/**
 * Steps of a Stack's life that several test files start from, played with the builders' stand-in
 * for Metacontroller and the cluster.
 */
import type { Stack } from '../../schemas/generated/types';
import type { KObject } from '../src/lib/k8s';
import { syncStack } from './controllers';
import type { StackSyncResponse, SyncContext } from '../src/stack/sync';
import {
  applyChildren,
  jobFinishes,
  jobsOf,
  makeProgram,
  makeStack,
  noLookups,
  NOW,
  syncRequest,
  testConfig,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { at } from './children';

export const ctx = (now = NOW): SyncContext => ({ config: testConfig, now, lookups: noLookups });

/** A sync's context: the test bed's at `at`, or the one given (git lookups, say). */
const contextOf = (at: Date | SyncContext): SyncContext => (at instanceof Date ? ctx(at) : at);

/**
 * Drives a Stack from creation to its first update's Job: returns the state just after the Job is
 * created. `recorded` is the answer that records the operation in status.currentUpdate; `r2` the
 * next, to Metacontroller's write of that status, which makes its Update (and so its Job).
 */
export function toFirstJob(stack = makeStack(), related: KObject[] = [makeProgram()]) {
  const r1 = syncStack(syncRequest(stack, [], related), ctx());
  const s1 = withStatus(stack, r1);
  const cluster1 = workspaceBecomesReady(applyChildren([], r1.children));
  const { recorded, res: r2, stack: s2, cluster: cluster2 } = syncStarting(s1, cluster1, related);
  return { r1, recorded, r2, stack: s2, cluster: cluster2, job: at(jobsOf(r2), 0, 'Job') };
}

/**
 * One sync and what Metacontroller makes of its answer (children applied, status written); when
 * that answer records an operation it does not make yet (status.currentUpdate names an Update
 * absent from it), also the sync Metacontroller makes on that status write, which makes the
 * Update. `res` is the last answer, `recorded` the recording one if there were two.
 */
export function step(
  stack: Stack,
  cluster: KObject[],
  related: KObject[] = [makeProgram()],
  now: Date | SyncContext = NOW,
  finalizing = false,
): { res: StackSyncResponse; stack: Stack; cluster: KObject[]; recorded?: StackSyncResponse } {
  const res = syncStack(syncRequest(stack, cluster, related, finalizing), contextOf(now));
  const name = res.status.currentUpdate?.name;
  if (name === undefined || res.children.some((c) => c.kind === 'Update' && c.metadata.name === name))
    return { res, stack: withStatus(stack, res), cluster: applyChildren(cluster, res.children) };
  return { recorded: res, ...startRecorded(withStatus(stack, res), cluster, res, related, now, finalizing) };
}

/**
 * A sync that starts an operation, as Metacontroller plays it: the answer that records it in
 * status.currentUpdate (`recorded`), then the one to Metacontroller's write of that status, which
 * makes its Update (`res`); with the Stack and the cluster after both.
 */
export function syncStarting(
  stack: Stack,
  cluster: KObject[],
  related: KObject[] = [makeProgram()],
  now: Date | SyncContext = NOW,
) {
  const recorded = syncStack(syncRequest(stack, cluster, related), contextOf(now));
  return { recorded, ...startRecorded(withStatus(stack, recorded), cluster, recorded, related, now) };
}

/**
 * The sync that follows an answer recording an operation in status.currentUpdate (Metacontroller
 * calls again on its own status write): it makes that operation's Update. `stack` carries the
 * recorded status; the recording answer's children are applied first.
 */
export function startRecorded(
  stack: Stack,
  cluster: KObject[],
  recording: { children: KObject[] },
  related: KObject[] = [makeProgram()],
  now: Date | SyncContext = NOW,
  finalizing = false,
) {
  const applied = applyChildren(cluster, recording.children);
  const res = syncStack(syncRequest(stack, applied, related, finalizing), contextOf(now));
  return { res, stack: withStatus(stack, res), cluster: applyChildren(applied, res.children) };
}

/** Runs one failing attempt from a state where a Job was just created; returns the state after absorbing it. */
export function failOnce(stack: Stack, cluster: KObject[], jobName: string, endTime: string) {
  const done = jobFinishes(cluster, jobName, { state: 'failed', message: 'error: resource creation failed', endTime });
  const res = syncStack(syncRequest(stack, done), ctx(new Date(endTime)));
  return { res, stack: withStatus(stack, res), cluster: applyChildren(done, res.children) };
}

/** A Stack with a workspace and a finished Job whose result is absorbed: what the invalid-spec and unavailable-source tests change. */
export function withChildren() {
  const { stack, cluster, job } = toFirstJob();
  const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', message: 'ok' });
  const r3 = syncStack(syncRequest(stack, done), ctx());
  return { stack: withStatus(stack, r3), cluster: applyChildren(done, r3.children), res: r3 };
}
