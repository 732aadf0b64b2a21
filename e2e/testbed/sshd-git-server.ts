/**
 * A real SSH git server for tests: OpenSSH's sshd (Debian's openssh-server) with git-shell as the
 * login shell of a user `git`, so clients may run git-upload-pack and git-receive-pack only.
 * Everything it uses is in a temp dir: its config, host key, authorized_keys, the repositories
 * (in git's home, so `git@host:org/repo.git` finds them) and the user itself.
 *
 * sshd needs the user in the passwd database, and a privilege separation directory /run/sshd; the
 * host's /etc/passwd and /run are not touched. sshd runs in a mount namespace of its own (unshare
 * --mount, private propagation) where a copy of /etc/passwd with the user `git` added is
 * bind-mounted over /etc/passwd and a tmpfs over /run: only sshd and its children see them, and
 * they vanish with it. It needs root (sshd changes to the user; unshare and mount). docs/testbed.md
 * explains it.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { commitTo, initBare } from './git-server';
import { freePort } from './helpers';
import { testServerHost } from './node/environment';

/** The unprivileged uid/gid `git` runs as (nobody's: no file on the host belongs to it). */
const GIT_UID = 65534;
const SSHD = '/usr/sbin/sshd';

export interface SshdGitServerOptions {
  /** Listen on this port (default: 22 on the test network, where scp-like URLs need it; else a free one). */
  port?: number;
  /** Protect the client key with this passphrase. */
  passphrase?: string;
}

export interface SshdGitServer {
  host: string;
  port: number;
  /** The known_hosts line for this server (its ed25519 host key). */
  knownHosts: string;
  /** A client private key (OpenSSH format) that the server accepts for user `git`. */
  clientKey: string;
  /** Creates a bare repository `<name>.git` and returns its scp-like and ssh:// URLs. */
  createRepo(name: string): { scpUrl: string; sshUrl: string };
  /** Commits files to a branch of a repository (creating the branch) and returns the commit SHA. */
  commit(repo: string, branch: string, files: Record<string, string>, message?: string): string;
  /** What sshd logged (connections, authentications). */
  log(): string;
  close(): Promise<void>;
}

function keygen(file: string, passphrase = ''): void {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', passphrase, '-C', 'pko-e2e', '-f', file]);
}

export async function startSshdGitServer(options: SshdGitServerOptions = {}): Promise<SshdGitServer> {
  if (process.getuid?.() !== 0) throw new Error('the SSH git server needs root (sshd, unshare, mount)');
  const host = testServerHost();
  const port = options.port ?? (host === '127.0.0.1' ? await freePort(host) : 22);
  const root = mkdtempSync(join(tmpdir(), 'pko-sshd-'));
  const home = join(root, 'home');
  const work = join(root, 'work');
  mkdirSync(home);
  mkdirSync(work);
  // git (uid 65534) reads the repositories and its home; the keys and config stay root's.
  chmodSync(root, 0o755);
  chmodSync(home, 0o755);
  keygen(join(root, 'host_key'));
  keygen(join(root, 'client_key'), options.passphrase);
  writeFileSync(join(root, 'authorized_keys'), readFileSync(join(root, 'client_key.pub')), { mode: 0o644 });
  // git refuses repositories owned by another user (safe.directory); these are root's.
  writeFileSync(join(home, '.gitconfig'), '[safe]\n\tdirectory = *\n', { mode: 0o644 });

  const passwd = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('git:'));
  passwd.push(`git:x:${GIT_UID}:${GIT_UID}:git:${home}:/usr/bin/git-shell`);
  if (!passwd.some((l) => l.startsWith('sshd:'))) passwd.push('sshd:x:65534:65534::/run/sshd:/usr/sbin/nologin');
  writeFileSync(join(root, 'passwd'), `${passwd.join('\n')}\n`, { mode: 0o644 });

  const config = join(root, 'sshd_config');
  writeFileSync(
    config,
    [
      `ListenAddress ${host}:${port}`,
      `HostKey ${join(root, 'host_key')}`,
      `AuthorizedKeysFile ${join(root, 'authorized_keys')}`,
      'PidFile none',
      'AllowUsers git',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'PermitRootLogin no',
      // The key files live under /tmp (mode 1777), which StrictModes would reject.
      'StrictModes no',
      'AllowTcpForwarding no',
      'X11Forwarding no',
      'PermitTTY no',
      'Subsystem sftp none',
      'LogLevel VERBOSE',
      '',
    ].join('\n'),
  );

  const script = [
    'set -e',
    `mount --bind ${join(root, 'passwd')} /etc/passwd`,
    'mount -t tmpfs -o mode=0755 pko-sshd-run /run',
    'mkdir -m 0755 /run/sshd',
    `exec ${SSHD} -D -e -f ${config}`,
  ].join('\n');
  let log = '';
  const sshd: ChildProcess = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  sshd.stdout?.on('data', (c: Buffer) => (log += c.toString()));
  sshd.stderr?.on('data', (c: Buffer) => (log += c.toString()));
  const exited = new Promise<void>((resolve) => sshd.on('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`sshd did not start in 10 s:\n${log}`)), 10_000);
    const check = () => {
      if (/Server listening on/.test(log)) {
        clearTimeout(timer);
        resolve();
      }
    };
    sshd.stderr?.on('data', check);
    sshd.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`sshd exited (${code}) before listening:\n${log}`));
    });
  });

  const hostKey = readFileSync(join(root, 'host_key.pub'), 'utf8').trim().split(/\s+/).slice(0, 2).join(' ');
  const hostField = port === 22 ? host : `[${host}]:${port}`;
  return {
    host,
    port,
    knownHosts: `${hostField} ${hostKey}\n`,
    clientKey: readFileSync(join(root, 'client_key'), 'utf8'),
    createRepo(name) {
      initBare(join(home, `${name}.git`));
      execFileSync('chmod', ['-R', 'a+rX', home]);
      const hostPart = host.includes(':') ? `[${host}]` : host;
      return {
        scpUrl: port === 22 ? `git@${hostPart}:${name}.git` : `ssh://git@${hostPart}:${port}/~/${name}.git`,
        sshUrl: `ssh://git@${hostPart}:${port}/~/${name}.git`,
      };
    },
    commit(repo, branch, files, message) {
      const sha = commitTo(join(home, `${repo}.git`), work, branch, files, message);
      execFileSync('chmod', ['-R', 'a+rX', home]);
      return sha;
    },
    log: () => log,
    async close() {
      if (sshd.exitCode === null) {
        sshd.kill('SIGTERM');
        await exited;
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}
