/**
 * Sync requests recorded from a real cluster (bench/requests/steady-state-*.json, written by
 * bench/capture-sync-request.ts): a Stack at rest after three updates, its Workspace and its three
 * kept Updates, each with its children as the API server stores them (managedFields, defaulted pod
 * templates, the Job and StatefulSet controllers' status, Metacontroller's last-applied annotation).
 * The hooks must see each as at rest: the Stack Ready with its Workspace and Updates as last
 * applied, the Workspace Ready with its children as last applied (no rollout), each Update Complete
 * with no new child. The benchmarks measure these requests, so this test also says when the
 * recordings no longer match what the hooks build: then record them again (see the script's header).
 */
import { request as httpRequest } from 'undici';
import { recording, restingClock } from '../../bench/recordings';
import { validateStack, validateUpdate, validateWorkspace } from '../../schemas';
import type { Update, Workspace } from '../../schemas/generated/types';
import { configFromEnv } from '../src/config';
import { buildServer } from '../src/server';
import { syncStack, type StackSyncRequest } from '../src/stack/sync';
import { syncUpdate, type UpdateSyncRequest } from '../src/update/sync';
import { syncWorkspace, type WorkspaceSyncRequest } from '../src/workspace/sync';
import { LAST_APPLIED_ANNOTATION, type KObject, type ObjectMap } from '../src/lib/k8s';
import { stackSyncAnswer, updateSyncAnswer, workspaceSyncAnswer, listenOnLoopback } from './answers';
import { condition, workspaceHashOf } from './builders';
import { asChild } from './children';

const stack = recording<StackSyncRequest>('steady-state-sync.json', validateStack);
const workspace = recording<WorkspaceSyncRequest & { parent: Workspace }>(
  'steady-state-workspace-sync.json',
  validateWorkspace,
);
const updates = [1, 2, 3].map((n) =>
  recording<UpdateSyncRequest & { parent: Update }>(`steady-state-update-sync-${n}.json`, validateUpdate),
);
const config = { ...configFromEnv({}), agentImage: stack.agentImage, programServer: stack.programServer };
// The answers depend on the clock: the one the benches answer these requests at too.
const NOW = restingClock(stack.request);

// Copied into KObjects, whose metadata is open: the API server adds fields (managedFields) the schema leaves out.
const objects = (children: ObjectMap | undefined): KObject[] =>
  Object.values(children ?? {})
    .flatMap((byName) => Object.values(byName))
    .map((o) => ({ ...o, metadata: { ...o.metadata } }));
const names = (list: readonly { kind: string; metadata: { name?: string } }[]) =>
  list.map((o) => `${o.kind}/${o.metadata.name}`).sort();

/** What Metacontroller applied last to `observed` (its annotation), to compare a desired child with. */
function lastApplied(observed: KObject): unknown {
  const text = observed.metadata.annotations?.[LAST_APPLIED_ANNOTATION];
  if (text === undefined) throw new Error(`${observed.kind}/${observed.metadata.name} has no last-applied annotation`);
  return JSON.parse(text);
}

/**
 * Each desired child is what Metacontroller last applied to the observed one: nothing to update.
 * Metacontroller applies a child with its parent's generated selector label (generateSelector).
 * Children of kinds in `onDelete` (that update strategy: never updated) need only be returned.
 */
function expectAsLastApplied(
  desired: readonly KObject[],
  observed: readonly KObject[],
  parent: { metadata: { uid?: string } },
  onDelete: readonly string[] = [],
): void {
  expect(names(desired)).toEqual(names(observed));
  for (const d of desired.filter((c) => !onDelete.includes(c.kind))) {
    const o = observed.find((c) => c.kind === d.kind && c.metadata.name === d.metadata.name);
    const labels = { ...d.metadata.labels, 'controller-uid': parent.metadata.uid };
    expect(o && lastApplied(o)).toEqual({ ...d, metadata: { ...d.metadata, labels } });
  }
}

describe('sync requests recorded from a real cluster, a Stack at rest', () => {
  it('are valid Metacontroller requests with what the API server adds', () => {
    const all = [stack, workspace, ...updates].flatMap((r) => objects(r.request.children));
    expect(
      all.every((o) => Array.isArray(o.metadata.managedFields) && typeof o.metadata.resourceVersion === 'string'),
    ).toBe(true);
    const stackChildren = objects(stack.request.children);
    expect(names(stackChildren.filter((o) => o.kind === 'Update'))).toHaveLength(3);
    expect(names(stackChildren.filter((o) => o.kind === 'Workspace'))).toEqual([
      `Workspace/${stack.request.parent.metadata.name}`,
    ]);
    expect(updates.map((u) => u.agentImage)).toEqual(updates.map(() => stack.agentImage));
    expect(workspace.agentImage).toBe(stack.agentImage);
  });

  it('the Stack: Ready, its Workspace as last applied, its three Updates kept, no new one', () => {
    const response = syncStack(stack.request, { config, now: NOW, lookups: new Map() });
    expect(condition(response.status, 'Ready')).toMatchObject({
      status: 'True',
      reason: 'ProcessingCompleted',
      observedGeneration: stack.request.parent.metadata.generation,
    });
    expect(response.status.currentUpdate).toBeUndefined();
    expect(stack.request.parent.status?.lastUpdate).toBeDefined();
    expect(response.status.lastUpdate).toEqual(stack.request.parent.status?.lastUpdate);
    // The Updates (OnDelete, as the stack controller declares them) are kept by name; the Workspace as last applied.
    expectAsLastApplied(response.children, objects(stack.request.children), stack.request.parent, ['Update']);
  });

  it('the Workspace: Ready, its StatefulSet, Service, Role and status ConfigMap as last applied, the same pod template', () => {
    const response = syncWorkspace(workspace.request, { config, now: NOW });
    expect(condition(response.status, 'Ready')).toMatchObject({ status: 'True', reason: 'Succeeded' });
    expect(condition(response.status, 'Stalled')).toBeUndefined();
    expect(response.status.observedGeneration).toBe(workspace.request.parent.metadata.generation);
    const observed = objects(workspace.request.children);
    expectAsLastApplied(response.children, observed, workspace.request.parent);
    const hashOf = (list: readonly KObject[]) =>
      workspaceHashOf(
        asChild(
          list.find((c) => c.kind === 'StatefulSet'),
          'StatefulSet',
        ),
      );
    expect(hashOf(response.children)).toBeDefined();
    expect(hashOf(response.children)).toBe(hashOf(observed));
  });

  it.each(updates.map((u, i) => [i + 1, u] as const))(
    'Update %i: Complete, succeeded, its Job and identity kept, no new child',
    (_n, update) => {
      const response = syncUpdate(update.request, { config, now: NOW });
      expect(condition(response.status, 'Complete')).toMatchObject({ status: 'True', reason: 'Updated' });
      expect(condition(response.status, 'Failed')).toMatchObject({ status: 'False', reason: 'UpdateSucceeded' });
      expect(response.status.conditions).toEqual(update.request.parent.status?.conditions);
      expect(response.resyncAfterSeconds).toBeUndefined();
      // Jobs are OnDelete (update-controller.yaml): a finished Update's Job stays as the version that
      // made it built it (these recordings' asked for 10m CPU; Jobs now ask for none), by name only.
      expectAsLastApplied(response.children, objects(update.request.children), update.request.parent, ['Job']);
    },
  );

  it('are answered over HTTP with the same bytes every time, and the same with their managed fields parsed', async () => {
    const { app } = buildServer(config, { logger: false, clock: () => NOW });
    const base = await listenOnLoopback(app);
    try {
      const post = async (route: string, body: string) => {
        const res = await httpRequest(`${base}${route}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
        return { status: res.statusCode, body: await res.body.text() };
      };
      const cases: (readonly [
        string,
        unknown,
        (body: unknown) => { status: { conditions?: { type: string }[] } },
        string,
      ])[] = [
        ['/stack/sync', stack.request, stackSyncAnswer, 'Ready'],
        ['/workspace/sync', workspace.request, workspaceSyncAnswer, 'Ready'],
        ...updates.map((u) => ['/update/sync', u.request, updateSyncAnswer, 'Complete'] as const),
      ];
      for (const [route, request, read, atRest] of cases) {
        const first = await post(route, JSON.stringify(request));
        const second = await post(route, JSON.stringify(request));
        expect(first.status).toBe(200);
        expect(condition(read(JSON.parse(first.body)).status, atRest)).toMatchObject({ status: 'True' });
        expect(second.body).toBe(first.body);
        // Indented, the managed fields are parsed with the rest (http/managed-fields.ts only cuts Go's
        // compact `"managedFields":[`): the answer must not depend on them.
        const parsedWhole = await post(route, JSON.stringify(request, null, 2));
        expect(parsedWhole.body).toBe(first.body);
      }
    } finally {
      await app.close();
    }
  });
});
