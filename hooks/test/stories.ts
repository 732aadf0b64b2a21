/**
 * Steps of a Stack's life that several test files start from, played with the builders' stand-in
 * for Metacontroller and the cluster.
 */
import type { Stack } from '../../schemas/generated/types';
import type { KObject } from '../src/lib/k8s';
import { syncStack } from './controllers';
import type { SyncContext } from '../src/stack/sync';
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

/** Drives a Stack from creation to its first update's Job: returns the state just after the Job is created. */
export function toFirstJob(stack = makeStack(), related: KObject[] = [makeProgram()]) {
  const r1 = syncStack(syncRequest(stack, [], related), ctx());
  const s1 = withStatus(stack, r1);
  const cluster1 = workspaceBecomesReady(applyChildren([], r1.children));
  const r2 = syncStack(syncRequest(s1, cluster1, related), ctx());
  const s2 = withStatus(s1, r2);
  const cluster2 = applyChildren(cluster1, r2.children);
  return { r1, r2, stack: s2, cluster: cluster2, job: at(jobsOf(r2), 0, 'Job') };
}

/** Runs one failing attempt from a state where a Job was just created; returns the state after absorbing it. */
export function failOnce(stack: Stack, cluster: KObject[], jobName: string, endTime: string) {
  const done = jobFinishes(cluster, jobName, { state: 'failed', message: 'error: resource creation failed', endTime });
  const res = syncStack(syncRequest(stack, done), ctx(new Date(endTime)));
  return { res, stack: withStatus(stack, res), cluster: applyChildren(done, res.children) };
}

/** A Stack with a workspace and a finished Job whose result is absorbed: what the invalid-spec and unavailable-source tests change. */
export function withChildren() {
  const stack = makeStack();
  const r1 = syncStack(syncRequest(stack), ctx());
  const cluster1 = workspaceBecomesReady(applyChildren([], r1.children));
  const r2 = syncStack(syncRequest(withStatus(stack, r1), cluster1), ctx());
  const cluster2 = applyChildren(cluster1, r2.children);
  const jobName = at(jobsOf(r2), 0, 'Job').metadata.name ?? '';
  const done = jobFinishes(cluster2, jobName, { state: 'succeeded', message: 'ok' });
  const r3 = syncStack(syncRequest(withStatus(stack, r2), done), ctx());
  return { stack: withStatus(stack, r3), cluster: applyChildren(done, r3.children) };
}
