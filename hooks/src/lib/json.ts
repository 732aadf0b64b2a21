import { createHash } from 'node:crypto';

/** JSON with object keys sorted at every level: the same value always gives the same bytes. */
export function stableStringify(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key];
      if (v !== undefined) out[key] = sortKeys(v);
    }
    return out;
  }
  return value;
}

/** Short, stable hex digest of a value (sha256 of its stable JSON). */
export function shortHash(value: unknown, length = 10): string {
  return createHash('sha256').update(stableStringify(value)).digest('hex').slice(0, length);
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Deep copy of JSON data. */
export function cloneJson<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/** Freezes a JSON value and everything in it (for values shared between requests). */
export function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}

/**
 * Where a JSON value nests more than `max` objects or arrays deep, as a path from `root`
 * (`spec.config.x.value[0]…`), or undefined. Iterative, so any depth is measured rather than
 * overflowing the stack: the API server stores JSON nested up to 10,000 levels in free-form fields,
 * and the hooks' other walks over a spec (cache snapshots, merges, freezing) are recursive.
 */
export function pathNestedDeeperThan(value: unknown, max: number, root: string): string | undefined {
  return nestedDeeperThan(value, max) ? pathDeeperThan(value, max, root) : undefined;
}

/** Whether a JSON value nests more than `max` deep: depths only, no path (cheaper than the path). */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  const values: object[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const next = values.pop()!;
    const depth = depths.pop()!;
    if (depth > max) return true;
    const children: unknown[] = Array.isArray(next) ? next : Object.values(next);
    for (let i = 0; i < children.length; i++) {
      const child = children[i];
      if (child !== null && typeof child === 'object') {
        values.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/** The path to the first place deeper than `max` (only for a value known to have one). */
function pathDeeperThan(value: unknown, max: number, root: string): string | undefined {
  interface Frame {
    value: object;
    depth: number;
    step: string;
    parent: Frame | undefined;
  }
  if (value === null || typeof value !== 'object') return undefined;
  const pending: Frame[] = [{ value, depth: 1, step: root, parent: undefined }];
  while (pending.length > 0) {
    const frame = pending.pop()!;
    if (frame.depth > max) {
      const steps: string[] = [];
      for (let f: Frame | undefined = frame; f; f = f.parent) steps.push(f.step);
      steps.reverse();
      // The first steps say where to look; the rest of a 10,000-step path says nothing more.
      return steps.length > 8 ? `${steps.slice(0, 8).join('')}…` : steps.join('');
    }
    const isArray = Array.isArray(frame.value);
    for (const key of Object.keys(frame.value)) {
      const child: unknown = (frame.value as Record<string, unknown>)[key];
      if (child !== null && typeof child === 'object') {
        pending.push({ value: child, depth: frame.depth + 1, step: isArray ? `[${key}]` : `.${key}`, parent: frame });
      }
    }
  }
  return undefined;
}
