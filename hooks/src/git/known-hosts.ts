import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * OpenSSH known_hosts files (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"), read the way ssh reads them
 * with StrictHostKeyChecking=yes: the hooks trust a server's host key only when a line names the
 * server and holds that key, and no `@revoked` line holds it.
 */

export interface KnownHostKey {
  /** The key type as written, e.g. ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256. */
  type: string;
  /** The public key blob (base64-decoded), as the server sends it in the key exchange. */
  blob: Buffer;
  revoked: boolean;
  /** The line it came from, to hand to ssh in the fetch container. */
  line: string;
}

/** The name a known_hosts line uses for a server: `host`, or `[host]:port` for another port than 22. */
function lookupName(host: string, port: number): string {
  const h = host.toLowerCase();
  return port === 22 ? h : `[${h}]:${port}`;
}

/** OpenSSH's wildcard patterns: `*` any run, `?` one character, case-insensitive. */
function wildcardMatch(pattern: string, name: string): boolean {
  const re = pattern
    .toLowerCase()
    .split('')
    .map((c) => (c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[\\^$.|+()[\]{}]/g, '\\$&')))
    .join('');
  return new RegExp(`^${re}$`).test(name);
}

/** A hashed name `|1|<salt>|<hmac-sha1(salt, name)>` (ssh-keygen -H). */
function hashedMatch(field: string, name: string): boolean {
  const [, version, saltText, hmacText, ...rest] = field.split('|');
  if (version !== '1' || saltText === undefined || hmacText === undefined || rest.length > 0) return false;
  const salt = Buffer.from(saltText, 'base64');
  const want = Buffer.from(hmacText, 'base64');
  const got = createHmac('sha1', salt).update(name).digest();
  return want.length === got.length && timingSafeEqual(want, got);
}

/** Whether a line's host field names the server: any pattern matches and no negated one does. */
function hostFieldMatches(field: string, name: string): boolean {
  if (field.startsWith('|')) return hashedMatch(field, name);
  let matched = false;
  for (const pattern of field.split(',')) {
    if (pattern.startsWith('!')) {
      if (wildcardMatch(pattern.slice(1), name)) return false;
    } else if (wildcardMatch(pattern, name)) {
      matched = true;
    }
  }
  return matched;
}

/**
 * The keys the known_hosts text holds for a server. `@cert-authority` lines are skipped: the hooks'
 * SSH client cannot check host certificates (docs/security.md says so).
 */
export function knownHostKeys(text: string, host: string, port: number): KnownHostKey[] {
  const name = lookupName(host, port);
  const keys: KnownHostKey[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const fields = line.split(/\s+/);
    let revoked = false;
    const marker = fields[0];
    if (marker?.startsWith('@')) {
      fields.shift();
      if (marker === '@revoked') revoked = true;
      else continue;
    }
    const [hosts, type, data] = fields;
    if (!hosts || !type || !data || !hostFieldMatches(hosts, name)) continue;
    const blob = Buffer.from(data, 'base64');
    if (blob.length === 0) continue;
    keys.push({ type, blob, revoked, line });
  }
  return keys;
}

/** Whether the server's host key (the blob it sent) is trusted: known for it and not revoked. */
export function isKnownHostKey(keys: readonly KnownHostKey[], blob: Buffer): boolean {
  const same = (k: KnownHostKey) => k.blob.equals(blob);
  return keys.some((k) => !k.revoked && same(k)) && !keys.some((k) => k.revoked && same(k));
}

/** The fingerprint ssh prints for a key: `SHA256:` and the unpadded base64 of its blob's SHA-256. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256').update(blob).digest('base64').replace(/=+$/, '')}`;
}

/**
 * The known_hosts lines for one server, for the fetch container's ssh (which then checks the same
 * keys as the hooks): the matching lines as written, revocations included.
 */
export function knownHostsLinesFor(text: string, host: string, port: number): string {
  return knownHostKeys(text, host, port)
    .map((k) => `${k.line}\n`)
    .join('');
}

/**
 * Host key algorithms to offer the server, so it presents a key of a type the known_hosts text
 * holds for it (as ssh orders them by its known keys); undefined: no preference.
 */
export function hostKeyAlgorithms(keys: readonly KnownHostKey[]): string[] | undefined {
  const algorithms: string[] = [];
  for (const k of keys) {
    if (k.revoked) continue;
    const forType = k.type === 'ssh-rsa' ? ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'] : [k.type];
    for (const a of forType) if (!algorithms.includes(a)) algorithms.push(a);
  }
  return algorithms.length > 0 ? algorithms : undefined;
}
