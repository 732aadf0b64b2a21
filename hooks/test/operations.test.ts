import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { startHookServer } from '../src/main';
import { configFromEnv } from '../src/config';
import { postJson } from './answers';
import { makeProgram, makeStack, syncRequest, testConfig } from './builders';

const post = (base: string, path: string, body: unknown) => postJson(`${base}${path}`, body);

describe('metrics', () => {
  it('exports upstream gauges, hook latency and errors by reason', async () => {
    const server = await startHookServer({ ...testConfig, port: 0 }, { logger: false });
    const base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
    const failed = makeStack(
      {},
      { name: 'broken' },
      {
        lastUpdate: {
          generation: 1,
          reconcileRequest: '',
          name: 'x',
          type: 'up',
          state: 'failed',
          lastResyncTime: '2026-11-22T09:00:00Z',
          failures: 3,
          lastAttemptedCommit: '1',
        },
      },
    );
    await post(base, '/stack/sync', { controller: {}, ...syncRequest(makeStack()) });
    await post(base, '/stack/sync', { controller: {}, ...syncRequest(failed) });
    await post(base, '/program/sync', { controller: {}, object: makeProgram(), attachments: {} });
    await post(base, '/stack/sync', { controller: {} });
    const text = await (await request(`${base}/metrics`)).body.text();
    expect(text).toMatch(/^stacks_active 2$/m);
    expect(text).toMatch(/^stacks_failing\{namespace="team-a",name="broken"\} 1$/m);
    expect(text).toMatch(/^programs_active 1$/m);
    expect(text).toMatch(/^pulumi_hook_request_duration_seconds_count\{hook="stack_sync"\} 3$/m);
    expect(text).toMatch(/^pulumi_hook_request_duration_seconds_count\{hook="program_sync"\} 1$/m);
    expect(text).toMatch(/^pulumi_hook_errors_total\{hook="stack_sync",reason="bad_request"\} 1$/m);
    // A finalized Stack is forgotten.
    const gone = makeStack({}, { name: 'broken', deletionTimestamp: '2026-11-22T09:00:00Z' }, failed.status);
    await post(base, '/stack/finalize', { controller: {}, ...syncRequest(gone, [], [makeProgram()], true) });
    const after = await (await request(`${base}/metrics`)).body.text();
    expect(after).toMatch(/^stacks_active 1$/m);
    expect(after).not.toContain('name="broken"');
    await server.shutdown('test');
  });
});

describe('graceful shutdown', () => {
  it('fails readiness, then closes; a second signal is harmless', async () => {
    const server = await startHookServer({ ...testConfig, port: 0 }, { logger: false });
    const base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
    expect((await request(`${base}/readyz`)).statusCode).toBe(200);
    const closing = server.shutdown('SIGTERM');
    expect(server.health.ready).toBe(false);
    await Promise.all([closing, server.shutdown('SIGTERM')]);
    await expect(request(`${base}/healthz`)).rejects.toThrow();
  });
});

describe('configuration from the environment', () => {
  it('has defaults and rejects nonsense with a message naming the variable', () => {
    const defaults = configFromEnv({});
    expect(defaults).toMatchObject({ port: 8080, gitTimeoutMs: 2000 });
    expect(defaults.agentImage).toMatch(/agent:v/);
    expect(configFromEnv({ AGENT_IMAGE_PULL_POLICY: 'never' }).agentImagePullPolicy).toBe('Never');
    expect(() => configFromEnv({ PORT: 'eighty' })).toThrow('PORT must be a positive integer, not "eighty"');
    expect(() => configFromEnv({ AGENT_IMAGE_PULL_POLICY: 'Sometimes' })).toThrow(/AGENT_IMAGE_PULL_POLICY/);
  });
});
