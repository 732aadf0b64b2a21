/**
 * `pko-agent serve` with a Node.js project on disk (`runtime: nodejs`): a package.json depending on
 * @pulumi/pulumi, a pulumi.dynamic.Resource (run by the toolchain's dynamic-provider shim), plain and
 * secret config, a secret output. Dependencies install once (`pulumi install` runs npm once) and the
 * second operation on the same workspace is warm; the cold and warm times are reported, not asserted.
 *
 * The language host is the toolchain's real pulumi-language-nodejs where e2e/toolchain/build.sh could
 * build it, else the test-bed host agent/testkit/language-nodejs.ts (the Go module proxy of this
 * machine refuses the real one); the test output says which.
 *
 * No network: @pulumi/pulumi is a `file:` dependency on the repository's own copy (npm links it;
 * `npm_config_offline=true` from pulumiEnv).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { maskOutputs } from '../../contract';
import type { StreamLine, WorkspaceInfo } from '../src/api';
import { capturedOutput, pulumiEnv, REPO, useNodejsLanguageHost, writeFiles } from './helpers';
import { startWorkspace, workspaceSuite } from './workspace';
import { getJson, operate } from './workspace-client';

const SECRET_OUTPUT = 'dynamic-secret-output-55aa';
const SECRET_CONFIG = 'node-secret-config-3e9d';
const PROGRAM_LINE = 'the Node.js program ran';
const streamed: string[] = [];
const report: string[] = [];
const suite = workspaceSuite('nodejs');

function record(line: StreamLine): void {
  if (line.kind !== 'result') streamed.push(JSON.stringify(line));
}

it('runs a Node.js project with a dynamic provider: installs once, the second operation is warm', async () => {
  const env = pulumiEnv(suite.root, {}, ['pulumi', 'pulumiResourcePulumiNodejs']);
  const host = useNodejsLanguageHost(env);
  report.push(`language host: ${host}`);
  const workspace = path.join(suite.root, 'share', 'workspace');
  writeFiles(workspace, {
    'Pulumi.yaml': 'name: dynproj\nruntime: nodejs\n',
    // The preinstall script counts how often `pulumi install` ran npm.
    'package.json': JSON.stringify({
      name: 'dynproj',
      version: '1.0.0',
      main: 'index.js',
      scripts: { preinstall: 'echo install >> installs.log' },
      dependencies: { '@pulumi/pulumi': `file:${path.join(REPO, 'node_modules', '@pulumi', 'pulumi')}` },
    }),
    'index.js': [
      "const pulumi = require('@pulumi/pulumi');",
      'const config = new pulumi.Config();',
      'const provider = {',
      '  async create(inputs) { return { id: `thing-${inputs.size}`, outs: { size: inputs.size, label: `size ${inputs.size}` } }; },',
      '  async diff(id, olds, news) { return { changes: olds.size !== news.size }; },',
      '  async update(id, olds, news) { return { outs: { size: news.size, label: `size ${news.size}` } }; },',
      '};',
      'class Thing extends pulumi.dynamic.Resource {',
      '  constructor(name, args) { super(provider, name, { label: undefined, ...args }, {}); }',
      '}',
      "const thing = new Thing('thing', { size: 1 });",
      `console.log('${PROGRAM_LINE}');`,
      'exports.label = thing.label;',
      "exports.greeting = config.require('greeting');",
      "exports.apiKeyLength = config.requireSecret('apiKey').apply((k) => k.length);",
      `exports.token = pulumi.secret('${SECRET_OUTPUT}');`,
      '',
    ].join('\n'),
  });

  const t0 = Date.now();
  const w = await startWorkspace({
    root: suite.root,
    env,
    stack: {
      name: 'dev',
      create: true,
      config: [
        { key: 'greeting', value: 'hello', secret: false },
        { key: 'apiKey', value: SECRET_CONFIG, secret: true },
      ],
    },
  });
  suite.track(w);
  const readyMs = Date.now() - t0;
  // A real install: npm linked @pulumi/pulumi into the project's own node_modules.
  expect(fs.lstatSync(path.join(workspace, 'node_modules', '@pulumi', 'pulumi')).isSymbolicLink()).toBe(true);

  const first = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
  const coldMs = Date.now() - t0;
  expect(first.result).toMatchObject({
    state: 'succeeded',
    projectInfo: { name: 'dynproj', runtime: 'nodejs' },
    resourceChanges: { create: 2 },
  });
  expect(first.result!.outputs).toEqual({
    label: { value: 'size 1', secret: false },
    greeting: { value: 'hello', secret: false },
    apiKeyLength: { value: SECRET_CONFIG.length, secret: true },
    token: { value: SECRET_OUTPUT, secret: true },
  });
  const outputs = first.result!.outputs!;
  const secretKeys = Object.keys(outputs).filter((k) => outputs[k]!.secret);
  const values = Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, v.value]));
  expect(maskOutputs(values, secretKeys)).toEqual({
    label: 'size 1',
    greeting: 'hello',
    apiKeyLength: '[secret]',
    token: '[secret]',
  });
  // The program's own stdout reaches the operation's output (language host → CLI → workspace).
  expect(first.lines.some((l) => l.kind === 'output' && l.line.includes(PROGRAM_LINE))).toBe(true);

  // Same workspace: nothing installed again, the program runs again, the dynamic provider sees no change.
  const second = await operate(w.base, { type: 'up', stack: 'dev', expectNoChanges: true }, { onLine: record });
  expect(second.result).toMatchObject({ state: 'succeeded', outputs: { label: { value: 'size 1', secret: false } } });
  expect(((await getJson(w.base, '/v1/workspace')).body as WorkspaceInfo).installs).toBe(1);
  expect(fs.readFileSync(path.join(workspace, 'installs.log'), 'utf8').trim().split('\n')).toEqual(['install']);

  report.push(
    `cold ${coldMs} ms (process start → Ready ${readyMs} ms: pulumi install with npm install, stack init, config; then first up ${first.ms} ms) ` +
      `vs warm ${second.ms} ms (second up on the same workspace, nothing installed); cold/warm = ${(coldMs / second.ms).toFixed(2)}`,
  );
}, 300_000);

afterAll(() => {
  const all = [...capturedOutput, ...streamed].join('\n');
  expect(all).not.toContain(SECRET_OUTPUT);
  expect(all).not.toContain(SECRET_CONFIG);
  // Measured, reported, never asserted (2 shared cores).
  console.log(`nodejs-project.e2e:\n  ${report.join('\n  ')}`);
});
