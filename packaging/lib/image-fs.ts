/**
 * The file systems of our images, without building them: the Dockerfile's `build` stage is
 * emulated in a temporary directory (its COPYs from the build context, then its RUNs, which must be
 * `npm ci` and `npm run build`), and every path of a target image is traced back through its COPY
 * instructions to the build context, the emulated build output, the production dependencies of
 * package-lock.json, the Pulumi binaries the `pulumi` stage installs, the packages apt installs or
 * the base image. Used by packaging/dockerfile.test.ts.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { copiedEntries, type Dockerfile, effectiveStage, type Stage, stageNamed } from './dockerfile';
import { contextFiles } from './dockerignore';
import { ROOT } from './repo';

const run = promisify(execFile);

/** Files a stage's base image provides that our images rely on. */
const BASE_IMAGE_FILES: Record<string, string[]> = {
  node: [
    '/bin/sh',
    '/usr/bin/env',
    '/usr/local/bin/node',
    '/usr/local/bin/npm',
    '/usr/local/bin/npx',
    '/usr/local/bin/corepack',
    '/home/node',
  ],
  debian: ['/bin/sh', '/usr/bin/env', '/usr/bin/sha256sum', '/usr/bin/install', '/bin/tar'],
};

/** Files the Debian packages we install provide (the ones our images use). */
const APT_FILES: Record<string, string[]> = {
  tini: ['/usr/bin/tini'],
  git: ['/usr/bin/git'],
  'openssh-client': ['/usr/bin/ssh'],
  'ca-certificates': ['/etc/ssl/certs/ca-certificates.crt'],
  curl: ['/usr/bin/curl'],
};

export type Resolved =
  | { kind: 'host'; hostPath: string; what: string }
  | { kind: 'known'; executable: boolean; what: string }
  | { kind: 'missing'; why: string };

export interface BuildEmulation {
  /** The emulated build stage's root file system (stage paths are under it). */
  root: string;
  /** Output of `npm run build` (stdout+stderr) and whether it exited 0. */
  buildOutput: string;
  buildOk: boolean;
  /** Context files the build stage received. */
  context: string[];
  cleanup(): void;
}

function aptPackages(stage: Stage): string[] {
  const out: string[] = [];
  for (const r of stage.runs) {
    const m = /apt-get install\s+((?:-\S+\s+)*)([^&;|]+)/.exec(r.command);
    if (m) out.push(...m[2]!.trim().split(/\s+/));
  }
  return out;
}

function removedPaths(stage: Stage): string[] {
  const out: string[] = [];
  for (const r of stage.runs) {
    const m = /^rm -rf (.+)$/.exec(r.command.trim());
    if (m) out.push(...m[1]!.split(/\s+/));
  }
  return out;
}

function matchesGlob(glob: string, p: string): boolean {
  const re = new RegExp(
    `^${glob
      .split('*')
      .map((s) => s.replace(/[.+?^${}()|[\]\\/]/g, '\\$&'))
      .join('[^/]*')}(/.*)?$`,
  );
  return re.test(p);
}

/** The binaries the `pulumi-release` stage installs into /pulumi/bin (from its `for f in …; do install` loop). */
export function pulumiBinaries(stage: Stage): string[] {
  for (const r of stage.runs) {
    const m = /for f in ([^;]+); do\s+install -m 0755 "pulumi\/\$\{f\}" \/pulumi\/bin\//.exec(r.command);
    if (m) return m[1]!.trim().split(/\s+/);
  }
  return [];
}

/**
 * Runs the build stage: copies what its COPYs name (as the build context has it) into a temporary
 * root, links the repository's node_modules for `npm ci`, and runs `npm run build` there.
 */
export async function emulateBuildStage(df: Dockerfile, dockerignore: string): Promise<BuildEmulation> {
  const stage = stageNamed(df, 'build');
  const context = contextFiles(ROOT, dockerignore);
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-image-build-'));
  const cleanup = () => fs.rmSync(root, { recursive: true, force: true });
  let buildOutput = '';
  let buildOk = true;
  try {
    let copyIndex = 0;
    for (const { instruction, workdir } of stage.instructions) {
      const hostWorkdir = path.join(root, workdir);
      fs.mkdirSync(hostWorkdir, { recursive: true });
      if (instruction.keyword === 'COPY') {
        const copy = stage.copies[copyIndex++]!;
        if (copy.from !== undefined) throw new Error(`build stage: COPY --from is not emulated (line ${copy.line})`);
        for (const src of copy.sources) {
          const clean = src.replace(/\/+$/, '');
          const files = context.filter((f) => f === clean || f.startsWith(`${clean}/`));
          if (files.length === 0)
            throw new Error(`build stage line ${copy.line}: "${src}" is not in the build context`);
          const isDir = !(files.length === 1 && files[0] === clean);
          for (const f of files) {
            // A directory source copies its contents (Docker never copies the directory itself).
            const dest = isDir
              ? path.join(root, copy.dest, path.posix.relative(clean, f))
              : copy.destIsDir
                ? path.join(root, copy.dest, path.posix.basename(f))
                : path.join(root, copy.dest);
            fs.mkdirSync(path.dirname(dest), { recursive: true });
            fs.copyFileSync(path.join(ROOT, f), dest);
            fs.chmodSync(dest, fs.statSync(path.join(ROOT, f)).mode & 0o777);
          }
        }
      } else if (instruction.keyword === 'RUN') {
        const cmd = instruction.args.trim();
        if (/^npm ci(\s+--no-audit|\s+--no-fund)*$/.test(cmd)) {
          if (!fs.existsSync(path.join(hostWorkdir, 'package-lock.json')))
            throw new Error('build stage: npm ci runs before package-lock.json is copied');
          fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(hostWorkdir, 'node_modules'), 'dir');
        } else if (cmd === 'npm run build') {
          try {
            const r = await run('npm', ['run', 'build', '--silent'], {
              cwd: hostWorkdir,
              maxBuffer: 64 * 1024 * 1024,
              env: { ...process.env, npm_config_update_notifier: 'false' },
            });
            buildOutput = `${r.stdout}${r.stderr}`;
          } catch (e) {
            const err = e as { stdout?: string; stderr?: string; message: string };
            buildOk = false;
            buildOutput = `${err.stdout ?? ''}${err.stderr ?? ''}` || err.message;
          }
        } else {
          throw new Error(`build stage: RUN "${cmd}" is not emulated by packaging/lib/image-fs.ts`);
        }
      }
    }
  } catch (e) {
    cleanup();
    throw e;
  }
  return { root, buildOutput, buildOk, context, cleanup };
}

/** Production packages of package-lock.json: what `npm ci --omit=dev` installs. */
export function productionPackages(): Set<string> {
  const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  const out = new Set<string>();
  for (const [key, meta] of Object.entries(lock.packages)) {
    if (!key.startsWith('node_modules/') || meta.dev === true) continue;
    // nested node_modules/a/node_modules/b: the top-level name is what a require from our code sees
    if (key.lastIndexOf('node_modules/') === 0) out.add(key.slice('node_modules/'.length));
  }
  return out;
}

/**
 * A target image's file system, traced through its COPYs. `resolve(p)` says where an image path
 * comes from: a host file (the context or the emulated build), something known to exist (base
 * image, apt package, Pulumi binary, a production package) or nothing.
 */
export class ImageFs {
  private readonly stage: Stage;
  private readonly entries: ReturnType<typeof copiedEntries>;
  private readonly known = new Map<string, string>();
  private readonly removed: string[];

  constructor(
    private readonly df: Dockerfile,
    target: string,
    private readonly build: BuildEmulation,
  ) {
    this.stage = stageNamed(df, target);
    this.entries = copiedEntries(this.stage);
    const baseKind = this.stage.base.startsWith('node:')
      ? 'node'
      : this.stage.base.startsWith('debian:')
        ? 'debian'
        : undefined;
    for (const f of baseKind ? BASE_IMAGE_FILES[baseKind]! : []) this.known.set(f, `base image ${this.stage.base}`);
    for (const pkg of aptPackages(this.stage))
      for (const f of APT_FILES[pkg] ?? []) this.known.set(f, `apt package ${pkg}`);
    this.removed = removedPaths(this.stage);
  }

  get target(): string {
    return this.stage.name;
  }

  resolve(imagePath: string): Resolved {
    const p = path.posix.normalize(imagePath);
    if (this.removed.some((g) => matchesGlob(g, p)))
      return { kind: 'missing', why: `${p} is removed by a RUN rm -rf in stage ${this.stage.name}` };
    // The last COPY that covers the path wins.
    for (const e of [...this.entries].reverse()) {
      if (p !== e.imagePath && !p.startsWith(`${e.imagePath}/`)) continue;
      const rest = p.slice(e.imagePath.length);
      if (e.origin.kind === 'context') {
        const rel = `${e.origin.path}${rest}`;
        const inContext = this.build.context.some((f) => f === rel || f.startsWith(`${rel}/`));
        if (!inContext)
          return {
            kind: 'missing',
            why: `${p} comes from ${rel} in the build context (line ${e.line}), which is not there`,
          };
        return { kind: 'host', hostPath: path.join(ROOT, rel), what: `${rel} (build context)` };
      }
      return this.resolveInStage(e.origin.stage, `${e.origin.path}${rest}`, p, e.line);
    }
    const known = this.known.get(p);
    if (known) return { kind: 'known', executable: !p.startsWith('/home/') && !p.startsWith('/etc/'), what: known };
    return { kind: 'missing', why: `nothing in stage ${this.stage.name} puts anything at ${p}` };
  }

  private resolveInStage(name: string, stagePath: string, imagePath: string, line: number): Resolved {
    const from = effectiveStage(this.df, name);
    const stageName = from.name;
    if (stageName === 'build') {
      const host = path.join(this.build.root, stagePath);
      if (fs.existsSync(host)) return { kind: 'host', hostPath: host, what: `${stagePath} of the build stage` };
      return {
        kind: 'missing',
        why: `${imagePath} is copied from ${stagePath} of the build stage (line ${line}), which the build does not produce`,
      };
    }
    if (stageName === 'prod-deps') {
      const m = /^\/app\/node_modules(?:\/((?:@[^/]+\/)?[^/]+))?/.exec(stagePath);
      if (!m) return { kind: 'missing', why: `${stagePath} of stage prod-deps is not node_modules` };
      if (m[1] === undefined) return { kind: 'known', executable: false, what: 'production node_modules' };
      if (!productionPackages().has(m[1]))
        return { kind: 'missing', why: `${m[1]} is not a production dependency (npm ci --omit=dev leaves it out)` };
      return {
        kind: 'host',
        hostPath: path.join(ROOT, 'node_modules', stagePath.slice('/app/node_modules/'.length)),
        what: `production package ${m[1]}`,
      };
    }
    if (stageName === 'pulumi-release') {
      const bins = pulumiBinaries(from);
      if (stagePath === '/pulumi/bin') return { kind: 'known', executable: false, what: 'Pulumi binaries' };
      const name = stagePath.startsWith('/pulumi/bin/') ? stagePath.slice('/pulumi/bin/'.length) : '';
      if (bins.includes(name))
        return { kind: 'known', executable: true, what: `Pulumi ${name} from the release tarball` };
      return {
        kind: 'missing',
        why: `${stagePath} is not among the Pulumi binaries the pulumi-release stage installs (${bins.join(', ')})`,
      };
    }
    return { kind: 'missing', why: `stage ${stageName} is not emulated` };
  }

  /** Whether the image path exists and is an executable file. */
  isExecutable(imagePath: string): { ok: boolean; why: string } {
    const r = this.resolve(imagePath);
    if (r.kind === 'missing') return { ok: false, why: r.why };
    if (r.kind === 'known')
      return r.executable
        ? { ok: true, why: r.what }
        : { ok: false, why: `${imagePath} (${r.what}) is not an executable` };
    const st = fs.statSync(r.hostPath);
    if (!st.isFile()) return { ok: false, why: `${imagePath} (${r.what}) is not a file` };
    if ((st.mode & 0o111) === 0)
      return { ok: false, why: `${imagePath} (${r.what}) is not executable (mode ${(st.mode & 0o777).toString(8)})` };
    return { ok: true, why: r.what };
  }

  /** Resolves a command name the way execvp does, on the image's PATH. */
  which(command: string, pathDirs: string[]): { imagePath?: string; tried: string[] } {
    if (command.includes('/'))
      return this.isExecutable(command).ok ? { imagePath: command, tried: [command] } : { tried: [command] };
    const tried: string[] = [];
    for (const dir of pathDirs) {
      const candidate = path.posix.join(dir, command);
      tried.push(candidate);
      if (this.isExecutable(candidate).ok) return { imagePath: candidate, tried };
    }
    return { tried };
  }
}

/** Literal `require("…")` targets of a compiled CommonJS file (static and lazy requires alike). */
export function requiresOf(source: string): string[] {
  const out = new Set<string>();
  const re = /\brequire\(\s*(["'])([^"']+)\1\s*\)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(source)) !== null) out.add(m[2]!);
  return [...out];
}

/** The npm package a bare specifier names: `@scope/name` or `name`. */
export function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
}
