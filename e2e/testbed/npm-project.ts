/**
 * A Node.js Pulumi project with its dependencies vendored (node_modules and package-lock.json next
 * to package.json), as a user commits it for workspaces that cannot reach the npm registry: there
 * the language host's `npm install`, run with `npm_config_offline=true`, finds everything installed
 * and changes nothing.
 *
 * The test network has no registry either, so the project is built from this machine's npm cache,
 * which the repository's own `npm ci` filled. The versions are the repository's: the project's
 * lockfile is the part of the repository's package-lock.json that its dependencies reach (with the
 * same layout, so it is a valid tree of its own), and `npm install --offline` installs exactly those
 * from the cache. A fresh resolution would ask for the newest versions, which the cache may lack.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from './toolchain';

interface LockEntry {
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  peerDependenciesMeta?: Record<string, { optional?: boolean }>;
  dev?: boolean;
  devOptional?: boolean;
  peer?: boolean;
  [k: string]: unknown;
}

type Packages = Record<string, LockEntry>;

/** `node_modules/a/node_modules/@b/c` → `node_modules/a`; a top-level package → '' (the project). */
function parentOf(key: string): string {
  const i = key.lastIndexOf('/node_modules/');
  return i < 0 ? '' : key.slice(0, i);
}

/** Where Node.js finds `dep` from the package at `from`: its own node_modules, then its parents'. */
function resolve(packages: Packages, from: string, dep: string): string | undefined {
  for (let base = from; ; base = parentOf(base)) {
    const key = base === '' ? `node_modules/${dep}` : `${base}/node_modules/${dep}`;
    if (packages[key]) return key;
    if (base === '') return undefined;
  }
}

/**
 * The lockfile `packages` entries that `deps` reach in `lock`: dependencies, optional ones that are
 * there, and peers that are not optional (npm installs those), each entry as it is in `lock`
 * without the flags that say how the repository itself uses it.
 */
export function lockedSubtree(lock: { packages?: Packages }, deps: string[]): Packages {
  const packages = lock.packages ?? {};
  const out: Packages = {};
  const queue: string[] = [];
  const add = (key: string): void => {
    if (out[key]) return;
    const entry = { ...packages[key]! };
    delete entry.dev;
    delete entry.devOptional;
    delete entry.peer;
    out[key] = entry;
    queue.push(key);
  };
  for (const dep of deps) {
    const key = resolve(packages, '', dep);
    if (!key) throw new Error(`${dep} is not in the repository's package-lock.json`);
    add(key);
  }
  for (let key = queue.shift(); key !== undefined; key = queue.shift()) {
    const e = packages[key]!;
    const needed = [
      ...Object.keys(e.dependencies ?? {}).map((d) => [d, true] as const),
      ...Object.keys(e.optionalDependencies ?? {}).map((d) => [d, false] as const),
      ...Object.keys(e.peerDependencies ?? {})
        .filter((d) => !e.peerDependenciesMeta?.[d]?.optional)
        .map((d) => [d, true] as const),
    ];
    for (const [dep, required] of needed) {
      const found = resolve(packages, key, dep);
      if (found) add(found);
      else if (required) throw new Error(`${key} needs ${dep}, which the repository's package-lock.json lacks`);
    }
  }
  return out;
}

export interface VendoredProject {
  /** Packages under node_modules. */
  packages: number;
  /** Files under node_modules, and their bytes. */
  files: number;
  bytes: number;
}

function sizeOf(dir: string): { files: number; bytes: number } {
  let files = 0;
  let bytes = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (!e.isFile()) continue;
    files++;
    bytes += fs.statSync(path.join(e.parentPath, e.name)).size;
  }
  return { files, bytes };
}

/**
 * Writes a Node.js project into `dir`: `files` (Pulumi.yaml, index.js, …), a package.json depending
 * on `@pulumi/pulumi` at the repository's version, its package-lock.json and node_modules installed
 * offline from the npm cache (no install scripts, as nothing in @pulumi/pulumi's tree needs one).
 */
export function writeVendoredProject(dir: string, name: string, files: Record<string, string>): VendoredProject {
  const repoPackage = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as {
    dependencies: Record<string, string>;
  };
  const dependencies = { '@pulumi/pulumi': repoPackage.dependencies['@pulumi/pulumi']! };
  const repoLock = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'package-lock.json'), 'utf8')) as {
    packages?: Packages;
  };
  const manifest = { name, version: '1.0.0', main: 'index.js', dependencies };
  const lock = {
    name,
    version: '1.0.0',
    lockfileVersion: 3,
    requires: true,
    packages: { '': { name, version: '1.0.0', dependencies }, ...lockedSubtree(repoLock, Object.keys(dependencies)) },
  };
  fs.mkdirSync(dir, { recursive: true });
  for (const [file, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, file), content);
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest, null, 2) + '\n');
  fs.writeFileSync(path.join(dir, 'package-lock.json'), JSON.stringify(lock, null, 2) + '\n');
  const npm = spawnSync(
    'npm',
    ['install', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'],
    { cwd: dir, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' }, timeout: 300_000 },
  );
  if (npm.status !== 0)
    throw new Error(
      `npm install --offline of ${JSON.stringify(dependencies)} failed (the test network has no registry: the ` +
        `packages come from this machine's npm cache, which \`npm ci\` in the repository fills): ` +
        `${npm.error?.message ?? ''}${npm.stderr}`,
    );
  return { packages: Object.keys(lock.packages).length - 1, ...sizeOf(path.join(dir, 'node_modules')) };
}
