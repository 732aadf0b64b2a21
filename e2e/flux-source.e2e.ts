/**
 * Stacks whose program comes from a Flux source, with Flux's real source-controller
 * (e2e/testbed/source-controller.ts) fetching from the test bed's git server: the artifacts, their
 * URLs, digests and revision strings, `ignore`, tag and semver refs, artifact garbage collection
 * and the source's status transitions are Flux's own. Everything else is the real operator: hooks
 * behind Metacontroller, the agent's fetch init container downloading and verifying the artifact
 * from source-controller's artifact server, the Pulumi CLI.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import type { Stack, StackSpec } from '../schemas/generated/types';
import { checkpointResources, e2eStackSpec, eventually, exists, type Operator, condition } from './harness';
import { e2eSuite } from './suite';
import { startGitServer, type GitServer } from './testbed/git-server';
import { captureStack } from './testbed/stack-fixtures';
import {
  ARTIFACT_HOST,
  FLUX_SOURCE_GROUP,
  GIT_REPOSITORIES,
  startSourceController,
  type SourceController,
} from './testbed/source-controller';

const NS = 'flux-source';
let op: Operator;
let git: GitServer;
let flux: SourceController;
const { recordTiming, getStack, readyStack } = e2eSuite('flux-source', NS, (started) => (op = started));

interface Artifact {
  url: string;
  path: string;
  revision: string;
  digest: string;
}
interface GitRepository {
  metadata: { name: string; generation?: number };
  spec: Record<string, unknown>;
  status?: {
    observedGeneration?: number;
    artifact?: Artifact;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}

const getSource = async (name: string): Promise<GitRepository> =>
  (await op.custom.getNamespacedCustomObject({ ...GIT_REPOSITORIES, namespace: NS, name })) as GitRepository;

const patchSource = (name: string, body: object) =>
  op.custom.patchNamespacedCustomObject(
    { ...GIT_REPOSITORIES, namespace: NS, name, body },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );

/** What `flux reconcile source git <name>` does: asks for a reconciliation now, not at the next interval. */
const requestReconcile = (name: string) =>
  patchSource(name, { metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': new Date().toISOString() } } });

/** Waits until the source advertises an artifact of `revision`. */
const artifactOf = (name: string, revision: string, timeoutMs = 90_000): Promise<Artifact> =>
  eventually(
    `GitRepository ${NS}/${name} to advertise an artifact of ${revision}`,
    async () => {
      const a = (await getSource(name)).status?.artifact;
      return a?.revision === revision ? a : undefined;
    },
    timeoutMs,
    500,
  );

const sha256 = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');

/**
 * A Pulumi YAML project in `app/` whose output `message` is its config value, by default
 * `defaultMessage`, and an `app/Pulumi.dev.yaml` that would set it: the GitRepositories ignore that
 * file, so the output tells whether the artifact left it out.
 */
function project(defaultMessage: string): Record<string, string> {
  return {
    'README.md': '# e2e project\n',
    'app/Pulumi.yaml': [
      'name: fluxapp',
      'runtime: yaml',
      'config:',
      '  message:',
      '    type: string',
      `    default: ${defaultMessage}`,
      'outputs:',
      '  message: ${message}',
      '',
    ].join('\n'),
    'app/Pulumi.dev.yaml': 'config:\n  fluxapp:message: the ignored file was deployed\n',
  };
}

const gitRepository = (name: string, url: string, spec: Record<string, unknown>): k8s.KubernetesObject =>
  ({
    apiVersion: `${FLUX_SOURCE_GROUP}/v1`,
    kind: 'GitRepository',
    metadata: { name, namespace: NS },
    spec: { url, interval: '10m', ignore: '/app/Pulumi.dev.yaml', ...spec },
  }) as k8s.KubernetesObject;

const fluxStack = (name: string, source: string, extra: Partial<StackSpec> = {}): k8s.KubernetesObject =>
  ({
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: NS },
    spec: e2eStackSpec({
      stack: 'dev',
      fluxSource: {
        sourceRef: { apiVersion: `${FLUX_SOURCE_GROUP}/v1`, kind: 'GitRepository', name: source },
        dir: 'app',
      },
      ...extra,
    }),
  }) as k8s.KubernetesObject;

/** The Stack once it has deployed `revision` (the source's revision string, as Flux writes it). */
const deployed = (name: string, revision: string, timeoutMs?: number) =>
  readyStack(name, (s) => s.status?.lastUpdate?.lastSuccessfulCommit === revision, timeoutMs);

/** Waits for a non-Ready condition of the Stack that says `pattern`, and returns the Stack. */
const stackSays = (name: string, pattern: RegExp, timeoutMs = 180_000): Promise<Stack> =>
  eventually(
    `Stack ${NS}/${name} to say ${String(pattern)}`,
    async () => {
      const s = await getStack(name);
      const told = (s.status?.conditions ?? []).some(
        (c) => c.type !== 'Ready' && c.status === 'True' && pattern.test(c.message ?? ''),
      );
      return told ? s : undefined;
    },
    timeoutMs,
    1000,
  );

/** Deletes the workspace pod, as an eviction or a node restart would: its StatefulSet makes a new one that fetches again. */
const deleteWorkspacePod = (stack: string) =>
  op.core.deleteNamespacedPod({ namespace: NS, name: `${stack}-workspace-0`, gracePeriodSeconds: 0 });

/** The fetch init container's log lines (this run and the previous one) that match `pattern`. */
async function fetchLog(stack: string, pattern: RegExp): Promise<string[]> {
  const pod = `${stack}-workspace-0`;
  const logs = [await op.logs(NS, pod, 'fetch', { previous: true }), await op.logs(NS, pod, 'fetch')].join('\n');
  return logs.split('\n').filter((l) => pattern.test(l));
}

beforeAll(async () => {
  git = await startGitServer();
  // Every artifact but the advertised one is garbage once it is a second old (Flux: 60 s).
  flux = await startSourceController(op, { artifactRetentionTtl: '1s' });
}, 180_000);

afterAll(async () => {
  await flux?.stop();
  await git?.close();
});

describe('a Stack from a GitRepository of the test git server', () => {
  const stack = 'app';
  const commits: string[] = [];
  let url = '';

  it('waits for the source, then is Ready at the revision Flux advertises, from `dir`, without the ignored file', async () => {
    url = git.createRepo('app');
    // main is its default branch (HEAD), as a hosted repository's: a semver ref clones HEAD first.
    execFileSync('git', ['symbolic-ref', 'HEAD', 'refs/heads/main'], { cwd: join(git.root, 'repos', 'app.git') });
    commits.push(git.commit('app', 'main', project('first'), 'first'));
    await op.objects.create(fluxStack(stack, 'app'));
    const waiting = await stackSays(stack, /not found/, 60_000);
    expect(condition(waiting, 'Stalled')).toMatchObject({ reason: 'SourceUnavailable' });

    const started = Date.now();
    // A branch is polled at the interval: the push test below relies on it.
    await op.objects.create(gitRepository('app', url, { interval: '15s', ref: { branch: 'main' } }));
    const revision = `main@sha1:${commits[0]}`;
    const artifact = await artifactOf('app', revision);
    const ready = await deployed(stack, revision);
    recordTiming('GitRepository created to Stack Ready', started);
    captureStack('ready', ready);

    // What source-controller advertises, and what the Stack records of it.
    expect(artifact.url).toBe(`http://${ARTIFACT_HOST}/gitrepository/${NS}/app/${commits[0]}.tar.gz`);
    expect(artifact.path).toBe(`gitrepository/${NS}/app/${commits[0]}.tar.gz`);
    expect(artifact.digest).toBe(`sha256:${sha256(join(flux.storageDir, artifact.path))}`);
    expect(ready.status?.lastUpdate).toMatchObject({
      type: 'up',
      state: 'succeeded',
      lastSuccessfulCommit: revision,
      lastAttemptedCommit: revision,
      failures: 0,
    });
    expect(ready.status?.outputs).toEqual({ message: 'first' });
    expect(ready.status?.projectInfo).toEqual({ name: 'fluxapp', runtime: 'yaml' });
  }, 360_000);

  it('deploys a push that Flux picks up at its interval', async () => {
    commits.push(git.commit('app', 'main', project('second'), 'second'));
    const revision = `main@sha1:${commits[1]}`;
    const started = Date.now();
    // Nobody asks Flux: it polls the branch every 15 s.
    const progressing = await eventually(
      'the Stack to start an update for the push',
      async () => {
        const s = await getStack(stack);
        return condition(s, 'Reconciling')?.status === 'True' ? s : undefined;
      },
      120_000,
      250,
    ).catch(() => undefined);
    if (progressing) captureStack('progressing', progressing);
    const ready = await deployed(stack, revision);
    recordTiming('push to Stack Ready (Flux polling every 15 s)', started);
    expect(ready.status?.outputs).toEqual({ message: 'second' });
  }, 360_000);

  it('follows a tag, then the highest tag of a semver range', async () => {
    git.tag('app', 'v1.0.0', commits[0]!);
    git.tag('app', 'v1.1.0', commits[1]!);
    commits.push(git.commit('app', 'next', project('third'), 'third'));
    git.tag('app', 'v2.0.0', commits[2]!);

    let started = Date.now();
    // From here on Flux reconciles only when asked (or when the spec changes).
    await patchSource('app', { spec: { interval: '10m', ref: { branch: null, tag: 'v1.0.0' } } });
    let ready = await deployed(stack, `v1.0.0@sha1:${commits[0]}`);
    recordTiming('ref changed to a tag to Stack Ready', started);
    expect(ready.status?.outputs).toEqual({ message: 'first' });

    started = Date.now();
    await patchSource('app', { spec: { ref: { tag: null, semver: '>=1.0.0 <2.0.0' } } });
    ready = await deployed(stack, `v1.1.0@sha1:${commits[1]}`);
    recordTiming('ref changed to a semver range to Stack Ready', started);
    expect(ready.status?.outputs).toEqual({ message: 'second' });

    await patchSource('app', { spec: { ref: { semver: null, branch: 'main' } } });
    await deployed(stack, `main@sha1:${commits[1]}`);
  }, 600_000);

  it('refuses an artifact whose bytes are not the advertised digest, and takes the one Flux rebuilds', async () => {
    // The hooks are stopped while Flux stores the new artifact, so that the file can be changed
    // on source-controller's disk before any workspace downloads it.
    const startHooks = await op.stopHooks();
    commits.push(git.commit('app', 'main', project('fourth'), 'fourth'));
    const revision = `main@sha1:${commits[3]}`;
    await requestReconcile('app');
    const artifact = await artifactOf('app', revision);
    const file = join(flux.storageDir, artifact.path);
    appendFileSync(file, 'tampered on the artifact server');
    const started = Date.now();
    await startHooks();

    const refused = await stackSays(stack, /digest/i);
    recordTiming('tampered artifact to reported on the Stack', started);
    expect(condition(refused, 'Ready')).toMatchObject({ status: 'False' });
    expect(refused.status?.lastUpdate).toMatchObject({ lastSuccessfulCommit: `main@sha1:${commits[1]}` });
    expect(refused.status?.outputs).toEqual({ message: 'second' });
    expect((await fetchLog(stack, /digest mismatch/)).length).toBeGreaterThan(0);

    // At its next reconciliation Flux checks the stored file against the digest, drops it and
    // builds the artifact again; the fetch, retried by kubelet, then gets good bytes.
    await requestReconcile('app');
    await eventually('Flux to rebuild the artifact', async () => {
      const a = (await getSource('app')).status?.artifact;
      return a?.revision === revision && existsSync(file) && a.digest === `sha256:${sha256(file)}`;
    });
    // Nothing changes in the workspace's template: the fetch is retried at kubelet's back-off
    // (10 s, doubling, up to 5 min).
    const ready = await deployed(stack, revision, 420_000);
    recordTiming('tampered artifact to Stack Ready at the rebuilt one', started);
    expect(ready.status?.outputs).toEqual({ message: 'fourth' });
  }, 720_000);

  it('recovers from a workspace that asks for an artifact Flux has garbage-collected', async () => {
    const before = (await getSource('app')).status!.artifact!;
    const startHooks = await op.stopHooks();
    // Two new artifacts: at the second reconciliation Flux deletes every file but the
    // advertised one that is more than a second old (--artifact-retention-ttl=1s).
    commits.push(git.commit('app', 'main', project('fifth'), 'fifth'));
    await requestReconcile('app');
    await artifactOf('app', `main@sha1:${commits[4]}`);
    commits.push(git.commit('app', 'main', project('sixth'), 'sixth'));
    const revision = `main@sha1:${commits[5]}`;
    await requestReconcile('app');
    await artifactOf('app', revision);
    await eventually(
      'Flux to garbage-collect the artifact the workspace was made for',
      async () => {
        if (!existsSync(join(flux.storageDir, before.path))) return true;
        await requestReconcile('app');
        return false;
      },
      60_000,
      1000,
    );
    // The StatefulSet still has the template the hooks rendered for `before`: its new pod asks for a file that is gone.
    await deleteWorkspacePod(stack);
    await eventually(
      'the fetch container to be told the artifact is gone',
      async () => (await fetchLog(stack, /HTTP 404/)).length > 0,
      120_000,
      1000,
    );
    const started = Date.now();
    await startHooks();
    // Metacontroller calls the hooks again at its back-off after the failed calls.
    const ready = await deployed(stack, revision, 420_000);
    recordTiming('garbage-collected artifact to Stack Ready at the current one', started);
    expect(ready.status?.outputs).toEqual({ message: 'sixth' });
  }, 720_000);
});

describe('a Stack whose source is not Ready', () => {
  const stack = 'pending';

  it("is Stalled with Flux's reason, and deploys once Flux has an artifact", async () => {
    const url = git.createRepo('pending');
    git.commit('pending', 'main', project('other branch'), 'main');
    await op.objects.create(gitRepository('pending', url, { ref: { branch: 'release' } }));
    await op.objects.create(fluxStack(stack, 'pending', { stack: 'pending', destroyOnFinalize: true }));
    const failed = await eventually(
      'Flux to fail on the missing branch',
      async () => {
        const ready = (await getSource('pending')).status?.conditions?.find((c) => c.type === 'Ready');
        return ready?.status === 'False' ? ready : undefined;
      },
      90_000,
      500,
    );
    const stalled = await stackSays(stack, /has no artifact: /, 60_000);
    captureStack('stalled', stalled);
    expect(condition(stalled, 'Stalled')).toMatchObject({
      reason: 'SourceUnavailable',
      message: `Flux source GitRepository ${NS}/pending has no artifact: ${failed.message}`,
    });
    expect(condition(stalled, 'Ready')).toMatchObject({ status: 'False' });

    const sha = git.commit('pending', 'release', project('released'), 'release');
    const started = Date.now();
    await requestReconcile('pending');
    const ready = await deployed(stack, `release@sha1:${sha}`);
    recordTiming('source Ready to Stack Ready', started);
    expect(ready.status?.outputs).toEqual({ message: 'released' });
  }, 360_000);

  it('retries a failing update of a broken push, and is deleted with its resources destroyed', async () => {
    const broken = git.commit(
      'pending',
      'release',
      { 'app/Pulumi.yaml': 'name: fluxapp\nruntime: yaml\noutputs:\n  message: ${nowhere}\n' },
      'broken',
    );
    await requestReconcile('pending');
    const failing = await eventually(
      'the update of the broken program to fail and be retried',
      async () => {
        const s = await getStack(stack);
        return s.status?.lastUpdate?.state === 'failed' &&
          s.status.lastUpdate.lastAttemptedCommit === `release@sha1:${broken}`
          ? s
          : undefined;
      },
      240_000,
      1000,
    );
    captureStack('failed', failing);
    expect(condition(failing, 'Ready')).toMatchObject({ status: 'False' });

    const started = Date.now();
    await op.objects.delete({ apiVersion: 'pulumi.com/v1', kind: 'Stack', metadata: { name: stack, namespace: NS } });
    const deleting = await eventually('the Stack to be deleting', async () => {
      const s = await getStack(stack);
      return s.metadata.deletionTimestamp ? s : undefined;
    });
    captureStack('deleting', deleting);
    await eventually(
      'the Stack to be destroyed and gone',
      async () => !(await exists(() => getStack(stack))),
      240_000,
      1000,
    );
    recordTiming('delete to gone (destroy)', started);
    // destroyOnFinalize: destroyed, the backend's stack left without resources.
    expect(checkpointResources(op.stateDir(NS), 'fluxapp', 'pending')).toEqual([]);
  }, 360_000);
});
