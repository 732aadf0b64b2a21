/**
 * Upstream's own manifests, vendored unchanged under e2e/testdata/upstream (its NOTICE names the
 * commit and each file's git blob id), read the way `kubectl apply -f <dir>` reads a folder: every
 * .yaml, .yml and .json file directly in it (not in its subfolders), in name order, each file's
 * documents in order, empty documents skipped. Which upstream files are here and why:
 * docs/upstream-manifests.md.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { REPO_ROOT } from '../testbed/toolchain';

export const UPSTREAM_DIR = join(REPO_ROOT, 'e2e', 'testdata', 'upstream');

/** A vendored file: its path below UPSTREAM_DIR (= upstream's path) and its upstream git blob id. */
export interface VendoredFile {
  path: string;
  blob: string;
}

/** The files the NOTICE lists: lines `<40 hex blob id>  <path>`. */
export function vendoredFiles(notice = readFileSync(join(UPSTREAM_DIR, 'NOTICE'), 'utf8')): VendoredFile[] {
  return notice
    .split('\n')
    .map((line) => /^([0-9a-f]{40}) {2}(\S+)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ blob: m[1]!, path: m[2]! }));
}

/** The id git gives a file's content (`git hash-object`): sha1 of `blob <size>\0<content>`. */
export function gitBlobId(content: Buffer): string {
  return createHash('sha1')
    .update(Buffer.concat([Buffer.from(`blob ${content.length}\0`), content]))
    .digest('hex');
}

/** A Kubernetes object as a manifest spells it. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [field: string]: unknown;
}

function isManifest(doc: unknown): doc is Manifest {
  if (typeof doc !== 'object' || doc === null) return false;
  const d = doc as Record<string, unknown>;
  const meta = d.metadata as Record<string, unknown> | undefined;
  return typeof d.apiVersion === 'string' && typeof d.kind === 'string' && typeof meta?.name === 'string';
}

/**
 * The objects of one vendored folder (upstream's path, e.g. `operator/e2e/testdata/targets`), as
 * kubectl reads them; `root` is where the vendored files live (another vendored source's folder).
 */
export function manifestsIn(dir: string, root = UPSTREAM_DIR): Manifest[] {
  const abs = join(root, dir);
  const files = readdirSync(abs, { withFileTypes: true })
    .filter((e) => e.isFile() && /\.(ya?ml|json)$/.test(e.name))
    .map((e) => e.name)
    .sort();
  if (files.length === 0) throw new Error(`no manifests in ${abs}`);
  return files.flatMap((file) =>
    loadAll(readFileSync(join(abs, file), 'utf8')).flatMap((doc) => {
      if (doc === null || doc === undefined) return [];
      if (!isManifest(doc)) throw new Error(`${dir}/${file}: a document without apiVersion, kind and metadata.name`);
      return [doc];
    }),
  );
}

/** Every container image the objects name: Stack workspace images and pod template containers. */
export function imagesNamed(manifests: Manifest[]): string[] {
  const images = new Set<string>();
  for (const m of manifests) {
    if (m.kind !== 'Stack') continue;
    const ws = (m.spec as { workspaceTemplate?: { spec?: WorkspaceImages } } | undefined)?.workspaceTemplate?.spec;
    if (ws?.image) images.add(ws.image);
    const pod = ws?.podTemplate?.spec;
    for (const c of [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])]) if (c.image) images.add(c.image);
  }
  return [...images];
}

interface WorkspaceImages {
  image?: string;
  podTemplate?: { spec?: { initContainers?: { image?: string }[]; containers?: { image?: string }[] } };
}
