import { createPrivateKey, sign } from 'node:crypto';
import { request, type Dispatcher } from 'undici';
import { observedDeadline } from '../lib/time';

/** What a GitHub App installation token needs (values from the Stack's related Secrets). */
export interface GitHubAppCredentials {
  appId: string;
  installationId: string;
  privateKey: string;
}

const b64url = (data: string | Buffer): string => Buffer.from(data).toString('base64url');

/**
 * The RS256 JWT a GitHub App presents to its API, as upstream signs it (iat = now − 60 s against
 * clock skew, exp = now + 10 min, iss = the App ID). Throws with a message naming the problem.
 */
export function githubAppJwt(appId: string, privateKeyPem: string, nowSeconds: number): string {
  let key;
  try {
    key = createPrivateKey(privateKeyPem);
  } catch {
    throw new Error('the GitHub App private key (gitAuth.githubApp.privateKey) is not a PEM RSA private key');
  }
  const signed = `${b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }))}.${b64url(JSON.stringify({ iat: nowSeconds - 60, exp: nowSeconds + 600, iss: appId }))}`;
  return `${signed}.${b64url(sign('RSA-SHA256', Buffer.from(signed), key))}`;
}

/**
 * Exchanges App credentials for an installation access token (upstream: POST
 * <api>/app/installations/<id>/access_tokens, expecting 201), returning it with its expiry.
 * Errors say what failed without the token or key.
 */
export async function installationToken(
  apiUrl: string,
  creds: GitHubAppCredentials,
  opts: { signal: AbortSignal; dispatcher: Dispatcher; nowMs: number },
): Promise<{ token: string; expiresAtMs: number }> {
  const jwt = githubAppJwt(creds.appId.trim(), creds.privateKey, Math.floor(opts.nowMs / 1000));
  const url = `${apiUrl.replace(/\/+$/, '')}/app/installations/${encodeURIComponent(creds.installationId.trim())}/access_tokens`;
  const res = await request(url, {
    method: 'POST',
    headers: {
      accept: 'application/vnd.github+json',
      'x-github-api-version': '2022-11-28',
      authorization: `Bearer ${jwt}`,
      'user-agent': 'pulumi-mc-operator',
    },
    signal: opts.signal,
    dispatcher: opts.dispatcher,
  });
  const text = await res.body.text();
  let body: { token?: unknown; expires_at?: unknown; message?: unknown } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    /* not JSON: reported below */
  }
  if (res.statusCode !== 201 || typeof body.token !== 'string') {
    const why = typeof body.message === 'string' ? `: ${body.message.slice(0, 200)}` : '';
    throw new Error(
      `the GitHub App installation token exchange at ${url} failed (HTTP ${res.statusCode}${why}): check gitAuth.githubApp`,
    );
  }
  // GitHub's installation tokens last an hour: an expiry that is later (or none) counts as an hour from now.
  const latest = opts.nowMs + 60 * 60 * 1000;
  const expires = observedDeadline(body.expires_at);
  return { token: body.token, expiresAtMs: expires === undefined ? latest : Math.min(expires, latest) };
}
