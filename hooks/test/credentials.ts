/**
 * The hook server's credentials as a user makes them: manifests/hooks-credentials.sh, run for
 * real (bash and openssl), its two Secrets parsed, and their keys written as the files a Secret
 * volume would hold. Unit tests and the e2e harness serve and call the hooks with these.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import type { HookConfig } from '../src/config';
import { repoPath } from '../../packaging/lib/repo';

export interface SecretObject {
  apiVersion: 'v1';
  kind: 'Secret';
  metadata: { name: string; namespace: string; labels?: Record<string, string> };
  type: string;
  data: Record<string, string>;
}

export interface HookCredentials {
  /** The two Secrets, as the script prints them: `<service>-tls` and `<service>-auth`. */
  secrets: [SecretObject, SecretObject];
  /** PEM of the CA (what Metacontroller's caBundle holds) and of the server's certificate and key. */
  ca: string;
  cert: string;
  key: string;
  /** The bearer token. */
  token: string;
  /** The files, as the Deployment mounts them (TLS_CERT_FILE, TLS_KEY_FILE, AUTH_TOKEN_FILES). */
  files: { certFile: string; keyFile: string; tokenFile: string; caFile: string };
  /** The hook server's settings serving with them. */
  serving: Pick<HookConfig, 'tls' | 'authTokenFiles'>;
}

const decode = (secret: SecretObject, key: string): string => {
  const value = secret.data[key];
  if (value === undefined) throw new Error(`${secret.metadata.name} has no ${key}`);
  return Buffer.from(value, 'base64').toString('utf8');
};

/**
 * Runs manifests/hooks-credentials.sh (NAMESPACE, SERVICE, EXTRA_SANS as given) and writes the
 * Secrets' keys under `dir`.
 */
export function makeHookCredentials(
  dir: string,
  env: { NAMESPACE?: string; SERVICE?: string; EXTRA_SANS?: string } = {},
): HookCredentials {
  const out = execFileSync('bash', [repoPath('manifests', 'hooks-credentials.sh')], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
    encoding: 'utf8',
  });
  const [tls, auth] = loadAll(out) as SecretObject[];
  if (!tls || !auth) throw new Error(`hooks-credentials.sh printed no two Secrets:\n${out.slice(0, 200)}`);
  mkdirSync(dir, { recursive: true });
  const files = {
    certFile: join(dir, 'tls.crt'),
    keyFile: join(dir, 'tls.key'),
    caFile: join(dir, 'ca.crt'),
    tokenFile: join(dir, 'token'),
  };
  const credentials: HookCredentials = {
    secrets: [tls, auth],
    ca: decode(tls, 'ca.crt'),
    cert: decode(tls, 'tls.crt'),
    key: decode(tls, 'tls.key'),
    token: decode(auth, 'token'),
    files,
    serving: { tls: { certFile: files.certFile, keyFile: files.keyFile }, authTokenFiles: [files.tokenFile] },
  };
  writeFileSync(files.certFile, credentials.cert);
  writeFileSync(files.keyFile, credentials.key, { mode: 0o600 });
  writeFileSync(files.caFile, credentials.ca);
  writeFileSync(files.tokenFile, credentials.token, { mode: 0o600 });
  return credentials;
}
