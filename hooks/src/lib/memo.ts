import { LRUCache } from 'lru-cache';
import { deepFreeze } from './json';

/**
 * Memoises a pure function of JSON data by content: the cache key is the JSON of everything the
 * function reads (`keyOf`; a string it returns is the key as is, for callers that already hold the
 * JSON of the large parts), so a hit returns exactly what a call would have. Results are frozen,
 * because they are shared between requests: a caller that tried to edit one would throw rather
 * than corrupt the next answer. Bounded (least recently used entries go first), so memory stays
 * flat however many Stacks there are. This is not state: forgetting an entry changes no answer.
 */
export function memoizeByContent<A extends unknown[], R>(fn: (...args: A) => R, keyOf: (...args: A) => unknown, max = 2048): (...args: A) => R {
  const cache = new LRUCache<string, { value: R }>({ max });
  return (...args: A): R => {
    const k = keyOf(...args);
    const key = typeof k === 'string' ? k : JSON.stringify(k);
    const hit = cache.get(key);
    if (hit) return hit.value;
    const value = deepFreeze(fn(...args));
    cache.set(key, { value });
    return value;
  };
}

const jsonOfFrozen = new WeakMap<object, string>();

/**
 * JSON.stringify, remembered for frozen objects (memoised results: they cannot change, so their
 * JSON cannot either). Serialising the unchanged workspace on every sync was a tenth of its cost.
 */
export function jsonOf(value: unknown): string {
  if (value === null || typeof value !== 'object' || !Object.isFrozen(value)) return JSON.stringify(value);
  let json = jsonOfFrozen.get(value);
  if (json === undefined) {
    json = JSON.stringify(value);
    jsonOfFrozen.set(value, json);
  }
  return json;
}

/**
 * The JSON of a hook response object whose `children` list may hold memoised objects: the same
 * bytes as JSON.stringify(response), with the children's JSON taken from jsonOf.
 */
export function responseJson(response: object): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(response)) {
    if (value === undefined || typeof value === 'function') continue;
    const json = key === 'children' && Array.isArray(value) ? `[${value.map((c) => (c === undefined ? 'null' : jsonOf(c))).join(',')}]` : JSON.stringify(value);
    parts.push(`${JSON.stringify(key)}:${json}`);
  }
  return `{${parts.join(',')}}`;
}

/**
 * Equality of two JSON values, key order included (so equal values serialise to equal bytes).
 * Anything but plain objects, arrays and primitives counts as unequal: a memo then just misses.
 */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!jsonEqual(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b) || !isPlainObject(a) || !isPlainObject(b)) return false;
  const keysA = Object.keys(a);
  const keysB = Object.keys(b);
  if (keysA.length !== keysB.length) return false;
  for (let i = 0; i < keysA.length; i++) {
    const key = keysA[i]!;
    if (key !== keysB[i] || !jsonEqual((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])) return false;
  }
  return true;
}

/** An object literal or JSON.parse result, of any realm (its prototype is an Object.prototype, or null). */
function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === null || Object.getPrototypeOf(proto) === null;
}

/**
 * Short tokens that stand for JSON values in memo keys, in place of the values' JSON. Each slot
 * (say, a Stack's namespace/name) remembers the last value seen there, as a frozen copy, and its
 * token; a value equal to it (jsonEqual) gets the same token. Comparing a freshly parsed spec with
 * the copy costs about half of serialising it, and the keys made with tokens are short to hash.
 * Tokens are never reused, so two different values never share one: a forgotten or overwritten
 * slot costs a memo miss, never a wrong answer. Bounded like the memos.
 */
export function contentTokens(max = 2048): (slot: string, value: unknown) => string {
  const slots = new LRUCache<string, { value: unknown; token: string }>({ max });
  let issued = 0;
  return (slot, value) => {
    const seen = slots.get(slot);
    if (seen !== undefined && jsonEqual(seen.value, value)) return seen.token;
    const token = `#${++issued}`;
    slots.set(slot, { value: deepFreeze(structuredClone(value)), token });
    return token;
  };
}
