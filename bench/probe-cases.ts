/**
 * The hostile-input probe's requests: real request bodies (examples/hooks/*.json and the captured
 * steady-state sync) mutated with knowledge of their structure. Case `i` of seed `s` is built from
 * a PRNG seeded with (s, i) alone, so any case is rebuilt from the two numbers the report prints.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

export interface ProbeCase {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  contentType: string | undefined;
  body: Buffer | undefined;
  /** What was done to the real body, for the report. */
  mutation: string;
  /**
   * Over the body limit: the server answers 413 and may close the connection while the body is
   * still being sent, so the client can see a reset instead of the answer.
   */
  oversized?: true;
}

export const HOOK_ROUTES = [
  '/stack/customize',
  '/stack/sync',
  '/stack/finalize',
  '/program/sync',
  '/workspace/sync',
  '/update/customize',
  '/update/sync',
] as const;
export const PROBE_ROUTES = ['/healthz', '/readyz', '/metrics'] as const;

/** The hook server's default BODY_LIMIT_BYTES; an oversized case is just over it. */
export const BODY_LIMIT = 8 * 1024 * 1024;

const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'];
const CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
  'application/json-patch+json',
  'application/octet-stream',
  'application/jsonx',
  '',
];

/** mulberry32: small, fast, and the same numbers on every platform. */
export function prng(seed: number, index: number): () => number {
  let a = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(index >>> 0, 0x85ebca6b) ^ 0x5bd1e995) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Rand = () => number;
const pick = <T>(rand: Rand, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const intIn = (rand: Rand, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));

export interface SeedBody {
  name: string;
  route: (typeof HOOK_ROUTES)[number];
  value: unknown;
}

function routeOf(file: string): SeedBody['route'] {
  if (file.startsWith('stack-customize')) return '/stack/customize';
  if (file.startsWith('stack-finalize')) return '/stack/finalize';
  if (file.startsWith('program-')) return '/program/sync';
  if (file.startsWith('workspace-')) return '/workspace/sync';
  if (file.startsWith('update-')) return '/update/sync';
  return '/stack/sync';
}

/** The real bodies the mutations start from. */
export function loadSeedBodies(repoRoot: string): SeedBody[] {
  const dir = join(repoRoot, 'examples', 'hooks');
  const seeds: SeedBody[] = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f, route: routeOf(f), value: JSON.parse(readFileSync(join(dir, f), 'utf8')) as unknown }));
  const captured = JSON.parse(readFileSync(join(repoRoot, 'bench', 'requests', 'steady-state-sync.json'), 'utf8')) as {
    request: unknown;
  };
  seeds.push({ name: 'steady-state-sync.json', route: '/stack/sync', value: captured.request });
  return seeds;
}

/** Nested arrays or objects `depth` levels deep, as JSON text (built as text: no recursion). */
export function deepJson(depth: number, shape: 'array' | 'object'): string {
  return shape === 'array' ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

function hostileValue(rand: Rand): unknown {
  switch (intIn(rand, 0, 13)) {
    case 0:
      return null;
    case 1:
      return pick(rand, [0, -1, 1e308, -0, 2 ** 53 + 1, 0.5]);
    case 2:
      return rand() < 0.5;
    case 3:
      return [];
    case 4:
      return {};
    case 5:
      return pick(rand, PROTOTYPE_NAMES);
    case 6:
      return 'x'.repeat(intIn(rand, 1, 4) * 256 * 1024); // huge string
    case 7:
      return '\u0000\ud800\uffff"\\/<>&';
    case 8:
      return ' ';
    case 9:
      return [pick(rand, PROTOTYPE_NAMES), null, {}];
    case 10:
      return Object.fromEntries(PROTOTYPE_NAMES.map((n) => [n, n]));
    case 11:
      return '../../../../etc/passwd';
    case 12:
      return 'a'.repeat(300); // longer than any Kubernetes name
    default:
      return '9'.repeat(400); // a number too long for anything
  }
}

/** Sets an own property, `__proto__` included (plain assignment would set the prototype). */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A random walk from the root: the containers on the way, the last one's key. */
function randomSpot(
  rand: Rand,
  root: unknown,
): { holder: Record<string, unknown> | unknown[]; key: string } | undefined {
  let holder: Record<string, unknown> | unknown[] | undefined;
  let key = '';
  let node = root;
  for (let depth = 0; depth < 40; depth++) {
    if (node === null || typeof node !== 'object') break;
    const keys = Array.isArray(node) ? node.map((_, i) => String(i)) : Object.keys(node);
    if (keys.length === 0) break;
    holder = node as Record<string, unknown>;
    key = pick(rand, keys);
    node = (node as Record<string, unknown>)[key];
    if (rand() < 0.2) break; // stop at every depth, not only at the leaves
  }
  return holder ? { holder, key } : undefined;
}

/** The fields named by kind and name, where prototype names as values are most likely to hurt. */
const NAMED_FIELDS: string[][] = [
  ['parent', 'kind'],
  ['parent', 'metadata', 'name'],
  ['parent', 'metadata', 'namespace'],
  ['object', 'kind'],
  ['object', 'metadata', 'name'],
  ['parent', 'spec', 'programRef', 'name'],
  ['parent', 'spec', 'stack'],
  ['controller', 'kind'],
];

function structuralMutation(rand: Rand, body: unknown): { value: unknown; what: string } {
  const copy = structuredClone(body);
  const op = intIn(rand, 0, 6);
  if (op === 6) {
    // A prototype name as the value of a kind or name field, or as a key of a children map.
    const fieldPath = pick(rand, NAMED_FIELDS);
    let node = copy as Record<string, unknown>;
    for (const k of fieldPath.slice(0, -1)) {
      if (node[k] === null || typeof node[k] !== 'object') return { value: copy, what: 'unchanged' };
      node = node[k] as Record<string, unknown>;
    }
    const name = pick(rand, PROTOTYPE_NAMES);
    setOwn(node, fieldPath.at(-1)!, name);
    return { value: copy, what: `${fieldPath.join('.')} = ${name}` };
  }
  const spot = randomSpot(rand, copy);
  if (!spot) return { value: copy, what: 'unchanged' };
  const { holder, key } = spot;
  switch (op) {
    case 0:
    case 1: {
      const v = hostileValue(rand);
      if (Array.isArray(holder)) holder[Number(key)] = v;
      else setOwn(holder, key, v);
      return { value: copy, what: `replace ${key}` };
    }
    case 2:
      if (Array.isArray(holder)) holder.splice(Number(key), 1);
      else delete holder[key];
      return { value: copy, what: `delete ${key}` };
    case 3:
      if (Array.isArray(holder)) holder.push(...Array.from({ length: intIn(rand, 1, 200) }, () => holder[Number(key)]));
      else setOwn(holder, `${key}${key}`, holder[key]);
      return { value: copy, what: `duplicate ${key}` };
    case 4: {
      // A prototype name as a key, the value what was there.
      if (Array.isArray(holder)) return { value: copy, what: 'unchanged' };
      const name = pick(rand, PROTOTYPE_NAMES);
      setOwn(holder, name, rand() < 0.5 ? holder[key] : { prototype: { polluted: true } });
      return { value: copy, what: `key ${name} beside ${key}` };
    }
    default: {
      // Wrong container type: an object for an array and the other way round.
      const v: unknown = Array.isArray(holder) ? holder[Number(key)] : holder[key];
      const swapped = Array.isArray(v) ? { ...v } : v !== null && typeof v === 'object' ? Object.values(v) : [v];
      if (Array.isArray(holder)) holder[Number(key)] = swapped;
      else setOwn(holder, key, swapped);
      return { value: copy, what: `swap container ${key}` };
    }
  }
}

/** Text-level damage: what a JSON value cannot express. */
function textMutation(rand: Rand, text: string): { body: Buffer; what: string } {
  switch (intIn(rand, 0, 6)) {
    case 0: {
      // A duplicate key: the same name twice in one object, the second a hostile value.
      const keys = [...text.slice(0, 200_000).matchAll(/"([A-Za-z]+)":/g)];
      if (keys.length === 0) return { body: Buffer.from(text), what: 'unchanged' };
      const m = pick(rand, keys);
      const dup = `"${m[1]}":${JSON.stringify(hostileValue(rand)) ?? 'null'},`;
      return { body: Buffer.from(text.slice(0, m.index) + dup + text.slice(m.index)), what: `duplicate key ${m[1]}` };
    }
    case 1:
      return { body: Buffer.from(text.slice(0, intIn(rand, 0, text.length - 1))), what: 'truncated JSON' };
    case 2: {
      // Invalid UTF-8: a lone continuation byte, an overlong encoding, a truncated sequence.
      const bytes = Buffer.from(text);
      const bad = pick(rand, [[0xff], [0x80], [0xc0, 0xaf], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80]]);
      const at = intIn(rand, 0, bytes.length - 1);
      return {
        body: Buffer.concat([bytes.subarray(0, at), Buffer.from(bad), bytes.subarray(at)]),
        what: 'invalid UTF-8',
      };
    }
    case 3:
      return { body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]), what: 'BOM' };
    case 4: {
      // A `__proto__` key spelt with escapes, inserted after a random `{`.
      const at = text.indexOf('{', intIn(rand, 0, text.length - 1));
      if (at < 0) return { body: Buffer.from(text), what: 'unchanged' };
      const key = pick(rand, ['"__proto__"', '"\\u005f_proto__"', '"constructor"', '"__pro\\u0074o__"']);
      const ins = `${key}:{"prototype":{"polluted":true}}${text[at + 1] === '}' ? '' : ','}`;
      return { body: Buffer.from(text.slice(0, at + 1) + ins + text.slice(at + 1)), what: `escaped key ${key}` };
    }
    case 5:
      return {
        body: Buffer.from(pick(rand, ['null', '[]', '"x"', '1', 'true', '{}', '', ' ', '{"a":1}{"a":1}'])),
        what: 'other top level',
      };
    default: {
      // Control characters and NUL in the text.
      const at = intIn(rand, 0, text.length - 1);
      return {
        body: Buffer.from(text.slice(0, at) + '\u0000\u0001\u001f' + text.slice(at)),
        what: 'control characters',
      };
    }
  }
}

/** A body nested `depth` levels deep at a random place of a real body (or as the body itself). */
export function nestingCase(rand: Rand, seeds: readonly SeedBody[], depth: number): ProbeCase {
  const seed = pick(rand, seeds);
  const shape = rand() < 0.5 ? 'array' : 'object';
  const deep = deepJson(depth, shape);
  let text: string;
  if (rand() < 0.3) text = deep;
  else {
    const copy = structuredClone(seed.value);
    const spot = randomSpot(rand, copy);
    const marker = 'probe-deep-nesting-goes-here';
    if (spot) {
      if (Array.isArray(spot.holder)) spot.holder[Number(spot.key)] = marker;
      else setOwn(spot.holder, spot.key, marker);
    }
    text = JSON.stringify(copy).replace(`"${marker}"`, deep);
  }
  return {
    method: 'POST',
    path: seed.route,
    contentType: 'application/json',
    body: Buffer.from(text),
    mutation: `${depth} levels of ${shape}s in ${seed.name}`,
  };
}

/** Case `index` of `seed`: the same two numbers always give the same request. */
export function probeCase(seed: number, index: number, seeds: readonly SeedBody[]): ProbeCase {
  const rand = prng(seed, index);
  const base = pick(rand, seeds);
  // Mostly the body's own route; sometimes another hook's, a probe, or no route at all.
  const r = rand();
  const path =
    r < 0.8
      ? base.route
      : r < 0.9
        ? pick(rand, HOOK_ROUTES)
        : r < 0.95
          ? pick(rand, PROBE_ROUTES)
          : pick(rand, [
              '/stack',
              '/stack/sync/',
              '/stack/sync?x=1&x=2',
              '/%00',
              '/stack/%2e%2e/program/sync',
              '/__proto__',
            ]);
  const kind = rand();
  if (kind < 0.005) {
    const size = BODY_LIMIT + intIn(rand, 1, 64 * 1024);
    return {
      method: 'POST',
      path,
      contentType: 'application/json',
      body: Buffer.alloc(size, 0x20),
      mutation: `oversized ${size} B`,
      oversized: true,
    };
  }
  if (kind < 0.02) return nestingCase(rand, seeds, intIn(rand, 1_000, 20_000));
  if (kind < 0.07) {
    const method = pick(rand, ['GET', 'PUT', 'DELETE'] as const);
    return {
      method,
      path,
      contentType: 'application/json',
      body: method === 'GET' ? undefined : Buffer.from('{}'),
      mutation: `method ${method}`,
    };
  }
  let value = base.value;
  const whats: string[] = [];
  // One to three structural mutations, then maybe damage to the text.
  for (let n = intIn(rand, 1, 3); n > 0; n--) {
    const m = structuralMutation(rand, value);
    value = m.value;
    whats.push(m.what);
  }
  let body: Buffer = Buffer.from(JSON.stringify(value) ?? 'null');
  if (rand() < 0.3) {
    const t = textMutation(rand, body.toString());
    body = t.body;
    whats.push(t.what);
  }
  let contentType: string | undefined = 'application/json';
  if (rand() < 0.08) {
    contentType = pick(rand, CONTENT_TYPES) || undefined;
    whats.push(`content type ${contentType ?? 'none'}`);
  }
  return { method: 'POST', path, contentType, body, mutation: `${base.name}: ${whats.join('; ')}` };
}

/** The soak's fixed mix: the real bodies unchanged, each to its own route, in turn. */
export function soakCase(index: number, seeds: readonly SeedBody[]): ProbeCase {
  const seed = seeds[index % seeds.length]!;
  return {
    method: 'POST',
    path: seed.route,
    contentType: 'application/json',
    body: Buffer.from(JSON.stringify(seed.value)),
    mutation: `soak ${seed.name}`,
  };
}
