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
