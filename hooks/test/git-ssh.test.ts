import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import type { StackSpec } from '../../schemas/generated/types';
import { MAX_SSH_KEY_ROUNDS, parseSshUrl, uploadPackCommand, withSshUser } from '../../contract';
import { readKnownHosts } from '../src/config';
import { fingerprint, isKnownHostKey, knownHostKeys, knownHostsLinesFor } from '../src/git/known-hosts';
import { GitResolver, redactUrl } from '../src/git/ls-remote';
import * as sshKey from '../src/git/ssh-key';
import { decryptSshKey } from '../src/git/ssh-key';
import type { KObject } from '../src/lib/k8s';
import { customizeStack } from '../src/stack/customize';
import { gitAuthEnv, planRefLookup } from '../src/stack/source';
import { buildServer } from '../src/server';
import { stackWorkspacePod } from './controllers';
import { postJson, stackSyncAnswer, listenOnLoopback } from './answers';
import { condition, makeStack, objectMap, syncRequest, testConfig } from './builders';
import { asChild, envList, fetchContainerOf } from './children';
import {
  encryptedKey,
  startFakeSshGitServer,
  strangerKey,
  withKeyRounds,
  type FakeSshGitServer,
} from './ssh-git-server';

describe('SSH git URLs', () => {
  it('reads the scp-like form, with the login git when it names none (upstream)', () => {
    expect(parseSshUrl('git@github.com:org/repo.git')).toEqual({
      user: 'git',
      host: 'github.com',
      port: 22,
      path: 'org/repo.git',
    });
    expect(parseSshUrl('deploy@git.example:~/repo.git')).toMatchObject({ user: 'deploy', path: '~/repo.git' });
    expect(parseSshUrl('git.example:org/repo.git')).toMatchObject({ user: 'git', host: 'git.example' });
    expect(parseSshUrl('git@[fd00::1]:org/repo.git')).toMatchObject({ host: 'fd00::1', port: 22 });
  });

  it('reads ssh:// URLs with a port, and ~ paths as git sends them', () => {
    expect(parseSshUrl('ssh://git@git.example:2222/org/repo.git')).toEqual({
      user: 'git',
      host: 'git.example',
      port: 2222,
      path: '/org/repo.git',
    });
    expect(parseSshUrl('ssh://git.example/~/repo.git')).toMatchObject({ user: 'git', port: 22, path: '~/repo.git' });
    expect(parseSshUrl('git+ssh://me@[fd00::1]:2200/r.git')).toMatchObject({ user: 'me', host: 'fd00::1', port: 2200 });
  });

  it('leaves HTTP URLs and local paths alone', () => {
    for (const url of ['https://github.com/org/repo.git', 'http://h:8080/r.git', '/srv/repo.git', './r:x', 'ssh://h/'])
      expect(parseSshUrl(url)).toBeUndefined();
  });

  it('makes the login explicit for the fetch container, and quotes the path as git does', () => {
    expect(withSshUser('ssh://git.example:2222/r.git')).toBe('ssh://git@git.example:2222/r.git');
    expect(withSshUser('git.example:org/r.git')).toBe('git@git.example:org/r.git');
    expect(withSshUser('deploy@git.example:org/r.git')).toBe('deploy@git.example:org/r.git');
    expect(withSshUser('https://h/r.git')).toBe('https://h/r.git');
    expect(uploadPackCommand("org/it's!.git")).toBe(`git-upload-pack 'org/it'\\''s'\\!'.git'`);
  });
});

// Written by ssh-keygen (a key, the same hosts hashed with ssh-keygen -H, and its fingerprint).
const KEY = 'AAAAC3NzaC1lZDI1NTE5AAAAILME5TNoMl3Z/ryANWDgWF7YuB6ELikc64zYcZ1WD2yW';
const BLOB = Buffer.from(KEY, 'base64');
const HASHED_22 = `|1|HUd46AigYHKf0aK+w4X8sgFPh84=|yUuvWR4mtsmAKRHiLJoUlokqock= ssh-ed25519 ${KEY}`;
const HASHED_2222 = `|1|Oef6gwoainJwZ2snl2xbP5s+AQk=|2tnT7E/jUU9/Ag/lJ0Jl5jzPeFo= ssh-ed25519 ${KEY}`;
const FINGERPRINT = 'SHA256:P4iKEK/PFLuPwf8o32Iqhpf1P4ERLrxD2LAZZeVxCKY';
const OTHER = 'AAAAC3NzaC1lZDI1NTE5AAAAIEJ2ahWm9TCTKpBspyWUNw8R5b5b5I0l6xjvCv4lNXUs';

describe('known_hosts', () => {
  it('finds a host by name, by [name]:port, by wildcard and by hashed name', () => {
    const text = [
      '# comment',
      `git.example.com,10.0.0.1 ssh-ed25519 ${KEY} a comment`,
      `[git.example.com]:2222 ssh-ed25519 ${OTHER}`,
      `*.corp.example,!bad.corp.example ssh-ed25519 ${KEY}`,
      '',
    ].join('\n');
    expect(knownHostKeys(text, 'GIT.example.com', 22).map((k) => k.blob)).toEqual([BLOB]);
    expect(knownHostKeys(text, '10.0.0.1', 22)).toHaveLength(1);
    expect(knownHostKeys(text, 'git.example.com', 2222).map((k) => k.blob.toString('base64'))).toEqual([OTHER]);
    expect(knownHostKeys(text, 'a.corp.example', 22)).toHaveLength(1);
    expect(knownHostKeys(text, 'bad.corp.example', 22)).toEqual([]);
    expect(knownHostKeys(text, 'other.example', 22)).toEqual([]);
    expect(knownHostKeys(HASHED_22, 'git.example.com', 22)).toHaveLength(1);
    expect(knownHostKeys(HASHED_22, 'git.example.com', 2222)).toEqual([]);
    expect(knownHostKeys(HASHED_2222, 'git.example.com', 2222)).toHaveLength(1);
  });

  it('trusts a key only when it is known and not revoked; skips certificate authorities', () => {
    const text = `h ssh-ed25519 ${KEY}\n@cert-authority h ssh-ed25519 ${OTHER}\n`;
    const keys = knownHostKeys(text, 'h', 22);
    expect(keys).toHaveLength(1);
    expect(isKnownHostKey(keys, BLOB)).toBe(true);
    expect(isKnownHostKey(keys, Buffer.from(OTHER, 'base64'))).toBe(false);
    const revoked = knownHostKeys(`${text}@revoked * ssh-ed25519 ${KEY}\n`, 'h', 22);
    expect(isKnownHostKey(revoked, BLOB)).toBe(false);
  });

  it('prints fingerprints as ssh-keygen does, and hands ssh only the lines of one server', () => {
    expect(fingerprint(BLOB)).toBe(FINGERPRINT);
    const text = `a ssh-ed25519 ${KEY}\nb ssh-ed25519 ${OTHER}\n@revoked a ssh-ed25519 ${OTHER}\n${HASHED_22}\n`;
    expect(knownHostsLinesFor(text, 'a', 22)).toBe(`a ssh-ed25519 ${KEY}\n@revoked a ssh-ed25519 ${OTHER}\n`);
    expect(knownHostsLinesFor(text, 'git.example.com', 22)).toBe(`${HASHED_22}\n`);
    expect(knownHostsLinesFor(text, 'c', 22)).toBe('');
  });

  it('is read from the files SSH_KNOWN_HOSTS names, else from upstream’s default places', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pko-kh-'));
    try {
      writeFileSync(join(dir, 'one'), `a ssh-ed25519 ${KEY}`);
      writeFileSync(join(dir, 'two'), `b ssh-ed25519 ${OTHER}\n`);
      expect(readKnownHosts({ SSH_KNOWN_HOSTS: `${join(dir, 'one')}:${join(dir, 'two')}:${join(dir, 'gone')}` })).toBe(
        `a ssh-ed25519 ${KEY}\nb ssh-ed25519 ${OTHER}\n`,
      );
      expect(() => readKnownHosts({ SSH_KNOWN_HOSTS: join(dir, 'gone') })).toThrow(/SSH_KNOWN_HOSTS: none of .*gone/);
      // No SSH_KNOWN_HOSTS: ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts (go-git's places).
      mkdirSync(join(dir, '.ssh'));
      writeFileSync(join(dir, '.ssh', 'known_hosts'), `c ssh-ed25519 ${KEY}\n`);
      expect(readKnownHosts({ HOME: dir }).startsWith(`c ssh-ed25519 ${KEY}\n`)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('resolving git refs over SSH', () => {
  let server: FakeSshGitServer;
  let url: string;
  let main1: string;
  let resolver: GitResolver;
  const key = () => ({ privateKey: server.clientKey });

  beforeAll(async () => {
    server = await startFakeSshGitServer({ hostKeyTypes: ['ecdsa', 'ed25519'] });
    url = server.createRepo('org/infra');
    main1 = server.commit('org/infra', 'main', { 'Pulumi.yaml': 'name: a\nruntime: yaml\n' });
  });
  beforeEach(() => {
    resolver = new GitResolver({ timeoutMs: 5000, cacheTtlMs: 60_000, sshKnownHosts: server.knownHosts.ed25519 });
  });
  afterEach(() => resolver.close());
  afterAll(() => server.close());

  it('resolves a branch with the key, checking the host key it knows (offering its type first)', async () => {
    // The server has an ECDSA and an Ed25519 key; only the Ed25519 one is in known_hosts.
    await expect(resolver.resolve({ url, ref: 'main', ssh: key() })).resolves.toEqual({ sha: main1 });
    await expect(resolver.resolve({ url, ref: 'refs/heads/main', ssh: key() })).resolves.toEqual({ sha: main1 });
  });

  it('uses an encrypted key with its passphrase, and says when the passphrase is missing or wrong', async () => {
    const encrypted = { privateKey: server.encryptedClientKey, passphrase: server.passphrase };
    await expect(resolver.resolve({ url, ref: 'main', ssh: encrypted })).resolves.toEqual({ sha: main1 });
    const missing = await resolver.resolve({ url, ref: 'main', ssh: { privateKey: server.encryptedClientKey } });
    expect(missing).toEqual({
      error: expect.stringMatching(
        /SSH private key of gitAuth\.sshAuth cannot be used: .*passphrase.*gitAuth\.sshAuth\.password/,
      ),
    });
    const wrong = await resolver.resolve({
      url,
      ref: 'main',
      ssh: { privateKey: server.encryptedClientKey, passphrase: 'not it' },
    });
    expect(wrong).toEqual({ error: expect.stringMatching(/SSH private key of gitAuth\.sshAuth cannot be used/) });
    for (const r of [missing, wrong]) {
      expect(JSON.stringify(r)).not.toContain('PRIVATE KEY');
      expect(JSON.stringify(r)).not.toContain(server.passphrase);
    }
  });

  it('decrypts a key once, not on every lookup', async () => {
    const decrypted = jest.spyOn(sshKey, 'decryptSshKey');
    try {
      const encrypted = { privateKey: server.encryptedClientKey, passphrase: server.passphrase };
      const fresh = new GitResolver({ timeoutMs: 5000, cacheTtlMs: 1, sshKnownHosts: server.knownHosts.ed25519 });
      for (const ref of ['main', 'refs/heads/main', 'main'])
        await expect(fresh.resolve({ url, ref, ssh: encrypted })).resolves.toEqual({ sha: main1 });
      await fresh.close();
      expect(decrypted.mock.calls.filter(([key]) => key === server.encryptedClientKey)).toHaveLength(1);
    } finally {
      decrypted.mockRestore();
    }
  });

  it('refuses a key that asks for more bcrypt rounds than it decrypts, before decrypting, naming the limit and the remedy', async () => {
    // Decrypting them would take minutes to days: the answer says the cap, not the time budget.
    for (const rounds of [MAX_SSH_KEY_ROUNDS + 1, 2 ** 32 - 1]) {
      const costly = { privateKey: withKeyRounds(server.encryptedClientKey, rounds), passphrase: server.passphrase };
      expect(await resolver.resolve({ url, ref: 'main', ssh: costly })).toEqual({
        error:
          `cannot resolve "main" in ${redactUrl(url)}: the SSH private key of gitAuth.sshAuth is encrypted with ${rounds} bcrypt rounds, ` +
          `more than the ${MAX_SSH_KEY_ROUNDS} the operator decrypts: encrypt it again with fewer ` +
          '(ssh-keygen -p -a 16 -f <key file>, the default) and update its Secret',
      });
    }
  });

  it('decrypts off the event loop, within a time budget', async () => {
    const slow = encryptedKey('slow', 16);
    // The event loop turns while the key decrypts: a timer fires before the decryption ends.
    let decrypted = false;
    const decryption = decryptSshKey(slow, 'slow').then(() => (decrypted = true));
    await new Promise((resolve) => setTimeout(resolve, 1));
    expect(decrypted).toBe(false);
    await decryption;
    // A decryption past its budget is stopped, and says what to do.
    await expect(decryptSshKey(slow, 'slow', 1)).rejects.toThrow(
      'the SSH private key of gitAuth.sshAuth took longer than 0.001 s to decrypt: encrypt it again with fewer rounds',
    );
  });

  it('caches answers like HTTP lookups: one connection per TTL, and sees a push after it', async () => {
    let now = 1_000_000;
    const timed = new GitResolver({
      timeoutMs: 5000,
      cacheTtlMs: 20_000,
      sshKnownHosts: server.knownHosts.ed25519,
      now: () => now,
    });
    try {
      const before = server.connections();
      await Promise.all([1, 2, 3].map(() => timed.resolve({ url, ref: 'main', ssh: key() })));
      await timed.resolve({ url, ref: 'main', ssh: key() });
      expect(server.connections() - before).toBe(1);
      const main2 = server.commit('org/infra', 'main', { 'b.txt': 'b' });
      await expect(timed.resolve({ url, ref: 'main', ssh: key() })).resolves.toEqual({ sha: main1 });
      now += 20_001;
      await expect(timed.resolve({ url, ref: 'main', ssh: key() })).resolves.toEqual({ sha: main2 });
      main1 = main2;
    } finally {
      await timed.close();
    }
  });

  it('refuses a server whose host key it does not know, or knows otherwise, naming host and key', async () => {
    const unknown = new GitResolver({ timeoutMs: 5000, cacheTtlMs: 1 });
    const changed = new GitResolver({
      timeoutMs: 5000,
      cacheTtlMs: 1,
      sshKnownHosts: `[127.0.0.1]:${server.port} ssh-ed25519 ${OTHER}\n`,
    });
    const revoked = new GitResolver({
      timeoutMs: 5000,
      cacheTtlMs: 1,
      sshKnownHosts: `${server.knownHosts.ed25519}@revoked ${server.knownHosts.ed25519}`,
    });
    try {
      const host = `127.0.0.1:${server.port}`;
      expect(await unknown.resolve({ url, ref: 'main', ssh: key() })).toEqual({
        error: expect.stringMatching(
          new RegExp(
            `the host key of ${host} is not known: add it to the hooks' known_hosts \\(SSH_KNOWN_HOSTS; the server offered ssh-ed25519 key SHA256:`,
          ),
        ),
      });
      expect(await changed.resolve({ url, ref: 'main', ssh: key() })).toEqual({
        error: expect.stringContaining(`the host key of ${host} does not match the hooks' known_hosts`),
      });
      expect(await revoked.resolve({ url, ref: 'main', ssh: key() })).toEqual({
        error: expect.stringContaining(`the host key of ${host} (ssh-ed25519 key SHA256:`),
      });
    } finally {
      await Promise.all([unknown.close(), changed.close(), revoked.close()]);
    }
  });

  it('says when the server refuses the key, without the key', async () => {
    const stranger = strangerKey();
    const r = await resolver.resolve({ url, ref: 'main', ssh: { privateKey: stranger } });
    expect(r).toEqual({
      error: `cannot resolve "main" in ssh://127.0.0.1:${server.port}/org/infra.git: 127.0.0.1:${server.port} refused the SSH key of gitAuth.sshAuth for user "git" (publickey authentication failed)`,
    });
    expect(JSON.stringify(r)).not.toContain('PRIVATE KEY');
  });

  it('says which repository or ref is missing, with what the server said', async () => {
    expect(await resolver.resolve({ url: server.createRepo('empty'), ref: 'main', ssh: key() })).toEqual({
      error: expect.stringContaining('no commits found for ref "main"'),
    });
    const gone = url.replace('infra', 'gone');
    expect(await resolver.resolve({ url: gone, ref: 'main', ssh: key() })).toEqual({
      error: expect.stringMatching(
        /git-upload-pack on 127\.0\.0\.1:\d+ failed \(exit status 128\): fatal: .*gone\.git/,
      ),
    });
    expect(await resolver.resolve({ url, ref: 'nope', ssh: key() })).toEqual({
      error: expect.stringContaining('no commits found for ref "nope"'),
    });
  });

  it('reads a ref list that spans many SSH packets', async () => {
    const big = server.createRepo('big');
    const sha = server.commit('big', 'main', { a: 'a' });
    const tags = Array.from({ length: 3000 }, (_, i) => `refs/tags/release-${String(i).padStart(5, '0')}`);
    server.updateRefs('big', [...tags, 'refs/heads/zz-last'], sha);
    await expect(resolver.resolve({ url: big, ref: 'zz-last', ssh: key() })).resolves.toEqual({ sha });
    await expect(resolver.resolve({ url: big, ref: 'release-02999', ssh: key() })).resolves.toEqual({ sha });
  });

  it('needs an SSH key for an SSH URL', async () => {
    expect(await resolver.resolve({ url, ref: 'main' })).toEqual({
      error: expect.stringContaining('an SSH repository URL needs an SSH key (gitAuth.sshAuth)'),
    });
  });
});

describe('the hook server with an SSH branch', () => {
  it('syncs a Stack at the branch head read over SSH, and reports a host key problem as SourceUnavailable', async () => {
    const server = await startFakeSshGitServer();
    const url = server.createRepo('app');
    const head = server.commit('app', 'main', { 'Pulumi.yaml': 'name: app\nruntime: yaml\n' });
    const logs: string[] = [];
    const start = async (sshKnownHosts: string) => {
      const { app } = buildServer(
        { ...testConfig, logLevel: 'debug', sshKnownHosts },
        { logStream: new Writable({ write: (c, _e, cb) => (logs.push(String(c)), cb()) }) },
      );
      await listenOnLoopback(app);
      return app;
    };
    const stack = makeStack({
      programRef: undefined,
      projectRepo: url,
      branch: 'main',
      gitAuth: { sshAuth: { sshPrivateKey: { type: 'Secret', secret: { name: 'deploy-key', key: 'id' } } } },
    });
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'deploy-key', namespace: 'team-a' },
      data: { id: Buffer.from(server.clientKey).toString('base64') },
    };
    const trusting = await start(server.knownHosts.ed25519);
    const stranger = await start(`[127.0.0.1]:${server.port} ssh-ed25519 ${OTHER}\n`);
    try {
      const sync = async (app: typeof trusting) => {
        const res = await postJson(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/stack/sync`, {
          controller: {},
          ...syncRequest(stack, [], [secret]),
        });
        expect(res.status).toBe(200);
        return { answer: stackSyncAnswer(res.json), text: res.text };
      };
      const ok = (await sync(trusting)).answer;
      expect(condition(ok.status, 'Stalled')).toBeUndefined();
      // The Workspace controller, in the same server, makes the StatefulSet of the Stack's Workspace.
      const workspace = ok.children.find((c) => c.kind === 'Workspace');
      const port = (trusting.server.address() as AddressInfo).port;
      const ws = await postJson(`http://127.0.0.1:${port}/workspace/sync`, {
        controller: {},
        parent: workspace,
        children: {},
      });
      expect(ws.status).toBe(200);
      const sts = asChild(
        (JSON.parse(ws.text) as { children: unknown[] }).children.find(
          (c) => (c as { kind?: string }).kind === 'StatefulSet',
        ),
        'StatefulSet',
      );
      expect(envList(fetchContainerOf(sts))).toEqual(
        expect.arrayContaining([
          { name: 'GIT_URL', value: url },
          { name: 'GIT_REVISION', value: head },
          { name: 'GIT_SSH_KNOWN_HOSTS', value: server.knownHosts.ed25519 },
        ]),
      );
      const refused = await sync(stranger);
      expect(condition(refused.answer.status, 'Stalled')).toMatchObject({
        reason: 'SourceUnavailable',
        message: expect.stringContaining(`the host key of 127.0.0.1:${server.port} does not match`),
      });
      for (const text of [refused.text, logs.join('')]) {
        expect(text).not.toContain('PRIVATE KEY');
        expect(text).not.toContain(secret.data.id);
      }
    } finally {
      await Promise.all([trusting.close(), stranger.close()]);
      await server.close();
    }
  });
});

describe('the hook server with an SSH key asking for 2^32-1 bcrypt rounds', () => {
  it('answers at once: Stalled SourceUnavailable, naming the limit and the remedy, never the key', async () => {
    const key = withKeyRounds(encryptedKey('pass', 4), 2 ** 32 - 1);
    const stack = makeStack({
      programRef: undefined,
      projectRepo: 'ssh://git@git.test/org/app.git',
      branch: 'main',
      gitAuth: {
        sshAuth: {
          sshPrivateKey: { type: 'Secret', secret: { name: 'deploy-key', key: 'id' } },
          password: { type: 'Secret', secret: { name: 'deploy-key', key: 'passphrase' } },
        },
      },
    });
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'deploy-key', namespace: 'team-a' },
      data: { id: Buffer.from(key).toString('base64'), passphrase: Buffer.from('pass').toString('base64') },
    };
    const { app } = buildServer({ ...testConfig, logLevel: 'error' });
    const base = await listenOnLoopback(app);
    try {
      const res = await postJson(`${base}/stack/sync`, {
        controller: {},
        ...syncRequest(stack, [], [secret]),
      });
      expect(res.status).toBe(200);
      expect(condition(stackSyncAnswer(res.json).status, 'Stalled')).toMatchObject({
        reason: 'SourceUnavailable',
        message: expect.stringContaining(
          `encrypted with ${2 ** 32 - 1} bcrypt rounds, more than the ${MAX_SSH_KEY_ROUNDS} the operator decrypts`,
        ),
      });
      expect(res.text).not.toContain(secret.data.id);
    } finally {
      await app.close();
    }
  });
});

describe('an SSH server that does not answer', () => {
  it('gives up at the lookup timeout, in the handshake or after it', async () => {
    // A TCP server that never speaks SSH, and an SSH server that never answers git-upload-pack.
    const mute: Server = createServer(() => undefined);
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    const port = (mute.address() as { port: number }).port;
    const silent = await startFakeSshGitServer({ silent: true });
    const resolver = new GitResolver({ timeoutMs: 300, cacheTtlMs: 1, sshKnownHosts: silent.knownHosts.ed25519 });
    try {
      expect(
        await resolver.resolve({
          url: `ssh://git@127.0.0.1:${port}/r.git`,
          ref: 'main',
          ssh: { privateKey: silent.clientKey },
        }),
      ).toEqual({ error: expect.stringMatching(/timed out after 300 ms .*127\.0\.0\.1:\d+/) });
      const url = silent.createRepo('r');
      expect(await resolver.resolve({ url, ref: 'main', ssh: { privateKey: silent.clientKey } })).toEqual({
        error: expect.stringMatching(/timed out after 300 ms talking to 127\.0\.0\.1:\d+/),
      });
    } finally {
      mute.close();
      await resolver.close();
      await silent.close();
    }
  });

  it('says when the server does not speak git-upload-pack', async () => {
    const odd = await startFakeSshGitServer({ reply: 'Welcome to the shell!\n' });
    const resolver = new GitResolver({ timeoutMs: 5000, cacheTtlMs: 1, sshKnownHosts: odd.knownHosts.ed25519 });
    try {
      expect(
        await resolver.resolve({ url: odd.createRepo('r'), ref: 'main', ssh: { privateKey: odd.clientKey } }),
      ).toEqual({
        error: expect.stringContaining('the server did not answer as git-upload-pack'),
      });
    } finally {
      await resolver.close();
      await odd.close();
    }
  });

  it('reports a refused connection', async () => {
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    const port = (probe.address() as { port: number }).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const resolver = new GitResolver({ timeoutMs: 2000, cacheTtlMs: 1, sshKnownHosts: '' });
    const privateKey = strangerKey();
    expect(
      await resolver.resolve({ url: `ssh://git@127.0.0.1:${port}/r.git`, ref: 'main', ssh: { privateKey } }),
    ).toEqual({
      error: `cannot resolve "main" in ssh://127.0.0.1:${port}/r.git: cannot reach 127.0.0.1:${port} over SSH: ECONNREFUSED`,
    });
    await resolver.close();
  });
});

describe('a branch of an SSH URL with gitAuth.sshAuth, from the Stack', () => {
  const ref = (name: string, key: string) => ({ type: 'Secret' as const, secret: { name, key } });
  const repo = 'git@git.example.com:org/infra.git';
  const spec: Partial<StackSpec> = {
    programRef: undefined,
    projectRepo: repo,
    branch: 'main',
    gitAuth: { sshAuth: { sshPrivateKey: ref('deploy-key', 'id'), password: ref('deploy-key', 'passphrase') } },
  };
  const secret = (name: string, data: Record<string, string>): KObject => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: 'team-a' },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  });

  it('asks Metacontroller for the key Secret and plans an SSH lookup with the key and passphrase', () => {
    const stack = makeStack(spec);
    expect(customizeStack(stack).relatedResources).toContainEqual({
      apiVersion: 'v1',
      resource: 'secrets',
      namespace: 'team-a',
      names: ['deploy-key'],
    });
    expect(planRefLookup(stack, objectMap(secret('deploy-key', { id: 'KEY', passphrase: 'PW' })))).toEqual({
      url: repo,
      ref: 'main',
      ssh: { privateKey: 'KEY', passphrase: 'PW' },
    });
    // A legacy gitAuthSecret's sshPrivateKey (and password as passphrase) serves too.
    const legacy = makeStack({ programRef: undefined, projectRepo: repo, branch: 'main', gitAuthSecret: 'legacy' });
    expect(planRefLookup(legacy, objectMap(secret('legacy', { sshPrivateKey: 'KEY' })))?.ssh).toEqual({
      privateKey: 'KEY',
    });
  });

  it('says which Secret is missing, and that an SSH key cannot read an HTTP(S) URL', () => {
    expect(planRefLookup(makeStack(spec), objectMap())?.unsupported).toBe(
      'resolving "main" needs the SSH key of gitAuth.sshAuth.sshPrivateKey: Secret team-a/deploy-key or its key "id" is missing',
    );
    const https = makeStack({ ...spec, projectRepo: 'https://git.example.com/org/infra.git' });
    expect(planRefLookup(https, objectMap(secret('deploy-key', { id: 'KEY' })))?.unsupported).toMatch(
      /an SSH key reads SSH URLs only/,
    );
  });

  it('gives the fetch container the hooks’ known_hosts lines for that server only', () => {
    const stack = makeStack(spec);
    const fetchEnv = (url: string, config: typeof testConfig) =>
      envList(
        fetchContainerOf(
          asChild(
            stackWorkspacePod(
              stack,
              { kind: 'git', url, revision: 'a'.repeat(40), shallow: false, auth: gitAuthEnv(stack.spec) },
              config,
            ).statefulSet,
            'StatefulSet',
          ),
        ),
      );
    const sshKnownHosts = `git.example.com ssh-ed25519 ${KEY}\nother.example ssh-ed25519 ${OTHER}\n`;
    expect(fetchEnv(repo, { ...testConfig, sshKnownHosts })).toContainEqual({
      name: 'GIT_SSH_KNOWN_HOSTS',
      value: `git.example.com ssh-ed25519 ${KEY}\n`,
    });
    const names = (env: { name: string }[]) => env.map((e) => e.name);
    expect(names(fetchEnv(repo, testConfig))).not.toContain('GIT_SSH_KNOWN_HOSTS');
    expect(names(fetchEnv('https://git.example.com/org/infra.git', { ...testConfig, sshKnownHosts }))).not.toContain(
      'GIT_SSH_KNOWN_HOSTS',
    );
  });
});
