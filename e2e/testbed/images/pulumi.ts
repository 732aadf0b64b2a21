/**
 * The Pulumi binaries for the agent image, from the e2e toolchain instead of the release download
 * (the Dockerfile's `pulumi-release` stage needs GitHub): a FROM-scratch image holding
 * /pulumi/bin/{pulumi, pulumi-language-yaml, pulumi-resource-pulumi-nodejs,
 * pulumi-language-nodejs}, passed to the Dockerfile as PULUMI_STAGE. pulumi-language-nodejs is the
 * toolchain's when build.sh could build it, else a launcher of the test-bed host
 * (agent/testkit/language-nodejs.ts, compiled into the agent image's /app/dist by its build stage).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { hashFile, sha256 } from './hash';
import type { BuildContext, Recipe } from './recipe';
import { requireBinaries, toolchain } from '../toolchain';

/** Runs the test-bed Node.js language host of the agent image (its /app is the Dockerfile's). */
const NODEJS_HOST_LAUNCHER = '#!/bin/sh\nexec node /app/dist/agent/testkit/language-nodejs.js "$@"\n';

interface PulumiFile {
  name: string;
  /** A toolchain binary, or the text of a launcher. */
  from: { file: string } | { text: string };
}

function files(): PulumiFile[] {
  const bins = requireBinaries(['pulumi', 'pulumiLanguageYaml', 'pulumiResourcePulumiNodejs']);
  const nodejs = toolchain.binaries.pulumiLanguageNodejs;
  return [
    { name: 'pulumi', from: { file: bins.pulumi } },
    { name: 'pulumi-language-yaml', from: { file: bins.pulumiLanguageYaml } },
    { name: 'pulumi-resource-pulumi-nodejs', from: { file: bins.pulumiResourcePulumiNodejs } },
    {
      name: 'pulumi-language-nodejs',
      from: fs.existsSync(nodejs) ? { file: nodejs } : { text: NODEJS_HOST_LAUNCHER },
    },
  ];
}

export const pulumi: Recipe = {
  name: 'pulumi',
  needs: [],
  tools: [],
  async inputs() {
    const out: Record<string, string> = {};
    for (const f of files())
      out[f.name] = 'file' in f.from ? await hashFile(f.from.file) : `launcher ${sha256(f.from.text)}`;
    return out;
  },
  async build(ctx: BuildContext) {
    const dir = path.join(ctx.work, 'bin');
    fs.mkdirSync(dir);
    for (const f of files()) {
      const dest = path.join(dir, f.name);
      if ('file' in f.from) fs.copyFileSync(f.from.file, dest);
      else fs.writeFileSync(dest, f.from.text);
    }
    const b = ctx.buildah;
    const c = await b.from('scratch');
    await b.copy(c, `${dir}/`, '/pulumi/bin/', '0755');
    await b.commit(c, ctx.refs.pulumi);
  },
};
