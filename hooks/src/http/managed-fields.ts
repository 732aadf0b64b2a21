import { randomUUID } from 'node:crypto';

/**
 * Parses a Metacontroller request without building its objects' `metadata.managedFields`.
 *
 * Every object Metacontroller sends carries the API server's managed fields, and the hooks never
 * read them. Yet they are a third of a Stack's sync request and half of the time JSON.parse takes
 * over it (docs/benchmarks.md): their keys (`f:spec`, `k:{"name":"agent"}`) are all different, so
 * each one is a new string and each object a new shape.
 *
 * Each `"managedFields":[` in the text is found with indexOf, and the array after it is matched by
 * one sticky regular expression that accepts exactly the JSON of such an array, written compactly
 * as Go's encoder writes it: objects whose values are strings or such objects, at most
 * {@link MAX_DEPTH} deep. An array it matches is replaced by a marker string, and the shorter text
 * is parsed. The result is used only if every marker ended up as the `metadata.managedFields` of
 * one of the request's objects (its controller, parent or object, and those in children, related
 * and attachments), which are then left undefined. A marker anywhere else means the key was the
 * user's (a Program can hold `kubectl get -o yaml` output, managed fields included), and the caller
 * parses the whole text instead, as it does when nothing was cut or the shorter text is not JSON.
 *
 * Why a result is JSON.parse's, less those fields: the shorter text agrees with the whole one up
 * to the first marker, so a parser that takes the marker as a value would take the array there as
 * one too (it is valid JSON: the expression accepts nothing else), and both go on from the same
 * state. So when the shorter text parses, the whole text parses to the same values but for the
 * markers; undefined (nothing cut, or no result) leaves the whole text, and its errors, to the
 * caller's JSON.parse. The expression has no ambiguous repetition, so it takes time linear in the
 * text. managed-fields.test.ts compares results with JSON.parse's on generated bodies and after
 * every single-character edit of an array.
 */
export function parseWithoutManagedFields(text: string): unknown {
  const cut = withoutManagedFields(text);
  if (cut === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(cut.text);
  } catch {
    return undefined;
  }
  return clearMarkers(parsed) === cut.markers ? parsed : undefined;
}

/** Nesting allowed in one managed-fields entry; deeper arrays are left in the text and parsed. */
export const MAX_DEPTH = 32;

const KEY = '"managedFields":[';

// Random per process, so no request can hold it: a marker is only ever one this process wrote.
const MARKER = `managed fields not parsed ${randomUUID()}`;
const MARKER_JSON = JSON.stringify(MARKER);

/** A JSON string: no raw control characters, only JSON's escapes; unrolled, so never ambiguous. */
const STRING = String.raw`"[^"\\\x00-\x1f]*(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*)*"`;

/**
 * A managed-fields array: `[` objects `]`, each member `"key":` a string or an object one level less
 * deep. A member is followed by `,` and another member, or by the closing `}` (lookaheads, so a
 * trailing comma fails); the innermost level only allows `{}`, the leaves of `fieldsV1`.
 */
const ARRAY = (() => {
  let object = String.raw`\{\}`;
  for (let depth = 1; depth <= MAX_DEPTH; depth++)
    object = String.raw`\{(?:${STRING}:(?:${STRING}|${object})(?:,(?=")|(?=\})))*\}`;
  return new RegExp(String.raw`\[(?:${object}(?:,(?=\{)|(?=\])))*\]`, 'y');
})();

/** The text with every matching managed-fields array replaced by the marker, or undefined if none. */
function withoutManagedFields(text: string): { text: string; markers: number } | undefined {
  let at = text.indexOf(KEY);
  if (at < 0) return undefined;
  let out = '';
  let from = 0;
  let markers = 0;
  while (at >= 0) {
    const open = at + KEY.length - 1;
    ARRAY.lastIndex = open;
    let matched: boolean;
    try {
      matched = ARRAY.test(text);
    } catch {
      matched = false; // the expression's backtrack stack exhausted: leave this array to JSON.parse
    }
    if (matched) {
      out += text.slice(from, open) + MARKER_JSON;
      from = ARRAY.lastIndex;
      markers++;
    }
    at = text.indexOf(KEY, matched ? from : open);
  }
  return markers === 0 ? undefined : { text: out + text.slice(from), markers };
}

/** Clears the markers found where Metacontroller puts objects; returns how many it found. */
function clearMarkers(request: unknown): number {
  if (!isObject(request)) return 0;
  let found = clearMarker(request.controller) + clearMarker(request.parent) + clearMarker(request.object);
  for (const field of ['children', 'related', 'attachments']) {
    const byKind = request[field];
    if (!isObject(byKind)) continue;
    for (const kind in byKind) {
      const byName = byKind[kind];
      if (!isObject(byName)) continue;
      for (const name in byName) found += clearMarker(byName[name]);
    }
  }
  return found;
}

function clearMarker(object: unknown): number {
  if (!isObject(object) || !isObject(object.metadata) || object.metadata.managedFields !== MARKER) return 0;
  object.metadata.managedFields = undefined;
  return 1;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
