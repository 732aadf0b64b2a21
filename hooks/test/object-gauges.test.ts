/**
 * Upstream's gauges derived from the Stack and Program objects (issue 22, item 8): every replica,
 * and one restarted, reports the same numbers, because they come from the API server's objects
 * rather than from the requests one replica answered. Against a stand-in API server
 * (fake-cluster.ts); the real one in e2e/object-metrics.e2e.ts.
 */
import { Writable } from 'node:stream';
import Fastify from 'fastify';
import { request } from 'undici';
import { ObjectGauges, programProjection, stackProjection, type WarnLog } from '../src/objects/gauges';
import { Reflector } from '../src/objects/reflector';
import { metricsPlugin } from '../src/http/metrics';
import { buildServer } from '../src/server';
import { postJson, listenOnLoopback } from './answers';
import { makeStack, syncRequest, testConfig } from './builders';
import { FakeCluster, programObject, stackObject } from './fake-cluster';

/** Retries without waiting: the tests assert what happens, never when. */
const noWait = { sleep: () => new Promise<void>((resolve) => setImmediate(resolve)) };

/** Polls until check() holds (a bound, not a timing assertion). */
async function until(what: string, check: () => boolean | Promise<boolean>, limitMs = 10_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

function quietLog(): WarnLog & { warnings: { fields: object; msg: string }[] } {
  const warnings: { fields: object; msg: string }[] = [];
  return { warnings, warn: (fields, msg) => warnings.push({ fields, msg }) };
}

/** The lines of upstream's three gauges in a scrape, sorted: what two replicas must agree on. */
function upstreamGauges(text: string): string[] {
  return text
    .split('\n')
    .filter((l) => /^(stacks_active|stacks_failing|programs_active)[ {]/.test(l))
    .sort();
}

function seed(cluster: FakeCluster): void {
  cluster.put('stacks', stackObject('team-a', 'ready', 'succeeded'));
  cluster.put('stacks', stackObject('team-a', 'broken', 'failed'));
  cluster.put('stacks', stackObject('team-b', 'new'));
  cluster.put('programs', programObject('team-a', 'prog'));
}

/** Listens on a free loopback port; returns the base URL. */

async function get(base: string, path: string): Promise<{ statusCode: number; body: string }> {
  const res = await request(`${base}${path}`);
  return { statusCode: res.statusCode, body: await res.body.text() };
}

const started: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((s) => s.stop()));
});

function gaugesOn(
  cluster: FakeCluster,
  log: WarnLog = quietLog(),
  extra: { pageSize?: number; now?: () => number } = {},
) {
  const gauges = new ObjectGauges(cluster.api(), {
    log,
    reflector: { ...noWait, ...(extra.pageSize ? { pageSize: extra.pageSize } : {}) },
    ...(extra.now ? { now: extra.now } : {}),
  });
  gauges.start();
  started.push(gauges);
  return gauges;
}

describe('the projections keep only what the gauges need', () => {
  it('a Stack: its key and the outcome of its last operation, as upstream counts it', () => {
    expect(stackProjection(stackObject('ns', 'a', 'failed'))).toEqual({ key: 'ns/a', value: 1 });
    expect(stackProjection(stackObject('ns', 'a', 'succeeded'))).toEqual({ key: 'ns/a', value: 0 });
    expect(stackProjection(stackObject('ns', 'a'))).toEqual({ key: 'ns/a', value: -1 });
    expect(programProjection(programObject('ns', 'p'))).toEqual({ key: 'ns/p', value: null });
  });

  it('ignores what is not a named object, and reads own properties only', () => {
    for (const bad of [
      null,
      7,
      'x',
      [],
      {},
      { metadata: null },
      { metadata: { name: 'a' } },
      { metadata: { namespace: 'n', name: '' } },
    ])
      expect(stackProjection(bad)).toBeUndefined();
    expect(stackProjection(JSON.parse('{"__proto__":{"metadata":{"namespace":"n","name":"a"}}}'))).toBeUndefined();
    const odd = { metadata: { namespace: 'n', name: 'a' }, status: { lastUpdate: { state: { toString: 1 } } } };
    expect(stackProjection(odd)).toEqual({ key: 'n/a', value: -1 });
    expect(stackProjection({ metadata: { namespace: 'n', name: 'a' }, status: 'weird' })).toEqual({
      key: 'n/a',
      value: -1,
    });
  });
});

describe('upstream gauges from the objects', () => {
  it('counts every Stack and Program, and each Stack failing or not from status.lastUpdate.state', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    const gauges = gaugesOn(cluster);
    await gauges.whenSynced();
    const text = await gauges.metrics();
    expect(upstreamGauges(text)).toEqual([
      'programs_active 1',
      'stacks_active 3',
      'stacks_failing{namespace="team-a",name="broken"} 1',
      'stacks_failing{namespace="team-a",name="ready"} 0',
    ]);
    expect(text).toMatch(/^pulumi_hook_objects_synced\{resource="stacks"\} 1$/m);
    expect(text).toMatch(/^pulumi_hook_objects_synced\{resource="programs"\} 1$/m);
  });

  it('stacks_drifted from status.lastDriftCheck.drifted: 1, 0, or no series', async () => {
    const cluster = new FakeCluster();
    const withCheck = (name: string, drifted?: boolean) => {
      const stack = stackObject('team-a', name, 'succeeded');
      const status = stack.status as Record<string, unknown>;
      status.lastDriftCheck = drifted === undefined ? { state: 'failed' } : { state: 'succeeded', drifted };
      return stack;
    };
    cluster.put('stacks', withCheck('drifted', true));
    cluster.put('stacks', withCheck('clean', false));
    cluster.put('stacks', withCheck('unknown'));
    cluster.put('stacks', stackObject('team-a', 'unchecked', 'succeeded'));
    const gauges = gaugesOn(cluster);
    await gauges.whenSynced();
    const lines = (await gauges.metrics()).split('\n').filter((l) => l.startsWith('stacks_drifted{'));
    expect(lines.sort()).toEqual([
      'stacks_drifted{namespace="team-a",name="clean"} 0',
      'stacks_drifted{namespace="team-a",name="drifted"} 1',
    ]);
  });

  it('two replicas and a restarted one report the same numbers, whichever requests they answered', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    const one = gaugesOn(cluster);
    const two = gaugesOn(cluster);
    await Promise.all([one.whenSynced(), two.whenSynced()]);
    expect(upstreamGauges(await one.metrics())).toEqual(upstreamGauges(await two.metrics()));
    // Changes reach both: the failing Stack recovers, the ready one fails, one is deleted, one added.
    cluster.put('stacks', stackObject('team-a', 'broken', 'succeeded'));
    cluster.put('stacks', stackObject('team-a', 'ready', 'failed'));
    cluster.delete('stacks', 'team-b', 'new');
    cluster.put('programs', programObject('team-b', 'other'));
    const expected = [
      'programs_active 2',
      'stacks_active 2',
      'stacks_failing{namespace="team-a",name="broken"} 0',
      'stacks_failing{namespace="team-a",name="ready"} 1',
    ];
    await until('both replicas to see the changes', async () => {
      const [a, b] = await Promise.all([one.metrics(), two.metrics()]);
      return (
        JSON.stringify(upstreamGauges(a)) === JSON.stringify(expected) && upstreamGauges(b).join() === expected.join()
      );
    });
    // A restart: a new instance starts from nothing and lists the same.
    await one.stop();
    const restarted = gaugesOn(cluster);
    await restarted.whenSynced();
    expect(upstreamGauges(await restarted.metrics())).toEqual(expected);
  });

  it('lists in pages, so no answer holds every object at once', async () => {
    const cluster = new FakeCluster();
    for (let i = 0; i < 25; i++)
      cluster.put('stacks', stackObject('ns', `s${String(i).padStart(2, '0')}`, i % 5 === 0 ? 'failed' : undefined));
    const gauges = gaugesOn(cluster, quietLog(), { pageSize: 10 });
    await gauges.whenSynced();
    expect(cluster.calls.filter((c) => c.resource === 'stacks' && c.op === 'list').map((c) => c.limit)).toEqual([
      10, 10, 10,
    ]);
    const text = await gauges.metrics();
    expect(text).toMatch(/^stacks_active 25$/m);
    expect(upstreamGauges(text).filter((l) => l.startsWith('stacks_failing'))).toHaveLength(5);
  });

  it('watches again from the last resourceVersion when a stream ends, and relists after a 410', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    const gauges = gaugesOn(cluster);
    await gauges.whenSynced();
    // One watch per mirror: Stacks, Programs, Workspaces and Updates.
    await until('the watches to open', () => cluster.openWatches === 4);
    cluster.bookmark('stacks');
    cluster.endWatches();
    await until('the watches to reopen', () => cluster.openWatches === 4);
    const stackWatches = cluster.calls.filter((c) => c.resource === 'stacks' && c.op === 'watch');
    // The second watch starts at the bookmark's resourceVersion, newer than the list's.
    expect(Number(stackWatches[1]!.from)).toBeGreaterThan(Number(stackWatches[0]!.from));
    const listsBefore = cluster.calls.filter((c) => c.op === 'list').length;
    // History compacted: the watches get 410, the mirror lists again; a change made meanwhile shows.
    cluster.compact();
    cluster.delete('stacks', 'team-a', 'broken');
    await until('the relist after 410', async () => (await gauges.metrics()).includes('stacks_active 2'));
    expect(cluster.calls.filter((c) => c.op === 'list').length).toBeGreaterThan(listsBefore);
    expect(await gauges.metrics()).not.toContain('name="broken"');
  });

  it('a broken watch is counted, then the mirror lists again and is right', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    const gauges = gaugesOn(cluster);
    await gauges.whenSynced();
    await until('the watches to open', () => cluster.openWatches === 4);
    cluster.breakWatches();
    cluster.put('stacks', stackObject('team-c', 'late', 'failed'));
    await until('the change after the break', async () => (await gauges.metrics()).includes('name="late"} 1'));
    expect(await gauges.metrics()).toMatch(
      /^pulumi_hook_object_watch_failures_total\{resource="stacks",operation="watch"\} 1$/m,
    );
  });
});

describe('the operations budget from the mirror', () => {
  it('pulumi_operations_queued and _running count the Stacks waiting and in operation, as every replica sees them', async () => {
    const cluster = new FakeCluster();
    const reconciling = (name: string, uid: string, reason: string) => {
      const stack = stackObject('team-a', name, 'succeeded');
      stack.metadata = { ...stack.metadata, uid, generation: 1 };
      stack.status = {
        observedGeneration: 1,
        conditions: [{ type: 'Reconciling', status: 'True', reason, lastTransitionTime: '2026-11-22T09:00:00Z' }],
      };
      return stack;
    };
    cluster.put('stacks', reconciling('a', 'u-a', 'StackProcessing'));
    cluster.put('stacks', reconciling('b', 'u-b', 'Queued'));
    cluster.put('stacks', reconciling('c', 'u-c', 'Queued'));
    cluster.put('stacks', reconciling('d', 'u-d', 'RetryingAfterFailure'));
    const gauges = gaugesOn(cluster);
    expect(gauges.budgetFacts()).toBeUndefined();
    await gauges.whenSynced();
    const text = await gauges.metrics();
    expect(text).toMatch(/^pulumi_operations_queued 2$/m);
    expect(text).toMatch(/^pulumi_operations_running 1$/m);
    expect([...(gauges.budgetFacts() ?? [])].map((f) => `${f.uid}:${f.phase}`).sort()).toEqual([
      'u-a:operating',
      'u-b:waiting',
      'u-c:waiting',
      'u-d:idle',
    ]);
    cluster.put('stacks', reconciling('b', 'u-b', 'StackProcessing'));
    await until('the admission to reach the gauges', async () =>
      /^pulumi_operations_running 2$/m.test(await gauges.metrics()),
    );
  });
});

describe('the mirror the events consult', () => {
  it('holds each Stack, Workspace and Update by kind, namespace, name and uid, until it is deleted', async () => {
    const cluster = new FakeCluster();
    const withUid = (object: ReturnType<typeof stackObject>, uid: string) => ({
      ...object,
      metadata: { ...object.metadata, uid },
    });
    cluster.put('stacks', withUid(stackObject('team-a', 'web'), 's-1'));
    cluster.put('workspaces', withUid({ kind: 'Workspace', metadata: { namespace: 'team-a', name: 'web' } }, 'w-1'));
    cluster.put('updates', withUid({ kind: 'Update', metadata: { namespace: 'team-a', name: 'web-up-1' } }, 'u-1'));
    const gauges = gaugesOn(cluster);
    await gauges.whenSynced();
    const holds = (kind: string, name: string, uid: string) =>
      gauges.mirror.holds({ kind, namespace: 'team-a', name, uid });
    expect([
      holds('Stack', 'web', 's-1'),
      holds('Workspace', 'web', 'w-1'),
      holds('Update', 'web-up-1', 'u-1'),
    ]).toEqual([true, true, true]);
    // Another kind, uid or namespace is not held; nor is a kind the hooks do not watch.
    expect([
      holds('Workspace', 'web', 's-1'),
      holds('Update', 'web-up-1', 'w-1'),
      gauges.mirror.holds({ kind: 'Workspace', namespace: 'team-b', name: 'web', uid: 'w-1' }),
      holds('Program', 'web', 's-1'),
    ]).toEqual([false, false, false, false]);
    cluster.delete('updates', 'team-a', 'web-up-1');
    await until('the deletion to reach the mirror', () => !holds('Update', 'web-up-1', 'u-1'));
  });
});

describe('failures never break /metrics', () => {
  it('a refused list: the gauges are absent, synced is 0, the failure counted and logged once a minute; then it recovers', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    cluster.refuseLists('stacks', 403, 5);
    const log = quietLog();
    let now = 0;
    const gauges = gaugesOn(cluster, log, { now: () => now });
    await until(
      'five refusals',
      () => cluster.calls.filter((c) => c.resource === 'stacks' && c.op === 'list').length >= 3,
    );
    await gauges.whenSynced();
    const text = await gauges.metrics();
    expect(text).toMatch(/^pulumi_hook_object_watch_failures_total\{resource="stacks",operation="list"\} 5$/m);
    expect(log.warnings).toHaveLength(1);
    expect(log.warnings[0]!.msg).toBe('cannot list stacks for the gauges derived from them; retrying');
    expect(log.warnings[0]!.fields).toMatchObject({ resource: 'stacks', operation: 'list', err: 'HTTP-Code: 403' });
    expect(text).toMatch(/^stacks_active 3$/m);
    // A minute later, the next failure is logged with the count of those that were not.
    now = 61_000;
    cluster.refuseLists('stacks', 500, 1);
    cluster.compact();
    await until('the second warning', () => log.warnings.length === 2);
    expect(log.warnings[1]!.fields).toMatchObject({ notLogged: 4 });
  });

  it('while no list has succeeded, the gauges of that resource are absent and the rest is served', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    cluster.refuseLists('stacks', 403, 1_000_000);
    const gauges = gaugesOn(cluster);
    await until('the programs to sync and the stacks to fail', async () => {
      const t = await gauges.metrics();
      return t.includes('programs_active 1') && /operation="list"\} [1-9]/.test(t);
    });
    const text = await gauges.metrics();
    expect(text).not.toMatch(/^stacks_active/m);
    expect(text).not.toMatch(/^stacks_failing\{/m);
    expect(text).toMatch(/^pulumi_hook_objects_synced\{resource="stacks"\} 0$/m);
    expect(text).toMatch(/^pulumi_hook_objects_synced\{resource="programs"\} 1$/m);
  });

  it('a list that never answers counts as failed, and the next one succeeds', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    const real = cluster.listWatch('stacks');
    let calls = 0;
    const hangingOnce = {
      ...real,
      list: (page: { limit: number; continue?: string }) =>
        ++calls === 1 ? new Promise<never>(() => undefined) : real.list(page),
    };
    const failures: string[] = [];
    const mirror = new Reflector({
      api: hangingOnce,
      project: stackProjection,
      onFailure: (operation, err) => failures.push(`${operation}: ${(err as Error).message}`),
      listTimeoutMs: 20,
      ...noWait,
    });
    mirror.start();
    started.push(mirror);
    await mirror.whenSynced();
    expect(failures).toEqual(['list: no answer to a list in 20 ms']);
    expect(mirror.entries.size).toBe(3);
  });

  it('stops cleanly while watching or retrying', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    cluster.refuseLists('programs', 403, 1_000_000);
    const gauges = gaugesOn(cluster);
    // Stacks, Workspaces and Updates watched; Programs retrying.
    await until('the other watches to open', () => cluster.openWatches === 3);
    await gauges.stop();
    expect(cluster.openWatches).toBe(0);
  });
});

describe('memory: only a number per Stack', () => {
  it('mirrors 10,000 Stacks as 10,000 map entries of a key and a small number', async () => {
    const cluster = new FakeCluster();
    const big = 'x'.repeat(2000);
    for (let i = 0; i < 10_000; i++) {
      const s = stackObject(`ns${i % 50}`, `stack-${i}`, i % 100 === 0 ? 'failed' : 'succeeded');
      (s.spec as Record<string, unknown>).config = { blob: big };
      cluster.put('stacks', s);
    }
    const mirror = new Reflector({
      api: cluster.listWatch('stacks'),
      project: stackProjection,
      onFailure: () => undefined,
      ...noWait,
    });
    mirror.start();
    started.push(mirror);
    await mirror.whenSynced();
    expect(mirror.entries.size).toBe(10_000);
    expect(new Set([...mirror.entries.values()])).toEqual(new Set([0, 1]));
    const gauges = gaugesOn(cluster);
    await gauges.whenSynced();
    const text = await gauges.metrics();
    expect(text).toMatch(/^stacks_active 10000$/m);
    expect(text.match(/^stacks_failing\{.*\} 1$/gm)).toHaveLength(100);
  });
});

describe('the hook server', () => {
  it('without API access: no upstream gauges, one log line saying why, the hooks’ metrics as before', async () => {
    let logged = '';
    const logStream = new Writable({
      write(chunk: Buffer, _e, cb) {
        logged += chunk.toString();
        cb();
      },
    });
    const server = buildServer({ ...testConfig, logLevel: 'info' }, { logStream });
    const base = await listenOnLoopback(server.app);
    await postJson(`${base}/stack/sync`, { controller: {}, ...syncRequest(makeStack()) });
    const res = await get(base, '/metrics');
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(/^pulumi_hook_request_duration_seconds_count\{hook="stack_sync"\} 1$/m);
    expect(res.body).not.toMatch(/stacks_active|stacks_failing|programs_active|pulumi_hook_objects_synced/);
    await server.app.close();
    const lines = logged.split('\n').filter((l) => l.includes('gauges of Stacks and Programs'));
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({
      msg: 'gauges of Stacks and Programs: off',
      why: 'no Kubernetes API access given',
    });
  });

  it('a failure of the derived gauges leaves the rest of /metrics served', async () => {
    const server = buildServer(testConfig, { logger: false });
    const failing = { metrics: () => Promise.reject(new Error('boom')) };
    // The plugin's contract, exercised directly: the hooks' metrics go out whatever the gauges do.
    const app = Fastify({ logger: false });
    app.register(metricsPlugin, { metrics: server.metrics, objects: failing });
    const res = await get(await listenOnLoopback(app), '/metrics');
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('pulumi_hook_request_duration_seconds');
    await app.close();
    await server.app.close();
  });

  it('two hook servers on the same API server scrape the same gauges, and so does a restarted one', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    const serve = async () => {
      const s = buildServer(testConfig, {
        logger: false,
        objects: { api: cluster.api(), via: 'the fake' },
      });
      const base = await listenOnLoopback(s.app);
      await s.objects!.whenSynced();
      return { ...s, base };
    };
    const scrape = async (s: Awaited<ReturnType<typeof serve>>) => {
      const res = await get(s.base, '/metrics');
      expect(res.statusCode).toBe(200);
      return upstreamGauges(res.body);
    };
    let one = await serve();
    const two = await serve();
    try {
      // Only the first answers hooks (a failed Stack's sync among them): that changes nothing in the gauges.
      const failed = makeStack(
        {},
        { name: 'other' },
        {
          lastUpdate: {
            generation: 1,
            reconcileRequest: '',
            name: 'x',
            type: 'up',
            state: 'failed',
            lastResyncTime: '2026-11-22T09:00:00Z',
            failures: 3,
            lastAttemptedCommit: '1',
          },
        },
      );
      for (const stack of [makeStack(), failed])
        await postJson(`${one.base}/stack/sync`, { controller: {}, ...syncRequest(stack) });
      const initial = [
        'programs_active 1',
        'stacks_active 3',
        'stacks_failing{namespace="team-a",name="broken"} 1',
        'stacks_failing{namespace="team-a",name="ready"} 0',
      ];
      expect(await scrape(one)).toEqual(initial);
      expect(await scrape(two)).toEqual(initial);
      // A change streams to both watches.
      cluster.put('stacks', stackObject('team-a', 'broken', 'succeeded'));
      const after = [...initial.slice(0, 2), 'stacks_failing{namespace="team-a",name="broken"} 0', initial[3]!];
      await until(
        'both to see the recovery',
        async () => (await scrape(one)).join() === after.join() && (await scrape(two)).join() === after.join(),
      );
      await one.app.close();
      one = await serve();
      expect(await scrape(one)).toEqual(after);
    } finally {
      await one.app.close();
      await two.app.close();
    }
    expect(cluster.openWatches).toBe(0);
  });

  it('a list refused (403: RBAC missing) leaves /metrics served with the gauges absent and the failure counted', async () => {
    const cluster = new FakeCluster();
    seed(cluster);
    cluster.refuseLists('stacks', 403, 1_000_000);
    cluster.refuseLists('programs', 403, 1_000_000);
    const server = buildServer(testConfig, { logger: false, objects: { api: cluster.api(), via: 'the fake' } });
    try {
      const base = await listenOnLoopback(server.app);
      const scrape = async () => (await get(base, '/metrics')).body;
      await until('a failed list of each', async () => {
        const text = await scrape();
        return ['stacks', 'programs'].every((r) => new RegExp(`resource="${r}",operation="list"\\} [1-9]`).test(text));
      });
      const res = await get(base, '/metrics');
      expect(res.statusCode).toBe(200);
      expect(upstreamGauges(res.body)).toEqual([]);
      expect(res.body).toMatch(/^pulumi_hook_objects_synced\{resource="stacks"\} 0$/m);
      expect(res.body).toMatch(/^pulumi_hook_objects_synced\{resource="programs"\} 0$/m);
      expect(res.body).toContain('pulumi_hook_request_duration_seconds');
    } finally {
      await server.app.close();
    }
  });
});
