import { LRUCache } from 'lru-cache';
import { deepFreeze } from './json';

/**
 * Memoises a pure function of JSON data by content: the cache key is the JSON of everything the
 * function reads (`keyOf`), so a hit returns exactly what a call would have. Results are frozen,
 * because they are shared between requests: a caller that tried to edit one would throw rather
 * than corrupt the next answer. Bounded (least recently used entries go first), so memory stays
 * flat however many Stacks there are. This is not state: forgetting an entry changes no answer.
 */
export function memoizeByContent<A extends unknown[], R>(fn: (...args: A) => R, keyOf: (...args: A) => unknown, max = 2048): (...args: A) => R {
  const cache = new LRUCache<string, { value: R }>({ max });
  return (...args: A): R => {
    const key = JSON.stringify(keyOf(...args));
    const hit = cache.get(key);
    if (hit) return hit.value;
    const value = deepFreeze(fn(...args));
    cache.set(key, { value });
    return value;
  };
}
