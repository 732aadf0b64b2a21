/**
 * Secured /metrics (issue 38, item 5): with METRICS_AUTH on, only a caller whose bearer token the
 * API server authenticates (TokenReview) and who may `get` the non-resource URL /metrics
 * (SubjectAccessReview) reads the metrics, as upstream's controller-runtime serves them. The API
 * server is a stand-in answering both reviews from a table of tokens and grants (the calls of
 * client-node against a real one are tested by e2e/object-metrics.e2e.ts).
 */
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { request } from 'undici';
import { configFromEnv } from '../src/config';
import {
  type AccessAttributes,
  type ReviewApi,
  type SubjectAccessReviewSpec,
  TokenReviewer,
  type TokenReviewerOptions,
  type UserInfo,
} from '../src/kube/token-review';
import { buildServer } from '../src/server';
import { testConfig } from './builders';

const PROMETHEUS: UserInfo = {
  username: 'system:serviceaccount:monitoring:prometheus',
  uid: 'uid-prometheus',
  groups: ['system:serviceaccounts', 'system:serviceaccounts:monitoring', 'system:authenticated'],
  extra: { 'authentication.kubernetes.io/pod-name': ['prometheus-0'] },
};
const STRANGER: UserInfo = {
  username: 'system:serviceaccount:team-a:default',
  uid: 'uid-default',
  groups: ['system:serviceaccounts', 'system:authenticated'],
  extra: {},
};
const PROMETHEUS_TOKEN = 'prometheus-token-0123456789';
const STRANGER_TOKEN = 'stranger-token-0123456789';
const API_AUDIENCES = ['https://kubernetes.default.svc'];

/**
 * The API server's reviews: tokens it knows (with the audiences each is valid for; none: the API
 * server's), and the users allowed to get /metrics. Counts the reviews asked; `fail` makes them
 * fail with an HTTP status, `hold` keeps them unanswered until released.
 */
class FakeReviews implements ReviewApi {
  readonly tokens = new Map<string, { user: UserInfo; audiences?: string[] }>([
    [PROMETHEUS_TOKEN, { user: PROMETHEUS }],
    [STRANGER_TOKEN, { user: STRANGER }],
  ]);
  readonly allowed = new Set<string>([PROMETHEUS.username]);
  readonly asked: { tokenReviews: number; accessReviews: SubjectAccessReviewSpec[] } = {
    tokenReviews: 0,
    accessReviews: [],
  };
  fail: number | undefined;
  private held: (() => void)[] = [];
  hold = false;

  async tokenReview(spec: { token: string; audiences?: string[] }): Promise<unknown> {
    this.asked.tokenReviews++;
    await this.maybeHold();
    const known = this.tokens.get(spec.token);
    if (!known) return { authenticated: false, error: 'invalid bearer token' };
    // Without audiences asked for, the API server checks its own.
    const valid = known.audiences ?? API_AUDIENCES;
    const audiences = (spec.audiences ?? API_AUDIENCES).filter((a) => valid.includes(a));
    if (audiences.length === 0) return { authenticated: false, error: 'token audiences are invalid' };
    return { authenticated: true, user: known.user, audiences };
  }

  async subjectAccessReview(spec: SubjectAccessReviewSpec): Promise<unknown> {
    this.asked.accessReviews.push(spec);
    await this.maybeHold();
    const path = spec.nonResourceAttributes?.path;
    const allowed = this.allowed.has(spec.user) && path === '/metrics' && spec.nonResourceAttributes?.verb === 'get';
    return { allowed, ...(allowed ? { reason: 'RBAC: allowed' } : {}) };
  }

  release(): void {
    for (const r of this.held.splice(0)) r();
  }

  private async maybeHold(): Promise<void> {
    if (this.fail !== undefined)
      throw Object.assign(new Error(`HTTP-Code: ${this.fail} Body: {"token":"…"}`), { code: this.fail });
    if (this.hold) await new Promise<void>((resolve) => this.held.push(resolve));
  }
}

let now = 0;
let logs: string[];

/** A hook server with METRICS_AUTH on, listening on loopback, and its log lines. */
async function serve(reviews: FakeReviews, options: TokenReviewerOptions = {}) {
  logs = [];
  const reviewer = new TokenReviewer(reviews, { now: () => now, ...options });
  const server = buildServer(
    { ...testConfig, logLevel: 'info', metricsAuth: true },
    {
      reviewer,
      logStream: new Writable({ write: (c, _e, cb) => (logs.push(String(c)), cb()) }),
    },
  );
  await server.app.listen({ port: 0, host: '127.0.0.1' });
  const base = `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}`;
  servers.push(server.app);
  /** GET /metrics with this Authorization header (none when undefined). */
  const scrapeWith = async (authorization?: string) => {
    const res = await request(`${base}/metrics`, { headers: authorization === undefined ? {} : { authorization } });
    const body = await res.body.text();
    return { statusCode: res.statusCode, headers: res.headers, body, json: () => JSON.parse(body) as unknown };
  };
  const scrape = (token?: string) => scrapeWith(token === undefined ? undefined : `Bearer ${token}`);
  return { ...server, reviewer, scrape, scrapeWith };
}

const servers: FastifyInstance[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((app) => app.close()));
});

beforeEach(() => {
  now = 1_000_000;
});

describe('/metrics with METRICS_AUTH on', () => {
  test('no token: 401 with a Bearer challenge, and the API server is not asked', async () => {
    const reviews = new FakeReviews();
    const { scrape, scrapeWith } = await serve(reviews);
    for (const res of [await scrape(), await scrape(''), await scrape('   ')]) {
      expect(res.statusCode).toBe(401);
      expect(res.headers['www-authenticate']).toBe('Bearer realm="pulumi-mc-hooks metrics"');
      expect(res.body).not.toContain('pulumi_hook_');
    }
    expect((await scrapeWith('Basic YTpi')).statusCode).toBe(401);
    expect(reviews.asked.tokenReviews).toBe(0);
  });

  test('a token the API server does not authenticate: 401, no access review', async () => {
    const reviews = new FakeReviews();
    const { scrape } = await serve(reviews);
    const res = await scrape('forged-token');
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: 'Unauthorized' });
    expect(reviews.asked).toEqual({ tokenReviews: 1, accessReviews: [] });
  });

  test('authenticated but not allowed to get /metrics: 403 naming the user, logged without the token', async () => {
    const reviews = new FakeReviews();
    const { app, scrape } = await serve(reviews);
    const res = await scrape(STRANGER_TOKEN);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({
      error: 'Forbidden',
      message: `${STRANGER.username} may not get the non-resource URL /metrics (grant it with a ClusterRole)`,
    });
    expect(res.body).not.toContain('pulumi_hook_');
    // The SubjectAccessReview asks about the user the TokenReview named, all of it.
    expect(reviews.asked.accessReviews).toEqual([
      {
        user: STRANGER.username,
        uid: STRANGER.uid,
        groups: STRANGER.groups,
        extra: STRANGER.extra,
        nonResourceAttributes: { path: '/metrics', verb: 'get' },
      },
    ]);
    await app.close();
    const refusal = logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.statusCode === 403);
    expect(refusal).toMatchObject({ msg: 'refused a scrape: may not get /metrics', user: STRANGER.username });
    expect(logs.join('')).not.toContain(STRANGER_TOKEN);
  });

  test('authenticated and allowed: the metrics', async () => {
    const reviews = new FakeReviews();
    const { app, scrape, scrapeWith } = await serve(reviews);
    const res = await scrape(PROMETHEUS_TOKEN);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toContain('text/plain');
    expect(res.body).toContain('pulumi_hook_request_duration_seconds');
    // `bearer` in any case, as RFC 6750 allows.
    expect((await scrapeWith(`bearer ${PROMETHEUS_TOKEN}`)).statusCode).toBe(200);
    await app.close();
    expect(logs.join('')).not.toContain(PROMETHEUS_TOKEN);
  });

  test('answers are remembered for their TTL: a revoked grant counts once the allowance expires', async () => {
    const reviews = new FakeReviews();
    const { scrape } = await serve(reviews, { allowTtlMs: 60_000, denyTtlMs: 10_000 });
    for (let i = 0; i < 5; i++) expect((await scrape(PROMETHEUS_TOKEN)).statusCode).toBe(200);
    expect(reviews.asked.tokenReviews).toBe(1);
    expect(reviews.asked.accessReviews).toHaveLength(1);
    reviews.allowed.delete(PROMETHEUS.username);
    now += 59_000;
    expect((await scrape(PROMETHEUS_TOKEN)).statusCode).toBe(200);
    now += 2_000;
    expect((await scrape(PROMETHEUS_TOKEN)).statusCode).toBe(403);
    expect(reviews.asked.tokenReviews).toBe(2);
    // A refusal is remembered for the shorter TTL: a new grant counts within it.
    reviews.allowed.add(PROMETHEUS.username);
    expect((await scrape(PROMETHEUS_TOKEN)).statusCode).toBe(403);
    now += 10_001;
    expect((await scrape(PROMETHEUS_TOKEN)).statusCode).toBe(200);
  });

  test('the API server unreachable: 503 with Retry-After, not remembered, no token in the log', async () => {
    const reviews = new FakeReviews();
    reviews.fail = 500;
    const { app, scrape } = await serve(reviews);
    const res = await scrape(PROMETHEUS_TOKEN);
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json()).toEqual({
      error: 'Service Unavailable',
      message: 'cannot review the token: the API server did not answer the review (HTTP 500)',
    });
    reviews.fail = undefined;
    expect((await scrape(PROMETHEUS_TOKEN)).statusCode).toBe(200);
    await app.close();
    expect(logs.join('')).toContain('refused a scrape: cannot review its token');
    expect(logs.join('')).not.toContain(PROMETHEUS_TOKEN);
  });
});

describe('TokenReviewer', () => {
  test('an unknown or refused audience is no authentication; a matching one is', async () => {
    const reviews = new FakeReviews();
    reviews.tokens.set('pod-token', { user: STRANGER, audiences: ['pulumi-mc-hooks'] });
    const reviewer = new TokenReviewer(reviews, { now: () => now });
    expect(await reviewer.authenticate('pod-token', ['pulumi-mc-hooks'])).toEqual(STRANGER);
    expect(await reviewer.authenticate('pod-token', ['https://kubernetes.default.svc'])).toBeUndefined();
    // Without audiences, the API server's own: this token is not valid for it.
    expect(await reviewer.authenticate('pod-token')).toBeUndefined();
    expect(await reviewer.authenticate(PROMETHEUS_TOKEN)).toEqual(PROMETHEUS);
    // An authenticator that ignores audiences says none matched: refused when some were asked for.
    const deaf: ReviewApi = {
      tokenReview: () => Promise.resolve({ authenticated: true, user: PROMETHEUS }),
      subjectAccessReview: () => Promise.resolve({ allowed: true }),
    };
    expect(await new TokenReviewer(deaf).authenticate('t', ['pulumi-mc-hooks'])).toBeUndefined();
    expect(await new TokenReviewer(deaf).authenticate('t')).toEqual(PROMETHEUS);
  });

  test('authorizes a resource attribute, and a denied answer overrides an allowed one', async () => {
    const asked: SubjectAccessReviewSpec[] = [];
    const api: ReviewApi = {
      tokenReview: () => Promise.resolve({}),
      subjectAccessReview: (spec) => {
        asked.push(spec);
        return Promise.resolve({ allowed: true, denied: spec.resourceAttributes?.name === 'other' });
      },
    };
    const reviewer = new TokenReviewer(api);
    const get = (name: string): AccessAttributes => ({
      verb: 'get',
      group: 'pulumi.com',
      resource: 'programs',
      namespace: 'team-a',
      name,
    });
    expect(await reviewer.authorize(STRANGER, get('mine'))).toBe(true);
    expect(await reviewer.authorize(STRANGER, get('other'))).toBe(false);
    expect(asked[0]?.resourceAttributes).toEqual(get('mine'));
    expect(asked[0]?.nonResourceAttributes).toBeUndefined();
  });

  test('malformed answers are no authentication: no user, an empty name, a non-boolean flag', async () => {
    for (const status of [
      undefined,
      null,
      'yes',
      { authenticated: 'true', user: PROMETHEUS },
      { authenticated: true },
      { authenticated: true, user: { username: '' } },
      { authenticated: true, user: { username: 7 } },
    ]) {
      const api: ReviewApi = {
        tokenReview: () => Promise.resolve(status),
        subjectAccessReview: () => Promise.resolve(status),
      };
      const reviewer = new TokenReviewer(api);
      expect(await reviewer.authenticate('t')).toBeUndefined();
      expect(await reviewer.authorize(PROMETHEUS, { nonResourceURL: '/metrics', verb: 'get' })).toBe(false);
    }
    // Odd fields of a user are dropped, never a prototype set.
    const odd: ReviewApi = {
      tokenReview: () =>
        Promise.resolve(
          JSON.parse(
            '{"authenticated":true,"user":{"username":"u","groups":["g",3],"extra":{"__proto__":["x"],"k":"v"}}}',
          ),
        ),
      subjectAccessReview: () => Promise.resolve({}),
    };
    const user = await new TokenReviewer(odd).authenticate('t');
    expect(user).toEqual({
      username: 'u',
      uid: '',
      groups: ['g'],
      extra: Object.fromEntries([
        ['__proto__', ['x']],
        ['k', []],
      ]),
    });
    expect(Object.getPrototypeOf(user?.extra)).toBe(Object.prototype);
  });

  test('the cache is bounded in entries and bytes; an evicted token is reviewed again', async () => {
    const reviews = new FakeReviews();
    for (let i = 0; i < 50; i++) reviews.tokens.set(`token-${i}`, { user: { ...STRANGER, username: `user-${i}` } });
    const byEntries = new TokenReviewer(reviews, { now: () => now, maxEntries: 8 });
    for (let i = 0; i < 50; i++) await byEntries.authenticate(`token-${i}`);
    expect(byEntries.size).toBe(8);
    expect(reviews.asked.tokenReviews).toBe(50);
    await byEntries.authenticate('token-49');
    expect(reviews.asked.tokenReviews).toBe(50);
    await byEntries.authenticate('token-0');
    expect(reviews.asked.tokenReviews).toBe(51);

    // An answer counts its key (a SHA-256 in hex) and its JSON: 2 KiB hold this many of them.
    const entryBytes = 64 + JSON.stringify({ user: { ...STRANGER, username: 'user-10' } }).length;
    const byBytes = new TokenReviewer(reviews, { now: () => now, maxBytes: 2048 });
    for (let i = 0; i < 50; i++) await byBytes.authenticate(`token-${i}`);
    expect(byBytes.size).toBe(Math.floor(2048 / entryBytes));
    // An answer larger than the whole cache is not kept at all.
    reviews.tokens.set('huge', { user: { ...STRANGER, groups: Array.from({ length: 500 }, (_, i) => `group-${i}`) } });
    const before = reviews.asked.tokenReviews;
    expect((await byBytes.authenticate('huge'))?.groups).toHaveLength(500);
    expect((await byBytes.authenticate('huge'))?.groups).toHaveLength(500);
    expect(reviews.asked.tokenReviews).toBe(before + 2);
  });

  test('reviews in flight are bounded and shared; an oversized token is refused unasked', async () => {
    const reviews = new FakeReviews();
    reviews.hold = true;
    const reviewer = new TokenReviewer(reviews, { maxInFlight: 2 });
    const first = reviewer.authenticate(PROMETHEUS_TOKEN);
    const same = reviewer.authenticate(PROMETHEUS_TOKEN);
    const second = reviewer.authenticate(STRANGER_TOKEN);
    await expect(reviewer.authenticate('third-token')).rejects.toThrow('too many reviews in flight: retry shortly');
    expect(reviews.asked.tokenReviews).toBe(2);
    reviews.release();
    expect(await first).toEqual(PROMETHEUS);
    expect(await same).toEqual(PROMETHEUS);
    expect(await second).toEqual(STRANGER);
    reviews.hold = false;
    expect(await reviewer.authenticate('third-token')).toBeUndefined();
    expect(await reviewer.authenticate('x'.repeat(16 * 1024 + 1))).toBeUndefined();
    expect(reviews.asked.tokenReviews).toBe(3);
  });

  test('a review the API server does not answer in time fails, and frees its place', async () => {
    const reviews = new FakeReviews();
    reviews.hold = true;
    const reviewer = new TokenReviewer(reviews, { maxInFlight: 1, timeoutMs: 20 });
    await expect(reviewer.authenticate(PROMETHEUS_TOKEN)).rejects.toThrow(
      'the API server did not answer the review within 20 ms',
    );
    reviews.hold = false;
    expect(await reviewer.authenticate(STRANGER_TOKEN)).toEqual(STRANGER);
    reviews.release();
  });
});

describe('METRICS_AUTH', () => {
  test('on by default where the hook routes ask for a token (in a cluster), off for npm start', () => {
    expect(configFromEnv({}).metricsAuth).toBe(false);
    expect(configFromEnv({ AUTH_TOKEN_FILES: '/etc/token' }).metricsAuth).toBe(true);
    expect(configFromEnv({ AUTH_TOKEN_FILES: '/etc/token', METRICS_AUTH: 'off' }).metricsAuth).toBe(false);
    expect(configFromEnv({ METRICS_AUTH: 'on' }).metricsAuth).toBe(true);
    expect(() => configFromEnv({ METRICS_AUTH: 'maybe' })).toThrow('METRICS_AUTH must be on or off, not "maybe"');
  });

  test('on without the Kubernetes API to review tokens: the server does not start', () => {
    expect(() => buildServer({ ...testConfig, metricsAuth: true }, { logger: false })).toThrow(
      'METRICS_AUTH=on: /metrics reviews bearer tokens with the Kubernetes API',
    );
  });

  test('off: /metrics is open, as npm start serves it on 127.0.0.1', async () => {
    const { app } = buildServer(configFromEnv({}), { logger: false, reviewer: new TokenReviewer(new FakeReviews()) });
    servers.push(app);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const res = await request(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/metrics`);
    expect(res.statusCode).toBe(200);
    expect(await res.body.text()).toContain('pulumi_hook_request_duration_seconds');
  });
});
