/**
 * buildah with the test bed's own storage (--root/--runroot under the cache dir, overlay driver)
 * and the settings this machine needs (docs/real-node.md): runc at /usr/sbin/runc, never pull,
 * and host or no networking for RUN steps (buildah's default networking changes the host's).
 */
import * as fs from 'node:fs';
import type { ImageDirs } from './paths';
import { run } from './exec';

export const RUNTIME = '/usr/sbin/runc';
export const STORAGE_DRIVER = 'overlay';

export interface BudOptions {
  dockerfile: string;
  contextDir: string;
  /** The stage to build; undefined: the last one. */
  target?: string;
  tag: string;
  buildArgs: Record<string, string>;
  /** `host:container[:options]` bind mounts for RUN steps only (never committed). */
  volumes: string[];
}

export class Buildah {
  constructor(
    readonly dirs: ImageDirs,
    /** Log file of the image being built. */
    public log: string,
  ) {}

  private env(): NodeJS.ProcessEnv {
    return { ...process.env, TMPDIR: this.dirs.tmp };
  }

  /** `buildah --root … --runroot … --storage-driver overlay <args>`, resolving with stdout. */
  exec(args: readonly string[]): Promise<string> {
    const global = ['--root', this.dirs.storage, '--runroot', this.dirs.runroot, '--storage-driver', STORAGE_DRIVER];
    return run('buildah', [...global, ...args], { log: this.log, env: this.env() });
  }

  /** The image's ID, or undefined when the storage has no image of that name. */
  async imageId(ref: string): Promise<string | undefined> {
    try {
      return (await this.exec(['inspect', '--type', 'image', '--format', '{{.FromImageID}}', ref])).trim();
    } catch {
      return undefined;
    }
  }

  /** A working container from a local image (or `scratch`); returns its name. */
  async from(image: string): Promise<string> {
    return (await this.exec(['from', '--pull=never', image])).trim();
  }

  copy(container: string, src: string, dest: string, chmod?: string): Promise<string> {
    return this.exec(['copy', ...(chmod ? ['--chmod', chmod] : []), container, src, dest]);
  }

  /** `buildah add`: a tar file is extracted into the container. */
  add(container: string, src: string, dest: string): Promise<string> {
    return this.exec(['add', container, src, dest]);
  }

  /** A command in the container without network. */
  runIn(container: string, argv: readonly string[]): Promise<string> {
    return this.exec(['run', '--runtime', RUNTIME, '--network', 'none', container, '--', ...argv]);
  }

  /** `buildah copy --from <image>`: `src` is a path in that image. */
  copyFrom(image: string, container: string, src: string, dest: string): Promise<string> {
    return this.exec(['copy', '--from', image, container, src, dest]);
  }

  /** A command in the container on the host's network (apt-get from Debian's mirror). */
  runOnHostNetwork(container: string, argv: readonly string[]): Promise<string> {
    return this.exec(['run', '--runtime', RUNTIME, '--network', 'host', container, '--', ...argv]);
  }

  config(container: string, flags: readonly string[]): Promise<string> {
    return this.exec(['config', ...flags, container]);
  }

  /** Commits the container as `ref` and removes it. */
  commit(container: string, ref: string): Promise<string> {
    return this.exec(['commit', '--quiet', '--rm', container, ref]);
  }

  /** `buildah bud` of one target, RUN steps on the host's network (npm ci, apt-get). */
  bud(o: BudOptions): Promise<string> {
    const buildArgs = Object.entries(o.buildArgs).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]);
    const volumes = o.volumes.flatMap((v) => ['--volume', v]);
    return this.exec([
      'bud',
      '--runtime',
      RUNTIME,
      '--pull=never',
      '--network',
      'host',
      '--layers',
      '--file',
      o.dockerfile,
      ...(o.target ? ['--target', o.target] : []),
      ...buildArgs,
      ...volumes,
      '--tag',
      o.tag,
      o.contextDir,
    ]);
  }

  /** Writes the image as a docker-archive tar that names it `ref`. */
  pushArchive(ref: string, file: string): Promise<string> {
    fs.rmSync(file, { force: true });
    return this.exec(['push', '--quiet', ref, `docker-archive:${file}:${ref}`]);
  }

  /** Loads a docker-archive written by pushArchive() back into the storage, under `ref`. */
  async loadArchive(file: string, ref: string): Promise<void> {
    const id = (await this.exec(['pull', '--quiet', `docker-archive:${file}`])).trim();
    await this.exec(['tag', id, ref]);
  }

  /** Removes working containers left behind (a failed build, or bud's alias stages). */
  async removeContainers(): Promise<void> {
    await this.exec(['rm', '--all']);
  }
}

/** Mount points at or below `dir` (deepest first), from /proc/self/mountinfo. */
export function mountsUnder(dir: string): string[] {
  const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)));
  const points = fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => unescape(l.split(' ')[4]!))
    .filter((p) => p === dir || p.startsWith(`${dir}/`));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}
