/**
 * SSH git URLs, read the same way by the hooks (branch lookups, the host keys they hand the fetch
 * container) and by the agent (the URL its ssh connects to).
 */

/** Where an SSH git URL points: the login, the server and the repository path sent to it. */
export interface SshRemote {
  user: string;
  host: string;
  port: number;
  /** The path as git sends it to git-upload-pack (relative to the login's home for scp-like URLs). */
  path: string;
}

/** The login when the URL names none: upstream's (go-git's PublicKeys user for gitAuth.sshAuth). */
export const DEFAULT_SSH_USER = 'git';
const SSH_SCHEMES = new Set(['ssh:', 'git+ssh:', 'ssh+git:']);

/**
 * Parses the two SSH URL forms git accepts: `ssh://[user@]host[:port]/path` (also git+ssh://) and
 * the scp-like `[user@]host:path` (no `://`, a colon before any slash). Undefined for anything
 * else (HTTP(S) URLs, local paths).
 */
export function parseSshUrl(url: string): SshRemote | undefined {
  if (url.includes('://')) {
    let u: URL;
    try {
      u = new URL(url);
    } catch {
      return undefined;
    }
    if (!SSH_SCHEMES.has(u.protocol) || !u.hostname) return undefined;
    let path: string;
    try {
      path = decodeURIComponent(u.pathname);
    } catch {
      return undefined;
    }
    // git: ssh://host/~user/repo asks for ~user/repo, not /~user/repo.
    if (path.startsWith('/~')) path = path.slice(1);
    if (path === '' || path === '/') return undefined;
    return {
      user: u.username ? decodeURIComponent(u.username) : DEFAULT_SSH_USER,
      host: u.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: u.port ? Number(u.port) : 22,
      path,
    };
  }
  const m = /^(?:([^@/:]+)@)?(\[[0-9a-fA-F:.]+\]|[^@/:[\]]+):(.+)$/.exec(url);
  if (!m) return undefined;
  return { user: m[1] ?? DEFAULT_SSH_USER, host: m[2]!.replace(/^\[(.*)\]$/, '$1'), port: 22, path: m[3]! };
}

/** `host`, or `host:port` for another port than 22, for messages. */
export function sshHostLabel(remote: Pick<SshRemote, 'host' | 'port'>): string {
  const host = remote.host.includes(':') ? `[${remote.host}]` : remote.host;
  return remote.port === 22 ? host : `${host}:${remote.port}`;
}

/** The command git runs on the server to read a repository: `git-upload-pack '<path>'`, quoted as git quotes it. */
export function uploadPackCommand(path: string): string {
  return `git-upload-pack '${path.replace(/'/g, `'\\''`).replace(/!/g, `'\\!'`)}'`;
}

/**
 * The URL with the login made explicit (`git` when it names none), so the fetch container's ssh
 * logs in as the hooks do instead of as the container's user. Other URLs are returned as they are.
 */
export function withSshUser(url: string): string {
  const scheme = /^[a-z+]+:\/\//.exec(url)?.[0] ?? '';
  const rest = url.slice(scheme.length);
  if (!parseSshUrl(url) || /^[^/]*@/.test(rest)) return url;
  return `${scheme}${DEFAULT_SSH_USER}@${rest}`;
}
