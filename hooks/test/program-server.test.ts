/**
 * The program server (program/serve.ts, http/program-routes.ts): `GET /programs/<ns>/<name>` answers
 * a Program's rendered Pulumi.yaml to the token of a workspace that downloads it, and nothing to
 * anyone else. The TokenReview and the Program's read are stand-ins; the Workspaces come through the
 * hooks' own watch (a FakeCluster behind the mirror).
 */
import { request } from 'undici';
import type { Program } from '../../schemas/generated/types';
import { ReviewUnavailable, TokenReviewer, type Reviewer, type UserInfo } from '../src/kube/token-review';
import { renderProgram } from '../src/program/render';
import { syncProgram } from '../src/program/sync';
import { buildServer, type HookServer } from '../src/server';
import { listenOnLoopback } from './answers';
import { NOW, testConfig } from './builders';
import { FakeCluster } from './fake-cluster';

const SERVER = testConfig.programServer!.url;
const URL_OF = (ns: string, name: string) => `${SERVER}/programs/${ns}/${name}`;

function program(name: string, spec: Record<string, unknown> = { outputs: { hello: 'world' } }): Program {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name, namespace: 'team-a', generation: 1 },
    program: spec,
  };
}

/** A Workspace of team-a that downloads `url`, running as `serviceAccount`. */
function workspace(name: string, url: string, serviceAccount: string) {
  return {
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Workspace',
    metadata: { name, namespace: 'team-a', uid: `uid-${name}` },
    spec: { serviceAccountName: serviceAccount, flux: { url, digest: 'sha256:00' } },
  };
}

const user = (username: string, pod?: string): UserInfo => ({
  username,
  uid: 'u',
  groups: ['system:serviceaccounts'],
  extra: pod ? { 'authentication.kubernetes.io/pod-name': [pod] } : {},
});

/** The tokens the stand-in TokenReview knows, for the program server's audience only. */
const TOKENS: Record<string, UserInfo> = {
  'app-token': user('system:serviceaccount:team-a:app-sa', 'app-workspace-0'),
  'app-token-unbound': user('system:serviceaccount:team-a:app-sa'),
  'app-token-other-pod': user('system:serviceaccount:team-a:app-sa', 'intruder-0'),
  'other-stack-token': user('system:serviceaccount:team-a:other-sa', 'other-workspace-0'),
  'other-namespace-token': user('system:serviceaccount:team-b:app-sa', 'app-workspace-0'),
  'person-token': user('alice'),
};

/** A GET of the server at `base`, as the fetch container makes it (undici). */
async function call(
  base: string,
  path: string,
  authorization?: string,
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const res = await request(`${base}${path}`, { headers: authorization === undefined ? {} : { authorization } });
  return { status: res.statusCode, body: await res.body.text(), headers: res.headers };
}

interface Setup {
  server: HookServer;
  programs: Map<string, Program>;
  audiences: string[][];
  /** The program server's port. */
  base: string;
  /** The hook routes' port. */
  hookBase: string;
  get(path: string, token?: string): Promise<{ status: number; body: string; headers: Record<string, unknown> }>;
}

async function setup(
  options: { reviewDown?: boolean; hold?: Promise<void>; readFails?: Error; reviewer?: Reviewer } = {},
): Promise<Setup> {
  const cluster = new FakeCluster();
  cluster.put('workspaces', workspace('app', URL_OF('team-a', 'hello'), 'app-sa'));
  cluster.put('workspaces', workspace('other', URL_OF('team-a', 'other'), 'other-sa'));
  cluster.put('workspaces', workspace('gone', URL_OF('team-a', 'gone'), 'app-sa'));
  const programs = new Map<string, Program>([
    ['team-a/hello', program('hello')],
    ['team-a/other', program('other')],
  ]);
  const audiences: string[][] = [];
  const server = buildServer(testConfig, {
    logger: false,
    objects: { api: cluster.api(), via: 'the fake' },
    programs: {
      via: 'the stand-ins',
      api: {
        reviewer: options.reviewer ?? {
          authenticate: (token, wanted = []) => {
            audiences.push([...wanted]);
            if (options.reviewDown) return Promise.reject(new ReviewUnavailable('the API server did not answer'));
            return Promise.resolve(wanted.includes('programs.pulumi-mc-hooks') ? TOKENS[token] : undefined);
          },
        },
        getProgram: async (namespace, name) => {
          await options.hold;
          if (options.readFails !== undefined) throw options.readFails;
          return programs.get(`${namespace}/${name}`);
        },
      },
    },
  });
  const hookBase = await listenOnLoopback(server.app);
  const base = await listenOnLoopback(server.programs);
  await server.objects!.whenSynced();
  return {
    server,
    programs,
    audiences,
    base,
    hookBase,
    get: (path, token) => call(base, path, token === undefined ? undefined : `Bearer ${token}`),
  };
}

describe('the program server', () => {
  let s: Setup;
  beforeEach(async () => {
    s = await setup();
  });
  afterEach(async () => {
    await s.server.app.close();
  });

  it("answers the Program's rendered Pulumi.yaml, with the digest the Program hook reports, to its workspace's token", async () => {
    const res = await s.get('/programs/team-a/hello', 'app-token');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/yaml; charset=utf-8');
    expect(res.body).toBe(renderProgram(program('hello')).yaml);
    const artifact = syncProgram({ object: program('hello') }, NOW, SERVER).status.artifact!;
    expect(res.headers['x-program-digest']).toBe(artifact.digest);
    expect(artifact.url).toBe(URL_OF('team-a', 'hello'));
    // The token was checked for the program server's own audience.
    expect(s.audiences).toEqual([['programs.pulumi-mc-hooks']]);
    // A token not bound to a pod: the ServiceAccount decides.
    expect((await s.get('/programs/team-a/hello', 'app-token-unbound')).status).toBe(200);
  });

  it('has a port of its own: the Programs only there, the hook routes, probes and /metrics only on theirs', async () => {
    expect((await call(s.hookBase, '/programs/team-a/hello', 'Bearer app-token')).status).toBe(404);
    for (const path of ['/healthz', '/readyz', '/metrics'])
      expect({ path, status: (await call(s.base, path)).status }).toEqual({ path, status: 404 });
    const sync = await request(`${s.base}/program/sync`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ object: program('hello') }),
    });
    await sync.body.dump();
    expect(sync.statusCode).toBe(404);
    // The same requests on the hook routes' port answer.
    expect((await call(s.hookBase, '/healthz')).status).toBe(200);
    expect((await call(s.base, '/programs/team-a/hello', 'Bearer app-token')).status).toBe(200);
  });

  it('answers 401 without a token, or with one not valid for its audience', async () => {
    for (const token of [undefined, '', 'made-up']) {
      const res = await s.get('/programs/team-a/hello', token);
      expect({ token, status: res.status }).toEqual({ token, status: 401 });
      expect(res.headers['www-authenticate']).toBe('Bearer realm="pulumi-mc-hooks programs"');
      expect(res.body).not.toContain('hello: world');
    }
    expect((await call(s.base, '/programs/team-a/hello', 'Basic YTpi')).status).toBe(401);
  });

  it.each([
    [
      'a ServiceAccount of another namespace',
      'other-namespace-token',
      /namespace team-b may not read Program team-a\/hello/,
    ],
    [
      "another Stack's workspace in the namespace",
      'other-stack-token',
      /runs pod other-workspace-0 as ServiceAccount other-sa/,
    ],
    ['the right ServiceAccount in another pod', 'app-token-other-pod', /runs pod intruder-0 as ServiceAccount app-sa/],
    ['a person', 'person-token', /only the ServiceAccount of a workspace/],
  ])('answers 403 to %s', async (_who, token, why) => {
    const res = await s.get('/programs/team-a/hello', token);
    expect(res.status).toBe(403);
    expect((JSON.parse(res.body) as { message: string }).message).toMatch(why);
    expect(res.body).not.toContain('hello: world');
  });

  it('answers 404 for a Program that does not exist, to a workspace that downloads it', async () => {
    const res = await s.get('/programs/team-a/gone', 'app-token-unbound');
    expect(res.status).toBe(404);
    expect(JSON.parse(res.body)).toEqual({ error: 'Not Found', message: 'Program team-a/gone not found' });
    // And 403, not 404, to a workspace that does not: no caller learns which Programs exist.
    expect((await s.get('/programs/team-a/nowhere', 'app-token')).status).toBe(403);
  });

  it('serves a Program of about 1 MiB whole, and refuses an invalid one (409)', async () => {
    s.programs.set('team-a/hello', program('hello', { variables: { blob: 'ab<'.repeat(350_000) }, outputs: { n: 1 } }));
    const res = await s.get('/programs/team-a/hello', 'app-token');
    expect(res.status).toBe(200);
    expect(Buffer.byteLength(res.body)).toBeGreaterThan(1024 * 1024);
    expect(res.headers['x-program-digest']).toBe(renderProgram(s.programs.get('team-a/hello')!).digest);
    s.programs.set('team-a/hello', program('hello', { resources: { pet: { type: '' } } }));
    const invalid = await s.get('/programs/team-a/hello', 'app-token');
    expect(invalid.status).toBe(409);
    expect(invalid.body).toMatch(/program\.resources\.pet\.type/);
  });

  it.each([
    ['/programs/Team-A/hello', '/namespace'],
    ['/programs/team-a/' + 'x'.repeat(254), '/name'],
    ['/programs/team-a/hello_world', '/name'],
  ])('answers 400 naming the field for %s', async (path, field) => {
    const res = await s.get(path, 'app-token');
    expect(res.status).toBe(400);
    expect((JSON.parse(res.body) as { field: string }).field).toBe(field);
  });
});

describe('the program server, when it cannot decide', () => {
  it('answers 503 while the TokenReview is unavailable, and while Programs are not served', async () => {
    const s = await setup({ reviewDown: true });
    try {
      expect((await s.get('/programs/team-a/hello', 'app-token')).status).toBe(503);
    } finally {
      await s.server.app.close();
    }
    const off = buildServer(testConfig, { logger: false });
    try {
      const res = await call(await listenOnLoopback(off.programs), '/programs/team-a/hello', 'Bearer app-token');
      expect(res.status).toBe(503);
      expect(res.body).toContain('Programs are not served');
    } finally {
      await off.app.close();
    }
  });

  it('answers 503, not 500, when the API server does not give the Program, and says nothing of its answer', async () => {
    // As client-node fails: the status code, and a message that carries the API server's answer.
    const failure = Object.assign(new Error('HTTP-Code: 403 Body: {"reason":"Forbidden","secret":"s3cr3t"}'), {
      code: 403,
    });
    const s = await setup({ readFails: failure });
    try {
      const res = await s.get('/programs/team-a/hello', 'app-token');
      expect(res.status).toBe(503);
      expect(JSON.parse(res.body)).toEqual({
        error: 'Service Unavailable',
        message: 'cannot read Program team-a/hello from the API server (HTTP 403); retry',
      });
    } finally {
      await s.server.app.close();
    }
  });

  it('gives a download slot only to an authorized caller: made-up tokens whose TokenReviews hang do not hold one', async () => {
    // The API server answers the workspace's token at once and hangs on every other one.
    let hangUp!: () => void;
    const hanging = new Promise<void>((r) => (hangUp = r));
    const reviewer = new TokenReviewer(
      {
        tokenReview: async ({ token, audiences }) => {
          const user = TOKENS[token];
          if (user === undefined) await hanging;
          return user ? { authenticated: true, user, audiences } : { authenticated: false };
        },
        subjectAccessReview: () => Promise.reject(new Error('not asked')),
      },
      { maxInFlight: 16 },
    );
    const s = await setup({ reviewer });
    try {
      // The workspace downloaded its Program once: the reviewer remembers its token.
      expect((await s.get('/programs/team-a/hello', 'app-token-unbound')).status).toBe(200);
      const flood = Array.from({ length: 16 }, (_, i) => s.get('/programs/team-a/hello', `made-up-${i}`));
      // Sixteen TokenReviews hang: the reviewer's bound; one more made-up token is refused at once.
      expect((await s.get('/programs/team-a/hello', 'made-up-16')).status).toBe(503);
      // The workspace's next download gets a slot meanwhile: the hanging callers hold none.
      const res = await s.get('/programs/team-a/hello', 'app-token-unbound');
      expect(res.status).toBe(200);
      expect(res.body).toBe(renderProgram(program('hello')).yaml);
      hangUp();
      expect((await Promise.all(flood)).map((r) => r.status)).toEqual(Array(16).fill(401));
    } finally {
      hangUp();
      await s.server.app.close();
    }
  });

  it('holds at most 8 downloads at once: the next is told to retry (429)', async () => {
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    const s = await setup({ hold });
    try {
      const held = Array.from({ length: 8 }, () => s.get('/programs/team-a/hello', 'app-token'));
      // The eight have reached the read of the Program (the TokenReview answered at once).
      await new Promise((r) => setImmediate(r));
      const refused = await s.get('/programs/team-a/hello', 'app-token');
      expect(refused.status).toBe(429);
      expect(refused.headers['retry-after']).toBe('1');
      release();
      expect((await Promise.all(held)).map((r) => r.status)).toEqual(Array(8).fill(200));
      expect((await s.get('/programs/team-a/hello', 'app-token')).status).toBe(200);
    } finally {
      await s.server.app.close();
    }
  });
});
