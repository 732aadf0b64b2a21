/** The real helm from the e2e toolchain (e2e/toolchain/build.sh helm), run with a throwaway home. */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { requireToolchain } from '../../e2e/testbed/toolchain';
import { type KObject, loadObjects, repoPath } from './repo';

const run = promisify(execFile);

export const CHART_DIR = repoPath('charts', 'pulumi-operator');

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

let home: string | undefined;

/** Runs helm; never throws for a non-zero exit (the result says). Throws when helm is not built. */
export async function helm(args: string[]): Promise<HelmResult> {
  const bin = requireToolchain(['helm']).binaries.helm;
  home ??= fs.mkdtempSync(path.join(os.tmpdir(), 'pko-helm-home-'));
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: home,
    HELM_CACHE_HOME: path.join(home, 'cache'),
    HELM_CONFIG_HOME: path.join(home, 'config'),
    HELM_DATA_HOME: path.join(home, 'data'),
  };
  try {
    const r = await run(bin, args, { env, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string; message: string };
    return {
      code: typeof err.code === 'number' ? err.code : 1,
      stdout: err.stdout ?? '',
      stderr: err.stderr ?? err.message,
    };
  }
}

/** `helm template <release> charts/pulumi-operator -n <namespace> [args]`, parsed; throws on failure. */
export async function helmTemplate(
  release: string,
  namespace: string,
  args: string[] = [],
): Promise<{ text: string; objects: KObject[] }> {
  const r = await helm(['template', release, CHART_DIR, '--namespace', namespace, ...args]);
  if (r.code !== 0) throw new Error(`helm template failed (exit ${r.code}):\n${r.stderr}`);
  return { text: r.stdout, objects: loadObjects(r.stdout, 'helm template output') };
}

export function removeHelmHome(): void {
  if (home) fs.rmSync(home, { recursive: true, force: true });
  home = undefined;
}
