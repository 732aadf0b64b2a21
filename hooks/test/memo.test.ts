import fc from 'fast-check';
import { deepFreeze, nestedDeeperThan } from '../src/lib/json';
import { contentTokens, matchesSnapshot, snapshotBytes, snapshotJson } from '../src/cache/snapshot';
import { IDLE_BEFORE_EVICTION_MS } from '../src/cache/admission';
import { FrozenCache, SyncCache } from '../src/cache/sync-cache';
import { responseJson } from '../src/http/stack-routes';
import { syncStack } from '../src/stack/sync';
import type { Workspace } from '../../schemas/generated/types';
import { stackWorkspace } from '../src/stack/workspace';
import { desiredPod } from '../src/workspace/pod';
import { makeStack, noLookups, NOW, syncRequest, testConfig } from './builders';

const programSource = {
  kind: 'program' as const,
  name: 'my-program',
  digest: 'sha256:' + 'a'.repeat(64),
};

describe('FrozenCache', () => {
  /** A pure function remembered by the JSON of its argument. */
  function memoize<A, R>(fn: (a: A) => R, max = 2048): (a: A) => R {
    const cache = new FrozenCache<R>({ max });
    return (a) => cache.get(JSON.stringify(a), () => fn(a));
  }

  it('answers equal content from the cache and different content anew', () => {
    let calls = 0;
    const double = memoize((x: { n: number }) => ({ value: (calls++, x.n * 2) }));
    const a = double({ n: 2 });
    expect(double({ n: 2 })).toBe(a); // another object with the same content: a hit
    expect(calls).toBe(1);
    expect(double({ n: 3 }).value).toBe(6);
    expect(calls).toBe(2);
  });

  it('returns frozen results, so no caller can change the next answer', () => {
    const make = memoize((n: number) => ({ list: [n], nested: { n } }));
    const r = make(1);
    expect(() => {
      r.list.push(2);
    }).toThrow(TypeError);
    expect(() => {
      r.nested.n = 5;
    }).toThrow(TypeError);
    expect(make(1)).toEqual({ list: [1], nested: { n: 1 } });
  });

  it('is bounded: a new entry takes the room of the least recently used only once that one has gone unasked a while', () => {
    let now = 0;
    let calls = 0;
    const cache = new FrozenCache<{ n: number; call: number }>({ max: 2 }, undefined, () => now);
    const f = (n: number) => cache.get(String(n), () => ({ n, call: ++calls }));
    f(1);
    f(2);
    now += 1000;
    f(1); // 1 is now more recent than 2
    f(3); // no room, and 1 and 2 are in use: 3 is not kept
    expect(f(3).call).toBe(4);
    expect(f(2).call).toBe(2);
    now += IDLE_BEFORE_EVICTION_MS;
    f(1);
    f(5); // 2, the least recently used, has gone unasked long enough: 5 takes its room
    expect(f(5).call).toBe(5);
    expect(f(1).call).toBe(1);
    expect(f(2).call).toBe(6);
  });
});

describe('JSON snapshots', () => {
  const same = (a: unknown, b: unknown) => matchesSnapshot(a, snapshotJson(b));

  it('match only values with the same JSON, and always a copy', () => {
    const json = fc.jsonValue({ maxDepth: 3 });
    fc.assert(
      fc.property(json, json, (a, b) => {
        if (same(a, b)) expect(JSON.stringify(a)).toBe(JSON.stringify(b));
        expect(same(a, structuredClone(a))).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('match a value that differs from the snapshotted one in a single place nowhere', () => {
    // Random JSON rarely differs in one place only; this walks every place of a realistic value.
    const spec = {
      stack: 'dev',
      envRefs: { A: { type: 'Literal', literal: { value: '1' } } },
      config: { 'aws:region': 'x' },
      list: [1, 'two', null, true, { k: [] }],
    };
    const snapshot = snapshotJson(spec);
    const edits: unknown[] = [];
    const walk = (v: unknown, edit: (n: unknown) => unknown) => {
      edits.push(
        edit(
          v === null
            ? 0
            : typeof v === 'object'
              ? null
              : typeof v === 'string'
                ? `${v}x`
                : typeof v === 'number'
                  ? v + 1
                  : !v,
        ),
      );
      if (Array.isArray(v)) {
        const list: readonly unknown[] = v;
        edits.push(edit([...list, 1]), edit(list.slice(1)));
        list.forEach((item, i) => walk(item, (n) => edit(list.map((x, j) => (j === i ? n : x)))));
      } else if (v !== null && typeof v === 'object') {
        const entries = Object.entries(v);
        edits.push(
          edit({ ...v, extra: 1 }),
          edit(Object.fromEntries(entries.slice(1))),
          edit(Object.fromEntries([...entries].reverse())),
        );
        for (const [key, item] of entries) {
          walk(item, (n) => edit(Object.fromEntries(entries.map(([k, x]) => [k, k === key ? n : x]))));
          edits.push(edit(Object.fromEntries(entries.map(([k, x]) => [k === key ? `${k}_` : k, x]))));
        }
      }
    };
    walk(spec, (n) => n);
    const changed = edits.filter((e) => JSON.stringify(e) !== JSON.stringify(spec));
    expect(changed.length).toBeGreaterThan(40);
    for (const e of changed) expect(matchesSnapshot(e, snapshot)).toBe(false);
    expect(matchesSnapshot(structuredClone(spec), snapshot)).toBe(true);
  });

  it('tell key order apart (it changes the bytes) and never take other objects for JSON', () => {
    expect(same({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(false);
    expect(same({ a: [1, { b: null }] }, { a: [1, { b: null }] })).toBe(true);
    expect(same([1], { 0: 1 })).toBe(false);
    expect(same({ 0: 1 }, [1])).toBe(false);
    expect(same({ d: new Date(0) }, { d: new Date(0) })).toBe(false);
    expect(same({ a: undefined }, {})).toBe(false);
    expect(same({}, { a: undefined })).toBe(false);
    expect(same(['a'], [['a']])).toBe(false);
    expect(same([], {})).toBe(false);
    expect(same(null, {})).toBe(false);
    // Values whose flat lists would line up if lengths and key counts were not recorded.
    expect(same([[1], 2], [[1, 2]])).toBe(false);
    expect(same({ a: { x: 1 }, y: 2 }, { a: { x: 1, y: 2 } })).toBe(false);
  });

  it('read own keys only, so a polluted Object.prototype cannot fill in a missing one', () => {
    const snapshot = snapshotJson({ a: 1, b: 2 });
    const proto = Object.prototype as Record<string, unknown>;
    Object.defineProperty(proto, 'b', { value: 2, enumerable: true, configurable: true, writable: true });
    try {
      expect(matchesSnapshot({ a: 1 }, snapshot)).toBe(false);
    } finally {
      delete proto.b;
    }
    expect(matchesSnapshot({ a: 1, b: 2 }, snapshot)).toBe(true);
  });
});

describe('contentTokens', () => {
  it('gives one token to equal values in a slot, and never one token to different values', () => {
    const value = fc.oneof(fc.constantFrom({ a: 1 }, { a: 2 }, { a: 1, b: [1] }), fc.jsonValue({ maxDepth: 2 }));
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('ns/a', 'ns/b', 'other/a'), value), { maxLength: 30 }),
        // From no room for any snapshot of such values to room for a few of them.
        fc.integer({ min: 50, max: 16_000 }),
        (calls, maxBytes) => {
          const tokenOf = contentTokens({ maxBytes });
          // A value gets a token when its snapshot takes at most an eighth of the budget.
          const fits = (slot: string, v: unknown) => snapshotBytes(snapshotJson(v)) + 2 * slot.length <= maxBytes / 8;
          const seen = new Map<string, string>();
          let previous: { slot: string; json: string; token: string | undefined } | undefined;
          for (const [slot, v] of calls) {
            const token = tokenOf(slot, structuredClone(v));
            const json = JSON.stringify(v);
            expect(token === undefined).toBe(!fits(slot, v));
            if (token !== undefined) {
              const before = seen.get(token);
              if (before !== undefined) expect(before).toBe(json);
              seen.set(token, json);
            }
            if (previous?.slot === slot && previous.json === json) expect(token).toBe(previous.token);
            previous = { slot, json, token };
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps its own copy: changing the value afterwards cannot change what the token stands for', () => {
    const tokenOf = contentTokens();
    const spec = { stack: 'dev', envs: { A: '1' } };
    const first = tokenOf('ns/s', spec);
    spec.envs.A = '2';
    expect(tokenOf('ns/s', spec)).not.toBe(first);
    expect(tokenOf('ns/s', { stack: 'dev', envs: { A: '2' } })).not.toBe(first);
  });
  it('asks admit only about values the slot has not seen, and gives a refused value no token', () => {
    const asked: unknown[] = [];
    const tokenOf = contentTokens({
      admit: (v) => {
        asked.push(v);
        return (v as { ok?: boolean }).ok === true;
      },
    });
    const first = tokenOf('ns/s', { ok: true });
    expect(first).toBeDefined();
    expect(tokenOf('ns/s', { ok: true })).toBe(first);
    expect(asked).toHaveLength(1);
    expect(tokenOf('ns/s', { ok: false })).toBeUndefined();
    // Nothing was recorded for the refused value: the slot still holds the admitted one.
    expect(tokenOf('ns/s', { ok: true })).toBe(first);
    expect(asked).toHaveLength(2);
  });

  it('matches a value far deeper than the call stack allows against an admitted snapshot without overflowing', () => {
    const nested = (depth: number) => {
      let v: unknown = 'x';
      for (let i = 0; i < depth; i++) v = [v];
      return v;
    };
    const tokenOf = contentTokens({ admit: (v) => !nestedDeeperThan(v, 100) });
    expect(tokenOf('ns/s', { deep: nested(50) })).toBeDefined();
    expect(tokenOf('ns/s', { deep: nested(100_000) })).toBeUndefined();
  });
});

describe('syncStack with a warm cache', () => {
  it('answers every edit of a Stack exactly as a fresh hook process would', async () => {
    const cache = new SyncCache();
    const edits = fc.array(
      fc.record({
        config: fc.dictionary(fc.constantFrom('app:a', 'app:b'), fc.constantFrom('1', '2'), { maxKeys: 2 }),
        image: fc.constantFrom('example.test/agent:1', 'example.test/agent:2'),
        invalid: fc.boolean(),
      }),
      { minLength: 2, maxLength: 4 },
    );
    await fc.assert(
      fc.asyncProperty(edits, async (specs) => {
        for (const [i, e] of specs.entries()) {
          const stack = makeStack(
            {
              config: e.config,
              workspaceTemplate: { spec: { image: e.image } },
              ...(e.invalid ? { projectRepo: 'https://git.test/x', commit: 'a'.repeat(40), branch: 'main' } : {}),
            },
            { generation: i + 1 },
          );
          const warm = syncStack(syncRequest(stack), { config: testConfig, now: NOW, lookups: noLookups, cache });
          let cold: unknown;
          await jest.isolateModulesAsync(async () => {
            const fresh = await import('../src/stack/sync');
            cold = fresh.syncStack(syncRequest(structuredClone(stack)), {
              config: testConfig,
              now: NOW,
              lookups: noLookups,
            });
          });
          expect(JSON.stringify(warm)).toBe(JSON.stringify(cold));
          // Valid edits get a workspace running their image (so a stale memo would show).
          if (!e.invalid) expect(JSON.stringify(warm.children)).toContain(`"image":"${e.image}"`);
        }
      }),
      // A fresh module per answer costs a third of a second (the schemas compile again).
      { numRuns: 8 },
    );
  });
});

describe('the cached workspace', () => {
  const cache = new SyncCache();
  const json = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.string({ maxLength: 4 }),
      fc.integer(),
      fc.boolean(),
      fc.array(tie('value'), { maxLength: 2 }),
      fc.dictionary(fc.string({ maxLength: 4 }), tie('value'), { maxKeys: 2 }),
    ),
  })).value;
  const container = fc.record({
    name: fc.constantFrom('pulumi', 'fetch', 'sidecar'),
    image: fc.constantFrom('a', 'b'),
    env: fc.array(fc.record({ name: fc.constantFrom('A', 'B'), value: fc.string({ maxLength: 3 }) }), { maxLength: 2 }),
  });
  const template = fc.record(
    {
      image: fc.constantFrom('example.test/agent:1', 'example.test/agent:2'),
      securityProfile: fc.constantFrom('restricted', 'baseline'),
      env: fc.array(fc.record({ name: fc.constantFrom('X', 'Y', 'PULUMI_ENV'), value: fc.string({ maxLength: 3 }) }), {
        maxLength: 2,
      }),
      podTemplate: fc.record(
        {
          metadata: fc.record({
            labels: fc.dictionary(fc.constantFrom('a', 'b'), fc.string({ maxLength: 3 }), { maxKeys: 2 }),
          }),
          spec: fc.record(
            {
              containers: fc.array(container, { maxLength: 2 }),
              nodeSelector: fc.dictionary(fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 }), { maxKeys: 2 }),
              extra: json,
            },
            { requiredKeys: [] },
          ),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: [] },
  );

  it('is exactly what building it would give, for any workspaceTemplate, and never a stale answer', () => {
    fc.assert(
      fc.property(template, template, (t1, t2) => {
        // Any JSON in the template, valid or not (containers may be missing): spec fields as a client wrote them.
        const specWith = (template: object): Record<string, unknown> => ({ workspaceTemplate: { spec: template } });
        const s1 = makeStack(specWith(t1));
        const s2 = makeStack(specWith(t2));
        const w1 = cache.workspace(s1, programSource, testConfig);
        const w2 = cache.workspace(s2, programSource, testConfig);
        expect(w1).toEqual(stackWorkspace(structuredClone(s1), programSource, testConfig));
        expect(w2).toEqual(stackWorkspace(structuredClone(s2), programSource, testConfig));
        if (JSON.stringify(t1) !== JSON.stringify(t2) && w1.hash === w2.hash) {
          // Different templates may build the same Workspace (e.g. a null that deletes nothing), never a different one under the same hash.
          expect(w1.workspace.spec).toEqual(w2.workspace.spec);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('differs when only the source, the name or the namespace differs', () => {
    const stack = makeStack();
    const base = cache.workspace(stack, programSource, testConfig);
    expect(cache.workspace(stack, { ...programSource, digest: 'sha256:' + 'b'.repeat(64) }, testConfig).hash).not.toBe(
      base.hash,
    );
    expect(cache.workspace(makeStack({}, { name: 'other' }), programSource, testConfig).workspace.metadata.name).toBe(
      'other',
    );
    expect(
      cache.workspace(makeStack({}, { namespace: 'team-b' }), programSource, testConfig).workspace.metadata.namespace,
    ).toBe('team-b');
    const ws = { ...base.workspace, metadata: { ...base.workspace.metadata, generation: 1 } } as Workspace;
    const pod = cache.workspacePod(ws, testConfig);
    expect(pod).toEqual(desiredPod(structuredClone(ws), testConfig));
    expect(cache.workspacePod(ws, { ...testConfig, agentImage: 'example.test/other:1' }).hash).not.toBe(pod.hash);
  });
});

describe('a SyncCache bounded by bytes', () => {
  /** A Stack with a config of about 50 kB of JSON. */
  const large = (i: number) =>
    makeStack(
      { config: Object.fromEntries(Array.from({ length: 50 }, (_, k) => [`app:k${k}`, { value: 'x'.repeat(1000) }])) },
      { name: `large-${i}` },
    );

  it('forgets the least recently used answers past its budget, and computes them again alike', () => {
    const lookups: string[] = [];
    const maxBytes = 16 * 1024 * 1024;
    let now = 0;
    const cache = new SyncCache({
      maxBytes,
      counted: (name, hit) => lookups.push(`${name} ${hit ? 'hit' : 'miss'}`),
      now: () => now,
    });
    // Each Stack comes when the ones before have gone unasked long enough to make room.
    for (let i = 0; i < 40; i++, now += IDLE_BEFORE_EVICTION_MS) cache.workspace(large(i), programSource, testConfig);
    expect(Object.values(cache.bytes()).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(maxBytes);
    lookups.length = 0;
    // The last Stack's workspace is still there; the first one's was forgotten, and is the same again.
    cache.workspace(large(39), programSource, testConfig);
    expect(cache.workspace(large(0), programSource, testConfig)).toEqual(
      stackWorkspace(large(0), programSource, testConfig),
    );
    expect(lookups).toEqual(['stack_workspace hit', 'stack_workspace miss']);
    expect(Object.values(cache.bytes()).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(maxBytes);
  });

  it('keeps the answers in use rather than each new one, when more Stacks come in turn than it holds', () => {
    const lookups: string[] = [];
    const maxBytes = 16 * 1024 * 1024;
    const cache = new SyncCache({ maxBytes, counted: (name, hit) => lookups.push(`${name} ${hit ? 'hit' : 'miss'}`) });
    const answers = () => {
      for (let i = 0; i < 40; i++)
        expect(cache.workspace(large(i), programSource, testConfig)).toEqual(
          stackWorkspace(large(i), programSource, testConfig),
        );
    };
    answers();
    lookups.length = 0;
    // Again, as a resync would: the first Stacks' answers were kept (plain LRU would have let each go
    // for a later one, and miss all 40); the last ones found no room, not even for their spec's token.
    answers();
    expect(lookups[0]).toBe('stack_workspace hit');
    const hits = lookups.filter((l) => l.endsWith('hit')).length;
    expect(hits).toBeGreaterThan(1);
    expect(hits).toBeLessThan(40);
    expect(Object.values(cache.bytes()).reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(maxBytes);
  });

  it('keeps nothing of a spec larger than an eighth of its share: each sync computes its answers', () => {
    const lookups: string[] = [];
    const cache = new SyncCache({ maxBytes: 1024 * 1024, counted: (name, hit) => lookups.push(`${name} ${hit}`) });
    for (let n = 0; n < 2; n++)
      expect(cache.workspace(large(1), programSource, testConfig)).toEqual(
        stackWorkspace(large(1), programSource, testConfig),
      );
    expect(lookups).toEqual([]);
    expect(Object.values(cache.bytes()).reduce((a, b) => a + b, 0)).toBe(0);
  });
});

describe('responseJson', () => {
  const cache = new SyncCache();
  it('gives the bytes JSON.stringify gives, for any response, with frozen and unfrozen children', () => {
    const json = fc.jsonValue({ maxDepth: 3 });
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ maxLength: 5 }), json, { maxKeys: 3 }),
        fc.array(fc.tuple(json, fc.boolean()), { maxLength: 4 }),
        fc.option(fc.integer()),
        (status, kids, resync) => {
          const children = kids.map(([child, freeze]) => (freeze ? deepFreeze(structuredClone(child)) : child));
          const response = { status, children, resyncAfterSeconds: resync ?? undefined, finalized: undefined };
          expect(responseJson(response, cache)).toBe(JSON.stringify(response));
          expect(responseJson(response, cache)).toBe(JSON.stringify(response)); // and again, from the cache
        },
      ),
      { numRuns: 300 },
    );
  });

  it('remembers the JSON of frozen objects only', () => {
    const frozen = deepFreeze({ a: [1, 2] });
    expect(cache.jsonOf(frozen)).toBe('{"a":[1,2]}');
    const open = { a: 1 };
    expect(cache.jsonOf(open)).toBe('{"a":1}');
    open.a = 2;
    expect(cache.jsonOf(open)).toBe('{"a":2}');
  });
});
