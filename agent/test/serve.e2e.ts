/**
 * `pko-agent serve` against the real Pulumi CLI (toolchain: pulumi + pulumi-language-yaml), a
 * file:// backend and a passphrase, no network: config (plain, structured, secret from files),
 * outputs with secret flags, real resources through a real provider plugin (agent/testkit/provider.ts),
 * install once and a warm second operation, failing programs, the one-operation-at-a-time rule,
 * SIGTERM during a long `up` and a clean restart, and that no secret value is ever printed or
 * streamed. (command:local:Command: toolchain-plugins.e2e.ts; a Node.js project with a dynamic provider: nodejs-project.e2e.ts.)
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { maskOutputs, type WorkspaceStackSpec } from '../../contract';
import { versions } from '../../e2e/testbed/toolchain';
import type { StreamLine, WorkspaceInfo } from '../src/api';
import { sleep } from '../src/lib/sleep';
import { eventually } from '../../e2e/testbed/helpers';
import { capturedOutput, pulumiEnv, testResource, writeFiles } from './helpers';
import { startWorkspace, workspaceSuite, type RunningWorkspace } from './workspace';
import { getJson, operate, post } from './workspace-client';

const PASSWORD = 'pw-from-a-mounted-Secret-7f3a';
const API_KEY = 'inline-secret-api-key-91c2';
const streamed: string[] = [];
const timings: Record<string, number> = {};

const suite = workspaceSuite('serve');

function project(files: Record<string, string>): void {
  writeFiles(path.join(suite.root, 'share', 'workspace'), files);
}

async function serve(
  stack: WorkspaceStackSpec,
  extraEnv: Record<string, string | undefined> = {},
): Promise<RunningWorkspace> {
  const w = await startWorkspace({
    root: suite.root,
    env: pulumiEnv(suite.root, extraEnv),
    stack,
  });
  suite.track(w);
  return w;
}

/** Processes whose command line mentions `dir` (the test's PULUMI_HOME, plugins and project are under it). */
function processesUnder(dir: string): string[] {
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
      if (cmd.includes(dir)) found.push(`${pid} ${cmd}`);
    } catch {
      /* gone */
    }
  }
  return found;
}

/** Everything streamed except the result line (which carries the outputs, with plaintext secrets, to the runner). */
function record(line: StreamLine): void {
  if (line.kind !== 'result') streamed.push(JSON.stringify(line));
}

describe('a YAML project with config, secret config and outputs', () => {
  it('applies config and returns outputs with the right secret flags', async () => {
    project({
      'Pulumi.yaml': [
        'name: cfgproj',
        'runtime: yaml',
        'config:',
        '  greeting:',
        '    type: string',
        '  password:',
        '    type: string',
        '  apiKey:',
        '    type: string',
        '  replicas:',
        '    type: integer',
        '  settings:',
        '    type: object',
        '  fromEnv:',
        '    type: string',
        'outputs:',
        '  greetingOut: ${greeting}',
        '  replicasOut: ${replicas}',
        '  settingsOut: ${settings}',
        '  passwordOut: ${password}',
        '  apiKeyLength:',
        '    fn::length: ${apiKey}',
        '  fromEnvOut: ${fromEnv}',
        '',
      ].join('\n'),
    });
    // Upstream's dynamic env file: an init container may add variables, here the passphrase itself
    // (not in the pod's environment) and a value config reads with valueFrom.env.
    writeFiles(suite.root, {
      'share/.env':
        '# written by an init container\nexport PULUMI_CONFIG_PASSPHRASE=\'test-passphrase\'\nDYNAMIC_VALUE="from the env file"\n',
    });
    writeFiles(suite.root, {
      'var/run/secrets/stacks.pulumi.com/secrets/db/password': PASSWORD,
      'var/run/configmaps/stacks.pulumi.com/configmaps/app/settings.json': JSON.stringify({
        tier: 'gold',
        ports: [80, 443],
      }),
    });
    const w = await serve(
      {
        name: 'dev',
        create: true,
        config: [
          { key: 'greeting', value: 'hello', secret: false },
          { key: 'replicas', value: 3, secret: false },
          {
            key: 'settings',
            valueFrom: {
              path: '/var/run/configmaps/stacks.pulumi.com/configmaps/app/settings.json',
              json: true,
            },
            secret: false,
          },
          {
            key: 'password',
            valueFrom: {
              path: '/var/run/secrets/stacks.pulumi.com/secrets/db/password',
            },
            secret: true,
          },
          { key: 'cfgproj:apiKey', value: API_KEY, secret: true },
          {
            key: 'fromEnv',
            valueFrom: { env: 'DYNAMIC_VALUE' },
            secret: false,
          },
        ],
      },
      { PULUMI_ENV: '/share/.env', PULUMI_CONFIG_PASSPHRASE: undefined },
    );
    const info = (await getJson(w.base, '/v1/workspace')).body as WorkspaceInfo;
    expect(info).toMatchObject({
      state: 'Ready',
      stack: 'dev',
      projectInfo: { name: 'cfgproj', runtime: 'yaml' },
      busy: false,
      installs: 1,
    });
    expect(info.pulumiVersion?.replace(/^v/, '')).toBe(versions.pulumi.replace(/^v/, ''));

    const stackFile = fs.readFileSync(path.join(suite.root, 'share', 'workspace', 'Pulumi.dev.yaml'), 'utf8');
    expect(stackFile).not.toContain(PASSWORD);
    expect(stackFile).not.toContain(API_KEY);
    expect(stackFile).toContain('cfgproj:password:\n    secure:');

    const up = await operate(w.base, { type: 'up', stack: 'dev', message: 'first' }, { onLine: record });
    expect(up.status).toBe(200);
    const r = up.result!;
    expect(r).toMatchObject({
      type: 'up',
      state: 'succeeded',
      projectInfo: { name: 'cfgproj', runtime: 'yaml' },
    });
    expect(r.message).toMatch(/^up succeeded/);
    expect(r.outputs).toEqual({
      apiKeyLength: { value: API_KEY.length, secret: true },
      fromEnvOut: { value: 'from the env file', secret: false },
      greetingOut: { value: 'hello', secret: false },
      passwordOut: { value: PASSWORD, secret: true },
      replicasOut: { value: 3, secret: false },
      settingsOut: { value: { tier: 'gold', ports: [80, 443] }, secret: false },
    });
    const values = Object.fromEntries(Object.entries(r.outputs!).map(([k, v]) => [k, v.value]));
    const secret = Object.entries(r.outputs!)
      .filter(([, v]) => v.secret)
      .map(([k]) => k);
    expect(maskOutputs(values, secret)).toEqual({
      apiKeyLength: '[secret]',
      fromEnvOut: 'from the env file',
      greetingOut: 'hello',
      passwordOut: '[secret]',
      replicasOut: 3,
      settingsOut: { tier: 'gold', ports: [80, 443] },
    });
    expect(up.lines[0]).toMatchObject({
      kind: 'started',
      type: 'up',
      stack: 'dev',
    });
    expect(up.lines.some((l) => l.kind === 'event')).toBe(true);
    expect(up.lines.some((l) => l.kind === 'output' && /outputs/i.test(l.line))).toBe(true);

    // The same workspace runs the other operations.
    const preview = await operate(w.base, { type: 'preview', stack: 'dev', expectNoChanges: true }, { onLine: record });
    expect(preview.result).toMatchObject({
      type: 'preview',
      state: 'succeeded',
    });
    expect(preview.result!.outputs).toBeUndefined();
    const refresh = await operate(w.base, { type: 'refresh', stack: 'dev' }, { onLine: record });
    expect(refresh.result).toMatchObject({
      type: 'refresh',
      state: 'succeeded',
    });
    const destroy = await operate(w.base, { type: 'destroy', stack: 'dev' }, { onLine: record });
    expect(destroy.result).toMatchObject({
      type: 'destroy',
      state: 'succeeded',
    });
  });

  it('fails initialisation when the stack is missing and create is false (useLocalStackOnly)', async () => {
    project({ 'Pulumi.yaml': 'name: nostack\nruntime: yaml\n' });
    const w = await startWorkspace({
      root: suite.root,
      env: pulumiEnv(suite.root),
      stack: { name: 'absent', create: false, config: [] },
      waitReady: false,
    });
    suite.track(w);
    const st = await (async () => {
      for (;;) {
        const r = (await getJson(w.base, '/readyz')).body as {
          state: string;
          reason?: string;
          message?: string;
        };
        if (r.state === 'Failed') return r;
        await sleep(200);
      }
    })();
    expect(st).toMatchObject({
      state: 'Failed',
      reason: 'InitializationFailed',
    });
    expect(st.message).toContain('stack absent not found');
    const refused = await operate(w.base, { type: 'up', stack: 'absent' });
    expect(refused.status).toBe(503);
    expect(refused.body).toMatchObject({ reason: 'WorkspaceNotReady' });
  });
});

describe('a YAML project with real resources (a provider plugin)', () => {
  it('creates them, installs once, and runs the second operation warm', async () => {
    project({
      'Pulumi.yaml': [
        'name: resproj',
        'runtime: yaml',
        'resources:',
        ...testResource('first', 'Sleep', {
          seconds: 1,
          message: 'hello from a provider',
        }),
        ...testResource('second', 'Sleep', {
          seconds: 0,
          message: '${first.result}',
        }),
        'outputs:',
        '  said: ${second.result}',
        '',
      ].join('\n'),
    });
    const t0 = Date.now();
    const w = await serve({ name: 'dev', create: true, config: [] });
    timings.yamlStartToReadyMs = Date.now() - t0;
    const up = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
    timings.yamlFirstUpMs = up.ms;
    timings.yamlColdTotalMs = Date.now() - t0;
    expect(up.result).toMatchObject({
      state: 'succeeded',
      outputs: {
        said: {
          value: 'slept 0s: slept 1s: hello from a provider',
          secret: false,
        },
      },
    });
    expect(up.result!.resourceChanges).toMatchObject({ create: 3 });
    expect(up.lines.some((l) => l.kind === 'output' && /\+ agenttest:index:Sleep: \(create\)/.test(l.line))).toBe(true);
    const again = await operate(w.base, { type: 'up', stack: 'dev', expectNoChanges: true }, { onLine: record });
    timings.yamlSecondUpMs = again.ms;
    expect(again.result).toMatchObject({ state: 'succeeded' });
    expect(again.result!.message).toBe('up succeeded (3 unchanged)');
    expect(((await getJson(w.base, '/v1/workspace')).body as WorkspaceInfo).installs).toBe(1);
    expect(w.proc.output().match(/installing dependencies \(pulumi install\)/g)).toHaveLength(1);
  });
});

describe('failures', () => {
  it('reports a failing program with a useful message', async () => {
    project({
      'Pulumi.yaml': [
        'name: failing',
        'runtime: yaml',
        'resources:',
        ...testResource('broken', 'Fail', { message: 'disk quota exceeded' }),
        '',
      ].join('\n'),
    });
    const w = await serve({ name: 'dev', create: true, config: [] });
    const up = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
    expect(up.result).toMatchObject({
      type: 'up',
      state: 'failed',
      reason: 'UpdateFailed',
    });
    expect(up.result!.message).toMatch(/^up failed: /);
    expect(up.result!.message).toContain('disk quota exceeded');
    // The workspace stays usable.
    expect((await getJson(w.base, '/v1/workspace')).body).toMatchObject({
      state: 'Ready',
      busy: false,
    });
  });

  it('reports a program error (unknown reference)', async () => {
    project({
      'Pulumi.yaml': 'name: badref\nruntime: yaml\noutputs:\n  x: ${nowhere.value}\n',
    });
    const w = await serve({ name: 'dev', create: true, config: [] });
    const up = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
    expect(up.result).toMatchObject({
      state: 'failed',
      reason: 'UpdateFailed',
    });
    expect(up.result!.message).toContain('nowhere');
  });

  it('runs one operation at a time (409), checks the stack and the request (422, 400), cancels by id', async () => {
    project({
      'Pulumi.yaml': [
        'name: slow',
        'runtime: yaml',
        'resources:',
        ...testResource('wait', 'Sleep', { seconds: 6 }),
        '',
      ].join('\n'),
    });
    const w = await serve({ name: 'dev', create: true, config: [] });
    let startedId = '';
    const longUp = operate(
      w.base,
      { type: 'up', stack: 'dev' },
      {
        onLine: (l) => (l.kind === 'started' ? (startedId = l.id) : record(l)),
      },
    );
    while (!startedId) await sleep(50);
    const second = await operate(w.base, { type: 'preview', stack: 'dev' });
    expect(second.status).toBe(409);
    expect(second.body).toMatchObject({ reason: 'UpdateConflict' });
    expect(second.body!.message).toContain(startedId);
    expect((await operate(w.base, { type: 'up', stack: 'prod' })).status).toBe(422);
    expect((await operate(w.base, { type: 'nope', stack: 'dev' } as never)).status).toBe(400);
    expect(await post(w.base, '/v1/operations/op-unknown/cancel')).toBe(404);
    expect(((await getJson(w.base, '/v1/workspace')).body as WorkspaceInfo).operation).toMatchObject({
      id: startedId,
      type: 'up',
    });
    expect((await longUp).result).toMatchObject({ state: 'succeeded' });
  });
});

describe('SIGTERM during a long up', () => {
  it('interrupts Pulumi, reports the interruption, exits, and leaves the stack usable', async () => {
    project({
      'Pulumi.yaml': [
        'name: longrun',
        'runtime: yaml',
        'resources:',
        ...testResource('slow', 'Sleep', { seconds: 8 }),
        'outputs:',
        '  out: ${slow.result}',
        '',
      ].join('\n'),
    });
    const w = await serve({ name: 'dev', create: true, config: [] });
    let creating = false;
    const upPromise = operate(
      w.base,
      { type: 'up', stack: 'dev' },
      {
        onLine: (l) => {
          record(l);
          const pre =
            l.kind === 'event' ? (l.event.resourcePreEvent as { metadata?: { type?: string } } | undefined) : undefined;
          if (pre?.metadata?.type === 'agenttest:index:Sleep') creating = true;
        },
      },
    );
    while (!creating) await sleep(50);
    await sleep(500);
    w.proc.child.kill('SIGTERM');
    const up = await upPromise;
    expect(up.result).toMatchObject({
      type: 'up',
      state: 'failed',
      reason: 'Aborted',
    });
    expect(up.result!.message).toContain('interrupted (the workspace received SIGTERM)');
    const exit = await w.proc.exited;
    expect(exit.code).toBe(0);
    expect(w.proc.output()).toContain('SIGTERM received');

    // A new workspace on the same project and backend: no lock left behind.
    const again = await serve({ name: 'dev', create: true, config: [] });
    const up2 = await operate(again.base, { type: 'up', stack: 'dev' }, { onLine: record });
    expect(up2.result).toMatchObject({
      state: 'succeeded',
      outputs: { out: { value: 'slept 8s: done', secret: false } },
    });
  });

  it('a second signal exits at once', async () => {
    project({
      'Pulumi.yaml': [
        'name: hard',
        'runtime: yaml',
        'resources:',
        ...testResource('slow', 'Sleep', { seconds: 30 }),
        '',
      ].join('\n'),
    });
    const w = await serve({ name: 'dev', create: true, config: [] });
    let creating = false;
    void operate(
      w.base,
      { type: 'up', stack: 'dev' },
      {
        onLine: (l) => {
          if (
            l.kind === 'event' &&
            (l.event.resourcePreEvent as { metadata?: { type?: string } } | undefined)?.metadata?.type ===
              'agenttest:index:Sleep'
          )
            creating = true;
        },
      },
    ).catch(() => undefined);
    while (!creating) await sleep(50);
    w.proc.child.kill('SIGTERM');
    await sleep(300);
    w.proc.child.kill('SIGTERM');
    const exit = await w.proc.exited;
    // 0 would mean it waited for Pulumi to finish; 1 is the immediate exit.
    expect(exit.code).toBe(1);
    expect(w.proc.output()).toContain('second SIGTERM: exiting now');
    // The CLI was killed with its process group: no plugin of this workspace is left running.
    await eventually(
      'no process of this workspace left',
      () => (processesUnder(suite.root).length === 0 ? true : undefined),
      10_000,
    );
  });
});

afterAll(() => {
  // Secret config and secret outputs never appear in anything printed or streamed.
  const all = [...capturedOutput, ...streamed].join('\n');
  expect(all.length).toBeGreaterThan(0);
  for (const s of [PASSWORD, API_KEY]) expect(all).not.toContain(s);
  console.log(`agent timings (ms): ${JSON.stringify(timings)}`);
});
