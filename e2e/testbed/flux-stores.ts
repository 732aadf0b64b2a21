/**
 * The stores behind Flux's OCIRepository and Bucket on the test bed, each a toolchain binary run as
 * a process on the node's address (plain HTTP, so the sources say `insecure: true`):
 *
 * - an OCI registry, distribution's `registry` (component `distribution`), with its filesystem
 *   storage in the node's directory; `pushArtifact()` pushes what `flux push artifact` pushes;
 * - an S3-compatible server, gofakes3 (component `gofakes3`), a stand-in for MinIO or AWS S3, in
 *   memory with one bucket; `putObject()` uploads a file as `aws s3 cp` or `mc cp` would.
 *
 * Why these two, and what each costs to build: docs/testbed.md ("OCIRepository and Bucket").
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Operator } from '../harness';
import { tarGz } from '../../agent/test/tarball';
import { request } from './control-plane/helpers';
import { freePort } from './helpers';
import { startUntilReady } from './control-plane/processes';
import { requireToolchain } from './toolchain';

/** The media types `flux push artifact` gives its manifest's config and its one layer. */
const FLUX_CONFIG_MEDIA_TYPE = 'application/vnd.cncf.flux.config.v1+json';
export const FLUX_CONTENT_MEDIA_TYPE = 'application/vnd.cncf.flux.content.v1.tar+gzip';
const MANIFEST_MEDIA_TYPE = 'application/vnd.oci.image.manifest.v1+json';

/** A server process on the node: `<node address>:<port>`, its log, and how to stop it. */
export interface NodeServer {
  address: string;
  logFile: string;
  stop(): Promise<void>;
}

/**
 * Runs `binary` in a directory of the node's (its log there too) until `ready(address)` says so;
 * `args` get the directory and the address (`<node address>:<free port>`) to listen on.
 */
async function launchOnNode(
  op: Operator,
  name: string,
  binary: string,
  args: (dir: string, address: string) => string[],
  ready: (address: string) => Promise<boolean>,
  env: Record<string, string> = {},
): Promise<NodeServer> {
  const dir = fs.mkdtempSync(path.join(op.node.dir, `${name}-`));
  const address = `${op.node.address}:${await freePort(op.node.address)}`;
  const started = await startUntilReady(
    dir,
    name,
    binary,
    args(dir, address),
    { HOME: dir, TMPDIR: dir, ...env },
    {
      what: `${name} to answer on ${address}`,
      check: () => ready(address),
    },
  );
  return { address, ...started };
}

/**
 * distribution's registry on the node, storing on the filesystem under its directory. The
 * configuration is the image's `config.yml` but for the address and the storage path; OpenTelemetry
 * export is off (nothing to send traces to; otherwise it retries a collector on loopback).
 */
export async function startOciRegistry(op: Operator): Promise<NodeServer> {
  const tc = requireToolchain(['distribution']);
  return launchOnNode(
    op,
    'registry',
    tc.binaries.registry,
    (dir, address) => {
      const config = path.join(dir, 'config.yml');
      fs.writeFileSync(
        config,
        [
          'version: 0.1',
          'log:',
          '  level: info',
          'storage:',
          '  filesystem:',
          `    rootdirectory: ${path.join(dir, 'storage')}`,
          '  delete:',
          '    enabled: true',
          'http:',
          `  addr: ${address}`,
          '',
        ].join('\n'),
      );
      return ['serve', config];
    },
    async (address) => (await request(`http://${address}/v2/`)).status === 200,
    { OTEL_TRACES_EXPORTER: 'none' },
  );
}

const sha256 = (data: Buffer): string => `sha256:${createHash('sha256').update(data).digest('hex')}`;

async function ok(what: string, response: Response, expected: number): Promise<Response> {
  if (response.status !== expected)
    throw new Error(`${what}: HTTP ${response.status} (expected ${expected}): ${await response.text()}`);
  return response;
}

/** Uploads a blob with the registry API's monolithic upload (POST, then PUT with the digest). */
async function pushBlob(registry: string, repository: string, data: Buffer): Promise<string> {
  const digest = sha256(data);
  const started = await ok(
    `starting an upload to ${repository}`,
    await fetch(`http://${registry}/v2/${repository}/blobs/uploads/`, { method: 'POST' }),
    202,
  );
  const location = new URL(started.headers.get('location') ?? '', `http://${registry}`);
  location.searchParams.set('digest', digest);
  await ok(
    `uploading ${digest} to ${repository}`,
    await fetch(location, {
      method: 'PUT',
      body: new Uint8Array(data),
      headers: { 'content-type': 'application/octet-stream' },
    }),
    201,
  );
  return digest;
}

/**
 * Pushes `files` as `flux push artifact oci://<registry>/<repository>:<tag> --path=<dir>` does: a
 * gzipped tarball of them as the one layer (FLUX_CONTENT_MEDIA_TYPE), an empty config of Flux's
 * config media type, and the source and revision annotations. Returns the manifest's digest, which
 * source-controller puts in the artifact's revision (`<tag>@sha256:...`).
 */
export async function pushArtifact(
  registry: string,
  repository: string,
  tag: string,
  files: Record<string, string>,
  annotations: { source: string; revision: string },
): Promise<string> {
  const layer = tarGz(Object.entries(files).map(([p, content]) => ({ path: p, content })));
  const config = Buffer.from('{}');
  const descriptor = (mediaType: string, data: Buffer, digest: string) => ({ mediaType, digest, size: data.length });
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MANIFEST_MEDIA_TYPE,
      config: descriptor(FLUX_CONFIG_MEDIA_TYPE, config, await pushBlob(registry, repository, config)),
      layers: [descriptor(FLUX_CONTENT_MEDIA_TYPE, layer, await pushBlob(registry, repository, layer))],
      annotations: {
        'org.opencontainers.image.created': new Date().toISOString(),
        'org.opencontainers.image.source': annotations.source,
        'org.opencontainers.image.revision': annotations.revision,
      },
    }),
  );
  await ok(
    `putting the manifest ${repository}:${tag}`,
    await fetch(`http://${registry}/v2/${repository}/manifests/${tag}`, {
      method: 'PUT',
      body: new Uint8Array(manifest),
      headers: { 'content-type': MANIFEST_MEDIA_TYPE },
    }),
    201,
  );
  return sha256(manifest);
}

/** gofakes3 on the node, in memory, with the bucket `bucket` made at its start. */
export async function startS3Server(op: Operator, bucket: string): Promise<NodeServer> {
  const tc = requireToolchain(['gofakes3']);
  return launchOnNode(
    op,
    'gofakes3',
    tc.binaries.gofakes3,
    (_dir, address) => ['-backend', 'memory', '-initialbucket', bucket, '-host', address],
    async (address) => (await request(`http://${address}/${bucket}?location`)).status === 200,
  );
}

/**
 * Uploads an object as an S3 client does, path-style (`PUT /<bucket>/<key>`), with the body's
 * Content-MD5; unsigned: gofakes3 checks no signature.
 */
export async function putObject(s3: string, bucket: string, key: string, content: string): Promise<void> {
  const body = Buffer.from(content);
  await ok(
    `putting s3://${bucket}/${key}`,
    await fetch(`http://${s3}/${bucket}/${key}`, {
      method: 'PUT',
      body: new Uint8Array(body),
      headers: { 'content-md5': createHash('md5').update(body).digest('base64') },
    }),
    200,
  );
}
