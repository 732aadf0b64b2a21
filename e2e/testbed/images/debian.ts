/**
 * docker.io/library/debian:bookworm-slim, stand-in: `mmdebstrap --variant=minbase` of the release
 * the Dockerfile names, from Debian's mirror, imported with `buildah add` into an image of its own.
 * Like the official slim image: merged /usr (debootstrap's way, mmdebstrap's merged-usr hook),
 * no manual pages, info pages, documentation (except copyright files) or translations, the
 * security and updates suites in its sources, `bash` as CMD.
 */
import * as path from 'node:path';
import { run } from './exec';
import type { BuildContext, Recipe } from './recipe';
import { readDockerfile } from './refs';

const MIRROR = 'http://deb.debian.org/debian';
const SECURITY_MIRROR = 'http://deb.debian.org/debian-security';

/** dpkg path filters of the official slim images. */
const SLIM_DPKG_OPTIONS = [
  'path-exclude=/usr/share/man/*',
  'path-exclude=/usr/share/info/*',
  'path-exclude=/usr/share/doc/*',
  'path-include=/usr/share/doc/*/copyright',
  'path-exclude=/usr/share/locale/*',
  'path-include=/usr/share/locale/locale.alias',
  'path-exclude=/usr/share/groff/*',
  'path-exclude=/usr/share/lintian/*',
];

function release(): string {
  const r = readDockerfile().globalArgs.DEBIAN_RELEASE;
  if (r === undefined) throw new Error('the Dockerfile has no DEBIAN_RELEASE default');
  return r;
}

function mmdebstrapArgs(suite: string, output: string): string[] {
  return [
    '--variant=minbase',
    '--mode=root',
    '--format=tar',
    '--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr',
    ...SLIM_DPKG_OPTIONS.map((o) => `--dpkgopt=${o}`),
    suite,
    output,
    `deb ${MIRROR} ${suite} main`,
    `deb ${MIRROR} ${suite}-updates main`,
    `deb ${SECURITY_MIRROR} ${suite}-security main`,
  ];
}

export const debian: Recipe = {
  name: 'debian',
  needs: [],
  tools: ['mmdebstrap'],
  inputs() {
    // The mirror's content is not an input: the stand-in is rebuilt when the recipe changes (or
    // with --force debian), not whenever Debian publishes an update.
    return Promise.resolve({ mmdebstrap: mmdebstrapArgs(release(), '<out>').join(' '), config: 'cmd=bash' });
  },
  async build(ctx: BuildContext) {
    if (process.getuid?.() !== 0) throw new Error('the Debian stand-in needs root (mmdebstrap --mode=root)');
    const tar = path.join(ctx.work, 'rootfs.tar');
    await run('mmdebstrap', mmdebstrapArgs(release(), tar), { log: ctx.log });
    const b = ctx.buildah;
    const c = await b.from('scratch');
    await b.add(c, tar, '/');
    await b.config(c, [
      '--cmd',
      '["bash"]',
      '--env',
      'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    ]);
    await b.commit(c, ctx.refs.debian);
  },
};
