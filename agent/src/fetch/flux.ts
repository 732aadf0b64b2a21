import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import { blake3 } from '@noble/hashes/blake3';
import { bytesToHex } from '@noble/hashes/utils';
import * as path from 'node:path';
import { Agent, interceptors, request } from 'undici';
import { Env } from '../../../contract';
import { AgentError, errorMessage } from '../lib/errors';
import { logger } from '../lib/log';
import { redactUrl } from '../lib/redact';
import { sleep } from '../lib/sleep';
import { fetchError, layout, linkWorkspace, privateTempDir, type FetchLayout } from './common';
import { DEFAULT_MAX_UNTAR_BYTES, DEFAULT_MAX_UNTAR_ENTRIES, safeExtract, UnsafeArchiveError } from './untar';
import { bufferChunks } from '../lib/bytes';

export interface FluxSettings {
  url: string;
  digest: string;
  dir?: string;
  /** -1: no limit. */
  maxBytes: number;
  /** -1: no limit. */
  maxEntries: number;
}

/** A limit from the environment: an integer ≥ -1 (-1: no limit), or `fallback` when unset. */
function limitFromEnv(env: NodeJS.ProcessEnv, name: string, url: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < -1)
    throw fetchError(
      'flux',
      redactUrl(url),
      `${name} must be an integer ≥ -1, not ${JSON.stringify(raw)}`,
      'SpecInvalid',
    );
  return n;
}

export function fluxSettingsFromEnv(env: NodeJS.ProcessEnv = process.env): FluxSettings {
  const url = env[Env.fluxUrl];
  const digest = env[Env.fluxDigest];
  if (!url) throw fetchError('flux', '(no URL)', `${Env.fluxUrl} is not set`, 'SpecInvalid');
  if (!digest) throw fetchError('flux', redactUrl(url), `${Env.fluxDigest} is not set`, 'SpecInvalid');
  const s: FluxSettings = {
    url,
    digest,
    maxBytes: limitFromEnv(env, Env.fluxMaxUntarSize, url, DEFAULT_MAX_UNTAR_BYTES),
    maxEntries: limitFromEnv(env, Env.fluxMaxUntarEntries, url, DEFAULT_MAX_UNTAR_ENTRIES),
  };
  if (env[Env.fluxDir]) s.dir = env[Env.fluxDir];
  return s;
}

/** A running hash: `update` with each chunk, then `hex`. */
export interface Hasher {
  update(data: Buffer): void;
  hex(): string;
}

/**
 * The digest algorithms of Flux artifacts: what source-controller's `--artifact-digest-algo`
 * accepts (sha256, the default; sha384, sha512, blake3), and sha1. BLAKE3 is not in Node.js's
 * crypto (OpenSSL has none).
 */
const ALGORITHMS: Record<string, () => Hasher> = {
  sha256: () => nodeHasher('sha256'),
  sha384: () => nodeHasher('sha384'),
  sha512: () => nodeHasher('sha512'),
  sha1: () => nodeHasher('sha1'),
  blake3: () => {
    const h = blake3.create({});
    return { update: (data) => void h.update(data), hex: () => bytesToHex(h.digest()) };
  },
};

function nodeHasher(algorithm: string): Hasher {
  const h = crypto.createHash(algorithm);
  return { update: (data) => void h.update(data), hex: () => h.digest('hex') };
}

/** A hasher for an algorithm that parseDigest accepted. */
export function hasherFor(algorithm: string): Hasher {
  const hasher = Object.hasOwn(ALGORITHMS, algorithm) ? ALGORITHMS[algorithm] : undefined;
  if (hasher === undefined) throw new Error(`unsupported digest algorithm "${algorithm}"`);
  return hasher();
}

/** `sha256:<hex>` → algorithm and hex. */
export function parseDigest(digest: string): { algorithm: string; hex: string } {
  const m = /^([a-z0-9]+):([0-9a-fA-F]+)$/.exec(digest.trim());
  const [, algorithm, hex] = m ?? [];
  if (algorithm === undefined || hex === undefined || !Object.hasOwn(ALGORITHMS, algorithm))
    throw new Error(
      `unsupported digest "${digest}" (expected <algorithm>:<hex>, the algorithm one of ${Object.keys(ALGORITHMS).join(', ')})`,
    );
  return { algorithm, hex: hex.toLowerCase() };
}

let agent: ReturnType<Agent['compose']> | undefined;
function downloader(): ReturnType<Agent['compose']> {
  agent ??= new Agent().compose(interceptors.redirect({ maxRedirections: 5 }));
  return agent;
}

/** Downloads to `file`, hashing as it goes; at most `maxBytes` (-1: no limit). Returns the hex digest. */
async function download(url: string, file: string, algorithm: string, maxBytes: number): Promise<string> {
  const res = await request(url, {
    method: 'GET',
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
    dispatcher: downloader(),
  });
  if (res.statusCode !== 200) {
    await res.body.dump().catch(() => undefined);
    throw new AgentError(`HTTP ${res.statusCode}`, { status: res.statusCode });
  }
  const hash = hasherFor(algorithm);
  const out = fs.createWriteStream(file, { mode: 0o600 });
  let bytes = 0;
  try {
    for await (const buf of bufferChunks(res.body)) {
      bytes += buf.length;
      if (maxBytes >= 0 && bytes > maxBytes) {
        res.body.destroy();
        throw new UnsafeArchiveError(`the artifact is larger than the size limit of ${maxBytes} bytes`);
      }
      hash.update(buf);
      if (!out.write(buf)) await new Promise<void>((r) => out.once('drain', r));
    }
  } finally {
    await new Promise<void>((r) => out.end(r));
  }
  return hash.hex();
}

/**
 * Downloads a Flux artifact, verifies its digest, extracts it safely into `<source>` and links the
 * workspace to `<source>/<dir>`. Three attempts for transient download failures, as upstream.
 */
export async function fetchFlux(s: FluxSettings, l: FetchLayout = layout()): Promise<{ projectDir: string }> {
  const what = redactUrl(s.url);
  let expected: { algorithm: string; hex: string };
  try {
    expected = parseDigest(s.digest);
  } catch (e) {
    throw fetchError('flux', what, errorMessage(e), 'SpecInvalid');
  }
  const tmp = privateTempDir('pko-flux-', l);
  const file = path.join(tmp, 'artifact.tar.gz');
  try {
    let actual = '';
    for (let attempt = 1; ; attempt++) {
      try {
        logger.info('downloading flux artifact', { url: what, attempt });
        // Compressed data is never much larger than what it expands to.
        const cap = s.maxBytes < 0 ? -1 : s.maxBytes + 1024 * 1024;
        actual = await download(s.url, file, expected.algorithm, cap);
        break;
      } catch (e) {
        if (e instanceof UnsafeArchiveError) throw fetchError('flux', what, e.message);
        const status = e instanceof AgentError ? e.status : undefined;
        const permanent = status !== undefined && status >= 400 && status < 500 && status !== 429;
        if (permanent || attempt >= 3) {
          const cause = status === 404 ? 'artifact not found (HTTP 404)' : `download failed (${errorMessage(e)})`;
          throw fetchError('flux', what, cause);
        }
        await sleep(1000 * attempt);
      }
    }
    if (actual !== expected.hex) {
      throw fetchError(
        'flux',
        what,
        `digest mismatch: expected ${expected.algorithm}:${expected.hex}, got ${expected.algorithm}:${actual}`,
        'DigestMismatch',
      );
    }
    fs.rmSync(l.source, { recursive: true, force: true });
    try {
      const stats = await safeExtract(file, l.source, { maxBytes: s.maxBytes, maxEntries: s.maxEntries });
      logger.info('flux artifact extracted', { url: what, entries: stats.entries, bytes: stats.bytes });
    } catch (e) {
      fs.rmSync(l.source, { recursive: true, force: true });
      if (e instanceof UnsafeArchiveError)
        throw fetchError('flux', what, `unsafe archive rejected: ${e.message}`, 'UnsafeArchive');
      throw fetchError('flux', what, `cannot extract the artifact (${errorMessage(e)})`);
    }
    return { projectDir: linkWorkspace('flux', what, l, s.dir) };
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}
