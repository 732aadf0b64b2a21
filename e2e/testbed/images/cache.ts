/**
 * The archive cache: archives/<image>-<key>.tar (docker-archive) and archives/<image>-<key>.json,
 * the record of the build that wrote it, where <key> (16 hex digits) is the cache key: a hash of
 * the image's inputs and of the keys of the images it is built from. An image is reused when a
 * record with its key is there and its archive is intact. Keyed names let checkouts with different
 * sources (git worktrees on one machine) keep their own project images side by side; the oldest
 * archives of an image beyond KEEP_PER_IMAGE are removed.
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

/** Archives kept per image (the newest): a few checkouts' worth, so that worktrees building in turn do not evict each other's images. */
const KEEP_PER_IMAGE = 6;

const stem = (name: ImageName, key: string): string => `${name}-${key.slice(0, 16)}`;

export function archivePath(dirs: ImageDirs, name: ImageName, key: string): string {
  return path.join(dirs.archives, `${stem(name, key)}.tar`);
}

function recordPath(dirs: ImageDirs, name: ImageName, key: string): string {
  return path.join(dirs.archives, `${stem(name, key)}.json`);
}

/** The record of the build of `name` with cache key `key`, when its archive is still there and complete. */
export function readRecord(dirs: ImageDirs, name: ImageName, key: string): ArchiveRecord | undefined {
  let record: ArchiveRecord;
  try {
    record = JSON.parse(fs.readFileSync(recordPath(dirs, name, key), 'utf8')) as ArchiveRecord;
  } catch {
    return undefined;
  }
  try {
    if (record.key !== key || fs.statSync(record.archive).size !== record.bytes) return undefined;
  } catch {
    return undefined;
  }
  return record;
}

export function writeRecord(dirs: ImageDirs, record: ArchiveRecord): void {
  const file = recordPath(dirs, record.name, record.key);
  fs.writeFileSync(`${file}.partial`, `${JSON.stringify(record, null, 2)}\n`);
  fs.renameSync(`${file}.partial`, file);
  pruneArchives(dirs, record.name);
}

/** Removes the oldest records and archives of `name` beyond KEEP_PER_IMAGE. */
function pruneArchives(dirs: ImageDirs, name: ImageName): void {
  const mine = new RegExp(`^${name}-[0-9a-f]{16}\\.json$`);
  const records = fs
    .readdirSync(dirs.archives)
    .filter((f) => mine.test(f))
    .map((f) => ({ f, t: fs.statSync(path.join(dirs.archives, f)).mtimeMs }))
    .sort((a, b) => b.t - a.t);
  for (const { f } of records.slice(KEEP_PER_IMAGE)) {
    fs.rmSync(path.join(dirs.archives, f), { force: true });
    fs.rmSync(path.join(dirs.archives, f.replace(/\.json$/, '.tar')), { force: true });
  }
}

/** Drops the record first, so an interrupted rebuild never leaves a stale record pointing at a new archive. */
export function dropRecord(dirs: ImageDirs, name: ImageName, key: string): void {
  fs.rmSync(recordPath(dirs, name, key), { force: true });
}
