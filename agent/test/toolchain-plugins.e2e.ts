/**
 * The workspace with `pulumi-resource-command`: YAML programs with real command:local:Command
 * resources whose commands write files the test reads back.
 *
 * The provider is the toolchain's real one where e2e/toolchain/build.sh could build it, else the
 * test-bed provider agent/testkit/command-provider.ts (the Go module proxy of this machine refuses the
 * real one); the test output says which. Either way it is installed into the test's PULUMI_HOME as
 * versions.pulumiCommand and the programs pin that version. Other real resources are covered by
 * serve.e2e.ts (test provider plugin), the Node.js language host and dynamic provider by
 * nodejs-project.e2e.ts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { versions } from '../../e2e/testbed/toolchain';
import type { StreamLine } from '../src/api';
import { capturedOutput, pulumiEnv, useCommandProvider, writeFiles } from './helpers';
import { startWorkspace, workspaceSuite } from './workspace';
import { operate } from './workspace-client';

const VERSION = versions.pulumiCommand.replace(/^v/, '');
const TOKEN = 'command-env-secret-7b1f';
const QUIET = 'quiet-marker-e4c2';
const streamed: string[] = [];
const report: string[] = [];
const suite = workspaceSuite('plugins');

function record(line: StreamLine): void {
  if (line.kind !== 'result') streamed.push(JSON.stringify(line));
}

/** The messages of the engine's diagnostic events in a stream (where provider log lines go). */
function diagnostics(lines: StreamLine[]): string[] {
  return lines.flatMap((l) => {
    const diag = l.kind === 'event' ? (l.event.diagnosticEvent as { message?: string } | undefined) : undefined;
    return diag?.message !== undefined ? [diag.message.replace(/\n$/, '')] : [];
  });
}

/** Every file under a directory, concatenated (the backend's state and history). */
function readTree(dir: string): string {
  let all = '';
  for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, d.name);
    all += d.isDirectory() ? readTree(p) : fs.readFileSync(p, 'latin1');
  }
  return all;
}

/** The program: `hello` (environment with a secret, update and delete commands) and `stamp` (triggers, dir, stdin, interpreter, logging). */
function program(o: { helloCreate: string; trigger: string; outDir: string }): string {
  return [
    'name: cmdproj',
    'runtime: yaml',
    'config:',
    '  token:',
    '    type: string',
    '    secret: true',
    'resources:',
    '  hello:',
    '    type: command:local:Command',
    '    properties:',
    `      create: ${JSON.stringify(o.helloCreate)}`,
    // PULUMI_COMMAND_STDOUT: the stdout of the last create/update, set for delete.
    '      delete: \'echo "deleted after: $PULUMI_COMMAND_STDOUT" > deleted.txt\'',
    '      environment:',
    '        NAME: command',
    '        TOKEN: ${token}',
    '    options:',
    `      version: ${VERSION}`,
    '  stamp:',
    '    type: command:local:Command',
    '    properties:',
    `      create: 'read line; echo "create $line" >> runs.log; echo "${QUIET} $line"'`,
    `      delete: 'echo "delete $(cat)" >> runs.log'`,
    `      stdin: ${o.trigger}`,
    `      dir: ${JSON.stringify(o.outDir)}`,
    '      interpreter: ["/bin/sh", "-c"]',
    '      logging: none',
    `      triggers: ["${o.trigger}"]`,
    '    options:',
    `      version: ${VERSION}`,
    'outputs:',
    '  said: ${hello.stdout}',
    '  complained: ${hello.stderr}',
    '  token: ${hello.environment.TOKEN}',
    '  stamped: ${stamp.stdout}',
    '',
  ].join('\n');
}

it('creates, updates, replaces (triggers) and deletes command:local:Command resources', async () => {
  const env = pulumiEnv(suite.root);
  report.push(`provider: ${useCommandProvider(env)}`);
  const workspace = path.join(suite.root, 'share', 'workspace');
  const outDir = path.join(suite.root, 'out');
  fs.mkdirSync(outDir);
  const firstCreate =
    'echo "hello from $NAME"; printf %s "$TOKEN" > token.txt; echo "token has $(printf %s "$TOKEN" | wc -c) bytes" >&2';
  writeFiles(workspace, { 'Pulumi.yaml': program({ helloCreate: firstCreate, trigger: 'one', outDir }) });
  const w = await startWorkspace({
    root: suite.root,
    env,
    stack: { name: 'dev', create: true, config: [{ key: 'token', value: TOKEN, secret: true }] },
  });
  suite.track(w);

  // Create: both commands ran, with their environment, dir and stdin.
  const up = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
  expect(up.result).toMatchObject({
    state: 'succeeded',
    outputs: {
      said: { value: 'hello from command', secret: false },
      complained: { value: `token has ${TOKEN.length} bytes`, secret: false },
      // The secret stays a secret in the resource's outputs (and so in the stack output taken from them).
      token: { value: TOKEN, secret: true },
      stamped: { value: `${QUIET} one`, secret: false },
    },
  });
  expect(up.result!.resourceChanges).toMatchObject({ create: 3 });
  // The command ran in the program's directory (the default `dir`) and got the secret.
  expect(fs.readFileSync(path.join(workspace, 'token.txt'), 'utf8')).toBe(TOKEN);
  expect(fs.readFileSync(path.join(outDir, 'runs.log'), 'utf8')).toBe('create one\n');
  // stdout/stderr reach the engine as progress messages, except with `logging: none`.
  const messages = diagnostics(up.lines);
  expect(messages).toContain('hello from command');
  expect(messages).toContain(`token has ${TOKEN.length} bytes`);
  expect(messages.some((m) => m.includes(QUIET))).toBe(false);

  // Nothing changed: nothing runs.
  const again = await operate(w.base, { type: 'up', stack: 'dev', expectNoChanges: true }, { onLine: record });
  expect(again.result).toMatchObject({ state: 'succeeded' });
  expect(fs.readFileSync(path.join(outDir, 'runs.log'), 'utf8')).toBe('create one\n');

  // A changed `create` (no `update` given) is an update that runs it again, with the previous stdout
  // in PULUMI_COMMAND_STDOUT.
  writeFiles(workspace, {
    'Pulumi.yaml': program({ helloCreate: 'echo "update saw: $PULUMI_COMMAND_STDOUT"', trigger: 'one', outDir }),
  });
  const update = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
  expect(update.result).toMatchObject({
    state: 'succeeded',
    outputs: { said: { value: 'update saw: hello from command', secret: false } },
  });
  expect(update.result!.resourceChanges).toMatchObject({ update: 1 });

  // Changed triggers replace the resource: the new one is created, then the old one deleted.
  writeFiles(workspace, {
    'Pulumi.yaml': program({ helloCreate: 'echo "update saw: $PULUMI_COMMAND_STDOUT"', trigger: 'two', outDir }),
  });
  const replace = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
  expect(replace.result).toMatchObject({
    state: 'succeeded',
    outputs: { stamped: { value: `${QUIET} two`, secret: false } },
  });
  expect(replace.result!.resourceChanges).toMatchObject({ replace: 1 });
  expect(fs.readFileSync(path.join(outDir, 'runs.log'), 'utf8')).toBe('create one\ncreate two\ndelete one\n');

  // Destroy runs each `delete` with the stored inputs and last stdout.
  const destroy = await operate(w.base, { type: 'destroy', stack: 'dev' }, { onLine: record });
  expect(destroy.result).toMatchObject({ type: 'destroy', state: 'succeeded' });
  expect(fs.readFileSync(path.join(workspace, 'deleted.txt'), 'utf8')).toBe(
    'deleted after: update saw: hello from command\n',
  );
  expect(fs.readFileSync(path.join(outDir, 'runs.log'), 'utf8')).toBe(
    'create one\ncreate two\ndelete one\ndelete two\n',
  );

  // The secret environment value is encrypted in the state and its history, never in plain text.
  expect(readTree(path.join(suite.root, 'backend'))).not.toContain(TOKEN);
}, 300_000);

it('reports a failing command with its exit status and output', async () => {
  const env = pulumiEnv(suite.root);
  useCommandProvider(env);
  writeFiles(path.join(suite.root, 'share', 'workspace'), {
    'Pulumi.yaml': [
      'name: cmdfail',
      'runtime: yaml',
      'resources:',
      '  broken:',
      '    type: command:local:Command',
      '    properties:',
      `      create: 'echo "about to fail"; echo "disk quota exceeded" >&2; exit 3'`,
      '    options:',
      `      version: ${VERSION}`,
      '',
    ].join('\n'),
  });
  const w = await startWorkspace({ root: suite.root, env, stack: { name: 'dev', create: true, config: [] } });
  suite.track(w);
  const up = await operate(w.base, { type: 'up', stack: 'dev' }, { onLine: record });
  expect(up.result).toMatchObject({ type: 'up', state: 'failed', reason: 'UpdateFailed' });
  expect(up.result!.message).toMatch(/^up failed: /);
  expect(up.result!.message).toContain(
    'exit status 3: running "echo \\"about to fail\\"; echo \\"disk quota exceeded\\" >&2; exit 3"',
  );
  expect(up.result!.message).toContain('disk quota exceeded');
});

afterAll(() => {
  // The secret environment value never appears in anything printed or streamed.
  const all = [...capturedOutput, ...streamed].join('\n');
  expect(all.length).toBeGreaterThan(0);
  expect(all).not.toContain(TOKEN);
  console.log(report.join('\n'));
});
