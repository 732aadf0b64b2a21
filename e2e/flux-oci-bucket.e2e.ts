/**
 * Stacks whose program comes from Flux's other two source kinds, with Flux's real source-controller
 * (e2e/testbed/source-controller.ts): an OCIRepository of an OCI registry (distribution's) to which
 * the test pushes Flux's artifact format, and a Bucket (provider `generic`) of an S3-compatible
 * server (gofakes3, a stand-in) to which it uploads files (e2e/testbed/flux-stores.ts). Both
 * stores are plain HTTP on the node, so the sources say `insecure: true`. What the agent fetches is
 * source-controller's artifact, as for a GitRepository (e2e/flux-source.e2e.ts); what this adds is
 * Flux's own fetching from a registry and a bucket, and their revision strings on the Stack.
 */
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import { e2eStackSpec, eventually, type Operator } from './harness';
import { e2eSuite } from './suite';
import {
  FLUX_CONTENT_MEDIA_TYPE,
  putObject,
  pushArtifact,
  startOciRegistry,
  startS3Server,
  type NodeServer,
} from './testbed/flux-stores';
import {
  ARTIFACT_HOST,
  FLUX_SOURCE_GROUP,
  startSourceController,
  type SourceController,
} from './testbed/source-controller';

const NS = 'flux-oci-bucket';
const BUCKET = 'programs';
let op: Operator;
let flux: SourceController;
let registry: NodeServer;
let s3: NodeServer;
const { recordTiming, readyStack } = e2eSuite('flux-oci-bucket', NS, (started) => (op = started));

interface Artifact {
  url: string;
  revision: string;
  digest: string;
}

const SOURCES = {
  OCIRepository: { group: FLUX_SOURCE_GROUP, version: 'v1', plural: 'ocirepositories' },
  Bucket: { group: FLUX_SOURCE_GROUP, version: 'v1', plural: 'buckets' },
} as const;
type SourceKind = keyof typeof SOURCES;

/** Waits until the source advertises an artifact that `wanted` accepts. */
const artifactOf = (kind: SourceKind, name: string, wanted: (a: Artifact) => boolean): Promise<Artifact> =>
  eventually(
    `${kind} ${NS}/${name} to advertise the expected artifact`,
    async () => {
      const source = (await op.custom.getNamespacedCustomObject({ ...SOURCES[kind], namespace: NS, name })) as {
        status?: { artifact?: Artifact };
      };
      const a = source.status?.artifact;
      return a !== undefined && wanted(a) ? a : undefined;
    },
    90_000,
    500,
  );

/** A Pulumi YAML project in `app/` whose output `message` is `message`. */
const project = (message: string): Record<string, string> => ({
  'README.md': '# e2e project\n',
  'app/Pulumi.yaml': ['name: fluxapp', 'runtime: yaml', 'outputs:', `  message: ${message}`, ''].join('\n'),
});

const fluxStack = (name: string, kind: SourceKind, source: string): k8s.KubernetesObject =>
  ({
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: NS },
    spec: e2eStackSpec({
      stack: name,
      fluxSource: { sourceRef: { apiVersion: `${FLUX_SOURCE_GROUP}/v1`, kind, name: source }, dir: 'app' },
    }),
  }) as k8s.KubernetesObject;

/** The Stack once it has deployed `revision` (the source's revision string, as Flux writes it). */
const deployed = (name: string, revision: string) =>
  readyStack(name, (s) => s.status?.lastUpdate?.lastSuccessfulCommit === revision);

beforeAll(async () => {
  flux = await startSourceController(op);
  registry = await startOciRegistry(op);
  s3 = await startS3Server(op, BUCKET);
}, 180_000);

afterAll(async () => {
  await s3?.stop();
  await registry?.stop();
  await flux?.stop();
});

describe('a Stack from an OCIRepository of the test bed registry', () => {
  const stack = 'oci';
  const push = (message: string) =>
    pushArtifact(registry.address, 'programs/app', 'latest', project(message), {
      source: 'https://git.example.test/programs',
      revision: `main@sha1:${message}`,
    });

  it('is Ready at the revision Flux advertises for the pushed artifact, from `dir`', async () => {
    const digest = await push('first');
    const started = Date.now();
    await op.objects.create({
      apiVersion: `${FLUX_SOURCE_GROUP}/v1`,
      kind: 'OCIRepository',
      metadata: { name: 'app', namespace: NS },
      spec: {
        url: `oci://${registry.address}/programs/app`,
        ref: { tag: 'latest' },
        insecure: true,
        interval: '15s',
        layerSelector: { mediaType: FLUX_CONTENT_MEDIA_TYPE, operation: 'extract' },
      },
    } as k8s.KubernetesObject);
    await op.objects.create(fluxStack(stack, 'OCIRepository', 'app'));
    const revision = `latest@${digest}`;
    const artifact = await artifactOf('OCIRepository', 'app', (a) => a.revision === revision);
    const ready = await deployed(stack, revision);
    recordTiming('OCIRepository created to Stack Ready', started);
    // The file is named by the manifest's digest, algorithm and colon included (a Bucket's by the hex alone).
    expect(artifact.url).toBe(`http://${ARTIFACT_HOST}/ocirepository/${NS}/app/${digest}.tar.gz`);
    expect(ready.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastSuccessfulCommit: revision });
    expect(ready.status?.outputs).toEqual({ message: 'first' });
  }, 360_000);

  it('deploys a new artifact pushed to the same tag, which Flux picks up at its interval', async () => {
    const digest = await push('second');
    const started = Date.now();
    const ready = await deployed(stack, `latest@${digest}`);
    recordTiming('push to Stack Ready (Flux polling every 15 s)', started);
    expect(ready.status?.outputs).toEqual({ message: 'second' });
  }, 360_000);
});

describe('a Stack from a Bucket of the test bed S3 server', () => {
  const stack = 'bucket';
  const upload = (message: string) =>
    Promise.all(Object.entries(project(message)).map(([key, content]) => putObject(s3.address, BUCKET, key, content)));
  let revision = '';

  it('is Ready at the revision Flux advertises for the bucket, from `dir`', async () => {
    await upload('first');
    const started = Date.now();
    await op.objects.create({
      apiVersion: `${FLUX_SOURCE_GROUP}/v1`,
      kind: 'Bucket',
      metadata: { name: 'app', namespace: NS },
      spec: { provider: 'generic', bucketName: BUCKET, endpoint: s3.address, insecure: true, interval: '15s' },
    } as k8s.KubernetesObject);
    await op.objects.create(fluxStack(stack, 'Bucket', 'app'));
    const artifact = await artifactOf('Bucket', 'app', () => true);
    revision = artifact.revision;
    // A Bucket's revision is the digest of its objects' keys and ETags.
    expect(revision).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(artifact.url).toBe(`http://${ARTIFACT_HOST}/bucket/${NS}/app/${revision.replace('sha256:', '')}.tar.gz`);
    const ready = await deployed(stack, revision);
    recordTiming('Bucket created to Stack Ready', started);
    expect(ready.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastSuccessfulCommit: revision });
    expect(ready.status?.outputs).toEqual({ message: 'first' });
  }, 360_000);

  it('deploys changed objects, which Flux picks up at its interval', async () => {
    await upload('second');
    const started = Date.now();
    const artifact = await artifactOf('Bucket', 'app', (a) => a.revision !== revision);
    const ready = await deployed(stack, artifact.revision);
    recordTiming('upload to Stack Ready (Flux polling every 15 s)', started);
    expect(ready.status?.outputs).toEqual({ message: 'second' });
  }, 360_000);
});
