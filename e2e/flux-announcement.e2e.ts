/**
 * Issue 37, item 3: the scenario of upstream's announcement of its Flux integration (Pulumi
 * Kubernetes Operator v1.10), with its manifests as the post has them (e2e/testdata/flux-announcement,
 * NOTICE names the source), against Flux's real source-controller. Applied as written they no
 * longer work anywhere: Flux has stopped serving source.toolkit.fluxcd.io/v1beta2, and a v2 operator
 * runs the Stack in a workspace that needs a backend and an identity the post (for v1.10, whose
 * operator pod had them) does not give. The test shows the first and then runs the scenario with
 * exactly those changes (docs/gitops.md, "The announcement's scenario").
 */
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import type { StackSpec } from '../schemas/generated/types';
import { checkpointResources, e2eStackSpec, eventually, exists, type Operator } from './harness';
import { e2eSuite } from './suite';
import { startGitServer, type GitServer } from './testbed/git-server';
import {
  FLUX_SOURCE_GROUP,
  GIT_REPOSITORIES,
  startSourceController,
  type SourceController,
} from './testbed/source-controller';
import { REPO_ROOT } from './testbed/toolchain';
import { type Manifest, manifestsIn } from './upstream/manifests';

const NS = 'pkodev';
let op: Operator;
let git: GitServer;
let flux: SourceController;
const { recordTiming, getStack, readyStack } = e2eSuite('flux-announcement', NS, (started) => (op = started));

const ANNOUNCEMENT = manifestsIn('.', join(REPO_ROOT, 'e2e', 'testdata', 'flux-announcement'));
const written = (kind: string): Manifest => ANNOUNCEMENT.find((m) => m.kind === kind)!;

/** The program in `basic/` of the repository (the post's lukehoban/pko-dev is not reachable here). */
const basicProject = (greeting: string): Record<string, string> => ({
  'basic/Pulumi.yaml': `name: pkodev\nruntime: yaml\noutputs:\n  greeting: ${greeting}\n`,
});

/** `kubectl apply -n pkodev` of a manifest: created in the test's namespace. */
const apply = (m: Manifest) => op.objects.create({ ...m, metadata: { ...m.metadata, namespace: NS } });

beforeAll(async () => {
  git = await startGitServer();
  // Flux's other digest: the manifests do not choose it, the installation does.
  flux = await startSourceController(op, { artifactDigestAlgo: 'blake3' });
}, 180_000);

afterAll(async () => {
  await flux?.stop();
  await git?.close();
});

describe("the announcement's Flux scenario", () => {
  let url = '';

  it("the Role and RoleBinding apply as written; the GitRepository's v1beta2 is no longer served", async () => {
    url = git.createRepo('pko-dev');
    git.commit('pko-dev', 'main', basicProject('hello from flux'), 'first');
    for (const m of ANNOUNCEMENT.filter((x) => x.kind === 'Role' || x.kind === 'RoleBinding')) await apply(m);

    const source = written('GitRepository');
    expect(source.apiVersion).toBe(`${FLUX_SOURCE_GROUP}/v1beta2`);
    const refused = await apply({ ...source, spec: { ...(source.spec as object), url } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused).toBeInstanceOf(k8s.ApiException);
    expect((refused as k8s.ApiException<unknown>).code).toBe(404);
  });

  it('with v1 and what a v2 Stack needs: Ready with the outputs, a push deployed at the 30 s interval, destroyed on delete', async () => {
    const source = written('GitRepository');
    const stack = written('Stack');
    const spec = stack.spec as StackSpec;
    // The changes, and only them: v1 for both apiVersions, the URL, and what the post's operator
    // pod had and a v2 workspace needs: a backend (the namespace's PVC: a DIY backend, where
    // `lukehoban/...` is no organization, so `organization/...`), a passphrase, a ServiceAccount.
    const stackName = 'organization/pkodev/test';
    await apply({ ...source, apiVersion: `${FLUX_SOURCE_GROUP}/v1`, spec: { ...(source.spec as object), url } });
    const started = Date.now();
    await apply({
      ...stack,
      spec: {
        ...e2eStackSpec({ stack: stackName }),
        ...spec,
        stack: stackName,
        fluxSource: {
          ...spec.fluxSource!,
          sourceRef: { ...spec.fluxSource!.sourceRef, apiVersion: `${FLUX_SOURCE_GROUP}/v1` },
        },
      },
    });
    const artifact = await eventually('Flux to advertise an artifact', async () => {
      const s = (await op.custom.getNamespacedCustomObject({ ...GIT_REPOSITORIES, namespace: NS, name: 'pkodev' })) as {
        status?: { artifact?: { revision: string; digest: string } };
      };
      return s.status?.artifact;
    });
    expect(artifact.digest).toMatch(/^blake3:[0-9a-f]{64}$/);
    const ready = await readyStack('pkodev');
    recordTiming('apply to Ready', started);
    expect(ready.spec.destroyOnFinalize).toBe(true);
    expect(ready.spec.fluxSource?.dir).toBe('basic/');
    expect(ready.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastSuccessfulCommit: artifact.revision });
    expect(ready.status?.outputs).toEqual({ greeting: 'hello from flux' });

    // The post's interval: Flux polls the branch every 30 s, nobody asks it.
    const sha = git.commit('pko-dev', 'main', basicProject('hello again'), 'second');
    const pushed = Date.now();
    const updated = await readyStack(
      'pkodev',
      (s) => s.status?.lastUpdate?.lastSuccessfulCommit === `main@sha1:${sha}`,
    );
    recordTiming('push to Ready (30 s interval)', pushed);
    expect(updated.status?.outputs).toEqual({ greeting: 'hello again' });

    const deleted = Date.now();
    await op.objects.delete({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'pkodev', namespace: NS },
    });
    await eventually(
      'the Stack to be destroyed and gone',
      async () => !(await exists(() => getStack('pkodev'))),
      240_000,
      1000,
    );
    recordTiming('delete to gone (destroyOnFinalize)', deleted);
    // destroyOnFinalize: destroyed, the backend's stack left without resources.
    expect(checkpointResources(op.stateDir(NS), 'pkodev', 'test')).toEqual([]);
  }, 600_000);
});
