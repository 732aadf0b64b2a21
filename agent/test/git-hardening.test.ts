/**
 * The git fetch against hostile settings: a revision that git would read as an option, ref names
 * and short SHAs, option-like and multi-line URLs, an SSH key asking for days of key derivation.
 * Real git, local repositories (file:// URLs).
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { checkoutArgs, fetchCommitArgs, fetchGit, gitSettingsFromEnv, isFullCommitSha } from '../src/fetch/git';
import type { FetchLayout } from '../src/fetch/common';
import { AgentError } from '../src/lib/errors';
import { MAX_SSH_KEY_ROUNDS } from '../../contract';
import { encryptedKey, withKeyRounds } from '../../hooks/test/ssh-git-server';

const GIT_ENV = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', LC_ALL: 'C' };

function git(cwd: string, args: string[]): string {
  return execFileSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8' }).trim();
}

/** A repository with one commit holding a Pulumi.yaml; its HEAD SHA. */
function makeRepo(dir: string, objectFormat: 'sha1' | 'sha256' = 'sha1'): string {
  fs.mkdirSync(dir, { recursive: true });
  git(dir, ['init', '-q', `--object-format=${objectFormat}`]);
  fs.writeFileSync(path.join(dir, 'Pulumi.yaml'), 'name: hardened\nruntime: yaml\n');
  git(dir, ['add', 'Pulumi.yaml']);
  git(dir, ['-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-q', '-m', 'one']);
  return git(dir, ['rev-parse', 'HEAD']);
}

let tmp: string;
let layout: FetchLayout;
let repo: string;
let head: string;
let pwned: string;

beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-git-hardening-'));
  layout = {
    share: path.join(tmp, 'share'),
    source: path.join(tmp, 'share', 'source'),
    workspace: path.join(tmp, 'share', 'workspace'),
  };
  repo = path.join(tmp, 'repo');
  head = makeRepo(repo);
  pwned = path.join(tmp, 'pwned');
});
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

const url = (): string => `file://${repo}`;
const hostileRevision = (): string => `--upload-pack=touch ${pwned}`;

async function failure(p: Promise<unknown>): Promise<AgentError> {
  const e: unknown = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(AgentError);
  return e as AgentError;
}

describe('git revision', () => {
  it('accepts only full commit SHAs (SHA-1 and SHA-256)', () => {
    expect(isFullCommitSha('a'.repeat(40))).toBe(true);
    expect(isFullCommitSha('A'.repeat(64))).toBe(true);
    for (const bad of ['main', 'refs/heads/main', 'a'.repeat(39), 'a'.repeat(41), 'a'.repeat(63), 'g'.repeat(40), '']) {
      expect(isFullCommitSha(bad)).toBe(false);
    }
  });

  it('refuses a revision that git would read as an option, with a clear message, and runs nothing', async () => {
    const settings = () => gitSettingsFromEnv({ GIT_URL: url(), GIT_REVISION: hostileRevision() });
    expect(settings).toThrow(AgentError);
    expect(settings).toThrow(
      /^fetch git: file:\/\/.*: GIT_REVISION must be a full commit SHA \(40 hexadecimal digits, or 64 for a SHA-256 repository\), not "--upload-pack=touch /,
    );
    // fetchGit checks too, whoever builds its settings.
    const e = await failure(fetchGit({ url: url(), revision: hostileRevision(), shallow: false }, layout));
    expect(e.reason).toBe('SpecInvalid');
    expect(e.message).toContain('must be a full commit SHA');
    expect(fs.existsSync(pwned)).toBe(false);
    expect(fs.existsSync(layout.source)).toBe(false);
  });

  it('refuses branch names and abbreviated SHAs: the hooks resolve them before the pod exists', () => {
    for (const revision of ['main', head.slice(0, 12)]) {
      expect(() => gitSettingsFromEnv({ GIT_URL: url(), GIT_REVISION: revision })).toThrow(
        `GIT_REVISION must be a full commit SHA`,
      );
    }
  });

  it('puts the revision after `--`, where git takes no option from it', () => {
    const init = path.join(tmp, 'init');
    fs.mkdirSync(init);
    git(init, ['init', '-q']);
    git(init, ['remote', 'add', 'origin', url()]);
    const run = (args: string[]): void => {
      try {
        execFileSync('git', args, { cwd: init, env: GIT_ENV, stdio: 'ignore' });
      } catch {
        /* the fetch fails: what matters is what it ran */
      }
    };
    for (const args of [fetchCommitArgs(hostileRevision(), false), fetchCommitArgs(hostileRevision(), true)]) {
      expect(args.indexOf('--')).toBeLessThan(args.indexOf(hostileRevision()));
      run(args);
      expect(fs.existsSync(pwned)).toBe(false);
    }
    const checkout = checkoutArgs(hostileRevision());
    expect(checkout.indexOf('--')).toBeGreaterThan(checkout.indexOf(hostileRevision()));
    // The same revision without the `--` is run by git: the attack the separator stops.
    run(['fetch', '-q', '--no-tags', 'origin', hostileRevision()]);
    expect(fs.existsSync(pwned)).toBe(true);
  });

  it('fetches and checks out a full SHA, of a SHA-1 and of a SHA-256 repository', async () => {
    const got = await fetchGit({ url: url(), revision: head.toUpperCase(), shallow: true }, layout);
    expect(got.commit).toBe(head);
    expect(fs.readFileSync(path.join(layout.workspace, 'Pulumi.yaml'), 'utf8')).toContain('hardened');

    const repo256 = path.join(tmp, 'repo256');
    const head256 = makeRepo(repo256, 'sha256');
    expect(head256).toHaveLength(64);
    const got256 = await fetchGit({ url: `file://${repo256}`, revision: head256, shallow: false }, layout);
    expect(got256.commit).toBe(head256);
  });

  it('says "ref not found" for a full SHA the repository does not have', async () => {
    const e = await failure(fetchGit({ url: url(), revision: 'b'.repeat(40), shallow: false }, layout));
    expect(e.message).toMatch(/ref not found/);
  });
});

describe('git URL', () => {
  it('refuses a URL that looks like an option, and one with control characters', () => {
    expect(() => gitSettingsFromEnv({ GIT_URL: `--upload-pack=touch ${pwned}`, GIT_REVISION: head })).toThrow(
      'GIT_URL must not start with "-"',
    );
    expect(() =>
      gitSettingsFromEnv({ GIT_URL: `${url()}"\n[core]\n\tsshCommand = touch ${pwned}`, GIT_REVISION: head }),
    ).toThrow('GIT_URL contains control characters');
    expect(fs.existsSync(pwned)).toBe(false);
  });
});

describe('SSH key', () => {
  it('refuses a key that asks for more bcrypt rounds than the operator decrypts, before ssh runs', async () => {
    const key = withKeyRounds(encryptedKey('pass', 4), 2 ** 32 - 1);
    const e = await failure(
      fetchGit(
        {
          url: 'ssh://git@127.0.0.1:1/org/app.git',
          revision: head,
          shallow: false,
          sshPrivateKey: key,
          password: 'pass',
          sshKnownHosts:
            '[127.0.0.1]:1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAILME5TNoMl3Z/ryANWDgWF7YuB6ELikc64zYcZ1WD2yW\n',
        },
        layout,
      ),
    );
    expect(e.reason).toBe('SourceUnavailable');
    expect(e.message).toBe(
      `fetch git: ssh://git@127.0.0.1:1/org/app.git: the SSH private key of gitAuth.sshAuth is encrypted with ${2 ** 32 - 1} ` +
        `bcrypt rounds, more than the ${MAX_SSH_KEY_ROUNDS} the operator decrypts: encrypt it again with fewer ` +
        '(ssh-keygen -p -a 16 -f <key file>, the default) and update its Secret',
    );
  });
});
