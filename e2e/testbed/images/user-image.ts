/**
 * A user's workspace image: e2e/testdata/user-image/Dockerfile, `FROM pulumi/pulumi:<version>-nonroot`
 * plus one file, built with `buildah bud` FROM the stand-in of that image (upstream-pulumi.ts), as
 * a user builds theirs FROM the real one.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { hashTree } from './hash';
import type { BuildContext, Recipe } from './recipe';
import { REPO_ROOT } from '../toolchain';

const CONTEXT = path.join(REPO_ROOT, 'e2e', 'testdata', 'user-image');

export const userPulumi: Recipe = {
  name: 'userPulumi',
  needs: ['pulumiNonroot'],
  tools: ['runc'],
  async inputs() {
    return { context: await hashTree(CONTEXT, fs.readdirSync(CONTEXT).sort()) };
  },
  async build(ctx: BuildContext) {
    await ctx.buildah.bud({
      dockerfile: path.join(CONTEXT, 'Dockerfile'),
      contextDir: CONTEXT,
      tag: ctx.refs.userPulumi,
      buildArgs: {},
      volumes: [],
    });
  },
};
