/**
 * "Images" for the pod runner. Nothing is pulled or unpacked: an image reference maps to what a
 * container of that image sees on top of the host's file system: directories put first on PATH,
 * host directories bind-mounted at container paths, default env, ENTRYPOINT/CMD, WORKDIR, USER and
 * per-container writable directories. See docs/pod-runner.md.
 */

export interface ImageBind {
  /** Host path (file or directory). */
  hostPath: string;
  /** Default true: a host directory must not be changed by a container. */
  readOnly?: boolean;
}

export interface WritableDir {
  /** Owner of the fresh directory (default: the container's uid/gid). */
  uid?: number;
  gid?: number;
  /** Default 0o755. */
  mode?: number;
}

export interface ImageConfig {
  /** Directories, as the container sees them (after binds), put first on PATH. */
  path?: string[];
  /** Container path → host path bind-mounted there (read-only unless readOnly: false). */
  binds?: Record<string, string | ImageBind>;
  /**
   * Fresh empty directories, one per container (like paths of the image's writable layer), at
   * these container paths: e.g. a home directory `{ '/home/pulumi': {} }`.
   */
  writableDirs?: Record<string, WritableDir>;
  /** The image's ENV. The container's env overrides it; PATH here replaces the computed PATH. */
  env?: Record<string, string>;
  /** ENTRYPOINT and CMD, used as Docker does when the container sets no command / args. */
  entrypoint?: string[];
  cmd?: string[];
  /** WORKDIR (default "/"). */
  workingDir?: string;
  /** USER as numeric ids (default 0:0, root). Decides runAsNonRoot without runAsUser. */
  user?: number;
  group?: number;
  /** Base PATH after `path` (default: the test process's PATH). */
  basePath?: string;
}

/** Image pattern → config. Patterns: `*` matches any run of characters; first match wins. */
export type ImageRegistry = Record<string, ImageConfig>;

function globToRegExp(glob: string): RegExp {
  return new RegExp(
    `^${glob
      .split('*')
      .map((s) => s.replace(/[.+?^${}()|[\]\\/]/g, '\\$&'))
      .join('.*')}$`,
  );
}

/**
 * The config for an image reference, or undefined when no pattern matches. A reference without a
 * tag also matches patterns written for `:latest`, as the registry would resolve it.
 */
export function resolveImage(registry: ImageRegistry, image: string): ImageConfig | undefined {
  const candidates = [image];
  const lastSlash = image.lastIndexOf('/');
  if (!image.includes('@') && !image.slice(lastSlash + 1).includes(':')) candidates.push(`${image}:latest`);
  for (const [pattern, config] of Object.entries(registry)) {
    const re = globToRegExp(pattern);
    if (candidates.some((c) => re.test(c))) return config;
  }
  return undefined;
}

/** A stable, fake image ID for the status (`<image>@sha256:<hash of the reference>`). */
export function imageID(image: string, hash: (s: string) => string): string {
  const repo = image.replace(/@.*$/, '').replace(/:[^:/]*$/, '');
  return `${repo}@sha256:${hash(image)}`;
}
