import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { Agent, interceptors, request, type Dispatcher } from 'undici';
import { installationToken, type GitHubAppCredentials } from './github-app';
import { decryptSshKey, SshKeyError, type SshIdentity } from './ssh-key';
import { sshAdvertisement, SshLookupError } from './ssh-ls-remote';
import { parseSshUrl, sshHostLabel, type SshRemote } from '../../../contract';
import { egressDenied, EgressPolicy } from './egress';
import { egressConnector } from './egress-connect';
import type { RefLookup, RefLookupRequest } from './ref-lookup';
import { bufferChunks } from '../lib/bytes';
import { errorCode, errorMessage } from '../lib/errors';

/** Largest ref advertisement read (a repository with tens of thousands of tags fits easily). */
const MAX_ADVERTISEMENT_BYTES = 16 * 1024 * 1024;
const MAX_CACHE_ENTRIES = 2000;
/** Decrypted SSH keys kept: decrypting an OpenSSH-format key costs up to seconds of CPU (ssh-key.ts). */
const MAX_SSH_KEYS = 256;
/** Failed lookups are retried sooner than answers are refreshed. */
const MAX_FAILURE_TTL_MS = 5000;
/** An installation token (valid an hour) is not used in its last 5 minutes. */
const TOKEN_MARGIN_MS = 5 * 60_000;
const TOKEN_LIFETIME_MS = 60 * 60_000;

/** A URL fit for messages and logs: no credentials. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    return u.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//');
  }
}

/**
 * Parses a smart-HTTP ref advertisement (protocol v0/v1): pkt-lines of `<sha> <ref>`, the first
 * carrying capabilities after a NUL, after a `# service=git-upload-pack` header and a flush.
 */
export function parseAdvertisement(body: Buffer): Map<string, string> {
  const refs = new Map<string, string>();
  let pos = 0;
  while (pos + 4 <= body.length) {
    const len = parseInt(body.subarray(pos, pos + 4).toString('ascii'), 16);
    if (Number.isNaN(len)) throw new Error('malformed pkt-line length');
    if (len === 0) {
      pos += 4;
      continue;
    }
    if (len < 4 || pos + len > body.length) throw new Error('truncated pkt-line');
    let line = body.subarray(pos + 4, pos + len).toString('utf8');
    pos += len;
    if (line.endsWith('\n')) line = line.slice(0, -1);
    if (line.startsWith('#')) continue;
    const nul = line.indexOf('\0');
    if (nul >= 0) line = line.slice(0, nul);
    const m = /^([0-9a-f]{40}|[0-9a-f]{64}) (.+)$/.exec(line);
    const [, sha, ref] = m ?? [];
    if (sha !== undefined && ref !== undefined) refs.set(ref, sha);
  }
  return refs;
}

/** Upstream's matching: a full ref name, else a branch, else a tag (peeled for annotated tags). */
export function matchRef(refs: Map<string, string>, ref: string): string | undefined {
  if (ref.startsWith('refs/')) return refs.get(`${ref}^{}`) ?? refs.get(ref);
  return (
    refs.get(`refs/heads/${ref}`) ??
    refs.get(`refs/tags/${ref}^{}`) ??
    refs.get(`refs/tags/${ref}`) ??
    (ref === 'HEAD' ? refs.get('HEAD') : undefined)
  );
}

export interface GitResolverOptions {
  timeoutMs: number;
  cacheTtlMs: number;
  /** GitHub's API root, for GitHub App credentials (GitHub Enterprise: https://<host>/api/v3). */
  githubApiUrl?: string;
  /** The SSH host keys trusted for SSH URLs (known_hosts text); none: every SSH lookup fails. */
  sshKnownHosts?: string;
  /** Which hosts the lookups may connect to (EGRESS_ALLOW, EGRESS_DENY); default: all but the addresses always denied. */
  egress?: EgressPolicy;
  /** For tests: a clock. */
  now?: () => number;
  /** Hears of each lookup: answered from the cache (or one in flight) or not (the hooks' cache metrics). */
  counted?: (hit: boolean) => void;
}

/**
 * Resolves git refs over smart HTTP, or over SSH for SSH URLs (ssh-ls-remote.ts), with a hard timeout, caching answers (failures too, for a
 * shorter time) so a busy Stack never costs more than one lookup per TTL, and concurrent syncs
 * share one request. Keys hash the credentials; no credential is kept in clear or logged.
 */
export class GitResolver {
  /** Lookups in flight or answered, by a hash of the request, for cacheTtlMs. */
  private readonly cache: LRUCache<string, Promise<RefLookup>>;
  /** GitHub App installation tokens, reused until 5 minutes before they expire. */
  private readonly appTokens: LRUCache<string, Promise<string>>;
  /**
   * SSH keys decrypted from (key, passphrase), by a hash of both, decryptions in flight included; a
   * key that cannot be used too (one that may decrypt another time, until its SshKeyError says).
   */
  private readonly sshKeys: LRUCache<string, Promise<SshIdentity>>;
  private readonly now: () => number;
  private readonly dispatcher: Dispatcher;
  private readonly egress: EgressPolicy;

  constructor(private readonly options: GitResolverOptions) {
    this.now = options.now ?? Date.now;
    // Every expiry is read from `now` (ttlResolution 0), so a test's clock moves them. Shifted by
    // 1 ms: lru-cache takes an entry stored at time 0 for one without a TTL.
    const ttlOptions = { max: MAX_CACHE_ENTRIES, ttlResolution: 0, perf: { now: () => this.now() + 1 } };
    this.cache = new LRUCache({ ...ttlOptions, ttl: options.cacheTtlMs });
    this.appTokens = new LRUCache({ ...ttlOptions, ttl: TOKEN_LIFETIME_MS - TOKEN_MARGIN_MS });
    this.sshKeys = new LRUCache({ ...ttlOptions, max: MAX_SSH_KEYS });
    this.egress = options.egress ?? new EgressPolicy();
    // Every connection, a redirect's too, goes through the egress check.
    this.dispatcher = new Agent({ connect: egressConnector(this.egress, options.timeoutMs) }).compose(
      interceptors.redirect({ maxRedirections: 3 }),
    );
  }

  close(): Promise<void> {
    return this.dispatcher.close();
  }

  resolve(req: RefLookupRequest): Promise<RefLookup> {
    if (req.unsupported) return Promise.resolve({ error: req.unsupported });
    const app = req.githubApp ? [req.githubApp.appId, req.githubApp.installationId, req.githubApp.privateKey] : [];
    const ssh = req.ssh ? [req.ssh.privateKey, req.ssh.passphrase ?? ''] : [];
    const key = createHash('sha256')
      .update(JSON.stringify([req.url, req.ref, req.username ?? '', req.password ?? '', ...app, ...ssh]))
      .digest('hex');
    const hit = this.cache.get(key);
    this.options.counted?.(hit !== undefined);
    if (hit) return hit;
    const value = this.lookup(req);
    this.cache.set(key, value);
    void value.then((v) => {
      if ('error' in v) this.cache.set(key, value, { ttl: Math.min(this.options.cacheTtlMs, MAX_FAILURE_TTL_MS) });
    });
    return value;
  }

  private githubAppToken(creds: GitHubAppCredentials, signal: AbortSignal): Promise<string> {
    const key = createHash('sha256')
      .update(JSON.stringify([creds.appId, creds.installationId, creds.privateKey]))
      .digest('hex');
    const hit = this.appTokens.get(key);
    if (hit) return hit;
    const apiUrl = this.options.githubApiUrl ?? 'https://api.github.com';
    const exchange = installationToken(apiUrl, creds, { signal, dispatcher: this.dispatcher, nowMs: this.now() });
    const token = exchange.then((r) => r.token);
    // Until the answer says when it expires, assume the documented hour; forget failures at once.
    this.appTokens.set(key, token);
    exchange.then(
      (r) => this.appTokens.set(key, token, { ttl: Math.max(1, r.expiresAtMs - TOKEN_MARGIN_MS - this.now()) }),
      () => this.appTokens.delete(key),
    );
    return token;
  }

  private async lookup(req: RefLookupRequest): Promise<RefLookup> {
    const remote = parseSshUrl(req.url);
    if (remote) return this.sshLookup(req, remote);
    const shown = redactUrl(req.url);
    let url: URL;
    try {
      url = new URL(req.url.replace(/\/+$/, '') + '/info/refs');
    } catch {
      return { error: `cannot resolve "${req.ref}": "${shown}" is not a valid repository URL` };
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      return { error: `cannot resolve "${req.ref}": unsupported repository URL scheme "${url.protocol}" in ${shown}` };
    }
    url.searchParams.set('service', 'git-upload-pack');
    const headers: Record<string, string> = { 'user-agent': 'git/2.0 (pulumi-mc-operator)', accept: '*/*' };
    const userinfo =
      url.username || url.password
        ? { username: decodeURIComponent(url.username), password: decodeURIComponent(url.password) }
        : undefined;
    url.username = '';
    url.password = '';
    let username = req.username ?? userinfo?.username;
    let password = req.password ?? userinfo?.password;
    // One deadline for the whole lookup, the token exchange included.
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    if (req.githubApp) {
      try {
        password = await this.githubAppToken(req.githubApp, signal);
        username = 'x-access-token';
      } catch (err) {
        const denied = egressDenied(err);
        if (denied) return { error: `cannot resolve "${req.ref}" in ${shown}: the GitHub API: ${denied.message}` };
        if (isAbort(err)) {
          return {
            error: `timed out after ${this.options.timeoutMs} ms getting a GitHub App installation token to resolve "${req.ref}" in ${shown}`,
          };
        }
        const code = errorCode(err);
        const message = errorMessage(err);
        return {
          error: `cannot resolve "${req.ref}" in ${shown}: ${code && !message.includes('GitHub App') ? `cannot reach the GitHub API (${code})` : message}`,
        };
      }
    }
    if (username !== undefined || password !== undefined) {
      headers.authorization = `Basic ${Buffer.from(`${username ?? ''}:${password ?? ''}`).toString('base64')}`;
    }
    try {
      const res = await request(url, { method: 'GET', headers, signal, dispatcher: this.dispatcher });
      if (res.statusCode === 401 || res.statusCode === 403) {
        await res.body.dump();
        return {
          error: `authentication failed reading ${shown} (HTTP ${res.statusCode}): check the git credentials in spec.gitAuth`,
        };
      }
      if (res.statusCode === 404) {
        await res.body.dump();
        return { error: `repository ${shown} not found (HTTP 404)` };
      }
      if (res.statusCode !== 200) {
        await res.body.dump();
        return { error: `reading refs of ${shown} failed: HTTP ${res.statusCode}` };
      }
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of bufferChunks(res.body)) {
        size += chunk.length;
        if (size > MAX_ADVERTISEMENT_BYTES) {
          res.body.destroy();
          return { error: `the ref list of ${shown} is larger than ${MAX_ADVERTISEMENT_BYTES} bytes` };
        }
        chunks.push(chunk);
      }
      let refs: Map<string, string>;
      try {
        refs = parseAdvertisement(Buffer.concat(chunks));
      } catch (err) {
        return { error: `${shown} did not answer as a git smart-HTTP server: ${errorMessage(err)}` };
      }
      const sha = matchRef(refs, req.ref);
      if (!sha) return { error: `no commits found for ref "${req.ref}" in ${shown}` };
      return { sha };
    } catch (err) {
      const denied = egressDenied(err);
      if (denied) return { error: `cannot resolve "${req.ref}" in ${shown}: ${denied.message}` };
      if (isAbort(err)) {
        return { error: `timed out after ${this.options.timeoutMs} ms resolving "${req.ref}" in ${shown}` };
      }
      return { error: `cannot reach ${shown} to resolve "${req.ref}": ${errorCode(err) ?? errorMessage(err)}` };
    }
  }

  /** The decrypted key, from the cache when this key and passphrase were decrypted (or are being) before. */
  private sshKey(privateKey: string, passphrase: string | undefined): Promise<SshIdentity> {
    const id = createHash('sha256')
      .update(JSON.stringify([privateKey, passphrase ?? '']))
      .digest('hex');
    let key = this.sshKeys.get(id);
    if (key === undefined) {
      const decrypting = decryptSshKey(privateKey, passphrase);
      key = decrypting;
      this.sshKeys.set(id, decrypting);
      decrypting.catch((e: unknown) => {
        const retry = e instanceof SshKeyError ? e.retryAfterMs : undefined;
        if (retry === 0) this.sshKeys.delete(id);
        else if (retry !== undefined) this.sshKeys.set(id, decrypting, { ttl: retry });
      });
    }
    return key;
  }

  private async sshLookup(req: RefLookupRequest, remote: SshRemote): Promise<RefLookup> {
    const shown = redactUrl(req.url);
    if (!req.ssh) {
      return {
        error: `cannot resolve "${req.ref}" in ${shown}: an SSH repository URL needs an SSH key (gitAuth.sshAuth)`,
      };
    }
    let advertisement: Buffer;
    try {
      advertisement = await sshAdvertisement({
        remote,
        key: await this.sshKey(req.ssh.privateKey, req.ssh.passphrase),
        knownHosts: this.options.sshKnownHosts ?? '',
        egress: this.egress,
        timeoutMs: this.options.timeoutMs,
        maxBytes: MAX_ADVERTISEMENT_BYTES,
      });
    } catch (err) {
      const why =
        err instanceof SshLookupError || err instanceof SshKeyError ? err.message : `SSH failed (${errorMessage(err)})`;
      return { error: `cannot resolve "${req.ref}" in ${shown}: ${why}` };
    }
    let refs: Map<string, string>;
    try {
      refs = parseAdvertisement(advertisement);
    } catch (err) {
      return {
        error: `${sshHostLabel(remote)} did not answer as git-upload-pack for ${shown}: ${errorMessage(err)}`,
      };
    }
    const sha = matchRef(refs, req.ref);
    if (!sha) return { error: `no commits found for ref "${req.ref}" in ${shown}` };
    return { sha };
  }
}

/** Whether a caught value is the lookup's deadline or an abort (read by shape, as errorMessage). */
function isAbort(e: unknown): boolean {
  return typeof e === 'object' && e !== null && 'name' in e && (e.name === 'TimeoutError' || e.name === 'AbortError');
}
