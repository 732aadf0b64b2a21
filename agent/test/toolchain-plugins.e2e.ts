/**
 * The workspace with the toolchain's pulumi-resource-command: a YAML program with a real
 * command:local:Command.
 *
 * It needs a binary e2e/toolchain/build.sh builds from the Go module proxy; where the proxy does not
 * serve it (recorded in the toolchain's .unavailable files) e2e/jest.config.js skips this file and
 * prints NOT RUN. Real resources through a provider plugin are covered by serve.e2e.ts with the test
 * provider plugin; the Node.js language host and dynamic provider by nodejs-project.e2e.ts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { toolchain, versions } from '../../e2e/testbed/toolchain';
import { ensureBuilt, installPlugin, pulumiEnv, tmpDir, writeFiles } from './helpers';
import { startWorkspace, type RunningWorkspace } from './workspace';
import { operate } from './workspace-client';

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
  const w = await startWorkspace({ root, env, stack: { name: 'dev', create: true, config: [] } });
  running.push(w);
  const up = await operate(w.base, { type: 'up', stack: 'dev' });
  expect(up.result).toMatchObject({ state: 'succeeded', outputs: { said: { value: 'hello from command', secret: false } } });
  const again = await operate(w.base, { type: 'up', stack: 'dev', expectNoChanges: true });
  expect(again.result).toMatchObject({ state: 'succeeded' });
});
