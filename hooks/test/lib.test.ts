/**
 * The hooks' small libraries: how deep JSON nests, stable JSON, the strategic merge of a user's pod
 * template, control characters escaped in conditions, observed times and durations.
 */
import fc from 'fast-check';
import { setConditions } from '../src/lib/conditions';
import { parseDuration } from '../src/lib/duration';
import { deepFreeze, pathNestedDeeperThan, prototypeKeyPath, stableStringify } from '../src/lib/json';
import { strategicMerge } from '../src/lib/merge';
import { hasControlCharacter } from './answers';
import { printable } from '../src/lib/printable';
import { knownTime, observedDeadline, observedTime, resyncAfter } from '../src/lib/time';

/** An array in an array … `depth` levels deep. */
function nested(depth: number): unknown {
  let value: unknown = 'x';
  for (let i = 0; i < depth; i++) value = [value, { k: 1 }];
  return value;
}

describe('stableStringify', () => {
  /** What it used to be: JSON.stringify of a copy with keys sorted (recursive, for small values). */
  const sortKeys = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sortKeys)
      : v !== null && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
              .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
          )
        : v;

  it("is JSON.stringify's JSON with keys sorted, for any JSON value (undefined members too)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.option(fc.constant(undefined)), (value, hole) => {
        expect(stableStringify(value)).toBe(JSON.stringify(sortKeys(value)));
        const withHoles = { b: value, a: hole, list: [hole, value] };
        expect(stableStringify(withHoles)).toBe(JSON.stringify(sortKeys(withHoles)));
      }),
    );
  });

  it('writes the same JSON on either side of the depth where it stops recursing', () => {
    for (const depth of [127, 128, 129, 255, 256, 257, 300])
      expect(stableStringify(nested(depth))).toBe(`${'['.repeat(depth)}"x"${',{"k":1}]'.repeat(depth)}`);
  });

  it('writes and freezes values 100,000 levels deep without overflowing the stack', () => {
    const deep = nested(100_000);
    expect(stableStringify(deep)).toBe(`${'['.repeat(100_000)}"x"${',{"k":1}]'.repeat(100_000)}`);
    expect(Object.isFrozen(deepFreeze(deep))).toBe(true);
  });
});

describe('prototypeKeyPath', () => {
  it('finds a __proto__ key, or a constructor holding prototype, at any depth, and nothing else', () => {
    expect(prototypeKeyPath(JSON.parse('{"a":[{"b":1},{"__proto__":{}}]}'))).toEqual(['a', 1, '__proto__']);
    expect(prototypeKeyPath({ a: { constructor: { prototype: 1 } } })).toEqual(['a', 'constructor']);
    expect(prototypeKeyPath({ constructor: 'c', toString: { prototype: 1 }, list: ['__proto__'] })).toBeUndefined();
  });
});

describe('pathNestedDeeperThan', () => {
  /** Objects and arrays on the deepest path (a plain recursive reference, for small values). */
  const depthOf = (v: unknown): number =>
    v !== null && typeof v === 'object' ? 1 + Math.max(0, ...Object.values(v).map(depthOf)) : 0;
  /** Follows a reported path (`root.key[0]…`) as far as it is spelt out. */
  const follow = (v: unknown, path: string, root: string): number => {
    let depth = 1;
    for (const [, key, index] of path
      .slice(root.length)
      .replace(/…$/, '')
      .matchAll(/\.([^.[]+)|\[(\d+)\]/g)) {
      v = (v as Record<string, unknown>)[key ?? index!];
      expect(v !== null && typeof v === 'object').toBe(true);
      depth++;
    }
    return depth;
  };

  it('finds a place deeper than the limit exactly when there is one, and its path leads there', () => {
    fc.assert(
      // Keys a path spells unambiguously; objects with arrays inside, as fc.object makes them.
      fc.property(
        fc.object({
          key: fc.stringMatching(/^[a-z]{1,3}$/),
          maxDepth: 6,
          values: [fc.integer(), fc.string(), fc.constant(null), fc.boolean()],
        }),
        fc.integer({ min: 1, max: 6 }),
        (value, max) => {
          const path = pathNestedDeeperThan(value, max, 'spec');
          expect(path !== undefined).toBe(depthOf(value) > max);
          if (path !== undefined) {
            const steps = follow(value, path, 'spec');
            // The path is cut after eight steps; uncut, it ends just past the limit.
            expect(path.endsWith('…') ? steps === 8 : steps === max + 1).toBe(true);
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});

/** The parts of a pod template the strategicMerge test merges. */
interface PodPatch {
  spec: {
    containers: { name: string; env?: { name: string; value?: string }[]; args?: string[] }[];
    volumes?: { name: string; emptyDir: object }[];
    nodeSelector?: Record<string, string>;
    tolerations?: { key: string }[];
  };
}

describe('strategicMerge', () => {
  it('changes neither input, and its result shares nothing with the patch', () => {
    const base: PodPatch = {
      spec: {
        containers: [{ name: 'pulumi', env: [{ name: 'A', value: '1' }] }],
        volumes: [{ name: 'share', emptyDir: {} }],
      },
    };
    const patch: PodPatch = {
      spec: {
        containers: [
          { name: 'pulumi', env: [{ name: 'B', value: '2' }] },
          { name: 'sidecar', args: ['x'] },
        ],
        nodeSelector: { zone: 'a' },
        tolerations: [{ key: 'k' }],
      },
    };
    const before = { base: structuredClone(base), patch: structuredClone(patch) };
    const merged = strategicMerge(base, patch);
    expect(base).toEqual(before.base);
    expect(patch).toEqual(before.patch);
    const [pulumi, sidecar] = merged.spec.containers;
    const { nodeSelector, tolerations } = merged.spec;
    if (!pulumi?.env || !sidecar?.args || !nodeSelector || !tolerations?.[0])
      throw new Error(`the merge lost a part of its inputs: ${JSON.stringify(merged)}`);
    sidecar.args.push('y');
    nodeSelector.zone = 'b';
    tolerations[0].key = 'changed';
    pulumi.env.push({ name: 'C' });
    expect(patch).toEqual(before.patch);
    expect(base).toEqual(before.base);
  });
});

describe('strategicMerge with user keys named after Object.prototype members', () => {
  it('merges a list under such a key as a list without a merge key (replaced), and pollutes nothing', () => {
    const merged = strategicMerge(
      { constructor: [{ name: 'a' }], toString: [1] },
      { constructor: [{ name: 'b' }], toString: [2] },
    );
    expect(merged).toEqual({ constructor: [{ name: 'b' }], toString: [2] });
    expect(strategicMerge({}, { constructor: { a: 1 }, valueOf: 'v' })).toEqual({
      constructor: { a: 1 },
      valueOf: 'v',
    });
    expect(({} as Record<string, unknown>).name).toBeUndefined();
  });
});

describe('printable', () => {
  it('escapes C0, DEL and C1 control characters, and nothing else', () => {
    expect(printable('a\u001b[31mred\u0007\r\n\tb\u0000\u007f\u0085')).toBe(
      'a\\x1b[31mred\\x07\\r\\n\\tb\\x00\\x7f\\x85',
    );
    expect(printable('é ✓ \u00a0 \\n "quoted"')).toBe('é ✓ \u00a0 \\n "quoted"');
  });

  it('leaves no control character, changes text without one not at all, and is idempotent', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: fc.integer({ min: 0, max: 0x2ff }).map((c) => String.fromCharCode(c)) }),
        (text) => {
          const once = printable(text);
          return !hasControlCharacter(once) && printable(once) === once && (hasControlCharacter(text) || once === text);
        },
      ),
    );
  });

  it('is applied to the message of every condition the Workspace and Update controllers write', () => {
    const [c] = setConditions(
      [],
      [{ type: 'Ready', status: 'False', reason: 'Failed', message: 'npm ERR!\n\u001b[2Jgone' }],
      1,
      new Date('2026-11-22T10:00:00Z'),
    );
    expect(c?.message).toBe('npm ERR!\\n\\x1b[2Jgone');
  });
});

describe('observed times', () => {
  const now = new Date('2026-11-22T10:00:00Z');

  it('are known when RFC 3339, from 1970 on, and at most a day ahead of the clock', () => {
    for (const t of [
      '2026-11-22T10:00:00Z',
      '2026-11-23T10:00:00Z',
      '1970-01-01T00:00:00Z',
      '2026-11-22T11:00:00.123456+01:00',
    ])
      expect(observedTime(t, now)).toBe(Date.parse(t));
    expect(knownTime('2026-11-22T09:00:00Z', now)).toBe('2026-11-22T09:00:00Z');
    for (const t of [
      '2026-11-23T10:00:01Z', // more than a day ahead
      '9999-12-31T23:59:59Z',
      '+275760-09-13T00:00:00Z', // JavaScript's last date, not RFC 3339
      '1969-12-31T23:59:59Z',
      'Sun, 22 Nov 2026 10:00:00 GMT', // a date, but not RFC 3339
      '2026-11-22',
      '2026-13-45T10:00:00Z',
      '',
      undefined,
      1_795_000_000_000,
    ])
      expect([t, observedTime(t, now), knownTime(t, now)]).toEqual([t, undefined, undefined]);
  });

  it('as deadlines may be any RFC 3339 time from 1970 on', () => {
    expect(observedDeadline('9999-12-31T23:59:59Z')).toBe(Date.parse('9999-12-31T23:59:59Z'));
    expect(observedDeadline('+275760-09-13T00:00:00Z')).toBeUndefined();
    expect(observedDeadline('1969-12-31T23:59:59Z')).toBeUndefined();
  });

  it('never ask for a wait longer than a day, nor shorter than a second', () => {
    expect([8_638_204_122_217, 86_401, 86_400, 59.2, 0, -5, Infinity].map(resyncAfter)).toEqual([
      86_400, 86_400, 86_400, 60, 1, 1, 86_400,
    ]);
    expect([undefined, NaN].map(resyncAfter)).toEqual([undefined, undefined]);
  });
});

describe('parseDuration', () => {
  it('reads Go durations up to the longest Go has, and refuses longer ones as Go does', () => {
    expect(parseDuration('1h30m')).toBe(5_400_000);
    expect(parseDuration('2562047h47m16.854s')).toBe(9_223_372_036_854);
    for (const d of ['2562048h', `1${'0'.repeat(400)}h`, '153722867m281s'])
      expect([d, parseDuration(d)]).toEqual([d, undefined]);
  });
});
