import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Env, parseSshUrl, sshHostLabel, sshKeyRoundsProblem, withSshUser } from '../../../contract';
import { errorMessage } from '../lib/errors';
import { logger } from '../lib/log';
import { redactor, redactUrl } from '../lib/redact';
import { registerSecretEnv } from '../lib/secret-env';
import { fetchError, layout, linkWorkspace, privateTempDir, type FetchLayout } from './common';
import { installationToken } from './githubapp';

export interface GitSettings {
  url: string;
  revision: string;
  dir?: string;
  shallow: boolean;
  sshPrivateKey?: string;
  /** known_hosts lines for an SSH URL's server (from the hooks): the only host keys ssh accepts. */
  sshKnownHosts?: string;
  /** Basic-auth password, or the SSH key's passphrase when sshPrivateKey is set. */
  password?: string;
  username?: string;
  token?: string;
  gitHubApp?: { appId: string; installationId: string; privateKey: string };
}

function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === '' ? undefined : v;
}

export function gitSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): GitSettings {
  // Secrets first: every message below, even a refusal of the other settings, is then masked.
  registerSecretEnv(env);
  const url = nonEmpty(env[Env.gitUrl]);
  const revision = nonEmpty(env[Env.gitRevision]);
  if (!url) throw fetchError('git', '(no URL)', `${Env.gitUrl} is not set`, 'SpecInvalid');
  if (!revision) throw fetchError('git', redactUrl(url), `${Env.gitRevision} is not set`, 'SpecInvalid');
  checkGitUrl(url);
  checkRevision(url, revision);
  const s: GitSettings = { url, revision, shallow: env[Env.gitShallow] === 'true' };
  const dir = nonEmpty(env[Env.gitDir]);
  if (dir) s.dir = dir;
  const key = nonEmpty(env[Env.gitSshPrivateKey]);
  const password = nonEmpty(env[Env.gitPassword]);
  const username = nonEmpty(env[Env.gitUsername]);
  const token = nonEmpty(env[Env.gitToken]);
  if (key) s.sshPrivateKey = key;
  const knownHosts = nonEmpty(env[Env.gitSshKnownHosts]);
  if (knownHosts) s.sshKnownHosts = knownHosts;
  if (password) s.password = password;
  if (username) s.username = username;
  if (token) s.token = token;
  const appId = nonEmpty(env[Env.gitHubAppId]);
  if (appId) {
    const installationId = nonEmpty(env[Env.gitHubAppInstallationId]);
    const privateKey = nonEmpty(env[Env.gitHubAppPrivateKey]);
    if (!installationId || !privateKey) {
      throw fetchError(
        'git',
        redactUrl(url),
        `GitHub App authentication needs ${Env.gitHubAppId}, ${Env.gitHubAppInstallationId} and ${Env.gitHubAppPrivateKey}`,
        'SpecInvalid',
      );
    }
    s.gitHubApp = { appId, installationId, privateKey };
  }
  return s;
}

/** A full commit SHA: 40 hex digits (SHA-1 repositories) or 64 (SHA-256 repositories). */
const FULL_SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/i;

export function isFullCommitSha(revision: string): boolean {
  return FULL_SHA.test(revision);
}

/** A value quoted for a message: JSON-escaped (no control characters reach a log) and cut short. */
function quoted(value: string): string {
  return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value);
}

/**
 * The hooks resolve every branch or tag to its commit before the pod exists, so the revision is a
 * full SHA; anything else (a ref name, an abbreviated SHA, a value that git would read as an
 * option) is refused before git runs.
 */
function checkRevision(url: string, revision: string): void {
  if (!isFullCommitSha(revision)) {
    throw fetchError(
      'git',
      redactUrl(url),
      `${Env.gitRevision} must be a full commit SHA (40 hexadecimal digits, or 64 for a SHA-256 repository), not ${quoted(revision)}`,
      'SpecInvalid',
    );
  }
}

/** The URL goes into .git/config and is handed to git's transports: no option look-alike, no control characters. */
function checkGitUrl(url: string): void {
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(url))
    throw fetchError(
      'git',
      '(URL with control characters)',
      `${Env.gitUrl} contains control characters`,
      'SpecInvalid',
    );
  if (url.startsWith('-'))
    throw fetchError('git', quoted(redactUrl(url)), `${Env.gitUrl} must not start with "-"`, 'SpecInvalid');
}

interface GitRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * The environment git runs with: none of the inherited GIT_* variables (GIT_DIR in particular is
 * the project directory here, and would mean the repository to git), no prompts, C locale, and the
 * credentials in variables that only the credential helper or ssh's askpass read. Nothing secret is
 * ever on a command line.
 */
interface GitAuth {
  env: Record<string, string>;
  cleanup(): void;
  kind: 'none' | 'basic' | 'token' | 'github-app' | 'ssh';
}

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || k.startsWith('GIT_') || k.startsWith('PKO_GIT_') || k === 'SSH_ASKPASS') continue;
    env[k] = v;
  }
  env.GIT_TERMINAL_PROMPT = '0';
  env.GIT_CONFIG_NOSYSTEM = '1';
  env.LC_ALL = 'C';
  env.LANG = 'C';
  return env;
}

/** A credential helper defined in the environment (config scope "command"), reading two variables. */
function credentialHelperEnv(username: string, password: string): Record<string, string> {
  return {
    GIT_CONFIG_COUNT: '2',
    // An empty helper resets any configured ones.
    GIT_CONFIG_KEY_0: 'credential.helper',
    GIT_CONFIG_VALUE_0: '',
    GIT_CONFIG_KEY_1: 'credential.helper',
    GIT_CONFIG_VALUE_1: `!f() { test "$1" = get || exit 0; printf 'username=%s\\npassword=%s\\n' "$PKO_GIT_USERNAME" "$PKO_GIT_PASSWORD"; }; f`,
    PKO_GIT_USERNAME: username,
    PKO_GIT_PASSWORD: password,
  };
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * ssh for an SSH URL: host keys checked strictly against the known_hosts lines the hooks sent (no
 * key is accepted on first use, ~/.ssh and /etc/ssh are not read), the private key from a 0600
 * file, its passphrase through an askpass script reading an environment variable.
 */
function sshAuth(s: GitSettings, l: FetchLayout): GitAuth {
  const remote = parseSshUrl(s.url)!;
  if (!s.sshKnownHosts) {
    throw fetchError(
      'git',
      redactUrl(s.url),
      `the host key of ${sshHostLabel(remote)} is not known: the hooks' known_hosts (SSH_KNOWN_HOSTS) has no entry for it`,
    );
  }
  // ssh would spend as long as the key asks deriving its passphrase (contract/ssh-key.ts).
  const tooCostly = s.sshPrivateKey ? sshKeyRoundsProblem(s.sshPrivateKey) : undefined;
  if (tooCostly) throw fetchError('git', redactUrl(s.url), tooCostly);
  const dir = privateTempDir('pko-ssh-', l);
  const knownHosts = path.join(dir, 'known_hosts');
  fs.writeFileSync(knownHosts, s.sshKnownHosts.endsWith('\n') ? s.sshKnownHosts : `${s.sshKnownHosts}\n`, {
    mode: 0o600,
  });
  const opts = [
    '-o StrictHostKeyChecking=yes',
    `-o UserKnownHostsFile=${shellQuote(knownHosts)}`,
    '-o GlobalKnownHostsFile=/dev/null',
    '-o IdentityAgent=none',
    '-o ConnectTimeout=30',
  ];
  const env: Record<string, string> = {};
  if (s.sshPrivateKey) {
    const keyFile = path.join(dir, 'key');
    const key = s.sshPrivateKey.endsWith('\n') ? s.sshPrivateKey : `${s.sshPrivateKey}\n`;
    fs.writeFileSync(keyFile, key, { mode: 0o600 });
    opts.unshift('-i', shellQuote(keyFile), '-o IdentitiesOnly=yes');
  }
  if (s.sshPrivateKey && s.password) {
    const askpass = path.join(dir, 'askpass');
    fs.writeFileSync(askpass, '#!/bin/sh\nprintf \'%s\\n\' "$PKO_SSH_PASSPHRASE"\n', { mode: 0o700 });
    env.SSH_ASKPASS = askpass;
    env.SSH_ASKPASS_REQUIRE = 'force';
    env.DISPLAY = env.DISPLAY ?? 'none';
    env.PKO_SSH_PASSPHRASE = s.password;
  } else {
    opts.push('-o BatchMode=yes');
  }
  env.GIT_SSH_COMMAND = `ssh ${opts.join(' ')}`;
  return {
    env,
    kind: s.sshPrivateKey ? 'ssh' : 'none',
    cleanup: () => fs.rmSync(dir, { recursive: true, force: true }),
  };
}

async function prepareAuth(s: GitSettings, l: FetchLayout): Promise<GitAuth> {
  const none = { env: {}, cleanup: () => undefined };
  // An SSH URL always goes through ssh with the hooks' host keys. Otherwise upstream's precedence:
  // SSH key (unusable over HTTP(S), as with upstream's go-git) > token (a GitHub App's
  // installation token counts as one) > username/password.
  if (parseSshUrl(s.url)) return sshAuth(s, l);
  if (s.sshPrivateKey) return { ...none, kind: 'none' };
  if (s.gitHubApp) {
    let token: string;
    try {
      token = await installationToken(s.gitHubApp.appId, s.gitHubApp.installationId, s.gitHubApp.privateKey);
    } catch (e) {
      throw fetchError('git', redactUrl(s.url), errorMessage(e), 'SourceUnavailable');
    }
    redactor.add(token);
    return { env: credentialHelperEnv('git', token), kind: 'github-app', cleanup: none.cleanup };
  }
  if (s.token) return { env: credentialHelperEnv('git', s.token), kind: 'token', cleanup: none.cleanup };
  if (s.username || s.password) {
    return { env: credentialHelperEnv(s.username ?? '', s.password ?? ''), kind: 'basic', cleanup: none.cleanup };
  }
  return { ...none, kind: 'none' };
}

function runGit(args: string[], cwd: string, env: Record<string, string>): Promise<GitRun> {
  return new Promise((resolve) => {
    const child = spawn('git', args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', (e) => resolve({ code: 127, stdout: '', stderr: `cannot run git: ${e.message}` }));
    child.on('close', (code) =>
      resolve({
        code: code ?? 1,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
      }),
    );
  });
}

const GIT_FAILURES: [RegExp, (auth: GitAuth['kind']) => string][] = [
  [
    /Permission denied \(publickey|incorrect passphrase|Load key .*:|invalid format|error in libcrypto/i,
    () => 'bad SSH credentials',
  ],
  [
    /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|No [\w-]+ host key is known/i,
    () => "SSH host key verification failed (the server's key is not the one in the hooks' known_hosts)",
  ],
  [
    /Authentication failed|could not read (Username|Password)|terminal prompts disabled|Invalid username or password|returned error: 40[13]|HTTP Basic: Access denied/i,
    (auth) =>
      auth === 'none'
        ? 'the repository requires credentials (authentication failed)'
        : 'bad credentials (authentication failed)',
  ],
  [
    /Repository not found|repository '.*' not found|returned error: 404|does not appear to be a git repository|not found: did you run git update-server-info/i,
    () => 'repository not found',
  ],
  [
    /not our ref|couldn't find remote ref|unadvertised object|no such remote ref|reference is not a tree|unknown revision|did not match any|bad object/i,
    () => 'ref not found',
  ],
  [
    /Could not resolve host|Connection refused|Failed to connect|Connection timed out|timed out|Network is unreachable|No route to host|SSL|certificate|Could not read from remote repository/i,
    () => 'cannot reach the repository',
  ],
];

/** Turns git's stderr into a cause a human can act on, with the line of git's output that tells. */
export function classifyGitError(stderr: string, authKind: GitAuth['kind']): string {
  const lines = redactor
    .redact(stderr)
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  for (const [re, cause] of GIT_FAILURES) {
    const line = lines.find((l) => re.test(l));
    if (line) return `${cause(authKind)} (${line.slice(0, 300)})`;
  }
  const detail = lines.filter((l) => /^(fatal|error):/.test(l)).pop() ?? lines.pop() ?? '';
  return detail.slice(0, 300) || 'git failed';
}

/** Writes `[remote "origin"] url = …` into .git/config directly: the URL may hold credentials. */
function setOrigin(repo: string, url: string): void {
  const escaped = url.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
  fs.appendFileSync(path.join(repo, '.git', 'config'), `[remote "origin"]\n\turl = "${escaped}"\n`);
}

async function headOf(repo: string, env: Record<string, string>): Promise<string | undefined> {
  if (!fs.existsSync(path.join(repo, '.git'))) return undefined;
  const r = await runGit(['rev-parse', 'HEAD'], repo, env);
  return r.code === 0 ? r.stdout.trim() : undefined;
}

/**
 * The fetch of one commit. User-controlled values (the revision) come after `--`, where git reads
 * nothing as an option; the remote is the `origin` written into .git/config, never an argument.
 */
export function fetchCommitArgs(revision: string, shallow: boolean): string[] {
  return ['fetch', '-q', '--no-tags', ...(shallow ? ['--depth=1'] : []), '--', 'origin', revision];
}

/** Every branch and tag, for servers that refuse to serve a commit by its SHA. */
const FETCH_ALL_ARGS = [
  'fetch',
  '-q',
  '--',
  'origin',
  '+refs/heads/*:refs/remotes/origin/*',
  '+refs/tags/*:refs/tags/*',
];

/** Detaches HEAD at `commit`; the `--` after it makes git read it as a commit, never as a path. */
export function checkoutArgs(commit: string): string[] {
  return ['-c', 'advice.detachedHead=false', 'checkout', '-q', '--force', '--detach', commit, '--'];
}

/**
 * Checks out `revision` (a full commit SHA) of the repository into `<source>` and links the
 * workspace to `<source>/<dir>`. A checkout already at that commit (an init container run again
 * in the same pod) is kept.
 */
export async function fetchGit(
  s: GitSettings,
  l: FetchLayout = layout(),
): Promise<{ commit: string; projectDir: string }> {
  const what = redactUrl(s.url);
  checkGitUrl(s.url);
  checkRevision(s.url, s.revision);
  const revision = s.revision.toLowerCase();
  const base = baseEnv();
  const existing = await headOf(l.source, base);
  if (existing && existing.toLowerCase() === revision) {
    logger.info('git checkout already present', { url: what, commit: existing });
    const projectDir = linkWorkspace('git', what, l, s.dir);
    return { commit: existing, projectDir };
  }
  const auth = await prepareAuth(s, l);
  const env = { ...base, ...auth.env };
  try {
    fs.rmSync(l.source, { recursive: true, force: true });
    fs.mkdirSync(l.source, { recursive: true });
    // A 64-digit SHA names an object of a SHA-256 repository, which only a SHA-256 clone can hold.
    const format = revision.length === 64 ? ['--object-format=sha256'] : [];
    const init = await runGit(['init', '-q', ...format], l.source, env);
    if (init.code !== 0) throw fetchError('git', what, classifyGitError(init.stderr, auth.kind));
    setOrigin(l.source, withSshUser(s.url));
    logger.info('fetching git repository', { url: what, revision, shallow: s.shallow, auth: auth.kind });
    let fetched = await runGit(fetchCommitArgs(revision, s.shallow), l.source, env);
    if (fetched.code !== 0) {
      const cause = classifyGitError(fetched.stderr, auth.kind);
      if (!cause.startsWith('ref not found')) throw fetchError('git', what, cause);
      fetched = await runGit(FETCH_ALL_ARGS, l.source, env);
      if (fetched.code !== 0) throw fetchError('git', what, classifyGitError(fetched.stderr, auth.kind));
      const has = await runGit(['cat-file', '-e', '--', `${revision}^{commit}`], l.source, env);
      if (has.code !== 0) throw fetchError('git', what, `ref not found (commit ${revision} is not in the repository)`);
    }
    const co = await runGit(checkoutArgs(revision), l.source, env);
    if (co.code !== 0) throw fetchError('git', what, classifyGitError(co.stderr, auth.kind));
    const commit = (await headOf(l.source, base)) ?? revision;
    if (commit.toLowerCase() !== revision) throw fetchError('git', what, `checked out ${commit}, expected ${revision}`);
    const projectDir = linkWorkspace('git', what, l, s.dir);
    logger.info('git checkout done', { url: what, commit, dir: s.dir ?? '' });
    return { commit, projectDir };
  } finally {
    auth.cleanup();
  }
}
