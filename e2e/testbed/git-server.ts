/**
 * A real git server for tests: `git http-backend` (smart HTTP, the protocol GitHub speaks) behind a
 * small Node HTTP server on loopback, with optional basic auth or a bearer-style token password.
 * Repositories are bare repos under a temp root; `commit()` pushes new commits to them.
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { testServerHost } from './node/environment';

export interface GitServerOptions {
  /** Require HTTP basic auth with these credentials for every repository. */
  auth?: { username: string; password: string };
  /** Hold every request for this long before answering (to test client timeouts). */
  delayMs?: number;
}

export interface GitServer {
  baseUrl: string;
  root: string;
  /** Creates a bare repository `<name>.git` and returns its URL. */
  createRepo(name: string): string;
  /**
   * Commits files to a branch of a repository (creating the branch) and returns the commit SHA; a
   * file given as `null` is deleted.
   */
  commit(repo: string, branch: string, files: Record<string, string | null>, message?: string): string;
  /**
   * Commits a copy of a directory tree (symbolic links kept, ignore rules not applied: a vendored
   * node_modules goes in whole) to a branch, and returns the commit SHA.
   */
  commitTree(repo: string, branch: string, tree: string, message?: string): string;
  /** Creates an annotated tag at a commit. */
  tag(repo: string, tag: string, sha: string): void;
  /** How many requests the server answered (to check caching). */
  requests(): number;
  close(): Promise<void>;
}

const GIT_ENV = {
  GIT_AUTHOR_NAME: 'Test',
  GIT_AUTHOR_EMAIL: 'test@example.test',
  GIT_COMMITTER_NAME: 'Test',
  GIT_COMMITTER_EMAIL: 'test@example.test',
  GIT_CONFIG_NOSYSTEM: '1',
  HOME: tmpdir(),
};

function git(args: string[], cwd: string): string {
  return execFileSync('git', args, { cwd, env: { ...process.env, ...GIT_ENV }, encoding: 'utf8' }).trim();
}

/** Creates a bare repository (and its parent directories). */
export function initBare(bare: string): void {
  mkdirSync(dirname(bare), { recursive: true });
  git(['init', '--bare', '--quiet', bare], dirname(bare));
}

/** Clones the branch of a bare repository (or starts it), lets `write` change the work tree, commits, pushes: the new SHA. */
function commitWith(
  bare: string,
  work: string,
  branch: string,
  message: string,
  add: string[],
  write: (dir: string) => void,
): string {
  const dir = join(work, 'clone');
  rmSync(dir, { recursive: true, force: true });
  git(['clone', '--quiet', bare, dir], work);
  const branches = git(['ls-remote', '--heads', bare, branch], work);
  if (branches) git(['checkout', '--quiet', branch], dir);
  else git(['checkout', '--quiet', '--orphan', branch], dir);
  write(dir);
  git(add, dir);
  git(['commit', '--quiet', '--allow-empty', '-m', message], dir);
  git(['push', '--quiet', 'origin', `HEAD:refs/heads/${branch}`], dir);
  return git(['rev-parse', 'HEAD'], dir);
}

/**
 * Commits files to a branch of a bare repository (creating the branch) through a clone in a
 * scratch directory under `work`, and returns the commit SHA.
 */
export function commitTo(
  bare: string,
  work: string,
  branch: string,
  files: Record<string, string | null>,
  message = 'commit',
): string {
  return commitWith(bare, work, branch, message, ['add', '-A'], (dir) => {
    for (const [path, content] of Object.entries(files)) {
      if (content === null) {
        rmSync(join(dir, path));
        continue;
      }
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), content);
    }
  });
}

/** Commits a whole directory tree (ignore rules notwithstanding: a vendored node_modules stays whole). */
export function commitTreeTo(bare: string, work: string, branch: string, tree: string, message = 'commit'): string {
  return commitWith(bare, work, branch, message, ['add', '-A', '--force'], (dir) =>
    cpSync(tree, dir, { recursive: true, verbatimSymlinks: true }),
  );
}

/** Creates an annotated tag at a commit of a bare repository. */
export function tagIn(bare: string, tag: string, sha: string): void {
  git(['tag', '-a', '-m', tag, tag, sha], bare);
}

export async function startGitServer(options: GitServerOptions = {}): Promise<GitServer> {
  const root = mkdtempSync(join(tmpdir(), 'pko-git-'));
  const repos = join(root, 'repos');
  const work = join(root, 'work');
  mkdirSync(repos);
  mkdirSync(work);
  let count = 0;

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    count++;
    if (options.auth) {
      const header = req.headers.authorization ?? '';
      const expected = 'Basic ' + Buffer.from(`${options.auth.username}:${options.auth.password}`).toString('base64');
      if (header !== expected) {
        res.writeHead(401, { 'WWW-Authenticate': 'Basic realm="git"' });
        res.end('authentication required\n');
        return;
      }
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    const cgi = spawn('git', ['http-backend'], {
      env: {
        ...process.env,
        ...GIT_ENV,
        GIT_PROJECT_ROOT: repos,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.replace(/^\?/, ''),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        CONTENT_LENGTH: req.headers['content-length'] ?? '',
        HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
        HTTP_GIT_PROTOCOL: (req.headers['git-protocol'] as string | undefined) ?? '',
        REMOTE_USER: options.auth?.username ?? 'anonymous',
        REMOTE_ADDR: '127.0.0.1',
      },
    });
    req.pipe(cgi.stdin);
    let buffer = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on('data', (chunk: Buffer) => {
      if (headersDone) {
        res.write(chunk);
        return;
      }
      buffer = Buffer.concat([buffer, chunk]);
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of buffer.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':');
        if (i < 0) continue;
        const k = line.slice(0, i).trim();
        const v = line.slice(i + 1).trim();
        if (k.toLowerCase() === 'status') status = parseInt(v, 10);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      res.write(buffer.subarray(end + 4));
    });
    cgi.on('close', () => {
      if (!headersDone) res.writeHead(500);
      res.end();
    });
    cgi.on('error', () => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  };

  const server: Server = createServer((req, res) => {
    if (options.delayMs) setTimeout(() => handle(req, res), options.delayMs);
    else handle(req, res);
  });
  const host = testServerHost();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  const baseUrl = `http://${host}:${port}`;

  return {
    baseUrl,
    root,
    createRepo(name) {
      const bare = join(repos, `${name}.git`);
      initBare(bare);
      git(['config', 'http.receivepack', 'true'], bare);
      return `${baseUrl}/${name}.git`;
    },
    commit: (repo, branch, files, message) => commitTo(join(repos, `${repo}.git`), work, branch, files, message),
    commitTree: (repo, branch, tree, message) => commitTreeTo(join(repos, `${repo}.git`), work, branch, tree, message),
    tag: (repo, tag, sha) => tagIn(join(repos, `${repo}.git`), tag, sha),
    requests: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          rmSync(root, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
