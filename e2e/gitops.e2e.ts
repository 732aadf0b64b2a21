/**
 * Issue 37, item 4: GitOps end to end. A Git repository of manifests (e2e/testdata/gitops: a
 * Program and a Stack deploying it, whose passphrase is a Secret reference) applied by Flux's real
 * kustomize-controller from the artifacts of Flux's real source-controller, both fetching from the
 * test bed's git server: the repository deploys, a commit that edits the Program changes the
 * Stack's outputs, a commit that deletes the Stack destroys it (`destroyOnFinalize`), and `render`
 * run on a clone of the same repository at each commit answers what the hooks answered in the
 * cluster.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import { parseOutput, runRender, type RenderedEntry } from '../hooks/test/render/run';
import { WORKSPACE_SPEC_HASH } from '../hooks/src/stack/workspace';
import { AGENT_IMAGE, checkpointResources, eventually, exists, type Operator } from './harness';
import { e2eSuite } from './suite';
import { startGitServer, type GitServer } from './testbed/git-server';
import { KUSTOMIZATIONS, startKustomizeController } from './testbed/kustomize-controller';
import { type ControllerProcess } from './testbed/source-controller';
import {
  FLUX_NAMESPACE,
  FLUX_SOURCE_GROUP,
  GIT_REPOSITORIES,
  startSourceController,
  type SourceController,
} from './testbed/source-controller';
import { REPO_ROOT } from './testbed/toolchain';

const NS = 'gitops';
const REPO = 'platform';
const TREE = join(REPO_ROOT, 'e2e', 'testdata', 'gitops');
const PROGRAM_FILE = 'platform/program.yaml';
let op: Operator;
let git: GitServer;
let source: SourceController;
let kustomize: ControllerProcess;
const { recordTiming, getStack, readyStack } = e2eSuite('gitops', NS, (started) => (op = started));

interface Conditioned {
  status?: { lastAppliedRevision?: string; conditions?: { type: string; status: string; message?: string }[] };
}

/** What `flux reconcile source git platform` does: fetch now rather than at the next interval. */
const reconcileSource = () =>
  op.custom.patchNamespacedCustomObject(
    {
      ...GIT_REPOSITORIES,
      namespace: FLUX_NAMESPACE,
      name: REPO,
      body: { metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': new Date().toISOString() } } },
    },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );

/** Waits until the Kustomization has applied `sha` and is Ready (with `wait: true`: every object it applied is healthy). */
const appliedReady = (sha: string) =>
  eventually(
    `Kustomization ${FLUX_NAMESPACE}/${REPO} to be Ready at ${sha}`,
    async () => {
      const k = (await op.custom.getNamespacedCustomObject({
        ...KUSTOMIZATIONS,
        namespace: FLUX_NAMESPACE,
        name: REPO,
      })) as Conditioned;
      const ready = k.status?.conditions?.find((c) => c.type === 'Ready');
      return k.status?.lastAppliedRevision === `main@sha1:${sha}` && ready?.status === 'True' ? k : undefined;
    },
    300_000,
    1000,
  );

/**
 * `render` of a clone of the repository at its current head, in the namespace the Kustomization
 * targets. The clone runs beside this process, not blocking it: the git server answering it is
 * this process's own.
 */
async function renderRepository(): Promise<{ programs: RenderedEntry[]; stacks: RenderedEntry[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'pko-gitops-render-'));
  await promisify(execFile)('git', ['clone', '--quiet', '--branch', 'main', `${git.baseUrl}/${REPO}.git`, dir], {
    timeout: 60_000,
  });
  // The hook server's settings that shape children, as the test bed sets them (testbed/operator.ts).
  const caFile = join(dir, 'program-server-ca.crt');
  writeFileSync(caFile, op.programServer.ca);
  const out = runRender(['-f', join(dir, 'platform'), '-n', NS, '-o', 'json'], '', {
    AGENT_IMAGE,
    PROGRAM_SERVER_URL: op.programServer.url,
    PROGRAM_SERVER_CA_FILE: caFile,
  });
  expect(out.stderr).toBe('');
  expect(out.code).toBe(0);
  return parseOutput(out.stdout);
}

type Child = k8s.KubernetesObject & { spec?: unknown; data?: Record<string, string> };
const childOf = (entry: RenderedEntry, key: 'children' | 'attachments', kind: string): Child => {
  const list = (entry.response[key] ?? []) as Child[];
  const found = list.find((c) => c.kind === kind);
  if (!found) throw new Error(`render answered no ${kind} for ${entry.namespace}/${entry.name}`);
  return found;
};

/** The rendered Program's artifact (the hook server's URL of it, its digest) is the cluster's. */
async function expectProgramAgrees(rendered: RenderedEntry): Promise<void> {
  const program = (await op.custom.getNamespacedCustomObject({
    group: 'pulumi.com',
    version: 'v1',
    plural: 'programs',
    namespace: NS,
    name: rendered.name,
  })) as { status?: { artifact?: { digest?: string; url?: string } } };
  const artifact = (rendered.response.status as { artifact?: { digest?: string; url?: string } }).artifact;
  expect(artifact?.url).toBe(`${op.programServer.url}/programs/${NS}/${rendered.name}`);
  expect(program.status?.artifact?.url).toBe(artifact?.url);
  expect(program.status?.artifact?.digest).toBe(artifact?.digest);
}

beforeAll(async () => {
  git = await startGitServer();
  source = await startSourceController(op);
  kustomize = await startKustomizeController(op, source);
  // The Secret the Stack refers to is not in Git (docs/gitops.md): made as a secrets tool would.
  await op.core.createNamespacedSecret({
    namespace: NS,
    body: { metadata: { name: 'greeting-passphrase' }, stringData: { passphrase: 'gitops-passphrase' } },
  });
}, 240_000);

afterAll(async () => {
  await kustomize?.stop();
  await source?.stop();
  await git?.close();
});

describe('a Git repository of Stacks and Programs applied by kustomize-controller', () => {
  it('deploys the repository: the Stack Ready with the Program outputs, the Kustomization healthy, render agrees', async () => {
    const url = git.createRepo(REPO);
    const sha = git.commitTree(REPO, 'main', TREE, 'platform');
    const started = Date.now();
    await op.objects.create({
      apiVersion: `${FLUX_SOURCE_GROUP}/v1`,
      kind: 'GitRepository',
      metadata: { name: REPO, namespace: FLUX_NAMESPACE },
      spec: { interval: '1m', url, ref: { branch: 'main' } },
    } as k8s.KubernetesObject);
    await op.objects.create({
      apiVersion: `${KUSTOMIZATIONS.group}/${KUSTOMIZATIONS.version}`,
      kind: 'Kustomization',
      metadata: { name: REPO, namespace: FLUX_NAMESPACE },
      spec: {
        interval: '1m',
        sourceRef: { kind: 'GitRepository', name: REPO },
        path: './platform',
        prune: true,
        targetNamespace: NS,
        wait: true,
        timeout: '5m',
      },
    } as k8s.KubernetesObject);

    const stack = await readyStack('greeting');
    expect(stack.status?.outputs).toEqual({ greeting: 'hello from git' });
    // kustomize-controller's `wait` reads the Stack's conditions (kstatus): Ready only now.
    await appliedReady(sha);
    recordTiming('commit to Ready through Flux', started);
    expect(stack.metadata?.labels?.['kustomize.toolkit.fluxcd.io/name']).toBe(REPO);

    const rendered = await renderRepository();
    expect(rendered.programs.map((p) => p.name)).toEqual(['greeting']);
    expect(rendered.stacks.map((s) => s.name)).toEqual(['greeting']);
    await expectProgramAgrees(rendered.programs[0]!);
    // The Workspace the hooks answered in the cluster is the one render answers: same spec, same hash.
    const workspace = childOf(rendered.stacks[0]!, 'children', 'Workspace');
    const inCluster = (await op.custom.getNamespacedCustomObject({
      group: 'auto.pulumi.com',
      version: 'v1alpha1',
      plural: 'workspaces',
      namespace: NS,
      name: 'greeting',
    })) as Child;
    expect(inCluster.metadata?.annotations?.[WORKSPACE_SPEC_HASH]).toBe(
      workspace.metadata?.annotations?.[WORKSPACE_SPEC_HASH],
    );
    expect(inCluster.spec).toEqual(workspace.spec);
  }, 600_000);

  it("a commit that edits the Program changes the Stack's outputs; render agrees", async () => {
    const before = await getStack('greeting');
    const program = readFileSync(join(TREE, PROGRAM_FILE), 'utf8').replace('hello from git', 'hello again from git');
    expect(program).toContain('hello again from git');
    const sha = git.commit(REPO, 'main', { [PROGRAM_FILE]: program }, 'edit the Program');
    const started = Date.now();
    await reconcileSource();
    const stack = await readyStack(
      'greeting',
      (s) =>
        s.status?.lastUpdate?.name !== before.status?.lastUpdate?.name &&
        (s.status?.outputs as { greeting?: string } | undefined)?.greeting === 'hello again from git',
    );
    expect(stack.status?.outputs).toEqual({ greeting: 'hello again from git' });
    await appliedReady(sha);
    recordTiming('Program edit to new outputs', started);
    await expectProgramAgrees((await renderRepository()).programs[0]!);
  }, 600_000);

  it('a commit that deletes the Stack destroys its resources (destroyOnFinalize); render agrees', async () => {
    expect(checkpointResources(op.stateDir(NS), 'greeting', 'dev')?.map((r) => r.type)).toContain('pulumi:index:Stash');
    const sha = git.commit(REPO, 'main', { 'platform/stack.yaml': null }, 'remove the Stack');
    const started = Date.now();
    await reconcileSource();
    await eventually(
      'the Stack to be destroyed and gone',
      async () => !(await exists(() => getStack('greeting'))),
      300_000,
      1000,
    );
    recordTiming('Stack removed from Git to gone (destroyOnFinalize)', started);
    expect(checkpointResources(op.stateDir(NS), 'greeting', 'dev')).toEqual([]);
    await appliedReady(sha);
    const rendered = await renderRepository();
    expect(rendered.stacks).toEqual([]);
    await expectProgramAgrees(rendered.programs[0]!);
  }, 600_000);
});
