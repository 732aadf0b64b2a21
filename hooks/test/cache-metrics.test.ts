/**
 * pulumi_hook_cache_requests_total counts the hooks' cache lookups: the first sync of a recorded
 * Stack at rest, its Workspace and an Update misses each cache it uses, the same requests again hit.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { request as httpRequest } from 'undici';
import { configFromEnv } from '../src/config';
import { buildServer, type HookServer } from '../src/server';

const REQUESTS = join(__dirname, '..', '..', 'bench', 'requests');

function recorded(file: string): { request: unknown; agentImage: string } {
  return JSON.parse(readFileSync(join(REQUESTS, file), 'utf8')) as { request: unknown; agentImage: string };
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
    server = buildServer({ ...configFromEnv({}), agentImage: stack.agentImage }, { logger: false });
    await server.app.listen({ port: 0, host: '127.0.0.1' });
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
