/**
 * What the hook server proves and asks for: its TLS certificate (TLS_CERT_FILE, TLS_KEY_FILE) and
 * the bearer tokens its hook routes accept (AUTH_TOKEN_FILES), both read from files (a mounted
 * Secret) at start and again whenever they change, so a rotated Secret takes effect without a
 * restart. A change that does not load (a key that does not match its certificate, no token left)
 * is logged and the previous material kept: a rotation half done never opens or closes the server.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { HookConfig } from '../config';

/** The certificate chain and key, PEM. */
export interface TlsMaterial {
  cert: string;
  key: string;
}

interface Log {
  info(fields: object, msg: string): void;
  warn(fields: object, msg: string): void;
}

/** Shorter tokens are refused: the ones our manifests make have 32 bytes of randomness. */
export const MIN_TOKEN_LENGTH = 16;

function readOptional(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** The TLS material of the files, checked by building a context from it (a mismatched key throws). */
function loadTls(files: { certFile: string; keyFile: string }): TlsMaterial {
  let material: TlsMaterial;
  try {
    material = { cert: readFileSync(files.certFile, 'utf8'), key: readFileSync(files.keyFile, 'utf8') };
  } catch (e) {
    throw new Error(`TLS_CERT_FILE, TLS_KEY_FILE: cannot read ${(e as Error).message}`, { cause: e });
  }
  try {
    createSecureContext(material);
  } catch (e) {
    throw new Error(
      `TLS_CERT_FILE ${files.certFile}, TLS_KEY_FILE ${files.keyFile}: not a certificate and its key (${(e as Error).message})`,
      { cause: e },
    );
  }
  return material;
}

/** The SHA-256 of each token the files hold (missing and empty files skipped). */
function loadTokens(files: readonly string[]): Buffer[] {
  const digests: Buffer[] = [];
  for (const file of files) {
    let text: string | undefined;
    try {
      text = readOptional(file);
    } catch (e) {
      throw new Error(`AUTH_TOKEN_FILES: cannot read ${file}: ${(e as Error).message}`, { cause: e });
    }
    const token = text?.trim() ?? '';
    if (token === '') continue;
    if (token.length < MIN_TOKEN_LENGTH)
      throw new Error(`AUTH_TOKEN_FILES: the token in ${file} is shorter than ${MIN_TOKEN_LENGTH} characters`);
    digests.push(digest(token));
  }
  if (digests.length === 0) throw new Error(`AUTH_TOKEN_FILES: none of ${files.join(', ')} holds a token`);
  return digests;
}

const digest = (text: string): Buffer => createHash('sha256').update(text, 'utf8').digest();

const BEARER = /^Bearer +(\S.*)$/i;

export class Credentials {
  private tlsMaterial: TlsMaterial | undefined;
  private tokens: Buffer[] | undefined;

  /** Reads the files once; throws (a startup error) when they are unreadable or hold nothing usable. */
  constructor(
    private readonly config: Pick<HookConfig, 'tls' | 'authTokenFiles'>,
    private readonly log: Log,
  ) {
    if (config.tls) this.tlsMaterial = loadTls(config.tls);
    if (config.authTokenFiles) this.tokens = loadTokens(config.authTokenFiles);
  }

  /** The certificate to serve; undefined: plain HTTP. */
  get tls(): TlsMaterial | undefined {
    return this.tlsMaterial;
  }

  /** Whether the hook routes ask for a bearer token. */
  get required(): boolean {
    return this.tokens !== undefined;
  }

  /**
   * Whether an Authorization header carries an accepted token (always, when none is required).
   * Compared as SHA-256 digests, with every accepted token, in constant time.
   */
  accepts(authorization: string | undefined): boolean {
    if (!this.tokens) return true;
    const presented = BEARER.exec(authorization ?? '')?.[1]?.trim();
    if (presented === undefined) return false;
    const given = digest(presented);
    let ok = false;
    for (const t of this.tokens) ok = timingSafeEqual(t, given) || ok;
    return ok;
  }

  /**
   * Reads the files again. Returns the new TLS material when it changed (for the server to
   * serve), undefined otherwise. Never throws: what does not load is logged and the old kept.
   */
  reload(): TlsMaterial | undefined {
    let changedTls: TlsMaterial | undefined;
    if (this.config.tls && this.tlsMaterial) {
      try {
        const fresh = loadTls(this.config.tls);
        if (fresh.cert !== this.tlsMaterial.cert || fresh.key !== this.tlsMaterial.key) {
          this.tlsMaterial = fresh;
          changedTls = fresh;
          this.log.info({ certFile: this.config.tls.certFile }, 'TLS certificate reloaded');
        }
      } catch (e) {
        this.log.warn({ err: (e as Error).message }, 'TLS certificate not reloaded: kept the previous one');
      }
    }
    if (this.config.authTokenFiles && this.tokens) {
      try {
        const fresh = loadTokens(this.config.authTokenFiles);
        const same = fresh.length === this.tokens.length && fresh.every((t, i) => t.equals(this.tokens![i]!));
        if (!same) {
          this.tokens = fresh;
          this.log.info({ tokens: fresh.length }, 'bearer tokens reloaded');
        }
      } catch (e) {
        this.log.warn({ err: (e as Error).message }, 'bearer tokens not reloaded: kept the previous ones');
      }
    }
    return changedTls;
  }
}
