import { Env } from '../../../contract';
import { redactor as processRedactor, type Redactor } from './redact';

/** Variables whose values are credentials whenever they are set, whoever set them. */
const ALWAYS_SECRET: readonly string[] = [
  Env.gitPassword,
  Env.gitToken,
  Env.gitSshPrivateKey,
  Env.gitHubAppPrivateKey,
  Env.pulumiAccessToken,
  Env.pulumiConfigPassphrase,
];

/** URLs that may carry credentials in their userinfo (https://user:token@host/…). */
const URL_VARIABLES: readonly string[] = [Env.gitUrl, Env.fluxUrl];

/** The names in PULUMI_SECRET_ENV_NAMES (comma or whitespace separated). */
export function secretEnvNames(env: NodeJS.ProcessEnv): string[] {
  return (env[Env.secretEnvNames] ?? '').split(/[\s,]+/).filter((n) => n !== '');
}

/** The password (and an https user name, often a token) in a URL's userinfo, raw and decoded. */
function urlCredentials(url: string): string[] {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return [];
  }
  const raw = [u.password];
  if (u.protocol === 'http:' || u.protocol === 'https:') raw.push(u.username);
  const out: string[] = [];
  for (const r of raw.filter((v) => v !== '')) {
    out.push(r);
    try {
      out.push(decodeURIComponent(r));
    } catch {
      /* not percent-encoded text: the raw form is enough */
    }
  }
  return out;
}

/**
 * Registers with the redactor every secret value the process received in its environment: the
 * credentials the hooks pass (git password, token, SSH key, GitHub App key, Pulumi access token),
 * the variables named in PULUMI_SECRET_ENV_NAMES (the Stack's envRefs of type Secret), and
 * credentials inside source URLs. From then on no log line, status or result carries them.
 * Returns the names of the variables registered (never the values).
 */
export function registerSecretEnv(
  env: NodeJS.ProcessEnv = process.env,
  redactor: Redactor = processRedactor,
): string[] {
  const registered: string[] = [];
  for (const name of new Set([...ALWAYS_SECRET, ...secretEnvNames(env)])) {
    const value = env[name];
    if (value === undefined || value === '') continue;
    redactor.add(value);
    registered.push(name);
  }
  for (const name of URL_VARIABLES) {
    const credentials = urlCredentials(env[name] ?? '');
    if (credentials.length === 0) continue;
    for (const c of credentials) redactor.add(c);
    registered.push(name);
  }
  return registered;
}
