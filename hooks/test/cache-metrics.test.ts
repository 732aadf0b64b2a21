/**
 * pulumi_hook_cache_requests_total counts the hooks' cache lookups: the first sync of a recorded
 * Stack at rest, its Workspace and an Update misses each cache it uses, the same requests again hit.
 * pulumi_hook_cache_bytes shows what the caches hold, within SYNC_CACHE_MAX_BYTES however large
 * the specs.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { request as httpRequest } from 'undici';
import { configFromEnv } from '../src/config';
import { buildServer, type HookServer } from '../src/server';
import { listenOnLoopback } from './answers';

const REQUESTS = join(__dirname, '..', '..', 'bench', 'requests');

/** A recording and what the hooks that answered it were configured with (bench/recordings.ts). */
type Recorded = { request: unknown; agentImage: string; programServer: { url: string; ca: string } };

function recorded(file: string): Recorded {
  return JSON.parse(readFileSync(join(REQUESTS, file), 'utf8')) as Recorded;
}

const stack = recorded('steady-state-sync.json');
const workspace = recorded('steady-state-workspace-sync.json');
const update = recorded('steady-state-update-sync-1.json');

async function call(server: HookServer, url: string, body?: unknown): Promise<{ status: number; text: string }> {
  const res = await httpRequest(`http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}${url}`, {
    method: body === undefined ? 'GET' : 'POST',
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: res.statusCode, text: await res.body.text() };
}

/** The counter's value per `cache/result` label pair, as /metrics serves it. */
/** The bytes each sync cache holds, as /metrics serves them. */
async function cacheBytes(server: HookServer): Promise<Record<string, number>> {
  const { text } = await call(server, '/metrics');
  const bytes: Record<string, number> = {};
  for (const m of text.matchAll(/^pulumi_hook_cache_bytes\{cache="(\w+)"\} (\d+)$/gm)) bytes[m[1]!] = Number(m[2]);
  return bytes;
}

async function cacheCounts(server: HookServer): Promise<Record<string, number>> {
  const { text } = await call(server, '/metrics');
  const counts: Record<string, number> = {};
  for (const m of text.matchAll(/^pulumi_hook_cache_requests_total\{cache="(\w+)",result="(\w+)"\} (\d+)$/gm))
    counts[`${m[1]}/${m[2]}`] = Number(m[3]);
  return counts;
}

describe('cache metrics', () => {
  let server: HookServer;
  beforeAll(async () => {
    server = buildServer(
      { ...configFromEnv({}), agentImage: stack.agentImage, programServer: stack.programServer },
      { logger: false },
    );
    await listenOnLoopback(server.app);
  });
  afterAll(() => server.app.close());

  const syncAll = async () => {
    for (const [url, body] of [
      ['/stack/sync', stack.request],
      ['/workspace/sync', workspace.request],
      ['/update/sync', update.request],
    ] as const) {
      expect((await call(server, url, body)).status).toBe(200);
    }
  };

  it('counts a miss on the first sync and a hit on the same sync again, per cache', async () => {
    await syncAll();
    const first = await cacheCounts(server);
    expect(first).toEqual({
      'stack_validation/miss': 1,
      'stack_workspace/miss': 1,
      'workspace_pod/miss': 1,
      'update_result/miss': 1,
    });
    await syncAll();
    expect(await cacheCounts(server)).toEqual({
      ...first,
      'stack_validation/hit': 1,
      'stack_workspace/hit': 1,
      'workspace_pod/hit': 1,
      'update_result/hit': 1,
    });
  });
});

describe('the sync caches of Stacks with large specs', () => {
  it('hold at most SYNC_CACHE_MAX_BYTES, and /metrics says how much each holds', async () => {
    const budget = 64 * 1024 * 1024;
    const server = buildServer(
      {
        ...configFromEnv({ SYNC_CACHE_MAX_BYTES: String(budget) }),
        agentImage: stack.agentImage,
        programServer: stack.programServer,
      },
      { logger: false },
    );
    await listenOnLoopback(server.app);
    try {
      expect(await cacheBytes(server)).toEqual({
        stack_spec: 0,
        stack_validation: 0,
        stack_workspace: 0,
        workspace_spec: 0,
        workspace_pod: 0,
        update_result: 0,
      });
      // Sixty Stacks, each with a config of 100 kB of JSON: cached whole, they would hold about 100 MB.
      const request = stack.request as { parent: { metadata: { name: string }; spec: Record<string, unknown> } };
      for (let i = 0; i < 60; i++) {
        const body = structuredClone(request);
        body.parent.metadata.name = `big-${i}`;
        body.parent.spec.config = Object.fromEntries(
          Array.from({ length: 100 }, (_, k) => [`app:key${k}`, { value: `${i}-${k}-${'x'.repeat(1000)}` }]),
        );
        const res = await call(server, '/stack/sync', body);
        expect(res.status).toBe(200);
        const workspace = (JSON.parse(res.text) as { children: { kind: string }[] }).children.find(
          (c) => c.kind === 'Workspace',
        );
        expect(
          (await call(server, '/workspace/sync', { controller: {}, parent: workspace, children: {} })).status,
        ).toBe(200);
      }
      const held = await cacheBytes(server);
      const total = Object.values(held).reduce((a, b) => a + b, 0);
      expect(total).toBeGreaterThan(budget / 4);
      expect(total).toBeLessThanOrEqual(budget);
    } finally {
      await server.app.close();
    }
  }, 60_000);
});
