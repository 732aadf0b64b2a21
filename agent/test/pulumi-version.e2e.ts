/**
 * `pko-agent serve` with the Pulumi CLI a user's image may hold: the toolchain's older pulumi
 * (older-clis.ts' tooOld, v3.197.0, first on PATH, with the current YAML host) and the current one.
 * Structured config on the older CLI is refused at once, naming both versions (the hooks make that
 * Stalled PulumiVersionTooLow); string and secret config work on both, byte-exact (`config set
 * --raw` on the current CLI, a newline for the older one to strip).
 */
import * as path from 'node:path';
import type { WorkspaceStatus } from '../../contract';
import { OLDER_CLIS } from '../../e2e/testbed/older-clis';
import { binDirOf, oldPulumiBinary, oldPulumiComponent, requireBinaries, versions } from '../../e2e/testbed/toolchain';
import type { WorkspaceInfo } from '../src/api';
import { PULUMI_CLI_VERSIONS } from '../src/serve/cli-version';
import { pulumiEnv, writeFiles } from './helpers';
import { startWorkspace, waitState, workspaceSuite } from './workspace';
import { getJson, operate } from './workspace-client';

const suite = workspaceSuite('pulumi-version');

/** The workspace's environment with the older CLI first on PATH. */
function oldCliEnv(): Record<string, string> {
  requireBinaries([oldPulumiBinary(OLDER_CLIS.tooOld)]);
  const env = pulumiEnv(suite.root);
  return { ...env, PATH: `${binDirOf(oldPulumiComponent(OLDER_CLIS.tooOld))}${path.delimiter}${env.PATH}` };
}

function project(): void {
  writeFiles(path.join(suite.root, 'share', 'workspace'), {
    'Pulumi.yaml': [
      'name: clicheck',
      'runtime: yaml',
      'config:',
      '  greeting:',
      '    type: string',
      '  password:',
      '    type: string',
      'outputs:',
      '  greetingOut: ${greeting}',
      '  passwordOut: ${password}',
      '',
    ].join('\n'),
  });
}

describe('an image whose Pulumi CLI is older than structured config needs', () => {
  it('fails the workspace as IncompatibleConfiguration, naming both versions, before installing', async () => {
    project();
    const w = suite.track(
      await startWorkspace({
        root: suite.root,
        env: oldCliEnv(),
        stack: {
          name: 'dev',
          create: true,
          config: [
            { key: 'greeting', value: 'hello', secret: false },
            { key: 'ports', value: [80, 443], secret: false },
          ],
        },
        waitReady: false,
      }),
    );
    const st: WorkspaceStatus = await waitState(w, 'Failed');
    expect(st).toMatchObject({ state: 'Failed', reason: 'IncompatibleConfiguration' });
    expect(st.pulumiVersion?.replace(/^v/, '')).toBe(OLDER_CLIS.tooOld.replace(/^v/, ''));
    expect(st.message).toBe(
      `the workspace image's Pulumi CLI is ${OLDER_CLIS.tooOld}; structured config (config set-all --json) ` +
        `needs v${PULUMI_CLI_VERSIONS.structuredConfig} or newer: use a newer Pulumi image in workspaceTemplate.spec.image`,
    );
    const info = (await getJson(w.base, '/v1/workspace')).body as WorkspaceInfo;
    expect(info).toMatchObject({ state: 'Failed', installs: 0 });
  });
});

describe.each([
  ['the older CLI', oldCliEnv, OLDER_CLIS.tooOld],
  ['the current CLI', () => pulumiEnv(suite.root), versions.pulumi],
])('string and secret config on %s', (_name, env, version) => {
  it('reach the program byte-exact, a trailing newline included', async () => {
    project();
    const password = 'line one\nline two\n';
    const w = suite.track(
      await startWorkspace({
        root: suite.root,
        env: env(),
        stack: {
          name: 'dev',
          create: true,
          config: [
            { key: 'greeting', value: 'hello', secret: false },
            { key: 'password', value: password, secret: true },
          ],
        },
      }),
    );
    const info = (await getJson(w.base, '/v1/workspace')).body as WorkspaceInfo;
    expect(info.pulumiVersion?.replace(/^v/, '')).toBe(version.replace(/^v/, ''));
    const up = await operate(w.base, { type: 'up', stack: 'dev' });
    expect(up.result).toMatchObject({ type: 'up', state: 'succeeded' });
    expect(up.result!.outputs).toEqual({
      greetingOut: { value: 'hello', secret: false },
      passwordOut: { value: password, secret: true },
    });
  });
});
