/**
 * A sync request recorded from a real cluster (bench/requests/steady-state-sync.json, written by
 * bench/capture-sync-request.ts): a Stack at rest after three updates, its children as the API
 * server stores them (managedFields, defaulted pod templates, the Job and StatefulSet controllers'
 * status, Metacontroller's last-applied annotation). The hooks must see it as at rest: Ready, no
 * new Job, every child kept, the workspace unchanged (no rollout). The benchmark measures this
 * request, so this test also says when the recording no longer matches what the hooks build: then
 * record it again (see the script's header).
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { request as httpRequest } from 'undici';
import { join } from 'node:path';
import { validateCompositeSyncRequest, validateStack } from '../../schemas';
import { configFromEnv } from '../src/config';
import { buildServer } from '../src/server';
import { syncStack } from './controllers';
import type { StackSyncRequest } from '../src/stack/sync';
import type { KObject } from '../src/lib/k8s';
import { stackSyncAnswer } from './answers';
import { workspaceHashOf } from './builders';
import { asChild } from './children';
import { isRecord } from './json';

/** A Stack sync request: valid as Metacontroller's request, with a parent valid as a Stack. */
function isStackSyncRequest(value: unknown): value is StackSyncRequest {
  return validateCompositeSyncRequest(value).ok && isRecord(value) && validateStack(value.parent).ok;
}

/** The recorded request and the agent image the hooks that answered it were configured with. */
function recording(): { request: StackSyncRequest; agentImage: string } {
  const file: unknown = JSON.parse(
    readFileSync(join(__dirname, '..', '..', 'bench', 'requests', 'steady-state-sync.json'), 'utf8'),
  );
  if (!isRecord(file) || !isStackSyncRequest(file.request) || typeof file.agentImage !== 'string')
    throw new Error('steady-state-sync.json holds no Stack sync request and agent image');
  return { request: file.request, agentImage: file.agentImage };
}

const { request, agentImage } = recording();
const config = { ...configFromEnv({}), agentImage };
// An hour after the recorded Stack's last update: the answer (Job retention's resyncAfterSeconds)
// depends on the clock, so a fixed one keeps it the same on every run and across a second boundary.
const NOW = new Date(Date.parse(request.parent.status?.lastUpdate?.lastResyncTime ?? '') + 3600_000);
// Copied into KObjects, whose metadata is open: the API server adds fields (managedFields) the schema leaves out.
const observed: KObject[] = Object.values(request.children ?? {})
  .flatMap((byName) => Object.values(byName))
  .map((o) => ({ ...o, metadata: { ...o.metadata } }));
const names = (objects: readonly { kind: string; metadata: { name?: string } }[]) =>
  objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();
const hashOf = (sts: unknown) => workspaceHashOf(asChild(sts, 'StatefulSet'));

describe('a sync request recorded from a real cluster, Stack at rest', () => {
  it('is a valid Metacontroller request with what the API server adds', () => {
    expect(validateCompositeSyncRequest(request)).toEqual({ ok: true });
    expect(
      observed.every((o) => Array.isArray(o.metadata.managedFields) && typeof o.metadata.resourceVersion === 'string'),
    ).toBe(true);
    expect(names(observed.filter((o) => o.kind === 'Job'))).toHaveLength(3);
  });

  it('gets a steady answer: Ready, every child kept, no new Job, the same workspace', () => {
    const response = syncStack(request, { config, now: NOW, lookups: new Map() });
    const ready = response.status.conditions?.find((c) => c.type === 'Ready');
    expect(ready).toMatchObject({
      status: 'True',
      reason: 'ProcessingCompleted',
      observedGeneration: request.parent.metadata.generation,
    });
    expect(response.status.currentUpdate).toBeUndefined();
    expect(request.parent.status?.lastUpdate).toBeDefined();
    expect(response.status.lastUpdate).toEqual(request.parent.status?.lastUpdate);
    expect(names(response.children)).toEqual(names(observed));
    const desired = response.children.find((c) => c.kind === 'StatefulSet');
    const actual = observed.find((c) => c.kind === 'StatefulSet');
    expect(hashOf(desired)).toBeDefined();
    expect(hashOf(desired)).toBe(hashOf(actual));
  });

  it('is answered over HTTP with the same bytes every time, and the same with its managed fields parsed', async () => {
    const { app } = buildServer(config, { logger: false, clock: () => NOW });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const post = async (body: string) => {
        const res = await httpRequest(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/stack/sync`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body,
        });
        return { status: res.statusCode, body: await res.body.text() };
      };
      const first = await post(JSON.stringify(request));
      const second = await post(JSON.stringify(request));
      expect(first.status).toBe(200);
      expect(stackSyncAnswer(JSON.parse(first.body)).status.conditions?.[0]).toMatchObject({
        type: 'Ready',
        status: 'True',
      });
      expect(second.body).toBe(first.body);
      // Indented, the managed fields are parsed with the rest (http/managed-fields.ts only cuts Go's
      // compact `"managedFields":[`): the answer must not depend on them.
      const parsedWhole = await post(JSON.stringify(request, null, 2));
      expect(parsedWhole.body).toBe(first.body);
    } finally {
      await app.close();
    }
  });
});
