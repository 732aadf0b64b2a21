/**
 * Secret values the agent receives in its environment (git credentials, the Pulumi access token,
 * the Stack's envRefs of type Secret) never reach a log line, an error message or a status.
 */
import { classifyGitError, gitSettingsFromEnv } from '../src/fetch/git';
import { AgentError } from '../src/lib/errors';
import { logger, say } from '../src/lib/log';
import { Redactor, redactor } from '../src/lib/redact';
import { registerSecretEnv, secretEnvNames } from '../src/lib/secret-env';
import { fatalLine } from '../src/main';

const DB_PASSWORD = 'db-Passw0rd-from-a-Secret';
const API_KEY = 'ak_live_0123456789abcdef';
const ACCESS_TOKEN = 'pul-0123456789abcdef0123456789abcdef';
const GIT_TOKEN = 'ghp_gitTokenValue0123456789';
const URL_TOKEN = 'glpat-urlToken/with+chars';

function captured(stream: NodeJS.WriteStream, fn: () => void): string {
  const chunks: string[] = [];
  const spy = jest.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
    chunks.push(String(chunk));
    return true;
  });
  try {
    fn();
  } finally {
    spy.mockRestore();
  }
  return chunks.join('');
}

describe('secret values from the environment', () => {
  const env = {
    PULUMI_SECRET_ENV_NAMES: 'DB_PASSWORD, API_KEY,MISSING',
    DB_PASSWORD,
    API_KEY,
    PLAIN: 'not-a-secret-value',
    PULUMI_ACCESS_TOKEN: ACCESS_TOKEN,
    GIT_TOKEN,
    GIT_URL: `https://oauth2:${encodeURIComponent(URL_TOKEN)}@git.example.com/org/repo.git`,
  };

  it('registers the envRefs Secrets named by the hooks, the credentials and URL userinfo; nothing else', () => {
    expect(secretEnvNames(env)).toEqual(['DB_PASSWORD', 'API_KEY', 'MISSING']);
    const r = new Redactor();
    expect(registerSecretEnv(env, r).sort()).toEqual(
      ['API_KEY', 'DB_PASSWORD', 'GIT_TOKEN', 'GIT_URL', 'PULUMI_ACCESS_TOKEN'].sort(),
    );
    const text = `db=${DB_PASSWORD} key=${API_KEY} plain=${env.PLAIN} token=${ACCESS_TOKEN} git=${GIT_TOKEN} url=${URL_TOKEN} enc=${encodeURIComponent(URL_TOKEN)}`;
    expect(r.redact(text)).toBe(
      `db=[secret] key=[secret] plain=${env.PLAIN} token=[secret] git=[secret] url=[secret] enc=[secret]`,
    );
    expect(registerSecretEnv({}, new Redactor())).toEqual([]);
  });

  it('masks them in log lines, progress lines and the fatal error line of the process', () => {
    registerSecretEnv(env);
    const err = new AgentError(`cannot connect: password ${DB_PASSWORD} refused (token ${ACCESS_TOKEN})`);
    const logged = captured(process.stderr, () =>
      logger.error('operation failed', { error: err.message, key: API_KEY }),
    );
    const said = captured(process.stdout, () => say(`the program printed ${DB_PASSWORD}`));
    const fatal = fatalLine('serve', err);
    for (const out of [logged, said, fatal]) {
      for (const secret of [DB_PASSWORD, ACCESS_TOKEN, API_KEY]) expect(out).not.toContain(secret);
      expect(out).toContain('[secret]');
    }
    expect(fatal).toBe('pko-agent serve: cannot connect: password [secret] refused (token [secret])');
    expect(logged).toMatch(/error operation failed error="cannot connect: password \[secret\] refused/);
  });

  it('masks git credentials read by fetch, even in a refusal of the other settings and in git output', () => {
    const password = 'basic-Auth-Passw0rd';
    const passphrase = 'ssh-Key-Passphrase-9';
    expect(() => gitSettingsFromEnv({ GIT_URL: 'https://h/r.git', GIT_PASSWORD: password })).toThrow(
      'GIT_REVISION is not set',
    );
    expect(redactor.redact(`x ${password} y`)).toBe('x [secret] y');
    gitSettingsFromEnv({
      GIT_URL: 'ssh://git@h/r.git',
      GIT_REVISION: 'c'.repeat(40),
      GIT_SSH_PRIVATE_KEY: '-----BEGIN OPENSSH PRIVATE KEY-----\nkey-material\n-----END OPENSSH PRIVATE KEY-----\n',
      GIT_PASSWORD: passphrase,
    });
    expect(classifyGitError(`fatal: Authentication failed: bad passphrase ${passphrase}`, 'ssh')).not.toContain(
      passphrase,
    );
    expect(fatalLine('fetch', new Error(`the passphrase was: ${passphrase}`))).toBe(
      'pko-agent fetch: the passphrase was: [secret]',
    );
  });
});
