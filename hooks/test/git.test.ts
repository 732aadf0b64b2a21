import { generateKeyPairSync, verify } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import type { StackSpec } from '../../schemas/generated/types';
import { startGitServer, type GitServer } from '../../e2e/testbed/git-server';
import { installationToken } from '../src/git/github-app';
import { GitResolver, matchRef, parseAdvertisement, redactUrl } from '../src/git/ls-remote';
import type { KObject } from '../src/lib/k8s';
import { customizeStack } from '../src/stack/customize';
import { gitAuthEnv, planRefLookup } from '../src/stack/source';
import { stackWorkspacePod } from './controllers';
import { makeStack, objectMap, testConfig } from './builders';
import { asChild, envList, fetchContainerOf } from './children';
import { isRecord } from './json';

describe('resolving git refs over smart HTTP, against git http-backend', () => {
  let server: GitServer;
  let url: string;
  let main1: string;
  let feature: string;
  let resolver: GitResolver;

  beforeAll(async () => {
    server = await startGitServer();
    url = server.createRepo('org/infra');
    main1 = server.commit('org/infra', 'main', { 'Pulumi.yaml': 'name: a\nruntime: yaml\n' });
    feature = server.commit('org/infra', 'feature/x', { 'README.md': 'x' });
    server.tag('org/infra', 'v1.0.0', main1);
  });
  beforeEach(() => {
    resolver = new GitResolver({ timeoutMs: 2000, cacheTtlMs: 60_000 });
  });
  afterEach(() => resolver.close());
  afterAll(() => server.close());

  it('resolves a short branch name, a full ref and an annotated tag', async () => {
    await expect(resolver.resolve({ url, ref: 'main' })).resolves.toEqual({ sha: main1 });
    await expect(resolver.resolve({ url, ref: 'refs/heads/feature/x' })).resolves.toEqual({ sha: feature });
    await expect(resolver.resolve({ url, ref: 'v1.0.0' })).resolves.toEqual({ sha: main1 });
  });

  it('says which ref is missing', async () => {
    await expect(resolver.resolve({ url, ref: 'nope' })).resolves.toEqual({
      error: `no commits found for ref "nope" in ${url}`,
    });
  });

  it('says when the repository does not exist', async () => {
    const r = await resolver.resolve({ url: `${server.baseUrl}/missing.git`, ref: 'main' });
    expect('error' in r && r.error).toMatch(/repository .*missing\.git not found|HTTP 404|HTTP 403/);
  });

  it('caches answers: one request per TTL for a busy Stack, and sees a push after it', async () => {
    let now = 0;
    const lookups: boolean[] = [];
    const cached = new GitResolver({
      timeoutMs: 2000,
      cacheTtlMs: 20_000,
      now: () => now,
      counted: (hit) => lookups.push(hit),
    });
    const before = server.requests();
    await Promise.all([cached.resolve({ url, ref: 'main' }), cached.resolve({ url, ref: 'main' })]);
    await cached.resolve({ url, ref: 'main' });
    expect(server.requests() - before).toBe(1);
    expect(lookups).toEqual([false, true, true]); // the cache metrics' misses and hits
    const main2 = server.commit('org/infra', 'main', { 'b.txt': 'b' });
    await expect(cached.resolve({ url, ref: 'main' })).resolves.toEqual({ sha: main1 });
    now = 20_001;
    await expect(cached.resolve({ url, ref: 'main' })).resolves.toEqual({ sha: main2 });
    await cached.close();
    main1 = main2;
  });
});

describe('private repositories', () => {
  let server: GitServer;
  let url: string;
  let sha: string;
  beforeAll(async () => {
    server = await startGitServer({ auth: { username: 'git', password: 's3cret-token' } });
    url = server.createRepo('private');
    sha = server.commit('private', 'main', { a: 'a' });
  });
  afterAll(() => server.close());

  it('resolves with the right credentials and explains a 401 without leaking them', async () => {
    const resolver = new GitResolver({ timeoutMs: 2000, cacheTtlMs: 1 });
    await expect(resolver.resolve({ url, ref: 'main', username: 'git', password: 's3cret-token' })).resolves.toEqual({
      sha,
    });
    const denied = await resolver.resolve({ url, ref: 'main', username: 'git', password: 'wrong' });
    expect(denied).toEqual({
      error: `authentication failed reading ${url} (HTTP 401): check the git credentials in spec.gitAuth`,
    });
    const inUrl = await resolver.resolve({ url: url.replace('http://', 'http://git:wrong-in-url@'), ref: 'main' });
    expect(JSON.stringify(inUrl)).not.toContain('wrong-in-url');
    await resolver.close();
  });
});

describe('private repositories with GitHub App credentials', () => {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const TOKEN = 'ghs_installationToken0123456789';
  let git: GitServer;
  let url: string;
  let sha: string;
  let api: ReturnType<typeof createServer>;
  let apiUrl: string;
  const exchanges: { path: string; iss: unknown; ok: boolean }[] = [];
  /** The expiry the stand-in API gives its tokens: an hour, as GitHub's. */
  let expiresAt = () => new Date(Date.now() + 3600_000).toISOString();

  beforeAll(async () => {
    git = await startGitServer({ auth: { username: 'x-access-token', password: TOKEN } });
    url = git.createRepo('app-repo');
    sha = git.commit('app-repo', 'main', { a: 'a' });
    // A stand-in for GitHub's API: checks the App's JWT signature and claims, answers like GitHub.
    api = createServer((req, res) => {
      const jwt = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
      const [h, p, sig] = jwt.split('.');
      const ok = !!sig && verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(sig, 'base64url'));
      const parsed: unknown = ok ? JSON.parse(Buffer.from(p!, 'base64url').toString()) : {};
      const claims = isRecord(parsed) ? parsed : {};
      exchanges.push({ path: req.url ?? '', iss: claims.iss, ok });
      const fresh =
        ok &&
        typeof claims.exp === 'number' &&
        typeof claims.iat === 'number' &&
        claims.exp - claims.iat === 660 &&
        req.method === 'POST' &&
        req.headers['x-github-api-version'] === '2022-11-28';
      res.writeHead(fresh && req.url === '/app/installations/42/access_tokens' ? 201 : 401, {
        'content-type': 'application/json',
      });
      res.end(
        JSON.stringify(
          fresh ? { token: TOKEN, expires_at: expiresAt() } : { message: 'A JSON web token could not be decoded' },
        ),
      );
    });
    await new Promise<void>((r) => api.listen(0, '127.0.0.1', r));
    apiUrl = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await git.close();
    await new Promise((r) => api.close(r));
  });

  it('exchanges the App key for an installation token once, and resolves the branch with it', async () => {
    const resolver = new GitResolver({ timeoutMs: 2000, cacheTtlMs: 1, githubApiUrl: apiUrl });
    const githubApp = { appId: '1234', installationId: '42', privateKey: pem };
    await expect(resolver.resolve({ url, ref: 'main', githubApp })).resolves.toEqual({ sha });
    await new Promise((r) => setTimeout(r, 5));
    await expect(resolver.resolve({ url, ref: 'main', githubApp })).resolves.toEqual({ sha });
    // The token is reused while valid: one exchange for two lookups.
    expect(exchanges).toEqual([{ path: '/app/installations/42/access_tokens', iss: '1234', ok: true }]);
    await resolver.close();
  });

  it('keeps a token no longer than the hour GitHub gives, whatever expiry the answer claims', async () => {
    const dispatcher = new Agent();
    const creds = { appId: '1234', installationId: '42', privateKey: pem };
    const nowMs = Date.now();
    try {
      for (const claimed of ['9999-12-31T23:59:59Z', '+275760-09-13T00:00:00Z', 'tomorrow']) {
        expiresAt = () => claimed;
        const token = await installationToken(apiUrl, creds, { signal: AbortSignal.timeout(2000), dispatcher, nowMs });
        expect(token).toEqual({ token: TOKEN, expiresAtMs: nowMs + 3600_000 });
      }
      expiresAt = () => new Date(nowMs + 600_000).toISOString();
      expect(
        (await installationToken(apiUrl, creds, { signal: AbortSignal.timeout(2000), dispatcher, nowMs })).expiresAtMs,
      ).toBe(nowMs + 600_000);
    } finally {
      expiresAt = () => new Date(Date.now() + 3600_000).toISOString();
      await dispatcher.close();
    }
  });

  it('says what is wrong with the App credentials, without the key or a token', async () => {
    const resolver = new GitResolver({ timeoutMs: 2000, cacheTtlMs: 1, githubApiUrl: apiUrl });
    const wrongInstallation = await resolver.resolve({
      url,
      ref: 'main',
      githubApp: { appId: '1234', installationId: '7', privateKey: pem },
    });
    expect(wrongInstallation).toEqual({ error: expect.stringContaining('the GitHub App installation token exchange') });
    expect(JSON.stringify(wrongInstallation)).toContain('HTTP 401');
    const badKey = await resolver.resolve({
      url,
      ref: 'main',
      githubApp: { appId: '1234', installationId: '42', privateKey: 'not a key' },
    });
    expect(badKey).toEqual({
      error: expect.stringContaining('gitAuth.githubApp.privateKey) is not a PEM RSA private key'),
    });
    for (const r of [wrongInstallation, badKey]) {
      expect(JSON.stringify(r)).not.toContain('PRIVATE KEY');
      expect(JSON.stringify(r)).not.toContain(TOKEN);
    }
    await resolver.close();
  });

  it('gives up within the lookup timeout when the API does not answer', async () => {
    const silent = createServer(() => undefined);
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const resolver = new GitResolver({
      timeoutMs: 300,
      cacheTtlMs: 1,
      githubApiUrl: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`,
    });
    const r = await resolver.resolve({
      url,
      ref: 'main',
      githubApp: { appId: '1234', installationId: '42', privateKey: pem },
    });
    expect(r).toEqual({
      error: `timed out after 300 ms getting a GitHub App installation token to resolve "main" in ${url}`,
    });
    await resolver.close();
    silent.closeAllConnections();
    await new Promise((res) => silent.close(res));
  });
});

describe('a git server that does not answer', () => {
  it('times out with a clear error instead of holding the hook', async () => {
    const hang = createServer(() => undefined);
    await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(hang.address() as AddressInfo).port}/r.git`;
    const resolver = new GitResolver({ timeoutMs: 200, cacheTtlMs: 1000 });
    await expect(resolver.resolve({ url, ref: 'main' })).resolves.toEqual({
      error: `timed out after 200 ms resolving "main" in ${url}`,
    });
    await resolver.close();
    hang.closeAllConnections();
    await new Promise((r) => hang.close(r));
  });

  it('reports a refused connection', async () => {
    const resolver = new GitResolver({ timeoutMs: 1000, cacheTtlMs: 1000 });
    const r = await resolver.resolve({ url: 'http://127.0.0.1:1/r.git', ref: 'main' });
    expect('error' in r && r.error).toMatch(
      /cannot reach http:\/\/127\.0\.0\.1:1\/r\.git to resolve "main": ECONNREFUSED/,
    );
    await resolver.close();
  });

  it('refuses schemes it cannot speak', async () => {
    const resolver = new GitResolver({ timeoutMs: 1000, cacheTtlMs: 1000 });
    expect(await resolver.resolve({ url: 'ftp://x/r.git', ref: 'main' })).toEqual({
      error: 'cannot resolve "main": unsupported repository URL scheme "ftp:" in ftp://x/r.git',
    });
    expect(await resolver.resolve({ url: 'git@github.com:o/r.git', ref: 'main', unsupported: 'no ssh' })).toEqual({
      error: 'no ssh',
    });
    await resolver.close();
  });
});

describe('the ref advertisement parser', () => {
  const pkt = (s: string) => (s.length + 4).toString(16).padStart(4, '0') + s;
  it('reads refs, skipping the service header and capabilities', () => {
    const body = Buffer.from(
      pkt('# service=git-upload-pack\n') +
        '0000' +
        pkt(`${'a'.repeat(40)} HEAD\0multi_ack symref=HEAD:refs/heads/main\n`) +
        pkt(`${'a'.repeat(40)} refs/heads/main\n`) +
        pkt(`${'b'.repeat(40)} refs/tags/v1\n`) +
        pkt(`${'c'.repeat(40)} refs/tags/v1^{}\n`) +
        '0000',
    );
    const refs = parseAdvertisement(body);
    expect(matchRef(refs, 'main')).toBe('a'.repeat(40));
    expect(matchRef(refs, 'v1')).toBe('c'.repeat(40));
    expect(matchRef(refs, 'refs/tags/v1')).toBe('c'.repeat(40));
    expect(matchRef(refs, 'HEAD')).toBe('a'.repeat(40));
  });
  it('rejects garbage instead of guessing', () => {
    expect(() => parseAdvertisement(Buffer.from('zzzz'))).toThrow();
  });
  it('redacts credentials', () => {
    expect(redactUrl('https://u:p@g.test/r.git')).toBe('https://g.test/r.git');
  });
});

describe('a branch with GitHub App credentials, from the Stack', () => {
  const ref = (name: string, key: string) => ({ type: 'Secret' as const, secret: { name, key } });
  const repo = 'https://github.example/org/app.git';
  const spec: Partial<StackSpec> = {
    programRef: undefined,
    projectRepo: repo,
    branch: 'main',
    gitAuth: {
      githubApp: {
        appID: ref('gh-app', 'id'),
        installationID: ref('gh-app', 'installation'),
        privateKey: ref('gh-key', 'pem'),
      },
    },
  };
  const secret = (name: string, data: Record<string, string>): KObject => ({
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: 'team-a' },
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
  });

  it('asks Metacontroller for the App Secrets, and plans a token exchange with their values', () => {
    const stack = makeStack(spec);
    expect(customizeStack(stack).relatedResources).toContainEqual({
      apiVersion: 'v1',
      resource: 'secrets',
      namespace: 'team-a',
      names: ['gh-app', 'gh-key'],
    });
    const plan = planRefLookup(
      stack,
      objectMap(secret('gh-app', { id: '1234', installation: '42' }), secret('gh-key', { pem: 'PEM' })),
    );
    expect(plan).toEqual({
      url: repo,
      ref: 'main',
      githubApp: { appId: '1234', installationId: '42', privateKey: 'PEM' },
    });
  });

  it('says which part is missing when a Secret is', () => {
    const plan = planRefLookup(makeStack(spec), objectMap(secret('gh-app', { id: '1234', installation: '42' })));
    expect(plan?.unsupported).toBe(
      `resolving "main" needs gitAuth.githubApp's appID, installationID and privateKey: a referenced Secret or key is missing`,
    );
    expect(plan?.githubApp).toBeUndefined();
  });

  it('gives the fetch container the same GitHub API (GitHub Enterprise)', () => {
    const stack = makeStack(spec);
    const source = {
      kind: 'git' as const,
      url: repo,
      revision: 'a'.repeat(40),
      shallow: false,
      auth: gitAuthEnv(stack.spec),
    };
    const fetchEnv = (config: typeof testConfig) =>
      envList(fetchContainerOf(asChild(stackWorkspacePod(stack, source, config).statefulSet, 'StatefulSet')));
    expect(fetchEnv({ ...testConfig, githubApiUrl: 'https://github.example/api/v3' })).toContainEqual({
      name: 'GITHUB_API_URL',
      value: 'https://github.example/api/v3',
    });
    expect(fetchEnv(testConfig).some((e) => e.name === 'GITHUB_API_URL')).toBe(false);
  });
});
