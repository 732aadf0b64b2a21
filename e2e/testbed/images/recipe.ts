/** What each image's module provides to the builder (build.ts). */
import type { Buildah } from './buildah';
import type { ImageDirs } from './paths';
import type { ImageName } from './refs';

export interface BuildContext {
  buildah: Buildah;
  dirs: ImageDirs;
  /** An empty scratch directory for this build, removed after it. */
  work: string;
  /** The image's log file (every command and its output). */
  log: string;
  /** The references of all images (a recipe builds FROM the ones it needs). */
  refs: Readonly<Record<ImageName, string>>;
}

export interface Recipe {
  name: ImageName;
  /** Images that must be in buildah's storage to build this one; their cache keys are part of its key. */
  needs: readonly ImageName[];
  /** Programs the build runs besides buildah (checked on PATH before it starts). */
  tools: readonly string[];
  /**
   * Everything else the image is made from, as named strings (content hashes, versions, command
   * lines): the cache key hashes them. Throws when an input is missing (e.g. the toolchain's Pulumi).
   */
  inputs(): Promise<Record<string, string>>;
  /** Builds the image into buildah's storage under `refs[name]`. */
  build(ctx: BuildContext): Promise<void>;
}
