import * as fs from 'node:fs';
import * as path from 'node:path';
import * as yaml from 'js-yaml';
import { Agent, request } from 'undici';
import { Env, MAX_PROGRAM_BYTES, Paths } from '../../../contract';
import { AgentError, errorCode, errorMessage } from '../lib/errors';
import { logger } from '../lib/log';
import { hostPath } from '../lib/paths';
import { bufferChunks } from '../lib/bytes';
import { sleep } from '../lib/sleep';
import { fetchError, layout, replaceWithSymlink, type FetchLayout } from './common';
import { fetchFlux, fluxSettingsFromEnv, hasherFor, parseDigest } from './flux';
import { fetchGit, gitSettingsFromEnv } from './git';

export const FETCH_KINDS = ['git', 'flux', 'program', 'project-info', 'local'] as const;

/** How long the whole download of a Program may take. */
const PROGRAM_TIMEOUT_MS = 60_000;

/**
 * The rendered Program, downloaded from the hook server (PROGRAM_URL, over HTTPS checked against
 * PROGRAM_CA, with the pod's projected ServiceAccount token), at most MAX_PROGRAM_BYTES in at most
 * a minute, and written to the workspace only if its digest is PROGRAM_DIGEST: the one the Stack
 * saw in the Program's status. Anything else (a Program changed since, an answer tampered with) is
 * refused, reported, and retried by the kubelet.
 */
export async function fetchProgram(env: NodeJS.ProcessEnv = process.env, l: FetchLayout = layout(env)): Promise<void> {
  const url = env[Env.programUrl];
  const digest = env[Env.programDigest];
  const ca = env[Env.programCa];
  if (!url) throw fetchError('program', '(no URL)', `${Env.programUrl} is not set`, 'SpecInvalid');
  if (!digest) throw fetchError('program', url, `${Env.programDigest} is not set`, 'SpecInvalid');
  if (!ca) throw fetchError('program', url, `${Env.programCa} is not set`, 'SpecInvalid');
  let expected: { algorithm: string; hex: string };
  try {
    expected = parseDigest(digest);
  } catch (e) {
    throw fetchError('program', url, errorMessage(e), 'SpecInvalid');
  }
  let token: string;
  try {
    token = fs.readFileSync(hostPath(Paths.programToken, env), 'utf8').trim();
  } catch (e) {
    throw fetchError('program', url, `cannot read the ServiceAccount token (${errorCode(e) ?? errorMessage(e)})`);
  }
  let bytes: Buffer | undefined;
  // Three attempts while the answer may change by itself: the hook server has not seen the
  // Workspace yet (403), is busy (429) or cannot decide yet (503), or the connection failed.
  for (let attempt = 1; bytes === undefined; attempt++) {
    try {
      bytes = await downloadProgram(url, ca, token);
    } catch (e) {
      // A failed connection is not an AgentError; an answer is, with its status (none: too large).
      const transient = !(e instanceof AgentError) || [403, 429, 503].includes(e.status ?? 0);
      if (!transient || attempt >= 3) throw fetchError('program', url, errorMessage(e));
      logger.info('program download failed; retrying', { url, attempt, error: errorMessage(e) });
      await sleep(1000 * attempt);
    }
  }
  const hash = hasherFor(expected.algorithm);
  hash.update(bytes);
  const actual = hash.hex();
  if (actual !== expected.hex) {
    throw fetchError(
      'program',
      url,
      `digest mismatch: refused the answer of ${bytes.length} bytes (have ${expected.algorithm}:${actual}, want ${expected.algorithm}:${expected.hex}); the Program changed since the Stack read it, or the answer was tampered with`,
      'DigestMismatch',
    );
  }
  resetDir(l.workspace);
  fs.writeFileSync(path.join(l.workspace, 'Pulumi.yaml'), bytes);
  logger.info('program downloaded', { url, bytes: bytes.length, digest: `${expected.algorithm}:${actual}` });
}

/** GET with the bearer token; the body, at most MAX_PROGRAM_BYTES, within PROGRAM_TIMEOUT_MS. */
async function downloadProgram(url: string, ca: string, token: string): Promise<Buffer> {
  const dispatcher = new Agent({ connect: { ca, timeout: 10_000 } });
  try {
    const res = await request(url, {
      method: 'GET',
      headers: { authorization: `Bearer ${token}` },
      dispatcher,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
      signal: AbortSignal.timeout(PROGRAM_TIMEOUT_MS),
    });
    if (res.statusCode !== 200) {
      const why = await leadingText(res.body, 300);
      throw new AgentError(`HTTP ${res.statusCode}${why ? `: ${why}` : ''}`, { status: res.statusCode });
    }
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of bufferChunks(res.body)) {
      size += chunk.length;
      if (size > MAX_PROGRAM_BYTES) {
        res.body.destroy();
        throw new AgentError(`the answer is larger than ${MAX_PROGRAM_BYTES} bytes`);
      }
      chunks.push(chunk);
    }
    return Buffer.concat(chunks);
  } finally {
    await dispatcher.close().catch(() => undefined);
  }
}

/** The first `max` bytes of a body, as text (for a message); the rest is never read. */
async function leadingText(body: AsyncIterable<unknown> & { destroy(): unknown }, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of bufferChunks(body)) {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= max) break;
    }
  } catch {
    // The status says why; its body is only a detail.
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).subarray(0, max).toString('utf8');
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
      await fetchProgram(env, l);
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
