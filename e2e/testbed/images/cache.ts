/**
 * The archive cache: archives/<image>.tar (docker-archive) and archives/<image>.json, the record
 * of the build that wrote it. An image is reused when its record has the same cache key (a hash
 * of its inputs and of the keys of the images it is built from) and its archive is intact.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { sha256 } from './hash';
import type { ImageDirs } from './paths';
import type { ImageName } from './refs';

/** Bumped when a change to the recipes must rebuild every image. */
const RECIPE_REVISION = '1';

export interface ArchiveRecord {
  name: ImageName;
  ref: string;
  key: string;
  /** The image ID (config digest) in buildah's storage. */
  imageId: string;
  archive: string;
  /** Size of the docker-archive tar (uncompressed layers), bytes. */
  bytes: number;
  /** Wall time of the build, seconds. */
  buildSeconds: number;
  builtAt: string;
  inputs: Record<string, string>;
}

export function cacheKey(
  name: ImageName,
  ref: string,
  inputs: Record<string, string>,
  neededKeys: Record<string, string>,
): string {
  const sorted = (o: Record<string, string>) =>
    Object.fromEntries(Object.entries(o).sort(([a], [b]) => a.localeCompare(b)));
  return sha256(
    JSON.stringify({ revision: RECIPE_REVISION, name, ref, inputs: sorted(inputs), needs: sorted(neededKeys) }),
  );
}

export function archivePath(dirs: ImageDirs, name: ImageName): string {
  return path.join(dirs.archives, `${name}.tar`);
}

function recordPath(dirs: ImageDirs, name: ImageName): string {
  return path.join(dirs.archives, `${name}.json`);
}

/** The record of the last build of `name`, when its archive is still there and complete. */
export function readRecord(dirs: ImageDirs, name: ImageName): ArchiveRecord | undefined {
  let record: ArchiveRecord;
  try {
    record = JSON.parse(fs.readFileSync(recordPath(dirs, name), 'utf8')) as ArchiveRecord;
  } catch {
    return undefined;
  }
  try {
    if (fs.statSync(record.archive).size !== record.bytes) return undefined;
  } catch {
    return undefined;
  }
  return record;
}

export function writeRecord(dirs: ImageDirs, record: ArchiveRecord): void {
  const file = recordPath(dirs, record.name);
  fs.writeFileSync(`${file}.partial`, `${JSON.stringify(record, null, 2)}\n`);
  fs.renameSync(`${file}.partial`, file);
}

/** Drops the record first, so an interrupted rebuild never leaves a stale record pointing at a new archive. */
export function dropRecord(dirs: ImageDirs, name: ImageName): void {
  fs.rmSync(recordPath(dirs, name), { force: true });
}
