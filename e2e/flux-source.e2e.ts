/**
 * Issue 5, scenario 3: a Stack whose program comes from a Flux source. Flux itself is not
 * installed: a minimal CRD stands in for its GitRepository (group source.toolkit.fluxcd.io,
 * version v1, with upstream's `status.artifact` shape), the test plays source-controller by
 * writing `status.artifact` through the status subresource, and a loopback HTTP server serves the
 * tar.gz artifacts. Everything else is the real operator: hooks behind Metacontroller, the
 * agent's fetch init container downloading and verifying the artifact, the Pulumi CLI.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import * as tar from 'tar';
import type { Stack } from '../schemas/generated/types';
import { e2eStackSpec, eventually, type Operator, condition } from './harness';
import { e2eSuite } from './suite';
import { testServerHost } from './testbed/node/environment';

let op: Operator;
const getStack = (ns: string, name: string) => op.getStack(ns, name);
const readyStack = (...args: Parameters<Operator['readyStack']>) => op.readyStack(...args);
let artifacts: ArtifactServer;

const FLUX_GROUP = 'source.toolkit.fluxcd.io';
const FLUX_VERSION = 'v1';
const GITREPOS = { group: FLUX_GROUP, version: FLUX_VERSION, plural: 'gitrepositories' } as const;

/**
 * Flux's GitRepository, reduced to what a Stack reads: spec as upstream (loosely), and
 * status.artifact with upstream's fields and constraints (source-controller api/v1 Artifact).
 */
const GIT_REPOSITORY_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `gitrepositories.${FLUX_GROUP}` },
  spec: {
    group: FLUX_GROUP,
    names: {
      kind: 'GitRepository',
      listKind: 'GitRepositoryList',
      plural: 'gitrepositories',
      singular: 'gitrepository',
      shortNames: ['gitrepo'],
    },
    scope: 'Namespaced',
    versions: [
      {
        name: FLUX_VERSION,
        served: true,
        storage: true,
        subresources: { status: {} },
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              apiVersion: { type: 'string' },
              kind: { type: 'string' },
              metadata: { type: 'object' },
              spec: {
                type: 'object',
                required: ['interval', 'url'],
                properties: {
                  url: { type: 'string', pattern: '^(http|https|ssh)://.*$' },
                  interval: { type: 'string', pattern: '^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$' },
                  ref: {
                    type: 'object',
                    properties: {
                      branch: { type: 'string' },
                      tag: { type: 'string' },
                      semver: { type: 'string' },
                      name: { type: 'string' },
                      commit: { type: 'string' },
                    },
                  },
                  suspend: { type: 'boolean' },
                },
              },
              status: {
                type: 'object',
                properties: {
                  observedGeneration: { type: 'integer', format: 'int64' },
                  conditions: {
                    type: 'array',
                    items: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
                  },
                  artifact: {
                    type: 'object',
                    required: ['lastUpdateTime', 'path', 'revision', 'url'],
                    properties: {
                      digest: { type: 'string', pattern: '^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$' },
                      lastUpdateTime: { type: 'string', format: 'date-time' },
                      metadata: { type: 'object', additionalProperties: { type: 'string' } },
                      path: { type: 'string' },
                      revision: { type: 'string' },
                      size: { type: 'integer', format: 'int64' },
                      url: { type: 'string' },
                    },
                  },
                },
              },
            },
          },
        },
      },
    ],
  },
};

interface ArtifactServer {
  baseUrl: string;
  /** Serves `bytes` at `/<path>`. */
  publish(path: string, bytes: Buffer): string;
  /** How many times a path was downloaded. */
  downloads(path: string): number;
  close(): Promise<void>;
}

async function startArtifactServer(): Promise<ArtifactServer> {
  const files = new Map<string, Buffer>();
  const counts = new Map<string, number>();
  const server: Server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname.replace(/^\//, '');
    const body = files.get(path);
    counts.set(path, (counts.get(path) ?? 0) + 1);
    if (req.method !== 'GET' || body === undefined) {
      res.writeHead(req.method === 'GET' ? 404 : 405);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/x-gzip', 'content-length': String(body.length) });
    res.end(body);
  });
  const host = testServerHost();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const baseUrl = `http://${host}:${(server.address() as AddressInfo).port}`;
  return {
    baseUrl,
    publish(path, bytes) {
      files.set(path, bytes);
      return `${baseUrl}/${path}`;
    },
    downloads: (path) => counts.get(path) ?? 0,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A tar.gz of `files`, as source-controller builds artifacts (paths relative to the repository root). */
function tarball(files: Record<string, string>): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'pko-flux-artifact-'));
  try {
    const src = join(dir, 'src');
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(src, path)), { recursive: true });
      writeFileSync(join(src, path), content);
    }
    const file = join(dir, 'artifact.tar.gz');
    tar.create({ gzip: true, portable: true, sync: true, cwd: src, file }, readdirSync(src).sort());
    return readFileSync(file);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** A Pulumi YAML project in `app/` whose only output says which artifact ran. */
function project(message: string): Record<string, string> {
  return {
    'README.md': '# e2e artifact\n',
    'app/Pulumi.yaml': ['name: fluxapp', 'runtime: yaml', 'outputs:', `  message: ${message}`, ''].join('\n'),
  };
}

interface Artifact {
  url: string;
  revision: string;
  digest: string;
  path: string;
  lastUpdateTime: string;
  size: number;
}

/** Publishes an artifact for `ns/name` at a fake commit and returns upstream's status.artifact for it. */
function publishArtifact(ns: string, name: string, message: string, opts: { wrongDigest?: boolean } = {}): Artifact {
  const bytes = tarball(project(message));
  const commit = sha256(Buffer.from(`${ns}/${name}/${message}`)).slice(0, 40);
  const path = `gitrepository/${ns}/${name}/${commit}.tar.gz`;
  const url = artifacts.publish(path, bytes);
  // A wrong digest: what source-controller would announce for other bytes (a corrupted or replaced file).
  const digest = `sha256:${opts.wrongDigest ? sha256(Buffer.concat([bytes, Buffer.from('tampered')])) : sha256(bytes)}`;
  return {
    url,
    revision: `main@sha1:${commit}`,
    digest,
    path,
    lastUpdateTime: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    size: bytes.length,
  };
}

async function setArtifact(ns: string, name: string, artifact: Artifact): Promise<void> {
  await op.custom.patchNamespacedCustomObjectStatus(
    {
      ...GITREPOS,
      namespace: ns,
      name,
      body: {
        status: {
          observedGeneration: 1,
          artifact,
          conditions: [
            {
              type: 'Ready',
              status: 'True',
              reason: 'Succeeded',
              message: `stored artifact for revision '${artifact.revision}'`,
              lastTransitionTime: artifact.lastUpdateTime,
              observedGeneration: 1,
            },
          ],
        },
      },
    },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
}

const { timings } = e2eSuite('flux-source', undefined, (started) => (op = started));

beforeAll(async () => {
  artifacts = await startArtifactServer();
  await op.objects.create(GIT_REPOSITORY_CRD);
  await eventually('the GitRepository CRD to be served', async () => {
    await op.custom.listClusterCustomObject({ ...GITREPOS });
    return true;
  });
}, 180_000);

afterAll(async () => {
  await artifacts?.close();
});

describe('a Flux source Stack', () => {
  const ns = 'flux-source';
  const repo = 'app';
  const stackName = 'app';
  let previous: Artifact;

  it('waits for the artifact, then becomes Ready at its revision', async () => {
    await op.namespace(ns);
    await op.objects.create({
      apiVersion: `${FLUX_GROUP}/${FLUX_VERSION}`,
      kind: 'GitRepository',
      metadata: { name: repo, namespace: ns },
      spec: { url: 'https://git.example.test/org/app', interval: '1m', ref: { branch: 'main' } },
    } as k8s.KubernetesObject);
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: stackName, namespace: ns },
      spec: e2eStackSpec({
        stack: 'dev',
        fluxSource: {
          sourceRef: { apiVersion: `${FLUX_GROUP}/${FLUX_VERSION}`, kind: 'GitRepository', name: repo },
          dir: 'app',
        },
      }),
    } as k8s.KubernetesObject);
    // No artifact yet: the Stack says so.
    const waiting = await eventually(
      'the Stack to report the missing artifact',
      async () => {
        const s = await getStack(ns, stackName);
        return condition(s, 'Stalled')?.status === 'True' ? s : undefined;
      },
      60_000,
      500,
    );
    expect(condition(waiting, 'Stalled')).toMatchObject({
      reason: 'SourceUnavailable',
      message: expect.stringContaining('has no artifact'),
    });

    const artifact = publishArtifact(ns, repo, 'first');
    const started = Date.now();
    await setArtifact(ns, repo, artifact);
    const stack = await readyStack(ns, stackName);
    timings['flux: artifact to Ready'] = Date.now() - started;
    expect(stack.status?.lastUpdate).toMatchObject({
      type: 'up',
      state: 'succeeded',
      lastSuccessfulCommit: artifact.revision,
      lastAttemptedCommit: artifact.revision,
      failures: 0,
    });
    expect(stack.status?.outputs).toEqual({ message: 'first' });
    expect(stack.status?.projectInfo).toEqual({ name: 'fluxapp', runtime: 'yaml' });
    expect(artifacts.downloads(artifact.path)).toBeGreaterThan(0);
    previous = artifact;
  }, 360_000);

  it('runs a new update for a new artifact revision', async () => {
    const before = await getStack(ns, stackName);
    const artifact = publishArtifact(ns, repo, 'second');
    const started = Date.now();
    await setArtifact(ns, repo, artifact);
    const stack = await readyStack(
      ns,
      stackName,
      (s) => s.status?.lastUpdate?.lastSuccessfulCommit === artifact.revision,
    );
    timings['flux: new revision to Ready'] = Date.now() - started;
    expect(stack.status?.lastUpdate?.name).not.toBe(before.status?.lastUpdate?.name);
    expect(stack.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded', failures: 0 });
    expect(stack.status?.outputs).toEqual({ message: 'second' });
    previous = artifact;
  }, 360_000);

  it('surfaces a wrong digest in the Stack status', async () => {
    const artifact = publishArtifact(ns, repo, 'tampered', { wrongDigest: true });
    const started = Date.now();
    await setArtifact(ns, repo, artifact);
    // The fetch init container downloads the artifact and refuses it. The Stack must say why,
    // not just "waiting for workspace readiness".
    let stack: Stack;
    try {
      stack = await eventually(
        'the digest mismatch to appear in the Stack status',
        async () => {
          const s = await getStack(ns, stackName);
          const told = (s.status?.conditions ?? []).some(
            (c) => c.type !== 'Ready' && c.status === 'True' && /digest/i.test(c.message ?? ''),
          );
          return told ? s : undefined;
        },
        120_000,
        1000,
      );
    } catch (e) {
      // Say what the Stack shows instead, and what the init container said.
      const s = await getStack(ns, stackName);
      const pod = `${stackName}-workspace-0`;
      const logs = [await op.logs(ns, pod, 'fetch', { previous: true }), await op.logs(ns, pod, 'fetch')].join('\n');
      const fetchLog = logs
        .split('\n')
        .filter((l) => /digest/i.test(l))
        .slice(-1)
        .join('\n');
      const fetchStatus = await op.core
        .readNamespacedPod({ namespace: ns, name: pod })
        .then((p) => JSON.stringify(p.status?.initContainerStatuses?.find((c) => c.name === 'fetch')))
        .catch((err: Error) => err.message);
      throw new Error(
        `${(e as Error).message}\nStack conditions: ${JSON.stringify(s.status?.conditions)}\n` +
          `artifact downloads: ${artifacts.downloads(artifact.path)}\nfetch container status: ${fetchStatus}\n` +
          `fetch container log: ${fetchLog || '(no digest line)'}`,
        { cause: e },
      );
    }
    timings['flux: wrong digest to reported'] = Date.now() - started;
    expect(condition(stack, 'Ready')).toMatchObject({ status: 'False' });
    // Nothing ran with the refused artifact.
    expect(stack.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastSuccessfulCommit: previous.revision });
    expect(stack.status?.outputs).toEqual({ message: 'second' });
  }, 240_000);

  it('recovers when a good artifact replaces the refused one', async () => {
    const artifact = publishArtifact(ns, repo, 'third');
    const started = Date.now();
    await setArtifact(ns, repo, artifact);
    const stack = await readyStack(
      ns,
      stackName,
      (s) => s.status?.lastUpdate?.lastSuccessfulCommit === artifact.revision,
    );
    timings['flux: good artifact after a wrong digest to Ready'] = Date.now() - started;
    expect(stack.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded', failures: 0 });
    expect(stack.status?.outputs).toEqual({ message: 'third' });
  }, 360_000);
});
