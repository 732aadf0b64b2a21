/**
 * The workspace with the toolchain's own plugins: pulumi-resource-command (a YAML program with a
 * real command:local:Command) and pulumi-language-nodejs + the dynamic-provider shim (a Node.js
 * program with a pulumi.dynamic.Resource: dependencies install once, the second operation is warm).
 *
 * These need binaries e2e/toolchain/build.sh builds from the Go module proxy; where the proxy does
 * not serve them (recorded in the toolchain's .unavailable files) these tests fail with
 * ToolchainMissingError naming them. The same behaviours are covered with the test provider plugin
 * in serve.e2e.ts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { WorkspaceStackSpec } from '../../contract';
import { toolchain, versions } from '../../e2e/testbed/toolchain';
import type { StreamLine, WorkspaceInfo } from '../src/api';
import { capturedOutput, ensureBuilt, installPlugin, pulumiEnv, REPO, tmpDir, writeFiles } from './helpers';
import { startWorkspace, type RunningWorkspace } from './workspace';
import { getJson, operate } from './workspace-client';

const SECRET_OUTPUT = 'dynamic-secret-output-55aa';
const streamed: string[] = [];
const timings: Record<string, number> = {};
let root: string;
let running: RunningWorkspace[] = [];

beforeAll(() => ensureBuilt());
beforeEach(() => {
  root = tmpDir('plugins');
});
afterEach(async () => {
  for (const w of running) await w.proc.stop();
  running = [];
  fs.rmSync(root, { recursive: true, force: true });
});

function record(line: StreamLine): void {
  if (line.kind !== 'result') streamed.push(JSON.stringify(line));
}

async function serve(env: Record<string, string>, stack: WorkspaceStackSpec): Promise<RunningWorkspace> {
  const w = await startWorkspace({ root, env, stack });
  running.push(w);
  return w;
}

it('runs a YAML program with a real command:local:Command (pulumi-resource-command)', async () => {
  const env = pulumiEnv(root, {}, ['pulumi', 'pulumiLanguageYaml', 'pulumiResourceCommand']);
  const version = versions.pulumiCommand.replace(/^v/, '');
  installPlugin(env, 'command', version, toolchain.binaries.pulumiResourceCommand);
  writeFiles(path.join(root, 'share', 'workspace'), {
    'Pulumi.yaml': [
      'name: cmdproj',
      'runtime: yaml',
      'resources:',
      '  hello:',
      '    type: command:local:Command',
      '    properties:',
      '      create: echo "hello from $NAME"',
      '      environment:',
      '        NAME: command',
      '    options:',
      `      version: ${version}`,
      'outputs:',
      '  said: ${hello.stdout}',
      '',
    ].join('\n'),
  });
  const w = await serve(env, { name: 'dev', create: true, config: [] });
  const up = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
  expect(up.result).toMatchObject({ state: 'succeeded', outputs: { said: { value: 'hello from command', secret: false } } });
  const again = await operate(w.base, { type: 'up', stack: 'dev', expectNoChanges: true }, { onLine: record });
  expect(again.result).toMatchObject({ state: 'succeeded' });
});

it('runs a Node.js program with a dynamic provider: installs once, second operation warm', async () => {
  const env = pulumiEnv(root, { NODE_PATH: path.join(REPO, 'node_modules') }, ['pulumi', 'pulumiLanguageNodejs', 'pulumiResourcePulumiNodejs']);
  writeFiles(path.join(root, 'share', 'workspace'), {
    'Pulumi.yaml': 'name: dynproj\nruntime: nodejs\n',
    // No registry here: @pulumi/pulumi comes from the repository's node_modules (NODE_PATH).
    // The preinstall script counts how often `pulumi install` ran npm.
    'package.json': JSON.stringify({ name: 'dynproj', version: '1.0.0', main: 'index.js', scripts: { preinstall: 'echo install >> installs.log' } }),
    'index.js': [
      "const pulumi = require('@pulumi/pulumi');",
      'const provider = {',
      '  async create(inputs) { return { id: `thing-${inputs.size}`, outs: { size: inputs.size, label: `size ${inputs.size}` } }; },',
      '  async diff(id, olds, news) { return { changes: olds.size !== news.size }; },',
      '  async update(id, olds, news) { return { outs: { size: news.size, label: `size ${news.size}` } }; },',
      '};',
      'class Thing extends pulumi.dynamic.Resource {',
      '  constructor(name, args) { super(provider, name, { label: undefined, ...args }, {}); }',
      '}',
      "const thing = new Thing('thing', { size: 1 });",
      'exports.label = thing.label;',
      `exports.token = pulumi.secret('${SECRET_OUTPUT}');`,
      '',
    ].join('\n'),
  });
  const t0 = Date.now();
  const w = await serve(env, { name: 'dev', create: true, config: [] });
  timings.nodeStartToReadyMs = Date.now() - t0;
  const first = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
  timings.nodeFirstUpMs = first.ms;
  timings.nodeColdTotalMs = Date.now() - t0;
  expect(first.result).toMatchObject({ state: 'succeeded', outputs: { label: { value: 'size 1', secret: false }, token: { value: SECRET_OUTPUT, secret: true } } });
  const second = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
  timings.nodeSecondUpMs = second.ms;
  expect(second.result).toMatchObject({ state: 'succeeded' });
  expect(((await getJson(w.base, '/v1/workspace')).body as WorkspaceInfo).installs).toBe(1);
  expect(fs.readFileSync(path.join(root, 'share', 'workspace', 'installs.log'), 'utf8').trim().split('\n')).toEqual(['install']);
});

afterAll(() => {
  const all = [...capturedOutput, ...streamed].join('\n');
  expect(all).not.toContain(SECRET_OUTPUT);
  // eslint-disable-next-line no-console
  console.log(`agent timings (ms): ${JSON.stringify(timings)}`);
});
