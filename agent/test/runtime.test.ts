/**
 * A project whose language runtime the workspace image lacks (a Node.js project in pulumi/pulumi-base):
 * the workspace says what is missing and which image to use, and stops retrying. The Workspace runs
 * against a stand-in `pulumi` (a shell script) that fails `pulumi install` as the CLI does there.
 */
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { WorkspaceStatus } from '../../contract';
import { Redactor } from '../src/lib/redact';
import { missingRuntime } from '../src/serve/runtime';
import { StatusReporter } from '../src/serve/status';
import { Workspace } from '../src/serve/workspace';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-runtime-'));

/** An executable file `name` in `dir` (made if needed); returns `dir`. */
function executable(dir: string, name: string, script = '#!/bin/sh\nexit 0\n'): string {
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, name), script, { mode: 0o755 });
  return dir;
}

describe('missingRuntime', () => {
  const withNode = executable(path.join(root, 'with-node'), 'node');
  const withPython = executable(path.join(root, 'with-python'), 'python');
  const empty = path.join(root, 'empty');
  fs.mkdirSync(empty, { recursive: true });
  // A directory named like the executable, and a file that is not executable, are not it.
  fs.mkdirSync(path.join(root, 'dir-named-node', 'node'), { recursive: true });
  fs.writeFileSync(path.join(empty, 'node'), '', { mode: 0o644 });

  it('names the runtime, what was looked for on PATH, and the official image of the same Pulumi release', () => {
    const message = missingRuntime('nodejs', `${empty}:${path.join(root, 'dir-named-node')}`, '3.274.1');
    expect(message).toBe(
      "the project's runtime is nodejs, but this workspace image has no Node.js " +
        `(no node on PATH ${empty}:${path.join(root, 'dir-named-node')}): set workspaceTemplate.spec.image to an ` +
        'image with Node.js, such as pulumi/pulumi:3.274.1-nonroot or an image built FROM it',
    );
    expect(missingRuntime('python', empty, '3.274.1')).toContain('no Python (no any of python3, python on PATH');
    expect(missingRuntime('dotnet', '', undefined)).toContain('on PATH (empty)');
    expect(missingRuntime('dotnet', '', undefined)).toContain('pulumi/pulumi:<version>-nonroot');
  });

  it('says nothing when the runtime is on PATH, or for runtimes that need none in the image', () => {
    expect(missingRuntime('nodejs', `${empty}:${withNode}`, '3.274.1')).toBeUndefined();
    expect(missingRuntime('python', withPython, '3.274.1')).toBeUndefined();
    expect(missingRuntime('yaml', empty, '3.274.1')).toBeUndefined();
    expect(missingRuntime('', empty, '3.274.1')).toBeUndefined();
  });
});

describe('a workspace whose image lacks the Node.js runtime', () => {
  const savedPath = process.env.PATH;
  afterEach(() => {
    process.env.PATH = savedPath;
  });

  /** A Node.js project, and a `pulumi` whose install fails as in an image without Node.js. */
  function setUp(name: string): { workDir: string; cliDir: string; installs: () => number } {
    const dir = path.join(root, name);
    const workDir = path.join(dir, 'project');
    fs.mkdirSync(workDir, { recursive: true });
    fs.writeFileSync(path.join(workDir, 'Pulumi.yaml'), 'name: app\nruntime: nodejs\n');
    const log = path.join(dir, 'installs.log');
    const cliDir = executable(
      path.join(dir, 'cli'),
      'pulumi',
      [
        '#!/bin/sh',
        'case "$1" in',
        '  version) echo v3.274.1 ;;',
        `  install) echo install >> '${log}'`,
        "    echo '/pulumi/bin/pulumi-language-nodejs: 2: exec: node: not found' >&2",
        "    echo 'error: load language plugin nodejs: could not read plugin [/pulumi/bin/pulumi-language-nodejs]: exit status 127' >&2",
        '    exit 1 ;;',
        '  *) exit 1 ;;',
        'esac',
        '',
      ].join('\n'),
    );
    const installs = (): number => (fs.existsSync(log) ? fs.readFileSync(log, 'utf8').trim().split('\n').length : 0);
    return { workDir, cliDir, installs };
  }

  function workspace(workDir: string): { ws: Workspace; reports: WorkspaceStatus[] } {
    const reporter = new StatusReporter(undefined);
    const reports: WorkspaceStatus[] = [];
    jest.spyOn(reporter, 'report').mockImplementation((s) => void reports.push(s));
    const ws = new Workspace({
      workDir,
      stack: { name: 'dev', create: true, config: [] },
      hash: 'h1',
      reporter,
      redactor: new Redactor(),
      logLevel: 0,
      retryDelayMs: 10,
      maxRetryDelayMs: 10,
    });
    return { ws, reports };
  }

  it('fails once with a message that names Node.js and the image to use, and does not retry', async () => {
    const { workDir, cliDir, installs } = setUp('no-node');
    process.env.PATH = cliDir;
    const { ws, reports } = workspace(workDir);
    await ws.initialize(); // returns: nothing to retry
    expect(installs()).toBe(1);
    expect(ws.status()).toMatchObject({ state: 'Failed', reason: 'InstallationFailed', pulumiVersion: '3.274.1' });
    expect(ws.status().message).toBe(
      "the project's runtime is nodejs, but this workspace image has no Node.js " +
        `(no node on PATH ${cliDir}): set workspaceTemplate.spec.image to an image with Node.js, ` +
        'such as pulumi/pulumi:3.274.1-nonroot or an image built FROM it (pulumi install: error: load language ' +
        'plugin nodejs: could not read plugin [/pulumi/bin/pulumi-language-nodejs]: exit status 127)',
    );
    expect(reports.map((r) => r.state)).toEqual(['Installing', 'Failed']);
  });

  it("keeps the CLI's message and retries when Node.js is there (the install failed for another reason)", async () => {
    const { workDir, cliDir, installs } = setUp('with-node');
    process.env.PATH = `${cliDir}:${executable(path.join(root, 'with-node', 'node-bin'), 'node')}`;
    const { ws } = workspace(workDir);
    const done = ws.initialize();
    const deadline = Date.now() + 10_000;
    while (installs() < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    await ws.shutdown('test');
    await done;
    expect(installs()).toBeGreaterThanOrEqual(2);
    expect(ws.status()).toMatchObject({
      state: 'Failed',
      reason: 'InstallationFailed',
      message:
        'pulumi install failed: error: load language plugin nodejs: could not read plugin ' +
        '[/pulumi/bin/pulumi-language-nodejs]: exit status 127',
    });
  });
});
