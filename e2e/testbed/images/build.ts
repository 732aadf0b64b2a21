/**
 * Builds the test bed's images with buildah and keeps each as a docker-archive tar, rebuilt only
 * when a cache key changes (cache.ts). Order: debian → node → pause → pulumi → pulumiNonroot →
 * pulumiBase → pulumiOld → pulumiOldStructured → userPulumi → hooks → agent; an image is built
 * after the ones it needs, which are loaded back into buildah's storage from their archives when
 * the storage lost them.
 *
 *   const images = await buildImages();                 // all eleven
 *   await buildImages({ only: ['pause'] });             // pause (and what it needs)
 *   await buildImages({ force: ['debian'] });           // rebuild debian (and what is built FROM it)
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Buildah, mountsUnder } from './buildah';
import { archivePath, cacheKey, dropRecord, readRecord, writeRecord, type ArchiveRecord } from './cache';
import { debian } from './debian';
import { onPath, run } from './exec';
import { acquireLock } from './lock';
import { node } from './node';
import { imageDirs, type ImageDirs } from './paths';
import { pause } from './pause';
import { agent, hooks } from './project';
import { pulumi } from './pulumi';
import { pulumiBase, pulumiNonroot, pulumiOld, pulumiOldStructured } from './upstream-pulumi';
import { userPulumi } from './user-image';
import type { Recipe } from './recipe';
import { IMAGE_NAMES, IMAGE_REFS, type ImageName } from './refs';

const RECIPES: Record<ImageName, Recipe> = {
  debian,
  node,
  pause,
  pulumi,
  pulumiNonroot,
  pulumiBase,
  pulumiOld,
  pulumiOldStructured,
  userPulumi,
  hooks,
  agent,
};

export interface BuildOptions {
  /** Images wanted (default: all); the images they need are built too. */
  only?: readonly ImageName[];
  /** Rebuild these even when their cache key matches. */
  force?: readonly ImageName[];
  /** Progress lines (default: none). */
  progress?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

export interface ImageResult extends ArchiveRecord {
  /** True when the archive of an earlier build was used. */
  reused: boolean;
  /** Wall time in this call (checking the key, and building when not reused), seconds. */
  seconds: number;
}

/** The wanted images and everything they need, in build order. */
export function closure(wanted: readonly ImageName[]): ImageName[] {
  const all = new Set<ImageName>();
  const add = (n: ImageName) => {
    if (all.has(n)) return;
    all.add(n);
    RECIPES[n].needs.forEach(add);
  };
  wanted.forEach(add);
  return IMAGE_NAMES.filter((n) => all.has(n));
}

/**
 * The cache key of each wanted image (and of what it needs) for this checkout, as buildImages()
 * computes it: importers use it to find the archives built from these sources.
 */
export async function cacheKeys(wanted: readonly ImageName[]): Promise<Partial<Record<ImageName, string>>> {
  const keys: Partial<Record<ImageName, string>> = {};
  for (const name of closure(wanted)) {
    const recipe = RECIPES[name];
    const needed = Object.fromEntries(recipe.needs.map((n) => [n, keys[n]!]));
    keys[name] = cacheKey(name, IMAGE_REFS[name], await recipe.inputs(), needed);
  }
  return keys;
}

/** Leftovers of an interrupted or finished build: working containers, then mounts under our dirs. */
async function cleanUp(buildah: Buildah, dirs: ImageDirs): Promise<void> {
  try {
    await buildah.removeContainers();
  } finally {
    for (const m of [...mountsUnder(dirs.storage), ...mountsUnder(dirs.runroot)])
      await run('umount', [m], { log: buildah.log });
  }
}

/** Makes sure buildah's storage has `name` as recorded (a build FROM it follows). */
async function ensureInStorage(buildah: Buildah, record: ArchiveRecord): Promise<void> {
  if ((await buildah.imageId(record.ref)) === record.imageId) return;
  await buildah.loadArchive(record.archive, record.ref);
  const id = await buildah.imageId(record.ref);
  if (id !== record.imageId) throw new Error(`${record.archive} loaded as ${id}, recorded ${record.imageId}`);
}

export async function buildImages(options: BuildOptions = {}): Promise<ImageResult[]> {
  const dirs = imageDirs(options.env);
  for (const d of [dirs.root, dirs.archives, dirs.downloads, dirs.work, dirs.tmp, dirs.logs])
    fs.mkdirSync(d, { recursive: true });
  const progress = options.progress ?? (() => undefined);
  const release = await acquireLock(dirs.lock);
  const buildah = new Buildah(dirs, path.join(dirs.logs, 'cleanup.log'));
  const results: ImageResult[] = [];
  try {
    await cleanUp(buildah, dirs);
    const keys: Partial<Record<ImageName, string>> = {};
    const records: Partial<Record<ImageName, ArchiveRecord>> = {};
    for (const name of closure(options.only ?? IMAGE_NAMES)) {
      const started = Date.now();
      const recipe = RECIPES[name];
      const ref = IMAGE_REFS[name];
      const inputs = await recipe.inputs();
      const needed = Object.fromEntries(recipe.needs.map((n) => [n, keys[n]!]));
      const key = cacheKey(name, ref, inputs, needed);
      keys[name] = key;
      const previous = readRecord(dirs, name, key);
      if (previous && previous.key === key && !options.force?.includes(name)) {
        records[name] = previous;
        const seconds = (Date.now() - started) / 1000;
        results.push({ ...previous, reused: true, seconds });
        progress(`${name}: reused ${ref} (${seconds.toFixed(1)} s)`);
        continue;
      }
      const missing = ['buildah', ...recipe.tools].filter((t) => !onPath(t));
      if (missing.length > 0)
        throw new Error(
          `cannot build image ${name}: ${missing.join(', ')} not on PATH ` +
            '(Debian: apt-get install buildah mmdebstrap gcc libc6-dev runc containerd)',
        );
      progress(`${name}: building ${ref}`);
      const log = path.join(dirs.logs, `${name}.log`);
      fs.writeFileSync(log, `${new Date().toISOString()} ${name} ${ref} key ${key}\n`);
      buildah.log = log;
      const work = path.join(dirs.work, name);
      fs.rmSync(work, { recursive: true, force: true });
      fs.mkdirSync(work, { recursive: true });
      dropRecord(dirs, name, key);
      try {
        for (const n of recipe.needs) await ensureInStorage(buildah, records[n]!);
        await recipe.build({ buildah, dirs, work, log, refs: IMAGE_REFS });
        const archive = archivePath(dirs, name, key);
        await buildah.pushArchive(ref, `${archive}.partial`);
        fs.renameSync(`${archive}.partial`, archive);
        const imageId = await buildah.imageId(ref);
        if (imageId === undefined) throw new Error(`${ref} is not in buildah's storage after its build`);
        const seconds = (Date.now() - started) / 1000;
        const record: ArchiveRecord = {
          name,
          ref,
          key,
          imageId,
          archive,
          bytes: fs.statSync(archive).size,
          buildSeconds: seconds,
          builtAt: new Date().toISOString(),
          inputs,
        };
        writeRecord(dirs, record);
        records[name] = record;
        results.push({ ...record, reused: false, seconds });
        progress(`${name}: built ${ref} in ${seconds.toFixed(1)} s`);
      } finally {
        fs.rmSync(work, { recursive: true, force: true });
        await cleanUp(buildah, dirs);
      }
    }
    return results;
  } finally {
    release();
  }
}
