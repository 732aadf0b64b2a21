import { createHash } from 'node:crypto';

/**
 * JSON with object keys sorted at every level: the same value always gives the same bytes.
 * Recursive for the first 256 levels, iterative past them, so a value of any depth is written
 * rather than overflowing the stack (the events hash what a request holds). The JSON is JSON.stringify's for JSON data: members whose value is
 * undefined are left out, and undefined in an array is written `null`.
 */
export function stableStringify(value: unknown): string {
  return stableJson(value, 0) ?? stableStringifyDeep(value);
}

/** How deep {@link stableJson} recurses before it leaves a value to the iterative writer. */
const RECURSIVE_DEPTH = 256;

/**
 * The same JSON, written recursively: no work list and no piece objects, so about twice as fast
 * on the StatefulSets the hooks hash for every Workspace (docs/benchmarks.md, "Control plane").
 * Undefined past RECURSIVE_DEPTH levels.
 */
function stableJson(value: unknown, depth: number): string | undefined {
  if (Array.isArray(value)) {
    if (depth >= RECURSIVE_DEPTH) return undefined;
    let out = '[';
    for (let i = 0; i < value.length; i++) {
      const item: unknown = value[i];
      const json = item === undefined || typeof item === 'function' ? 'null' : stableJson(item, depth + 1);
      if (json === undefined) return undefined;
      out += i > 0 ? `,${json}` : json;
    }
    return `${out}]`;
  }
  if (isRecord(value)) {
    if (depth >= RECURSIVE_DEPTH) return undefined;
    const keys = sortedKeys(Object.keys(value).filter((k) => value[k] !== undefined && typeof value[k] !== 'function'));
    let out = '';
    for (const key of keys) {
      const json = stableJson(value[key], depth + 1);
      if (json === undefined) return undefined;
      out += `,${JSON.stringify(key)}:${json}`;
    }
    return `{${out.slice(1)}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** {@link stableStringify} for a value of any depth: a work list instead of the call stack. */
function stableStringifyDeep(value: unknown): string {
  let out = '';
  // Values still to write, last first; a Piece is literal text (punctuation, a member's key).
  const todo: unknown[] = [value];
  while (todo.length > 0) {
    const next = todo.pop();
    if (next instanceof Piece) {
      out += next.text;
    } else if (Array.isArray(next)) {
      todo.push(CLOSE_ARRAY);
      for (let i = next.length - 1; i >= 0; i--) {
        const item: unknown = next[i];
        todo.push(item === undefined || typeof item === 'function' ? null : item);
        if (i > 0) todo.push(COMMA);
      }
      out += '[';
    } else if (isRecord(next)) {
      const keys = sortedKeys(Object.keys(next).filter((k) => next[k] !== undefined && typeof next[k] !== 'function'));
      todo.push(CLOSE_OBJECT);
      for (const [i, key] of [...keys.entries()].reverse()) {
        todo.push(next[key], new Piece(`${i > 0 ? ',' : ''}${JSON.stringify(key)}:`));
      }
      out += '{';
    } else {
      out += JSON.stringify(next) ?? 'null';
    }
  }
  return out;
}

/**
 * Keys in the order JSON.stringify wrote a copy made with sorted keys, which the hashes of earlier
 * versions were taken from: array-index keys (`"0"`, `"12"`) first in numeric order, as a
 * JavaScript object lists them, then the others sorted.
 */
function sortedKeys(keys: string[]): string[] {
  keys.sort();
  if (!keys.some(isArrayIndex)) return keys;
  const indices = keys.filter(isArrayIndex).sort((a, b) => Number(a) - Number(b));
  return [...indices, ...keys.filter((k) => !isArrayIndex(k))];
}

function isArrayIndex(key: string): boolean {
  return /^(?:0|[1-9][0-9]*)$/.test(key) && Number(key) < 4294967295;
}

class Piece {
  constructor(readonly text: string) {}
}
const COMMA = new Piece(',');
const CLOSE_ARRAY = new Piece(']');
const CLOSE_OBJECT = new Piece('}');

/** Short, stable hex digest of a value (sha256 of its stable JSON). */
export function shortHash(value: unknown, length = 10): string {
  return createHash('sha256').update(stableStringify(value)).digest('hex').slice(0, length);
}

/** The members of an object, or the items of an array keyed by index, in Object.keys order. */
function membersOf(value: object): [string, unknown][] {
  return Object.entries(value);
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Deep copy of JSON data. */
export function cloneJson<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}

/** Freezes a JSON value and everything in it (for values shared between requests); iterative, as above. */
export function deepFreeze<T>(value: T): T {
  const todo: unknown[] = [value];
  while (todo.length > 0) {
    const next = todo.pop();
    if (next === null || typeof next !== 'object' || Object.isFrozen(next)) continue;
    Object.freeze(next);
    for (const v of Object.values(next)) todo.push(v);
  }
  return value;
}

/**
 * How deep any value the hooks walk or copy may nest: a Stack's spec and a Program's program
 * (SpecInvalid past it), an agent's outputs (a failed update), the Stack's status carried over, the
 * children as last applied (a malformed request). Real values stay within about 15 levels (a pod
 * template's affinity rules); the limit keeps every recursive walk (JSON.stringify included) far
 * from the stack's end, however deep a free-form field the API server accepted goes.
 */
export const MAX_NESTING = 100;

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
  const pending: { value: object; depth: number }[] = [{ value, depth: 1 }];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (next.depth > max) return true;
    const children: unknown[] = Array.isArray(next.value) ? next.value : Object.values(next.value);
    for (let i = 0; i < children.length; i++) {
      const child = children[i];
      if (child !== null && typeof child === 'object') pending.push({ value: child, depth: next.depth + 1 });
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
  for (let frame = pending.pop(); frame !== undefined; frame = pending.pop()) {
    if (frame.depth > max) {
      const steps: string[] = [];
      for (let f: Frame | undefined = frame; f; f = f.parent) steps.push(f.step);
      steps.reverse();
      // The first steps say where to look; the rest of a 10,000-step path says nothing more.
      return steps.length > 8 ? `${steps.slice(0, 8).join('')}…` : steps.join('');
    }
    const isArray = Array.isArray(frame.value);
    for (const [key, child] of membersOf(frame.value)) {
      if (child !== null && typeof child === 'object') {
        pending.push({ value: child, depth: frame.depth + 1, step: isArray ? `[${key}]` : `.${key}`, parent: frame });
      }
    }
  }
  return undefined;
}

/**
 * Where a JSON value holds a key that Fastify's JSON parser (secure-json-parse) refuses, as the
 * path to it (keys, and indices of arrays), or undefined: a `__proto__` key, or a `constructor`
 * key whose value has a `prototype` key. A value written into an answer with such a key would come
 * back in every later request, each refused with a 400. Iterative, like the depth checks.
 */
export function prototypeKeyPath(value: unknown): (string | number)[] | undefined {
  interface Frame {
    value: unknown;
    step: string | number | undefined;
    parent: Frame | undefined;
  }
  const pathTo = (frame: Frame): (string | number)[] => {
    const steps: (string | number)[] = [];
    for (let f: Frame | undefined = frame; f?.step !== undefined; f = f.parent) steps.push(f.step);
    return steps.reverse();
  };
  const pending: Frame[] = [{ value, step: undefined, parent: undefined }];
  for (let frame = pending.pop(); frame !== undefined; frame = pending.pop()) {
    const next = frame.value;
    if (next === null || typeof next !== 'object') continue;
    const isArray = Array.isArray(next);
    for (const [key, child] of membersOf(next)) {
      const childFrame: Frame = { value: child, step: isArray ? Number(key) : key, parent: frame };
      if (
        !isArray &&
        (key === '__proto__' || (key === 'constructor' && isRecord(child) && Object.hasOwn(child, 'prototype')))
      )
        return pathTo(childFrame);
      pending.push(childFrame);
    }
  }
  return undefined;
}

/** Why such a key is refused, for messages that name it. */
export const PROTOTYPE_KEY_PROBLEM =
  "no key in a request to the hooks may be named __proto__, nor constructor with a prototype key in it (either could reach an object's prototype)";

/** A path as the messages write it: `outputs.a[0].b`. */
export function dottedPath(root: string, steps: readonly (string | number)[]): string {
  return steps.reduce<string>(
    (path, step) => (typeof step === 'number' ? `${path}[${step}]` : `${path}.${step}`),
    root,
  );
}

/** The message for a value nested deeper than MAX_NESTING (`what`: Stack, program, Stack output). */
export function tooDeepMessage(path: string, what: string): string {
  return `${path} is nested more than ${MAX_NESTING} levels deep; no ${what} needs that many, so flatten that value`;
}
