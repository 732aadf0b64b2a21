import { posix } from 'node:path';
import type { WorkspaceSpec } from '../../../schemas/generated/types';
import { Paths, programPath } from '../../../contract';

/** A Secret key the fetch container receives as an env var (secretKeyRef); never a literal value. */
export interface SecretEnv {
  env: string;
  secret: string;
  key: string;
  optional?: boolean;
}

/** What the workspace's `fetch` init container puts at /share/workspace. */
export type FetchSource =
  | { kind: 'git'; url: string; revision: string; dir?: string; shallow: boolean; auth: SecretEnv[] }
  | { kind: 'flux'; url: string; digest: string; dir?: string }
  | { kind: 'program'; name: string; digest: string }
  | { kind: 'local'; dir: string }
  | { kind: 'projectInfo'; name: string; runtime: string }
  | { kind: 'none' };

/**
 * The URL of a Program on the hook server (`<server>/programs/<namespace>/<name>`, program/serve.ts):
 * a Stack hands a Program to its Workspace as a Flux source with this URL, as upstream hands over
 * the Program's artifact (served by its operator); the fetch container downloads it with a token
 * of the workspace's ServiceAccount and checks its digest.
 */
export function programUrl(server: string, namespace: string, name: string): string {
  return `${server}${programPath(namespace, name)}`;
}

/** A Program's name (a DNS subdomain) in the URL of a Workspace of this namespace; undefined for any other URL. */
export function programOfUrl(url: string, server: string | undefined, namespace: string): string | undefined {
  if (server === undefined) return undefined;
  const prefix = programUrl(server, namespace, '');
  if (!url.startsWith(prefix)) return undefined;
  const name = url.slice(prefix.length);
  return /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name) ? name : undefined;
}

/** The env var of each git credential, in upstream's names. */
const GIT_AUTH_ENV = [
  ['sshPrivateKey', 'GIT_SSH_PRIVATE_KEY'],
  ['username', 'GIT_USERNAME'],
  ['password', 'GIT_PASSWORD'],
  ['token', 'GIT_TOKEN'],
] as const;
const GITHUB_APP_ENV = [
  ['appID', 'GIT_GITHUB_APP_ID'],
  ['installationID', 'GIT_GITHUB_APP_INSTALLATION_ID'],
  ['privateKey', 'GIT_GITHUB_APP_PRIVATE_KEY'],
] as const;

interface KeySelector {
  name?: string;
  key: string;
  optional?: boolean;
}

function secretEnv(env: string, ref: KeySelector | undefined): SecretEnv[] {
  if (!ref?.name) return [];
  const e: SecretEnv = { env, secret: ref.name, key: ref.key };
  if (ref.optional) e.optional = true;
  return [e];
}

/** The fetch source of a Workspace: git, then Flux (or a Program), then local, then projectInfo, as upstream. */
export function fetchSourceOf(spec: WorkspaceSpec, namespace: string, programServer: string | undefined): FetchSource {
  if (spec.git?.url) {
    const auth: SecretEnv[] = [];
    const a = spec.git.auth;
    for (const [field, env] of GIT_AUTH_ENV) auth.push(...secretEnv(env, a?.[field]));
    const app = a?.githubApp;
    for (const [field, env] of GITHUB_APP_ENV) auth.push(...secretEnv(env, app?.[field]));
    const source: FetchSource = {
      kind: 'git',
      url: spec.git.url,
      revision: spec.git.ref ?? '',
      shallow: spec.git.shallow === true,
      auth,
    };
    if (spec.git.dir) source.dir = spec.git.dir;
    return source;
  }
  if (spec.flux?.url) {
    const program = programOfUrl(spec.flux.url, programServer, namespace);
    if (program !== undefined) return { kind: 'program', name: program, digest: spec.flux.digest ?? '' };
    const source: FetchSource = { kind: 'flux', url: spec.flux.url, digest: spec.flux.digest ?? '' };
    if (spec.flux.dir) source.dir = spec.flux.dir;
    return source;
  }
  if (spec.local?.dir) return { kind: 'local', dir: localSourceDir(spec.local.dir) };
  if (spec.projectInfo?.name && spec.projectInfo.runtime)
    return { kind: 'projectInfo', name: spec.projectInfo.name, runtime: spec.projectInfo.runtime };
  return { kind: 'none' };
}

/**
 * The directory a `local` source links the workspace to. Upstream's fetch runs
 * `ln -s "$LOCAL_DIR" /share/workspace`, so a relative dir is relative to /share (where the user's
 * own init containers may write the project); an absolute one is in the image, kept as written.
 */
export function localSourceDir(dir: string): string {
  return dir.startsWith('/') ? dir : posix.resolve(Paths.share, dir);
}
