import * as crypto from 'node:crypto';
import { request } from 'undici';
import { Env } from '../../../contract';
import { errorMessage } from '../lib/errors';

/** GitHub's API root; GITHUB_API_URL overrides it (GitHub Enterprise, tests). */
export function githubApiUrl(env: NodeJS.ProcessEnv = process.env): string {
  return (env[Env.githubApiUrl] || 'https://api.github.com').replace(/\/+$/, '');
}

function b64url(data: Buffer | string): string {
  return Buffer.from(data).toString('base64url');
}

/** An RS256 JWT for a GitHub App, as upstream signs it: iat = now−60 s, exp = now+10 min, iss = app ID. */
export function appJwt(appId: string, privateKeyPem: string, now = Math.floor(Date.now() / 1000)): string {
  const header = b64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
  const payload = b64url(JSON.stringify({ iat: now - 60, exp: now + 600, iss: appId }));
  let key: crypto.KeyObject;
  try {
    key = crypto.createPrivateKey(privateKeyPem);
  } catch (e) {
    throw new Error(`the GitHub App private key is not a valid PEM RSA key (${errorMessage(e)})`, { cause: e });
  }
  const signature = crypto.sign('RSA-SHA256', Buffer.from(`${header}.${payload}`), key);
  return `${header}.${payload}.${b64url(signature)}`;
}

/** Exchanges GitHub App credentials for an installation access token (POST …/access_tokens, 201). */
export async function installationToken(
  appId: string,
  installationId: string,
  privateKeyPem: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  const jwt = appJwt(appId.trim(), privateKeyPem);
  const url = `${githubApiUrl(env)}/app/installations/${encodeURIComponent(installationId.trim())}/access_tokens`;
  let res;
  try {
    res = await request(url, {
      method: 'POST',
      headers: {
        accept: 'application/vnd.github+json',
        'x-github-api-version': '2022-11-28',
        authorization: `Bearer ${jwt}`,
        'user-agent': 'pko-agent',
      },
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
  } catch (e) {
    throw new Error(`cannot reach ${url} (${errorMessage(e)})`, { cause: e });
  }
  const text = await res.body.text();
  let body: { token?: unknown; message?: unknown } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    /* not JSON */
  }
  if (res.statusCode !== 201 || typeof body.token !== 'string') {
    const why = typeof body.message === 'string' ? `: ${body.message}` : '';
    const cause =
      res.statusCode === 401 || res.statusCode === 403
        ? 'bad GitHub App credentials'
        : 'GitHub App token exchange failed';
    throw new Error(`${cause} (HTTP ${res.statusCode}${why})`);
  }
  return body.token;
}
