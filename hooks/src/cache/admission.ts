import type { LRUCache } from 'lru-cache';

/**
 * How long an entry must go unasked before a new one may take its room ({@link hasRoomFor}): longer
 * than a resync period (600 s by default) times the replicas, so that an entry a replica is asked
 * for about once a resync or two counts as in use.
 */
export const IDLE_BEFORE_EVICTION_MS = 30 * 60_000;

/** What an entry of the sync's caches (sync-cache.ts, snapshot.ts) records: when it was last asked for. */
export interface Used {
  usedAt: number;
}

/**
 * Whether an LRU cache may take a new entry of `size` (its share of the bound: 1 for a cache
 * bounded by count, its bytes for one bounded by bytes): yes when it has room, else only when the
 * least recently used entries that would go to make room have each gone unasked `idleMs`.
 * Plain LRU evicts them whatever their age, and when the working set is larger than the cache
 * (10,000 Stacks over two replicas, each asked for once a resync in random order) every entry goes
 * before it is asked for again: no hits, and the cost of making, freezing and evicting an entry for
 * every request (docs/benchmarks.md, "Control plane"). Refusing newcomers while the entries are in
 * use keeps a fixed part of the working set instead, with hits in proportion to the cache's size.
 */
export function hasRoomFor<V extends Used>(
  cache: LRUCache<string, V>,
  size: number,
  now: number,
  idleMs: number,
): boolean {
  let slots = cache.max > 0 ? cache.size + 1 - cache.max : 0;
  let bytes = cache.maxSize > 0 ? cache.calculatedSize + size - cache.maxSize : 0;
  for (const key of cache.rkeys()) {
    if (slots <= 0 && bytes <= 0) return true;
    const entry = cache.peek(key);
    if (entry === undefined || now - entry.usedAt < idleMs) return false;
    slots--;
    bytes -= cache.info(key)?.size ?? 0;
  }
  return slots <= 0 && bytes <= 0;
}
