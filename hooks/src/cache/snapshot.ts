import { LRUCache } from 'lru-cache';
import { hasRoomFor, IDLE_BEFORE_EVICTION_MS } from './admission';

/**
 * Shape markers in a {@link JsonSnapshot}. They are objects private to this module, so no key, no
 * primitive and no value a caller holds can be taken for one.
 */
const OBJECT_MARK = Object.freeze({});
const ARRAY_MARK = Object.freeze({});
/** Stands for anything but plain objects, arrays and primitives: it matches nothing, so a cache just misses. */
const OPAQUE_MARK = Object.freeze({});

/**
 * A JSON value recorded as one flat list: primitives as they are, and for each object a marker, its
 * number of own keys, then each key followed by its value (for arrays: a marker, the length, the
 * items). The list holds only primitives and markers, so it is a private copy of the value, and
 * comparing a fresh value with it walks one side only: no second tree to read, no key list to make
 * for it. Two values with the same snapshot have the same JSON (key order included).
 */
export type JsonSnapshot = readonly unknown[];

export function snapshotJson(value: unknown): JsonSnapshot {
  const out: unknown[] = [];
  record(value, out);
  return out;
}

function record(value: unknown, out: unknown[]): void {
  if (value === null || typeof value !== 'object') {
    out.push(value);
  } else if (Array.isArray(value)) {
    out.push(ARRAY_MARK, value.length);
    for (let i = 0; i < value.length; i++) record(value[i], out);
  } else if (isPlainObject(value)) {
    const keys = Object.keys(value);
    out.push(OBJECT_MARK, keys.length);
    for (const key of keys) {
      out.push(key);
      record((value as Record<string, unknown>)[key], out);
    }
  } else {
    out.push(OPAQUE_MARK);
  }
}

/** True when `value` is, value by value and key by key in the same order, the value snapshotted. */
export function matchesSnapshot(value: unknown, snapshot: JsonSnapshot): boolean {
  return matchFrom(value, snapshot, 0) === snapshot.length;
}

/** Matches `value` against the snapshot from position `at`: the position after it, or -1. */
function matchFrom(value: unknown, snapshot: JsonSnapshot, at: number): number {
  if (value === null || typeof value !== 'object') return snapshot[at] === value ? at + 1 : -1;
  let i = at + 2;
  if (Array.isArray(value)) {
    if (snapshot[at] !== ARRAY_MARK || snapshot[at + 1] !== value.length) return -1;
    for (let k = 0; k < value.length && i !== -1; k++) i = matchFrom(value[k], snapshot, i);
    return i;
  }
  // Own keys only (Object.keys): a polluted Object.prototype must not lend a value a key it lacks.
  if (snapshot[at] !== OBJECT_MARK || !isPlainObject(value)) return -1;
  const keys = Object.keys(value);
  if (snapshot[at + 1] !== keys.length) return -1;
  for (let k = 0; k < keys.length && i !== -1; k++) {
    const key = keys[k]!;
    i = snapshot[i] === key ? matchFrom((value as Record<string, unknown>)[key], snapshot, i + 1) : -1;
  }
  return i;
}

/** An object literal or JSON.parse result, of any realm (its prototype is an Object.prototype, or null). */
function isPlainObject(value: object): boolean {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null || Object.getPrototypeOf(proto) === null;
}

/**
 * What a snapshot holds, in bytes, as an estimate of the heap it takes: a slot of the list (8 bytes,
 * a pointer) per entry, and each string's characters with V8's header (strings keep the request's
 * copies alive). Measured against the heap: docs/benchmarks.md.
 */
export function snapshotBytes(snapshot: JsonSnapshot): number {
  let bytes = 8 * snapshot.length;
  for (const entry of snapshot) if (typeof entry === 'string') bytes += 16 + entry.length;
  return bytes;
}

/** A {@link contentTokens} function, with the bytes its snapshots hold ({@link snapshotBytes}). */
export interface ContentTokens {
  (slot: string, value: unknown): string | undefined;
  bytes(): number;
}

/**
 * Short tokens that stand for JSON values in cache keys, in place of the values' JSON. Each slot
 * (say, a Stack's namespace/name) remembers a snapshot of the last value seen there and its token;
 * a value matching the snapshot gets the same token: matching is cheaper than serialising, and
 * the keys made with tokens are short to hash (docs/benchmarks.md).
 * Tokens are never reused, so two different values never share one: a forgotten or overwritten
 * slot costs a cache miss, never a wrong answer. Bounded by the bytes of the snapshots, `maxBytes`
 * (least recently used slots go first, for a new slot only when they have gone unasked a while:
 * ./admission.ts; a new slot that finds no room gets no token).
 *
 * A value gets no token (undefined) and nothing is recorded when its snapshot would take more than
 * an eighth of `maxBytes` (a token that could not be remembered would key answers no one asks for
 * again), or when `admit` refuses it. `admit` vets a value the slot has not seen (it is not asked
 * again while the value stays the same). Matching a value against a snapshot stops where the
 * snapshot ends, so a check of nesting depth here also bounds the matching of any later value.
 */
export function contentTokens(
  options: { maxBytes?: number; admit?: (value: unknown) => boolean; now?: () => number } = {},
): ContentTokens {
  const maxSize = options.maxBytes ?? 16 * 1024 * 1024;
  const maxEntrySize = Math.max(1, Math.floor(maxSize / 8));
  const clock = options.now ?? Date.now;
  const slots = new LRUCache<string, { snapshot: JsonSnapshot; token: string; bytes: number; usedAt: number }>({
    maxSize,
    maxEntrySize,
    sizeCalculation: (entry) => entry.bytes,
  });
  let issued = 0;
  const tokenOf = (slot: string, value: unknown): string | undefined => {
    const seen = slots.get(slot);
    const now = clock();
    if (seen !== undefined && matchesSnapshot(value, seen.snapshot)) {
      seen.usedAt = now;
      return seen.token;
    }
    if (options.admit && !options.admit(value)) return undefined;
    const snapshot = snapshotJson(value);
    const bytes = Math.max(1, snapshotBytes(snapshot) + 2 * slot.length);
    // A slot new to a full cache waits for room (./admission.ts); a slot held takes its new value.
    if (bytes > maxEntrySize || (seen === undefined && !hasRoomFor(slots, bytes, now, IDLE_BEFORE_EVICTION_MS))) {
      slots.delete(slot);
      return undefined;
    }
    const token = `#${++issued}`;
    slots.set(slot, { snapshot, token, bytes, usedAt: now });
    return token;
  };
  return Object.assign(tokenOf, { bytes: () => slots.calculatedSize });
}
