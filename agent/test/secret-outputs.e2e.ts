/**
 * Secret stack outputs of an `up` without `pulumi stack output --show-secrets` (stack-state.ts),
 * against the real Pulumi CLI: passphrase stacks on a file:// backend (plain, gzipped and
 * zstd-compressed state, the passphrase from the environment or a file), compared with what
 * `pulumi stack output --json --show-secrets` says; a changed secret value is seen at once; a secret
 * holding an asset still goes through the CLI. Every CLI call of the workspace is recorded (a
 * PULUMI_CLI wrapper); no secret value is ever printed or streamed.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { WorkspaceStackSpec } from '../../contract';
import { toolchain } from '../../e2e/testbed/toolchain';
import type { StreamLine } from '../src/api';
import { capturedOutput, pulumiEnv, testResource, writeFiles } from './helpers';
import { startWorkspace, workspaceSuite, type RunningWorkspace } from './workspace';
import { operate } from './workspace-client';

const SECRET_CONFIG = 'cfg-secret-5d1e-never-printed';
const SECRETS = [SECRET_CONFIG, 'first-secret-9b2c', 'second-secret-47aa', 'hello-asset-text-e3'];
const streamed: string[] = [];

const suite = workspaceSuite('secret-outputs');

const workDir = (): string => path.join(suite.root, 'share', 'workspace');
const cliLog = (): string => path.join(suite.root, 'cli-calls.log');
/** The workspace's CLI calls, first two arguments each ("up --yes", "stack output", …). */
const cliCalls = (): string[] =>
  fs.existsSync(cliLog())
    ? fs
        .readFileSync(cliLog(), 'utf8')
        .split('\n')
        .filter((l) => l !== '')
    : [];

function program(secretValue: string): string {
  return [
    'name: secretouts',
    'runtime: yaml',
    'config:',
    '  apiKey:',
    '    type: string',
    'resources:',
    ...testResource('res', 'Sleep', { seconds: 0, message: 'resource message' }),
    '      additionalSecretOutputs: [result]',
    'outputs:',
    '  plain: plain value',
    '  count: 3',
    '  token:',
    '    fn::secret: ' + secretValue,
    '  fromConfig: ${apiKey}',
    '  fromResource: ${res.result}',
    '  mixed:',
    '    visible: [1, 2]',
    '    hidden:',
    '      fn::secret: ' + secretValue,
    '',
  ].join('\n');
}

/** Starts a workspace whose CLI calls are recorded. */
async function serve(
  files: Record<string, string>,
  extraEnv: Record<string, string | undefined> = {},
): Promise<{ w: RunningWorkspace; env: Record<string, string> }> {
  writeFiles(workDir(), files);
  const wrapper = path.join(suite.root, 'pulumi-wrapper');
  fs.writeFileSync(
    wrapper,
    `#!/bin/sh\necho "$1 $2" >> ${JSON.stringify(cliLog())}\nexec ${JSON.stringify(toolchain.binaries.pulumi)} "$@"\n`,
    { mode: 0o755 },
  );
  const env = pulumiEnv(suite.root, { PULUMI_CLI: wrapper, PKO_AGENT_LOG_LEVEL: 'debug', ...extraEnv });
  const stack: WorkspaceStackSpec = {
    name: 'dev',
    create: true,
    config: [{ key: 'apiKey', value: SECRET_CONFIG, secret: true }],
  };
  const w = await startWorkspace({ root: suite.root, env, stack });
  suite.track(w);
  return { w, env };
}

async function up(w: RunningWorkspace) {
  fs.rmSync(cliLog(), { force: true });
  const r = await operate(
    w.base,
    { type: 'up', stack: 'dev' },
    { onLine: (l: StreamLine) => (l.kind !== 'result' ? streamed.push(JSON.stringify(l)) : undefined) },
  );
  expect(r.result).toMatchObject({ type: 'up', state: 'succeeded' });
  return r.result!;
}

/** What `pulumi stack output --json --show-secrets` says (the values the agent must report). */
function cliOutputs(env: Record<string, string>): Record<string, unknown> {
  // The real CLI, not the recording wrapper PULUMI_CLI points at.
  const plain = { ...env };
  delete plain.PULUMI_CLI;
  return JSON.parse(
    execFileSync(
      toolchain.binaries.pulumi,
      ['stack', 'output', '--json', '--show-secrets', '--stack', 'dev', '--non-interactive'],
      { cwd: workDir(), env: plain, encoding: 'utf8' },
    ),
  ) as Record<string, unknown>;
}

const expected = (secretValue: string) => ({
  count: { value: 3, secret: false },
  fromConfig: { value: SECRET_CONFIG, secret: true },
  fromResource: { value: 'slept 0s: resource message', secret: true },
  mixed: { value: { visible: [1, 2], hidden: secretValue }, secret: true },
  plain: { value: 'plain value', secret: false },
  token: { value: secretValue, secret: true },
});

const values = (outputs: Record<string, { value: unknown }>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(outputs).map(([k, v]) => [k, v.value]));

describe('secret outputs of a passphrase stack', () => {
  it('file:// backend: read from the state file, no CLI call after `up`, a changed secret seen at once', async () => {
    const { w, env } = await serve({ 'Pulumi.yaml': program('first-secret-9b2c') });
    const first = await up(w);
    expect(first.outputs).toEqual(expected('first-secret-9b2c'));
    expect(cliCalls()).toEqual(['up --yes']);
    const again = await up(w); // no changes: the state is rewritten all the same
    expect(again.outputs).toEqual(expected('first-secret-9b2c'));
    expect(cliCalls()).toEqual(['up --yes']);
    writeFiles(workDir(), { 'Pulumi.yaml': program('second-secret-47aa') });
    const changed = await up(w);
    expect(changed.outputs).toEqual(expected('second-secret-47aa'));
    expect(cliCalls()).toEqual(['up --yes']);
    expect(values(changed.outputs!)).toEqual(cliOutputs(env));
    expect(w.proc.output()).toMatch(/secret stack outputs decrypted from the state source="state file"/);
  });

  it('gzipped state and the passphrase from a file: still no CLI call', async () => {
    writeFiles(suite.root, { 'passphrase.txt': 'test-passphrase\n' });
    const { w, env } = await serve(
      { 'Pulumi.yaml': program('first-secret-9b2c') },
      {
        PULUMI_DIY_BACKEND_GZIP: 'true',
        PULUMI_CONFIG_PASSPHRASE: undefined,
        PULUMI_CONFIG_PASSPHRASE_FILE: path.join(suite.root, 'passphrase.txt'),
      },
    );
    const r = await up(w);
    expect(r.outputs).toEqual(expected('first-secret-9b2c'));
    expect(cliCalls()).toEqual(['up --yes']);
    expect(fs.readdirSync(path.join(suite.root, 'backend', '.pulumi', 'stacks', 'secretouts'))).toContain(
      'dev.json.gz',
    );
    expect(values(r.outputs!)).toEqual(cliOutputs(env));
  });

  it('zstd state (not read here): `pulumi stack export` then decryption, never `stack output`', async () => {
    const { w, env } = await serve(
      { 'Pulumi.yaml': program('first-secret-9b2c') },
      { PULUMI_DIY_BACKEND_ZSTD: 'true' },
    );
    const r = await up(w);
    expect(r.outputs).toEqual(expected('first-secret-9b2c'));
    expect(cliCalls()).toEqual(['up --yes', 'stack export']);
    expect(fs.readdirSync(path.join(suite.root, 'backend', '.pulumi', 'stacks', 'secretouts'))).toContain(
      'dev.json.zst',
    );
    expect(values(r.outputs!)).toEqual(cliOutputs(env));
    expect(w.proc.output()).toMatch(/secret stack outputs decrypted from the state source="stack export"/);
  });

  it('a secret holding an asset: the values come from `pulumi stack output --show-secrets`', async () => {
    const { w, env } = await serve({
      'Pulumi.yaml': [
        'name: assetout',
        'runtime: yaml',
        'outputs:',
        '  bundle:',
        '    fn::secret:',
        '      fn::stringAsset: hello-asset-text-e3',
        '  token:',
        '    fn::secret: first-secret-9b2c',
        '',
      ].join('\n'),
    });
    const r = await up(w);
    expect(cliCalls()).toEqual(['up --yes', 'stack output']);
    expect(r.outputs!.token).toEqual({ value: 'first-secret-9b2c', secret: true });
    expect(r.outputs!.bundle!.secret).toBe(true);
    expect(values(r.outputs!)).toEqual(cliOutputs(env));
    expect(w.proc.output()).toContain('special values');
  });
});

afterAll(() => {
  const all = [...capturedOutput, ...streamed].join('\n');
  expect(all.length).toBeGreaterThan(0);
  for (const s of SECRETS) expect(all).not.toContain(s);
});
