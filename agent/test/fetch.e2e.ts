/**
 * `pko-agent fetch`: git against a real smart-HTTP git server (public, basic auth, token, GitHub App
 * token exchange), Flux artifacts over HTTP (digest, size cap, unsafe archives), project-info and
 * local (Programs: fetch-program.test.ts). Runs the real CLI (bin/pko-agent) with PKO_AGENT_ROOT as the pod's `/`.
 */
import { execFileSync } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { blake3 } from '@noble/hashes/blake3';
import { bytesToHex } from '@noble/hashes/utils';
import { startGitServer, type GitServer } from '../../e2e/testbed/git-server';
import { startSshdGitServer, type SshdGitServer } from '../../e2e/testbed/sshd-git-server';
import { capturedOutput, cleanEnv, ensureBuilt, runAgent, tmpDir } from './helpers';
import { tarGz, type TarEntry } from './tarball';

const PROJECT = 'name: fetched\nruntime: yaml\n';
const SECRET_PASSWORD = 's3cret-Passw0rd-xyz';
const SECRET_TOKEN = 'ghs_installationTokenValue123';

let root: string;
beforeAll(() => ensureBuilt());
beforeEach(() => {
  root = tmpDir('fetch');
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

function ws(): string {
  return path.join(root, 'share', 'workspace');
}

/** A fresh pod: nothing left from an earlier fetch. */
function resetShare(): void {
  fs.rmSync(path.join(root, 'share'), { recursive: true, force: true });
}

function env(extra: Record<string, string>): Record<string, string> {
  return cleanEnv({ PKO_AGENT_ROOT: root, ...extra });
}

describe('fetch git', () => {
  let open: GitServer;
  let locked: GitServer;
  let first: string;
  let second: string;
  let lockedSha: string;

  beforeAll(async () => {
    open = await startGitServer();
    open.createRepo('org/proj');
    first = open.commit('org/proj', 'main', { 'deploy/Pulumi.yaml': PROJECT, 'deploy/v.txt': 'one' });
    second = open.commit('org/proj', 'main', { 'deploy/v.txt': 'two' });
    locked = await startGitServer({ auth: { username: 'git', password: SECRET_PASSWORD } });
    locked.createRepo('private');
    lockedSha = locked.commit('private', 'main', { 'Pulumi.yaml': PROJECT });
  });
  afterAll(async () => {
    await open?.close();
    await locked?.close();
  });

  it('checks out a pinned commit and links the workspace to repoDir', async () => {
    const r = await runAgent(
      ['fetch', 'git'],
      env({ GIT_URL: `${open.baseUrl}/org/proj.git`, GIT_REVISION: first, GIT_DIR: 'deploy' }),
    );
    expect(r.stderr).toContain('git checkout done');
    expect(r.code).toBe(0);
    expect(fs.readlinkSync(ws())).toBe(path.join(root, 'share', 'source', 'deploy'));
    expect(fs.readFileSync(path.join(ws(), 'v.txt'), 'utf8')).toBe('one');
    expect(fs.readFileSync(path.join(ws(), 'Pulumi.yaml'), 'utf8')).toBe(PROJECT);
  });

  it('does a shallow fetch of the branch head commit', async () => {
    const r = await runAgent(
      ['fetch', 'git'],
      env({ GIT_URL: `${open.baseUrl}/org/proj.git`, GIT_REVISION: second, GIT_DIR: 'deploy/', GIT_SHALLOW: 'true' }),
    );
    expect(r.code).toBe(0);
    expect(fs.readFileSync(path.join(ws(), 'v.txt'), 'utf8')).toBe('two');
    expect(fs.existsSync(path.join(root, 'share', 'source', '.git', 'shallow'))).toBe(true);
  });

  it('accepts an existing checkout of the same commit (init container run again)', async () => {
    const e = env({ GIT_URL: `${open.baseUrl}/org/proj.git`, GIT_REVISION: first, GIT_DIR: 'deploy' });
    expect((await runAgent(['fetch', 'git'], e)).code).toBe(0);
    const again = await runAgent(['fetch', 'git'], e);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain('already present');
  });

  it('says "ref not found" for a commit the repository does not have', async () => {
    const r = await runAgent(
      ['fetch', 'git'],
      env({ GIT_URL: `${open.baseUrl}/org/proj.git`, GIT_REVISION: 'a'.repeat(40) }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/^pko-agent fetch git: http:\/\/[\d.]+:\d+\/org\/proj\.git: ref not found/m);
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
  });

  it('refuses a revision git would read as an option, and runs nothing', async () => {
    const pwned = path.join(root, 'pwned');
    const r = await runAgent(
      ['fetch', 'git'],
      env({ GIT_URL: `${open.baseUrl}/org/proj.git`, GIT_REVISION: `--upload-pack=touch ${pwned}` }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      /^pko-agent fetch git: http:\/\/[\d.]+:\d+\/org\/proj\.git: GIT_REVISION must be a full commit SHA .*, not "--upload-pack=touch /m,
    );
    expect(fs.existsSync(pwned)).toBe(false);
    expect(fs.existsSync(path.join(root, 'share', 'source'))).toBe(false);
  });

  it('says "repository not found" and names a missing repoDir', async () => {
    const missing = await runAgent(['fetch', 'git'], env({ GIT_URL: `${open.baseUrl}/nope.git`, GIT_REVISION: first }));
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toMatch(/repository not found/);
    const dir = await runAgent(
      ['fetch', 'git'],
      env({ GIT_URL: `${open.baseUrl}/org/proj.git`, GIT_REVISION: first, GIT_DIR: 'elsewhere' }),
    );
    expect(dir.code).not.toBe(0);
    expect(dir.stderr).toContain('directory "elsewhere" does not exist in the source');
    const escape = await runAgent(
      ['fetch', 'git'],
      env({ GIT_URL: `${open.baseUrl}/org/proj.git`, GIT_REVISION: first, GIT_DIR: '../..' }),
    );
    expect(escape.code).not.toBe(0);
    expect(escape.stderr).toContain('must be relative and inside the source');
  });

  it('uses basic-auth credentials, and says so clearly when they are wrong', async () => {
    const url = `${locked.baseUrl}/private.git`;
    const ok = await runAgent(
      ['fetch', 'git'],
      env({ GIT_URL: url, GIT_REVISION: lockedSha, GIT_USERNAME: 'git', GIT_PASSWORD: SECRET_PASSWORD }),
    );
    expect(ok.code).toBe(0);
    expect(fs.existsSync(path.join(ws(), 'Pulumi.yaml'))).toBe(true);

    resetShare();
    const bad = await runAgent(
      ['fetch', 'git'],
      env({ GIT_URL: url, GIT_REVISION: lockedSha, GIT_USERNAME: 'git', GIT_PASSWORD: 'wrong-password' }),
    );
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(
      /fetch git: http:\/\/[\d.]+:\d+\/private\.git: bad credentials \(authentication failed\)/,
    );
    expect(bad.stderr).not.toContain('wrong-password');

    const none = await runAgent(['fetch', 'git'], env({ GIT_URL: url, GIT_REVISION: lockedSha }));
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain('the repository requires credentials');
  });

  it('uses an access token as the basic-auth password of user "git" (upstream)', async () => {
    const r = await runAgent(
      ['fetch', 'git'],
      env({ GIT_URL: `${locked.baseUrl}/private.git`, GIT_REVISION: lockedSha, GIT_TOKEN: SECRET_PASSWORD }),
    );
    expect(r.code).toBe(0);
  });

  it('uses ssh with the private key in a temp file (no SSH server here: the connection is refused)', async () => {
    const keyDir = tmpDir('sshkey');
    try {
      execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', 'key-passphrase-123', '-f', path.join(keyDir, 'id')]);
      const key = fs.readFileSync(path.join(keyDir, 'id'), 'utf8');
      const port = await new Promise<number>((resolve) => {
        const srv = http.createServer().listen(0, '127.0.0.1', () => {
          const p = (srv.address() as AddressInfo).port;
          srv.close(() => resolve(p));
        });
      });
      const tmp = path.join(root, 'tmp');
      fs.mkdirSync(tmp);
      const r = await runAgent(
        ['fetch', 'git'],
        env({
          GIT_URL: `ssh://git@127.0.0.1:${port}/repo.git`,
          GIT_REVISION: first,
          GIT_SSH_PRIVATE_KEY: key,
          GIT_SSH_KNOWN_HOSTS: `[127.0.0.1]:${port} ${fs.readFileSync(path.join(keyDir, 'id.pub'), 'utf8')}`,
          GIT_PASSWORD: 'key-passphrase-123',
          TMPDIR: tmp,
        }),
      );
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(
        /fetch git: ssh:\/\/git@127\.0\.0\.1:\d+\/repo\.git: cannot reach the repository \(.*Connection refused/,
      );
      expect(r.stderr).toContain('auth=ssh');
      expect(r.stderr).not.toContain('key-passphrase-123');
      expect(r.stderr).not.toContain('PRIVATE KEY');
      // The key file and askpass script are gone.
      expect(fs.readdirSync(tmp)).toEqual([]);
    } finally {
      fs.rmSync(keyDir, { recursive: true, force: true });
    }
  });

  it('exchanges GitHub App credentials for an installation token', async () => {
    const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', {
      modulusLength: 2048,
      privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
      publicKeyEncoding: { type: 'spki', format: 'pem' },
    });
    const tokenServer = await startGitServer({ auth: { username: 'git', password: SECRET_TOKEN } });
    tokenServer.createRepo('app');
    const sha = tokenServer.commit('app', 'main', { 'Pulumi.yaml': PROJECT });
    const seen: { path?: string; iss?: string; valid?: boolean; headers?: http.IncomingHttpHeaders } = {};
    const api = http.createServer((req, res) => {
      const jwt = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      const [h, p, s] = jwt.split('.');
      seen.path = req.url;
      seen.headers = req.headers;
      seen.valid = crypto.verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s ?? '', 'base64url'));
      seen.iss = (JSON.parse(Buffer.from(p ?? '', 'base64url').toString()) as { iss: string }).iss;
      if (!seen.valid) {
        res
          .writeHead(401, { 'content-type': 'application/json' })
          .end(JSON.stringify({ message: 'A JSON web token could not be decoded' }));
        return;
      }
      res
        .writeHead(201, { 'content-type': 'application/json' })
        .end(JSON.stringify({ token: SECRET_TOKEN, expires_at: '2099-01-01T00:00:00Z' }));
    });
    await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
    const apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    try {
      const r = await runAgent(
        ['fetch', 'git'],
        env({
          GIT_URL: `${tokenServer.baseUrl}/app.git`,
          GIT_REVISION: sha,
          GIT_GITHUB_APP_ID: '12345',
          GIT_GITHUB_APP_INSTALLATION_ID: '678',
          GIT_GITHUB_APP_PRIVATE_KEY: privateKey,
          GITHUB_API_URL: apiUrl,
        }),
      );
      expect(r.code).toBe(0);
      expect(seen).toMatchObject({ path: '/app/installations/678/access_tokens', iss: '12345', valid: true });
      expect(seen.headers?.['x-github-api-version']).toBe('2022-11-28');
      expect(r.stderr).not.toContain(SECRET_TOKEN);

      resetShare();
      const other = crypto.generateKeyPairSync('rsa', {
        modulusLength: 2048,
        privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
        publicKeyEncoding: { type: 'spki', format: 'pem' },
      });
      const bad = await runAgent(
        ['fetch', 'git'],
        env({
          GIT_URL: `${tokenServer.baseUrl}/app.git`,
          GIT_REVISION: sha,
          GIT_GITHUB_APP_ID: '12345',
          GIT_GITHUB_APP_INSTALLATION_ID: '678',
          GIT_GITHUB_APP_PRIVATE_KEY: other.privateKey,
          GITHUB_API_URL: apiUrl,
        }),
      );
      expect(bad.code).not.toBe(0);
      expect(bad.stderr).toContain('bad GitHub App credentials (HTTP 401: A JSON web token could not be decoded)');
    } finally {
      api.close();
      await tokenServer.close();
    }
  });
});

describe('fetch git over SSH, from OpenSSH sshd with git-shell', () => {
  const PASSPHRASE = 'key-passphrase-456';
  let sshd: SshdGitServer;
  let urls: { scpUrl: string; sshUrl: string };
  let head: string;

  beforeAll(async () => {
    sshd = await startSshdGitServer({ passphrase: PASSPHRASE });
    urls = sshd.createRepo('org/proj');
    head = sshd.commit('org/proj', 'main', { 'deploy/Pulumi.yaml': PROJECT });
  });
  afterAll(async () => {
    await sshd?.close();
  });
  const sshEnv = (extra: Record<string, string>) =>
    env({
      GIT_REVISION: head,
      GIT_DIR: 'deploy',
      GIT_SSH_PRIVATE_KEY: sshd.clientKey,
      GIT_PASSWORD: PASSPHRASE,
      ...extra,
    });

  it('clones with the encrypted key, trusting only the host key the hooks sent', async () => {
    // scp-like (git@host:org/proj.git) where the server has port 22 (the test network), else ssh://.
    const r = await runAgent(['fetch', 'git'], sshEnv({ GIT_URL: urls.scpUrl, GIT_SSH_KNOWN_HOSTS: sshd.knownHosts }));
    expect(r.stderr).toContain('git checkout done');
    expect(r.code).toBe(0);
    expect(fs.readFileSync(path.join(ws(), 'Pulumi.yaml'), 'utf8')).toBe(PROJECT);
    expect(r.stderr).not.toContain(PASSPHRASE);
    expect(r.stderr).not.toContain('PRIVATE KEY');
  });

  it('logs in as git when an ssh:// URL names no login, as the hooks do', async () => {
    const r = await runAgent(
      ['fetch', 'git'],
      sshEnv({ GIT_URL: urls.sshUrl.replace('ssh://git@', 'ssh://'), GIT_SSH_KNOWN_HOSTS: sshd.knownHosts }),
    );
    expect(r.code).toBe(0);
    expect(sshd.log()).toMatch(/Accepted publickey for git from/);
  });

  it('refuses a server whose key is not the one the hooks know, and a server they know nothing of', async () => {
    const otherKey = 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEJ2ahWm9TCTKpBspyWUNw8R5b5b5I0l6xjvCv4lNXUs';
    const changed = await runAgent(
      ['fetch', 'git'],
      sshEnv({ GIT_URL: urls.sshUrl, GIT_SSH_KNOWN_HOSTS: `${sshd.knownHosts.split(' ')[0]} ${otherKey}\n` }),
    );
    expect(changed.code).not.toBe(0);
    expect(changed.stderr).toMatch(
      /SSH host key verification failed \(the server's key is not the one in the hooks' known_hosts\)/,
    );
    resetShare();
    const unknown = await runAgent(['fetch', 'git'], sshEnv({ GIT_URL: urls.sshUrl }));
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(
      /the host key of [\d.]+(:\d+)? is not known: the hooks' known_hosts \(SSH_KNOWN_HOSTS\) has no entry for it/,
    );
  });

  it('says when the server refuses the key', async () => {
    const keyDir = tmpDir('sshkey');
    try {
      execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', path.join(keyDir, 'id')]);
      const r = await runAgent(
        ['fetch', 'git'],
        env({
          GIT_URL: urls.sshUrl,
          GIT_REVISION: head,
          GIT_SSH_PRIVATE_KEY: fs.readFileSync(path.join(keyDir, 'id'), 'utf8'),
          GIT_SSH_KNOWN_HOSTS: sshd.knownHosts,
        }),
      );
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/bad SSH credentials \(.*Permission denied \(publickey\)/);
    } finally {
      fs.rmSync(keyDir, { recursive: true, force: true });
    }
  });
});

describe('fetch flux', () => {
  let server: http.Server;
  let base: string;
  const artifacts = new Map<string, Buffer>();

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const body = artifacts.get(req.url ?? '');
      if (!body) return void res.writeHead(404).end('not found');
      res.writeHead(200, { 'content-type': 'application/gzip' }).end(body);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => server.close());

  function publish(name: string, entries: TarEntry[]): { url: string; digest: string } {
    const data = tarGz(entries);
    artifacts.set(`/${name}.tar.gz`, data);
    return {
      url: `${base}/${name}.tar.gz`,
      digest: `sha256:${crypto.createHash('sha256').update(data).digest('hex')}`,
    };
  }

  async function fetchFlux(a: { url: string; digest: string }, extra: Record<string, string> = {}) {
    return runAgent(['fetch', 'flux'], env({ FLUX_URL: a.url, FLUX_DIGEST: a.digest, ...extra }));
  }

  it('downloads, verifies and extracts an artifact, and links the workspace to its dir', async () => {
    const a = publish('good', [
      { path: 'app/', type: 'dir' },
      { path: 'app/Pulumi.yaml', content: PROJECT },
      { path: 'app/lib/index.txt', content: 'x' },
      { path: 'app/current', type: 'symlink', linkpath: 'lib' },
    ]);
    const r = await fetchFlux(a, { FLUX_DIR: 'app' });
    expect(r.stderr).toContain('flux artifact extracted');
    expect(r.code).toBe(0);
    expect(fs.readFileSync(path.join(ws(), 'Pulumi.yaml'), 'utf8')).toBe(PROJECT);
    expect(fs.readFileSync(path.join(ws(), 'current', 'index.txt'), 'utf8')).toBe('x');
  });

  it('rejects a digest mismatch before extracting anything', async () => {
    const a = publish('mismatch', [{ path: 'Pulumi.yaml', content: PROJECT }]);
    const r = await fetchFlux({ url: a.url, digest: `sha256:${'0'.repeat(64)}` });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(
      /^pko-agent fetch flux: http:\/\/127\.0\.0\.1:\d+\/mismatch\.tar\.gz: digest mismatch: expected sha256:0{64}, got sha256:[0-9a-f]{64}$/m,
    );
    expect(fs.existsSync(path.join(root, 'share', 'source'))).toBe(false);
  });

  it('verifies a BLAKE3 digest, as source-controller writes it with --artifact-digest-algo=blake3', async () => {
    const a = publish('blake3', [{ path: 'Pulumi.yaml', content: PROJECT }]);
    const data = artifacts.get('/blake3.tar.gz')!;
    const digest = `blake3:${bytesToHex(blake3(data))}`;
    const ok = await fetchFlux({ url: a.url, digest });
    expect(ok.stderr).toContain('flux artifact extracted');
    expect(ok.code).toBe(0);
    const bad = await fetchFlux({ url: a.url, digest: `blake3:${bytesToHex(blake3(Buffer.concat([data, data])))}` });
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/digest mismatch: expected blake3:[0-9a-f]{64}, got blake3:[0-9a-f]{64}$/m);
  });

  it('reports a missing artifact', async () => {
    const r = await fetchFlux({ url: `${base}/gone.tar.gz`, digest: `sha256:${'0'.repeat(64)}` });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('artifact not found (HTTP 404)');
  });

  const unsafe: [string, TarEntry[], RegExp][] = [
    [
      'a path with ..',
      [
        { path: 'Pulumi.yaml', content: PROJECT },
        { path: '../evil.txt', content: 'pwned' },
      ],
      /entry "\.\.\/evil\.txt" leaves the target directory/,
    ],
    ['a nested path with ..', [{ path: 'a/../../evil.txt', content: 'pwned' }], /leaves the target directory/],
    ['an absolute path', [{ path: '/tmp/pko-evil.txt', content: 'pwned' }], /has an absolute path/],
    [
      'a symlink to an absolute path',
      [{ path: 'etc', type: 'symlink', linkpath: '/etc' }],
      /points to the absolute path "\/etc"/,
    ],
    [
      'a symlink leaving the root',
      [{ path: 'up', type: 'symlink', linkpath: '../../..' }],
      /points outside the target directory/,
    ],
    [
      'a file written through a symlink',
      [
        { path: 'sub/', type: 'dir' },
        { path: 'link', type: 'symlink', linkpath: 'sub' },
        { path: 'link/file', content: 'x' },
      ],
      /goes through the symbolic link "link"/,
    ],
    [
      'a symlink chain that climbs out',
      [
        { path: 'a/', type: 'dir' },
        { path: 'a/s1', type: 'symlink', linkpath: '..' },
        { path: 's2', type: 'symlink', linkpath: 'a/s1/..' },
      ],
      /goes through the symbolic link "a\/s1"/,
    ],
    [
      'a hard link leaving the root',
      [{ path: 'passwd', type: 'hardlink', linkpath: '../../../etc/passwd' }],
      /hard link "passwd" -> "\.\.\/\.\.\/\.\.\/etc\/passwd" points outside/,
    ],
    [
      'a hard link through a symlink',
      [
        { path: 'l', type: 'symlink', linkpath: '.' },
        { path: 'h', type: 'hardlink', linkpath: 'l/x' },
      ],
      /goes through the symbolic link "l"/,
    ],
    ['a FIFO', [{ path: 'pipe', type: 'fifo' }], /unsupported type FIFO/],
    [
      'a hard link to a symlink',
      [
        { path: 'Pulumi.yaml', content: PROJECT },
        { path: 's', type: 'symlink', linkpath: 'Pulumi.yaml' },
        { path: 'h', type: 'hardlink', linkpath: 's' },
      ],
      /hard link "h" -> "s" points to a symbolic link/,
    ],
    [
      'a hard link to an entry not extracted yet',
      [{ path: 'h', type: 'hardlink', linkpath: 'Pulumi.yaml' }],
      /hard link "h" -> "Pulumi\.yaml" points to no file extracted before it/,
    ],
  ];

  it.each(unsafe)('rejects an archive with %s', async (name, entries, message) => {
    const a = publish(`unsafe-${name.replace(/\W+/g, '-')}`, entries);
    const r = await fetchFlux(a);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/fetch flux: .*: unsafe archive rejected: /);
    expect(r.stderr).toMatch(message);
    expect(fs.existsSync(path.join(root, 'share', 'source'))).toBe(false);
    expect(fs.existsSync(path.join(root, 'evil.txt'))).toBe(false);
    expect(fs.existsSync('/tmp/pko-evil.txt')).toBe(false);
  });

  it('enforces FLUX_MAX_UNTAR_SIZE_BYTES (and -1 lifts the cap)', async () => {
    const big = publish('big', [
      { path: 'Pulumi.yaml', content: PROJECT },
      { path: 'blob.bin', content: Buffer.alloc(64 * 1024, 1) },
    ]);
    const r = await fetchFlux(big, { FLUX_MAX_UNTAR_SIZE_BYTES: '4096' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('beyond the size limit of 4096 bytes');
    const ok = await fetchFlux(big, { FLUX_MAX_UNTAR_SIZE_BYTES: '-1' });
    expect(ok.code).toBe(0);
  });

  it('enforces FLUX_MAX_UNTAR_ENTRIES', async () => {
    const many = publish('many', [
      { path: 'Pulumi.yaml', content: PROJECT },
      ...Array.from({ length: 20 }, (_, i) => ({ path: `f${i}.txt`, content: '' })),
    ]);
    const r = await fetchFlux(many, { FLUX_MAX_UNTAR_ENTRIES: '20' });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('unsafe archive rejected: the archive has more than 20 entries (the entry limit)');
    expect(fs.existsSync(path.join(root, 'share', 'source'))).toBe(false);
    expect((await fetchFlux(many, { FLUX_MAX_UNTAR_ENTRIES: '21' })).code).toBe(0);
  });
});

describe('fetch project-info, local', () => {
  it('writes a project-info Pulumi.yaml', async () => {
    const r = await runAgent(['fetch', 'project-info'], env({ PROJECT_NAME: 'gone', PROJECT_RUNTIME: 'nodejs' }));
    expect(r.code).toBe(0);
    expect(fs.readFileSync(path.join(ws(), 'Pulumi.yaml'), 'utf8')).toBe('name: gone\nruntime: nodejs\n');
  });

  it('links a local directory', async () => {
    const r = await runAgent(['fetch', 'local'], env({ LOCAL_DIR: '/app/project' }));
    expect(r.code).toBe(0);
    expect(fs.readlinkSync(ws())).toBe(path.join(root, 'app', 'project'));
  });

  it('names missing settings', async () => {
    const r = await runAgent(['fetch', 'git'], env({}));
    expect(r.code).not.toBe(0);
    expect(r.stderr.trim()).toBe('pko-agent fetch git: (no URL): GIT_URL is not set');
  });
});

afterAll(() => {
  const all = capturedOutput.join('\n');
  expect(all).not.toContain(SECRET_PASSWORD);
  expect(all).not.toContain(SECRET_TOKEN);
});
