import * as fs from 'node:fs';
import * as path from 'node:path';
import * as yaml from 'js-yaml';
import { Env } from '../../../contract';
import { AgentError, errorCode, errorMessage } from '../lib/errors';
import { logger } from '../lib/log';
import { hostPath } from '../lib/paths';
import { fetchError, layout, replaceWithSymlink, type FetchLayout } from './common';
import { fetchFlux, fluxSettingsFromEnv, hasherFor, parseDigest } from './flux';
import { fetchGit, gitSettingsFromEnv } from './git';

export const FETCH_KINDS = ['git', 'flux', 'program', 'project-info', 'local'] as const;

/**
 * The rendered Program (a mounted ConfigMap key) after checking that it is the revision the Stack's
 * hook saw: a kubelet may still hold an older copy, so a mismatch fails and the kubelet retries the
 * init container.
 */
export function fetchProgram(env: NodeJS.ProcessEnv = process.env, l: FetchLayout = layout(env)): void {
  const fileEnv = env[Env.programFile];
  const digest = env[Env.programDigest];
  if (!fileEnv) throw fetchError('program', '(no file)', `${Env.programFile} is not set`, 'SpecInvalid');
  if (!digest) throw fetchError('program', fileEnv, `${Env.programDigest} is not set`, 'SpecInvalid');
  const file = hostPath(fileEnv, env);
  let expected: { algorithm: string; hex: string };
  try {
    expected = parseDigest(digest);
  } catch (e) {
    throw fetchError('program', fileEnv, errorMessage(e), 'SpecInvalid');
  }
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw fetchError(
      'program',
      fileEnv,
      `cannot read the Program's rendered project (${errorCode(e) ?? errorMessage(e)}); the ConfigMap may not exist yet`,
    );
  }
  const hash = hasherFor(expected.algorithm);
  hash.update(bytes);
  const actual = hash.hex();
  if (actual !== expected.hex) {
    throw fetchError(
      'program',
      fileEnv,
      `digest mismatch: the Program's ConfigMap is not yet at the expected revision (have ${expected.algorithm}:${actual}, want ${expected.algorithm}:${expected.hex}); the init container will be retried`,
      'DigestMismatch',
    );
  }
  resetDir(l.workspace);
  fs.writeFileSync(path.join(l.workspace, 'Pulumi.yaml'), bytes);
  logger.info('program copied', { file: fileEnv, digest: `${expected.algorithm}:${actual}` });
}

/** A minimal Pulumi.yaml (name and runtime), for destroying a stack whose source is gone. */
export function fetchProjectInfo(env: NodeJS.ProcessEnv = process.env, l: FetchLayout = layout(env)): void {
  const name = env[Env.projectName];
  const runtime = env[Env.projectRuntime];
  if (!name || !runtime) {
    throw fetchError(
      'project-info',
      name ?? '(no name)',
      `${Env.projectName} and ${Env.projectRuntime} must both be set`,
      'SpecInvalid',
    );
  }
  resetDir(l.workspace);
  fs.writeFileSync(path.join(l.workspace, 'Pulumi.yaml'), yaml.dump({ name, runtime }));
  logger.info('project info written', { name, runtime });
}

/** A project inside the image: the workspace is a symlink to it (like upstream's `ln -s`). */
export function fetchLocal(env: NodeJS.ProcessEnv = process.env, l: FetchLayout = layout(env)): void {
  const dir = env[Env.localDir];
  if (!dir) throw fetchError('local', '(no directory)', `${Env.localDir} is not set`, 'SpecInvalid');
  if (!path.isAbsolute(dir)) throw fetchError('local', dir, 'the directory must be an absolute path', 'SpecInvalid');
  // The directory lives in the workspace container's image, which may not be this one: not checked.
  replaceWithSymlink(hostPath(dir, env), l.workspace);
  logger.info('workspace linked to a local directory', { dir });
}

function resetDir(dir: string): void {
  try {
    const st = fs.lstatSync(dir);
    if (st.isSymbolicLink() || !st.isDirectory()) fs.unlinkSync(dir);
  } catch (e) {
    if (errorCode(e) !== 'ENOENT') throw e;
  }
  fs.mkdirSync(dir, { recursive: true });
}

export async function runFetch(kind: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const l = layout(env);
  switch (kind) {
    case 'git':
      await fetchGit(gitSettingsFromEnv(env), l);
      return;
    case 'flux':
      await fetchFlux(fluxSettingsFromEnv(env), l);
      return;
    case 'program':
      fetchProgram(env, l);
      return;
    case 'project-info':
      fetchProjectInfo(env, l);
      return;
    case 'local':
      fetchLocal(env, l);
      return;
    default:
      throw new AgentError(`fetch: unknown source kind "${kind}" (expected one of ${FETCH_KINDS.join(', ')})`, {
        reason: 'SpecInvalid',
        exitCode: 2,
      });
  }
}
