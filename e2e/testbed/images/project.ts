/**
 * The project's images, `hooks` and `agent`: the repository's Dockerfile built with `buildah bud`
 * on the base-image stand-ins, the agent with PULUMI_STAGE set to the toolchain's Pulumi image.
 * The cache key covers the Dockerfile, .dockerignore and every file of the build context as
 * .dockerignore filters it (path, executable bit, content), the build arguments and the keys of
 * the images it is built from.
 *
 * RUN steps use the host's network (npm ci, apt-get) and see one bind mount that is never
 * committed: a directory of the test bed's over /root (the RUN steps' HOME), holding npm's cache
 * and an .npmrc whose `cafile` is the host's CA bundle. Node.js reads only its own CA list, so
 * without it `npm ci` fails on a machine whose HTTPS goes through a proxy with a local CA; the
 * images themselves get nothing from the host.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { contextFiles } from '../../../packaging/lib/dockerignore';
import { hashFile, hashTree } from './hash';
import type { BuildContext, Recipe } from './recipe';
import { DOCKERFILE, IMAGE_REFS, type ImageName } from './refs';
import { REPO_ROOT } from '../toolchain';

const HOST_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';

function buildArgs(target: 'hooks' | 'agent'): Record<string, string> {
  return target === 'agent' ? { PULUMI_STAGE: IMAGE_REFS.pulumi } : {};
}

/** The RUN steps' /root: npm's cache (kept between builds) and, when the host has one, its CA bundle. */
function npmHome(ctx: BuildContext): string {
  const home = path.join(ctx.dirs.downloads, 'npm-home');
  fs.mkdirSync(home, { recursive: true });
  const rc: string[] = ['update-notifier=false'];
  if (fs.existsSync(HOST_CA_BUNDLE)) {
    fs.copyFileSync(HOST_CA_BUNDLE, path.join(home, 'host-ca.crt'));
    rc.push('cafile=/root/host-ca.crt');
  }
  fs.writeFileSync(path.join(home, '.npmrc'), `${rc.join('\n')}\n`);
  return home;
}

function projectImage(target: 'hooks' | 'agent', needs: ImageName[]): Recipe {
  return {
    name: target,
    needs,
    tools: ['runc'],
    async inputs() {
      const ignore = fs.readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8');
      return {
        dockerfile: await hashFile(DOCKERFILE),
        dockerignore: await hashFile(path.join(REPO_ROOT, '.dockerignore')),
        context: await hashTree(REPO_ROOT, contextFiles(REPO_ROOT, ignore)),
        target,
        buildArgs: JSON.stringify(buildArgs(target)),
      };
    },
    async build(ctx: BuildContext) {
      await ctx.buildah.bud({
        dockerfile: DOCKERFILE,
        contextDir: REPO_ROOT,
        target,
        tag: ctx.refs[target],
        buildArgs: buildArgs(target),
        volumes: [`${npmHome(ctx)}:/root`],
      });
    },
  };
}

export const hooks: Recipe = projectImage('hooks', ['node']);
export const agent: Recipe = projectImage('agent', ['node', 'pulumi']);
