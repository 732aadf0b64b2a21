/**
 * The pod sandbox image for containerd's `sandbox_image` (the upstream pause image cannot be
 * pulled here): pause.c built with `gcc -static` into a FROM-scratch image, user 65535.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { run } from './exec';
import { hashFile } from './hash';
import type { BuildContext, Recipe } from './recipe';
import { PAUSE_VERSION } from './refs';
import { REPO_ROOT } from '../toolchain';

const SOURCE = path.join(REPO_ROOT, 'e2e', 'testbed', 'images', 'pause.c');
const CFLAGS = ['-static', '-O2', '-s', '-Wall', '-Wextra', '-Werror', `-DPAUSE_VERSION="${PAUSE_VERSION}"`];

export const pause: Recipe = {
  name: 'pause',
  needs: [],
  tools: ['gcc'],
  async inputs() {
    return { source: await hashFile(SOURCE), cflags: CFLAGS.join(' ') };
  },
  async build(ctx: BuildContext) {
    const bin = path.join(ctx.work, 'pause');
    await run('gcc', [...CFLAGS, '-o', bin, SOURCE], { log: ctx.log });
    if (!fs.statSync(bin).isFile()) throw new Error(`gcc wrote no ${bin}`);
    const b = ctx.buildah;
    const c = await b.from('scratch');
    await b.copy(c, bin, '/pause', '0755');
    await b.config(c, ['--user', '65535:65535', '--entrypoint', '["/pause"]', '--cmd', '[]']);
    await b.commit(c, ctx.refs.pause);
  },
};
