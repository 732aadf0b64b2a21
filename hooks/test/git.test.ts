import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startGitServer, type GitServer } from '../../e2e/testbed/git-server';
import { GitResolver, matchRef, parseAdvertisement, redactUrl } from '../src/git/ls-remote';

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
    await expect(resolver.resolve({ url, ref: 'nope' })).resolves.toEqual({ error: `no commits found for ref "nope" in ${url}` });
  });

  it('says when the repository does not exist', async () => {
    const r = await resolver.resolve({ url: `${server.baseUrl}/missing.git`, ref: 'main' });
    expect('error' in r && r.error).toMatch(/repository .*missing\.git not found|HTTP 404|HTTP 403/);
  });

  it('caches answers: one request per TTL for a busy Stack, and sees a push after it', async () => {
    let now = 0;
    const cached = new GitResolver({ timeoutMs: 2000, cacheTtlMs: 20_000, now: () => now });
    const before = server.requests();
    await Promise.all([cached.resolve({ url, ref: 'main' }), cached.resolve({ url, ref: 'main' })]);
    await cached.resolve({ url, ref: 'main' });
    expect(server.requests() - before).toBe(1);
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
    await expect(resolver.resolve({ url, ref: 'main', username: 'git', password: 's3cret-token' })).resolves.toEqual({ sha });
    const denied = await resolver.resolve({ url, ref: 'main', username: 'git', password: 'wrong' });
    expect(denied).toEqual({ error: `authentication failed reading ${url} (HTTP 401): check the git credentials in spec.gitAuth` });
    const inUrl = await resolver.resolve({ url: url.replace('http://', 'http://git:wrong-in-url@'), ref: 'main' });
    expect(JSON.stringify(inUrl)).not.toContain('wrong-in-url');
    await resolver.close();
  });
});

describe('a git server that does not answer', () => {
  it('times out with a clear error instead of holding the hook', async () => {
    const hang = createServer(() => undefined);
    await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(hang.address() as AddressInfo).port}/r.git`;
    const resolver = new GitResolver({ timeoutMs: 200, cacheTtlMs: 1000 });
    await expect(resolver.resolve({ url, ref: 'main' })).resolves.toEqual({ error: `timed out after 200 ms resolving "main" in ${url}` });
    await resolver.close();
    hang.closeAllConnections();
    await new Promise((r) => hang.close(r));
  });

  it('reports a refused connection', async () => {
    const resolver = new GitResolver({ timeoutMs: 1000, cacheTtlMs: 1000 });
    const r = await resolver.resolve({ url: 'http://127.0.0.1:1/r.git', ref: 'main' });
    expect('error' in r && r.error).toMatch(/cannot reach http:\/\/127\.0\.0\.1:1\/r\.git to resolve "main": ECONNREFUSED/);
    await resolver.close();
  });

  it('refuses schemes it cannot speak', async () => {
    const resolver = new GitResolver({ timeoutMs: 1000, cacheTtlMs: 1000 });
    expect(await resolver.resolve({ url: 'ftp://x/r.git', ref: 'main' })).toEqual({ error: 'cannot resolve "main": unsupported repository URL scheme "ftp:" in ftp://x/r.git' });
    expect(await resolver.resolve({ url: 'git@github.com:o/r.git', ref: 'main', unsupported: 'no ssh' })).toEqual({ error: 'no ssh' });
    await resolver.close();
  });
});

describe('the ref advertisement parser', () => {
  const pkt = (s: string) => (s.length + 4).toString(16).padStart(4, '0') + s;
  it('reads refs, skipping the service header and capabilities', () => {
    const body = Buffer.from(pkt('# service=git-upload-pack\n') + '0000' + pkt(`${'a'.repeat(40)} HEAD\0multi_ack symref=HEAD:refs/heads/main\n`) + pkt(`${'a'.repeat(40)} refs/heads/main\n`) + pkt(`${'b'.repeat(40)} refs/tags/v1\n`) + pkt(`${'c'.repeat(40)} refs/tags/v1^{}\n`) + '0000');
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
