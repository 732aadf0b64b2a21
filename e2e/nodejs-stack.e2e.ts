/**
 * Issue 20: a Node.js program from a git repository, in the default workspace image (the stand-in
 * of pulumi/pulumi:<version>-nonroot, which has Node.js and npm) and in pulumi/pulumi-base (no
 * Node.js). The repository vendors its dependencies (node_modules and package-lock.json committed,
 * e2e/testbed/npm-project.ts), since the test network has no npm registry; the Stack sets
 * `npm_config_offline=true` through `envRefs` so that `pulumi install` (the language host's
 * `npm install`) uses what is there and asks no registry.
 */
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { StackSpec } from '../schemas/generated/types';
import { e2eStackSpec, eventually, condition, type Operator } from './harness';
import { e2eSuite } from './suite';
import { startGitServer, type GitServer } from './testbed/git-server';
import { ensureImages } from './testbed/images/containerd';
import { requireTestbedEnvironment } from './testbed/node/environment';
import { writeVendoredProject } from './testbed/npm-project';

let op: Operator;
const { recordTiming } = e2eSuite('nodejs-stack', undefined, (started) => (op = started));

const DEFAULT_IMAGE = 'pulumi/pulumi:3.274.1-nonroot';
const BASE_IMAGE = 'pulumi/pulumi-base:3.274.1-nonroot';
const SECRET = 'nodejs-stack-secret-7f3a';

let git: GitServer;
let head: string;
let work: string;

const PROGRAM = [
  "const pulumi = require('@pulumi/pulumi');",
  'const config = new pulumi.Config();',
  "exports.greeting = config.require('greeting');",
  'exports.nodeVersion = process.version;',
  `exports.token = pulumi.secret('${SECRET}');`,
  '',
].join('\n');

beforeAll(async () => {
  // The default image is on every test node; pulumi-base's stand-in is not.
  await ensureImages(requireTestbedEnvironment().containerdSocket, { images: ['pulumiBase'] });
  git = await startGitServer();
  git.createRepo('infra');
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-nodejs-stack-'));
  const started = Date.now();
  const vendored = writeVendoredProject(path.join(work, 'tree', 'app'), 'nodeapp', {
    'Pulumi.yaml': 'name: nodeapp\nruntime: nodejs\ndescription: a Node.js program with its dependencies vendored\n',
    'index.js': PROGRAM,
  });
  const installed = Date.now();
  head = git.commitTree('infra', 'main', path.join(work, 'tree'), 'a Node.js program, node_modules committed');
  const detail =
    `npm install --offline ${installed - started} ms, git commit and push ${Date.now() - installed} ms; ` +
    `node_modules: ${vendored.packages} packages, ${vendored.files} files, ${(vendored.bytes / 1e6).toFixed(0)} MB; ` +
    `bare repository ${(duSync(path.join(git.root, 'repos', 'infra.git')) / 1e6).toFixed(1)} MB`;
  recordTiming('vendored Node.js repository: build and push', started, detail);
}, 300_000);

afterAll(async () => {
  await git?.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

/** Bytes of the files under `dir`. */
function duSync(dir: string): number {
  return fs
    .readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .reduce((n, e) => n + fs.statSync(path.join(e.parentPath, e.name)).size, 0);
}

/** The Node.js git Stack: branch `main` of the test repository, `app/`, npm offline, in `image` if given. */
function nodejsStack(ns: string, name: string, image?: string): k8s.KubernetesObject {
  const spec: StackSpec = e2eStackSpec({
    stack: 'dev',
    projectRepo: `${git.baseUrl}/infra.git`,
    branch: 'main',
    repoDir: 'app',
    config: { greeting: 'hello from Node.js' },
    envRefs: {
      PULUMI_CONFIG_PASSPHRASE: { type: 'Literal', literal: { value: 'e2e-passphrase' } },
      // No registry: install from node_modules as committed, and ask npm for nothing else.
      npm_config_offline: { type: 'Literal', literal: { value: 'true' } },
      npm_config_audit: { type: 'Literal', literal: { value: 'false' } },
      npm_config_fund: { type: 'Literal', literal: { value: 'false' } },
      npm_config_update_notifier: { type: 'Literal', literal: { value: 'false' } },
    },
  });
  if (image) spec.workspaceTemplate!.spec!.image = image;
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: ns },
    spec,
  } as k8s.KubernetesObject;
}

const pulumiImage = async (ns: string, stack: string): Promise<string | undefined> =>
  (await op.core.readNamespacedPod({ namespace: ns, name: `${stack}-workspace-0` })).spec?.containers.find(
    (c) => c.name === 'pulumi',
  )?.image;

describe('a Node.js git Stack', () => {
  it('reaches Ready in the default image, installing from the committed node_modules with npm offline', async () => {
    const ns = await op.namespace('nodejs-default');
    const started = Date.now();
    await op.objects.create(nodejsStack(ns, 'app'));
    const stack = await op.readyStack(ns, 'app');
    const log = await op.logs(ns, 'app-workspace-0', 'pulumi');
    const install = /dependencies installed ms=(\d+)/.exec(log)?.[1];
    recordTiming('Node.js git Stack, default image: apply to Ready', started, `pulumi install ${install} ms`);

    expect(stack.status?.lastUpdate).toMatchObject({
      type: 'up',
      state: 'succeeded',
      lastSuccessfulCommit: head,
      failures: 0,
    });
    expect(stack.status?.projectInfo).toEqual({ name: 'nodeapp', runtime: 'nodejs' });
    expect(stack.status?.outputs).toEqual({
      greeting: 'hello from Node.js',
      nodeVersion: expect.stringMatching(/^v\d+\.\d+\.\d+$/),
      token: '[secret]',
    });
    expect(await pulumiImage(ns, 'app')).toBe(DEFAULT_IMAGE);
    expect(install).toBeDefined();
    // The secret reached neither the Stack nor the workspace's log.
    expect(JSON.stringify(stack)).not.toContain(SECRET);
    expect(log).not.toContain(SECRET);
  }, 360_000);

  it('stalls in pulumi-base, which has no Node.js, saying so and which image to use; the default image recovers it', async () => {
    const ns = await op.namespace('nodejs-base');
    const started = Date.now();
    await op.objects.create(nodejsStack(ns, 'app', BASE_IMAGE));
    const stalled = await eventually(
      'the Stack to be Stalled by the workspace',
      async () => {
        const s = await op.getStack(ns, 'app');
        return condition(s, 'Stalled')?.status === 'True' ? s : undefined;
      },
      240_000,
      500,
    );
    const message = condition(stalled, 'Stalled')?.message ?? '';
    recordTiming('Node.js git Stack, pulumi-base: apply to Stalled', started, message);
    expect(condition(stalled, 'Stalled')?.reason).toBe('WorkspaceFailed');
    expect(message).toMatch(
      /^InstallationFailed: the project's runtime is nodejs, but this workspace image has no Node\.js/,
    );
    expect(message).toContain('no node on PATH /pulumi/bin:');
    expect(message).toContain(`set workspaceTemplate.spec.image to an image with Node.js, such as ${DEFAULT_IMAGE}`);
    expect(condition(stalled, 'Ready')).toMatchObject({ status: 'False' });
    expect(stalled.status?.lastUpdate).toBeUndefined();
    expect(await pulumiImage(ns, 'app')).toBe(BASE_IMAGE);

    // What the message says to do: the image with Node.js.
    const fixed = Date.now();
    await op.patchStack(ns, 'app', { spec: { workspaceTemplate: { spec: { image: DEFAULT_IMAGE } } } });
    const stack = await op.readyStack(ns, 'app');
    recordTiming('Node.js git Stack: pulumi-base to the default image, to Ready', fixed);
    expect(stack.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastSuccessfulCommit: head });
    expect(stack.status?.outputs).toMatchObject({ greeting: 'hello from Node.js', token: '[secret]' });
    expect(condition(stack, 'Stalled')).toBeUndefined();
    expect(await pulumiImage(ns, 'app')).toBe(DEFAULT_IMAGE);
  }, 480_000);
});
