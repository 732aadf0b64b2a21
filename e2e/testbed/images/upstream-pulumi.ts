/**
 * Stand-ins of Pulumi's own images, under their upstream names, for workspaces that run in the
 * user's choice of Pulumi image (pulumi-docker-containers' nonroot variants):
 *
 *   pulumiNonroot  docker.io/pulumi/pulumi:<version>-nonroot       debian + Node.js (node.ts's, with
 *                                                                  npm) + git + the toolchain's
 *                                                                  pulumi, pulumi-language-yaml,
 *                                                                  pulumi-resource-pulumi-nodejs,
 *                                                                  and pulumi-language-nodejs: the
 *                                                                  test-bed host (one bundled file,
 *                                                                  dist/bundles/language-nodejs.js);
 *                                                                  and the toolchain's Kubernetes
 *                                                                  provider installed as a plugin
 *                                                                  (PREINSTALLED_PLUGINS)
 *   pulumiBase     docker.io/pulumi/pulumi-base:<version>-nonroot  debian + pulumi,
 *                                                                  pulumi-language-yaml and the same
 *                                                                  pulumi-language-nodejs: no
 *                                                                  Node.js, no git
 *   pulumiOld      docker.io/pulumi/pulumi:<old version>-nonroot   pulumiNonroot's shape with one
 *   pulumiOld-     (3.197.0 and 3.203.0, older-clis.ts)           of the toolchain's older pulumis
 *   Structured                                                     (OLD_PULUMI_VERSIONS) and the
 *                                                                  current YAML host, which runs
 *                                                                  with them (gRPC only)
 *
 * Every stand-in here has pulumi-language-nodejs because Pulumi's images all ship
 * every language host of the CLI tarball; pulumi-base has no runtime for them, so there a Node.js
 * project fails (the test-bed host, a Node.js script, cannot even start; the real one finds no npm).
 * All four: /pulumi/bin first on PATH, user and group `pulumi` 1000:1000 with home /home/pulumi,
 * `USER 1000:1000`, WORKDIR /home/pulumi, CMD ["pulumi"]. The binaries are copied from the
 * toolchain as the `pulumi` recipe does; Node.js from the node stand-in (`buildah copy --from`);
 * git by apt-get from Debian's mirror (the one RUN step on the host's network).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { hashFile } from './hash';
import type { BuildContext, Recipe } from './recipe';
import type { ImageName } from './refs';
import { OLDER_CLIS } from '../older-clis';
import {
  binaryPath,
  oldPulumiBinary,
  REPO_ROOT,
  requireBinaries,
  type ToolchainBinaries,
  versions,
} from '../toolchain';

const ADD_USER = 'groupadd --gid 1000 pulumi && useradd --uid 1000 --gid pulumi --shell /bin/bash --create-home pulumi';
const INSTALL_GIT =
  'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ' +
  'git ca-certificates >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/*';
const PATH_ENV = 'PATH=/pulumi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
const CONFIG = ['--env', PATH_ENV, '--user', '1000:1000', '--workingdir', '/home/pulumi', '--cmd', '["pulumi"]'];

/** Binary name in /pulumi/bin → its toolchain key. */
type Binaries = Record<string, keyof ToolchainBinaries>;

/**
 * A plugin in `pulumi plugin install`'s layout: ~/.pulumi/plugins/<kind>-<name>-v<version>/ holding
 * the binary, owned by the image's user.
 */
interface Plugin {
  /** `resource-kubernetes-v4.25.0` */
  dir: string;
  binary: string;
  key: keyof ToolchainBinaries;
}

/**
 * Plugins the pulumi/pulumi stand-in has installed. Pulumi's real image has none: the CLI downloads
 * them at run time, which the test network cannot. A user whose workspaces have no Internet access
 * builds their image FROM Pulumi's with `pulumi plugin install` in it; the stand-in carries the
 * result, so a program with `kubernetes:*` resources runs in it as it would in such an image.
 */
const PREINSTALLED_PLUGINS: readonly Plugin[] = [
  {
    dir: `resource-kubernetes-${versions.pulumiKubernetes}`,
    binary: 'pulumi-resource-kubernetes',
    key: 'pulumiResourceKubernetes',
  },
];
const PLUGINS_DIR = '/home/pulumi/.pulumi/plugins';

interface Variant {
  name: ImageName;
  binaries: Binaries;
  /** Installed plugins, as a user's `pulumi plugin install` leaves them in ~/.pulumi/plugins. */
  plugins: readonly Plugin[];
  /** Node.js (and npm) from the node stand-in, and git. */
  nodeAndGit: boolean;
}

/**
 * The test-bed Node.js language host (agent/testkit/language-nodejs.ts bundled by `npm run build`):
 * the Go module proxy refuses the real one, which Pulumi's image has.
 */
const NODEJS_HOST_BUNDLE = path.join(REPO_ROOT, 'dist', 'bundles', 'language-nodejs.js');
const NODEJS_HOST_LAUNCHER = '#!/bin/sh\nexec node /pulumi/bin/pulumi-language-nodejs.js "$@"\n';

function upstreamPulumi(v: Variant): Recipe {
  const files = (): [string, string][] => {
    requireBinaries(Object.values(v.binaries));
    return Object.entries(v.binaries).map(([name, key]) => [name, binaryPath(key)]);
  };
  const plugins = (): [Plugin, string][] => {
    requireBinaries(v.plugins.map((p) => p.key));
    return v.plugins.map((p) => [p, binaryPath(p.key)]);
  };
  return {
    name: v.name,
    needs: v.nodeAndGit ? ['debian', 'node'] : ['debian'],
    tools: ['runc'],
    async inputs() {
      const out: Record<string, string> = {};
      for (const [name, file] of files()) out[name] = await hashFile(file);
      for (const [p, file] of plugins()) out[`plugin ${p.dir}/${p.binary}`] = await hashFile(file);
      out.user = ADD_USER;
      out.config = CONFIG.join(' ');
      out.nodejsHost = await hashFile(NODEJS_HOST_BUNDLE);
      out.nodejsLauncher = NODEJS_HOST_LAUNCHER;
      if (v.nodeAndGit) out.git = INSTALL_GIT;
      return out;
    },
    async build(ctx: BuildContext) {
      const dir = path.join(ctx.work, 'bin');
      fs.mkdirSync(dir);
      for (const [name, file] of files()) fs.copyFileSync(file, path.join(dir, name));
      fs.copyFileSync(NODEJS_HOST_BUNDLE, path.join(dir, 'pulumi-language-nodejs.js'));
      fs.writeFileSync(path.join(dir, 'pulumi-language-nodejs'), NODEJS_HOST_LAUNCHER);
      const b = ctx.buildah;
      const c = await b.from(ctx.refs.debian);
      await b.copy(c, `${dir}/`, '/pulumi/bin/', '0755');
      let check = 'pulumi version >/dev/null && test ! -e /usr/local/bin/node';
      if (v.nodeAndGit) {
        const node = ctx.refs.node;
        await b.copyFrom(node, c, '/usr/local/bin/node', '/usr/local/bin/node');
        await b.copyFrom(node, c, '/usr/local/lib/node_modules/', '/usr/local/lib/node_modules/');
        await b.runIn(c, [
          'sh',
          '-ec',
          'ln -s node /usr/local/bin/nodejs && ' +
            'ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ' +
            'ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx',
        ]);
        await b.runOnHostNetwork(c, ['sh', '-ec', INSTALL_GIT]);
        check = 'pulumi version >/dev/null && node --version >/dev/null && npm --version >/dev/null && git --version';
      }
      await b.runIn(c, ['sh', '-ec', `export ${PATH_ENV} && ${ADD_USER} && ${check}`]);
      for (const [p, file] of plugins()) await b.copy(c, file, `${PLUGINS_DIR}/${p.dir}/${p.binary}`, '0755');
      // buildah copies as root: the user's own `pulumi plugin install` would leave the files its own.
      if (v.plugins.length > 0) await b.runIn(c, ['chown', '-R', '1000:1000', '/home/pulumi/.pulumi']);
      await b.config(c, CONFIG);
      await b.commit(c, ctx.refs[v.name]);
    },
  };
}

export const pulumiNonroot: Recipe = upstreamPulumi({
  name: 'pulumiNonroot',
  binaries: {
    pulumi: 'pulumi',
    'pulumi-language-yaml': 'pulumiLanguageYaml',
    'pulumi-resource-pulumi-nodejs': 'pulumiResourcePulumiNodejs',
  },
  plugins: PREINSTALLED_PLUGINS,
  nodeAndGit: true,
});

/** pulumiNonroot's shape with an older CLI of the toolchain. */
const olderPulumi = (name: ImageName, version: string): Recipe =>
  upstreamPulumi({
    name,
    binaries: {
      pulumi: oldPulumiBinary(version),
      'pulumi-language-yaml': 'pulumiLanguageYaml',
      'pulumi-resource-pulumi-nodejs': 'pulumiResourcePulumiNodejs',
    },
    plugins: [],
    nodeAndGit: true,
  });

/** An image whose CLI is older than structured config needs (the PulumiVersionTooLow case). */
export const pulumiOld: Recipe = olderPulumi('pulumiOld', OLDER_CLIS.tooOld);

/** An image with the oldest CLI that has structured config (the agent's floor holds there). */
export const pulumiOldStructured: Recipe = olderPulumi('pulumiOldStructured', OLDER_CLIS.structured);

export const pulumiBase: Recipe = upstreamPulumi({
  name: 'pulumiBase',
  binaries: { pulumi: 'pulumi', 'pulumi-language-yaml': 'pulumiLanguageYaml' },
  plugins: [],
  nodeAndGit: false,
});
