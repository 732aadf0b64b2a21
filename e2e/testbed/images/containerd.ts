/**
 * Moving the built images into a containerd (the test bed's node): `ctr -a <socket> -n k8s.io
 * images import <archive>` per image, the namespace the CRI plugin (kubelet) uses. Pods then run
 * them with `imagePullPolicy: Never`.
 */
import * as path from 'node:path';
import { cacheKeys } from './build';
import { readRecord } from './cache';
import { run } from './exec';
import { imageDirs } from './paths';
import { IMAGE_NAMES, IMAGE_REFS, NODE_IMAGES, type ImageName } from './refs';

export interface ImportOptions {
  /**
   * Default: pause, debian, node, pulumiNonroot, hooks and agent (the pulumi image is only a build
   * input; the stand-ins of pulumi-base and of the older pulumi/pulumi releases are imported only when
   * named).
   */
  images?: readonly ImageName[];
  namespace?: string;
  env?: NodeJS.ProcessEnv;
}

export interface ImportResult {
  name: ImageName;
  ref: string;
  archive: string;
  seconds: number;
}

function ctr(address: string, namespace: string, args: string[], log: string): Promise<string> {
  return run('ctr', ['--address', address, '--namespace', namespace, ...args], { log });
}

/**
 * Imports the archives that buildImages() made from this checkout into the containerd at
 * `containerdAddress` (its gRPC socket) and checks that each reference is listed afterwards. Throws
 * when an image was not built from these sources.
 */
export async function importImages(containerdAddress: string, options: ImportOptions = {}): Promise<ImportResult[]> {
  const dirs = imageDirs(options.env);
  const namespace = options.namespace ?? 'k8s.io';
  const log = path.join(dirs.logs, 'import.log');
  const names = options.images ?? NODE_IMAGES;
  const results: ImportResult[] = [];
  const keys = await cacheKeys(names);
  for (const name of IMAGE_NAMES.filter((n) => names.includes(n))) {
    const record = readRecord(dirs, name, keys[name]!);
    if (!record) throw new Error(`image ${name} is not built from this checkout: run npm run testbed:images`);
    const started = Date.now();
    await ctr(containerdAddress, namespace, ['images', 'import', record.archive], log);
    results.push({ name, ref: record.ref, archive: record.archive, seconds: (Date.now() - started) / 1000 });
  }
  const listed = new Set((await ctr(containerdAddress, namespace, ['images', 'list', '--quiet'], log)).split('\n'));
  const missing = results.filter((r) => !listed.has(r.ref)).map((r) => r.ref);
  if (missing.length > 0)
    throw new Error(`containerd at ${containerdAddress} does not list ${missing.join(', ')} after the import`);
  return results;
}

/**
 * The node's images in the containerd at `containerdAddress`, importing only those it does not
 * list yet: the first test file of a run imports them, the others find them there.
 */
export async function ensureImages(containerdAddress: string, options: ImportOptions = {}): Promise<ImportResult[]> {
  const dirs = imageDirs(options.env);
  const namespace = options.namespace ?? 'k8s.io';
  const log = path.join(dirs.logs, 'import.log');
  const listed = new Set((await ctr(containerdAddress, namespace, ['images', 'list', '--quiet'], log)).split('\n'));
  const names = (options.images ?? NODE_IMAGES).filter((n) => !listed.has(IMAGE_REFS[n]));
  return names.length > 0 ? importImages(containerdAddress, { ...options, images: names }) : [];
}
