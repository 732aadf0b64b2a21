/**
 * An SSH git server in the test process, for unit tests (no root, no sshd): ssh2's Server with
 * public-key authentication that runs the real `git-upload-pack` on bare repositories in a temp
 * dir. e2e/testbed/sshd-git-server.ts is the real OpenSSH one for the end-to-end tests.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Server, utils, type Connection, type ParsedKey } from 'ssh2';
import { commitTo, initBare } from '../../e2e/testbed/git-server';

export interface FakeSshGitServerOptions {
  /** Host key types the server offers (default ed25519). */
  hostKeyTypes?: ('ed25519' | 'ecdsa')[];
  /** Accept exec requests but never answer them (to test client timeouts). */
  silent?: boolean;
  /** Answer every exec with these bytes instead of running git-upload-pack. */
  reply?: string;
}

export interface FakeSshGitServer {
  port: number;
  /** known_hosts lines for this server, one per host key type. */
  knownHosts: Record<'ed25519' | 'ecdsa', string>;
  /** The key the server accepts for user `git`, its OpenSSH public line. */
  clientKey: string;
  /** The same key encrypted with `passphrase`. */
  encryptedClientKey: string;
  passphrase: string;
  /** `ssh://git@127.0.0.1:<port>/<name>.git` after creating the bare repository `<name>.git`. */
  createRepo(name: string): string;
  commit(repo: string, branch: string, files: Record<string, string>): string;
  /** Points many refs (full names) at a commit at once. */
  updateRefs(repo: string, refs: string[], sha: string): void;
  /** SSH connections accepted so far. */
  connections(): number;
  close(): Promise<void>;
}

function parsed(key: string, passphrase?: string): ParsedKey {
  const k = utils.parseKey(key, passphrase);
  if (k instanceof Error || Array.isArray(k)) throw new Error(`test key does not parse: ${String(k)}`);
  return k;
}

/**
 * ssh2's key generator, retried: about one ed25519 key in a few hundred it writes is malformed
 * (ssh-keygen rejects it too).
 */
function generate(make: () => { private: string; public: string }, passphrase?: string) {
  for (;;) {
    const pair = make();
    const k = utils.parseKey(pair.private, passphrase);
    if (!(k instanceof Error) && !Array.isArray(k)) return pair;
  }
}

/** A fresh client key nobody authorized. */
export function strangerKey(): string {
  return generate(() => utils.generateKeyPairSync('ed25519')).private;
}

/** A fresh ed25519 key in OpenSSH format, encrypted with `passphrase` in `rounds` bcrypt rounds (as ssh-keygen -a). */
export function encryptedKey(passphrase: string, rounds: number): string {
  return generate(() => utils.generateKeyPairSync('ed25519', { passphrase, cipher: 'aes256-ctr', rounds }), passphrase)
    .private;
}

/**
 * An encrypted OpenSSH key with the rounds field of its key derivation set to `rounds`, as anyone
 * may write it: not encrypted again (that would cost the rounds), so only its cost is claimed.
 */
export function withKeyRounds(key: string, rounds: number): string {
  const lines = key.trim().split('\n');
  const data = Buffer.from(lines.slice(1, -1).join(''), 'base64');
  let at = 'openssh-key-v1\0'.length;
  const skip = () => (at += 4 + data.readUInt32BE(at));
  skip(); // cipher name
  skip(); // kdf name ("bcrypt")
  at += 4; // the kdf options' length, then: string salt, uint32 rounds
  skip();
  data.writeUInt32BE(rounds, at);
  const body = data
    .toString('base64')
    .match(/.{1,70}/g)!
    .join('\n');
  return `${lines[0]}\n${body}\n${lines.at(-1)}\n`;
}

export async function startFakeSshGitServer(options: FakeSshGitServerOptions = {}): Promise<FakeSshGitServer> {
  const root = mkdtempSync(join(tmpdir(), 'pko-fake-ssh-'));
  const repos = join(root, 'repos');
  const work = join(root, 'work');
  mkdirSync(repos);
  mkdirSync(work);
  const hostKeys = {
    ed25519: generate(() => utils.generateKeyPairSync('ed25519')),
    ecdsa: generate(() => utils.generateKeyPairSync('ecdsa', { bits: 256 })),
  };
  const offered = options.hostKeyTypes ?? ['ed25519'];
  const passphrase = 'correct horse battery staple';
  const client = generate(() => utils.generateKeyPairSync('ed25519'));
  const encrypted = encryptedKey(passphrase, 4);
  const allowed = [parsed(client.private), parsed(encrypted, passphrase)];
  let count = 0;
  const sockets = new Set<Connection>();

  const server = new Server({ hostKeys: offered.map((t) => hostKeys[t].private) }, (conn) => {
    count++;
    sockets.add(conn);
    conn.on('close', () => sockets.delete(conn));
    conn.on('error', () => undefined);
    conn.on('authentication', (ctx) => {
      const key = ctx.method === 'publickey' ? allowed.find((k) => k.getPublicSSH().equals(ctx.key.data)) : undefined;
      if (ctx.method !== 'publickey' || ctx.username !== 'git' || !key) return ctx.reject(['publickey']);
      // Without a signature the client only asks whether the key would do.
      if (!ctx.signature) return ctx.accept();
      if (ctx.blob && key.verify(ctx.blob, ctx.signature, ctx.hashAlgo)) return ctx.accept();
      ctx.reject(['publickey']);
    });
    conn.on('ready', () => {
      conn.on('session', (acceptSession) => {
        const session = acceptSession();
        session.on('exec', (accept, _reject, info) => {
          const stream = accept();
          if (options.silent) return;
          if (options.reply !== undefined) {
            stream.end(options.reply);
            stream.exit(0);
            return;
          }
          const m = /^git-upload-pack '([^']*)'$/.exec(info.command);
          if (!m) {
            stream.stderr.write(`fatal: unrecognized command '${info.command}'\n`);
            stream.exit(128);
            stream.end();
            return;
          }
          const child = spawn('git-upload-pack', ['--strict', join(repos, m[1]!)], {
            env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1' },
          });
          stream.pipe(child.stdin).on('error', () => undefined);
          child.stdout.pipe(stream, { end: false });
          child.stderr.on('data', (c: Buffer) => stream.stderr.write(c));
          child.on('close', (code) => {
            stream.exit(code ?? 1);
            stream.end();
          });
        });
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const line = (t: 'ed25519' | 'ecdsa') =>
    `[127.0.0.1]:${port} ${parsed(hostKeys[t].public).type} ${parsed(hostKeys[t].public).getPublicSSH().toString('base64')}\n`;

  return {
    port,
    knownHosts: { ed25519: line('ed25519'), ecdsa: line('ecdsa') },
    clientKey: client.private,
    encryptedClientKey: encrypted,
    passphrase,
    createRepo(name) {
      initBare(join(repos, `${name}.git`));
      return `ssh://git@127.0.0.1:${port}/${name}.git`;
    },
    commit: (repo, branch, files) => commitTo(join(repos, `${repo}.git`), work, branch, files),
    updateRefs(repo, refs, sha) {
      execFileSync('git', ['update-ref', '--stdin'], {
        cwd: join(repos, `${repo}.git`),
        input: refs.map((r) => `create ${r} ${sha}\n`).join(''),
      });
    },
    connections: () => count,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of sockets) c.end();
        server.close(() => {
          rmSync(root, { recursive: true, force: true });
          resolve();
        });
      }),
  };
}
