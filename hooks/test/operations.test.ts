import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { startHookServer } from '../src/main';
import { configFromEnv } from '../src/config';
import { postJson } from './answers';
import { makeProgram, makeStack, syncRequest, testConfig } from './builders';

const post = (base: string, path: string, body: unknown) => postJson(`${base}${path}`, body);

describe('metrics', () => {
  it('exports hook latency and errors by reason, and no gauge of Stacks from the requests answered', async () => {
    const server = await startHookServer({ ...testConfig, port: 0 }, { logger: false });
    const base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
    try {
      await post(base, '/stack/sync', { controller: {}, ...syncRequest(makeStack()) });
      await post(base, '/program/sync', { controller: {}, object: makeProgram(), attachments: {} });
      await post(base, '/stack/sync', { controller: {} });
      const text = await (await request(`${base}/metrics`)).body.text();
      expect(text).toMatch(/^pulumi_hook_request_duration_seconds_count\{hook="stack_sync"\} 2$/m);
      expect(text).toMatch(/^pulumi_hook_request_duration_seconds_count\{hook="program_sync"\} 1$/m);
      expect(text).toMatch(/^pulumi_hook_errors_total\{hook="stack_sync",reason="bad_request"\} 1$/m);
      // Upstream's gauges come from the objects (object-gauges.test.ts); without API access, none.
      expect(text).not.toMatch(/^(stacks_active|stacks_failing|programs_active)/m);
    } finally {
      await server.shutdown('test');
    }
  });
});

describe('graceful shutdown', () => {
  it('fails readiness, then closes; a second signal is harmless', async () => {
    const server = await startHookServer({ ...testConfig, port: 0 }, { logger: false });
    const base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
    // With PROGRAM_SERVER_URL set, the program server listens on its own port, and closes with the hooks.
    const programs = `http://127.0.0.1:${(server.programs.server.address() as AddressInfo).port}`;
    expect(programs).not.toBe(base);
    expect((await request(`${base}/readyz`)).statusCode).toBe(200);
    expect((await request(`${programs}/programs/team-a/hello`)).statusCode).toBe(503);
    const closing = server.shutdown('SIGTERM');
    expect(server.health.ready).toBe(false);
    await Promise.all([closing, server.shutdown('SIGTERM')]);
    await expect(request(`${base}/healthz`)).rejects.toThrow();
    await expect(request(`${programs}/programs/team-a/hello`)).rejects.toThrow();
  });
});

describe('configuration from the environment', () => {
  it('has defaults and rejects nonsense with a message naming the variable', () => {
    const defaults = configFromEnv({});
    expect(defaults).toMatchObject({ port: 8080, gitTimeoutMs: 2000 });
    expect(defaults.agentImage).toMatch(/agent:v/);
    expect(configFromEnv({ AGENT_IMAGE_PULL_POLICY: 'never' }).agentImagePullPolicy).toBe('Never');
    expect(() => configFromEnv({ PORT: 'eighty' })).toThrow('PORT must be a positive integer, not "eighty"');
    expect(defaults.programPort).toBe(8081);
    expect(() => configFromEnv({ PORT: '9000', PROGRAM_PORT: '9000' })).toThrow(/PROGRAM_PORT must differ from PORT/);
    expect(() => configFromEnv({ AGENT_IMAGE_PULL_POLICY: 'Sometimes' })).toThrow(/AGENT_IMAGE_PULL_POLICY/);
  });
});
