/**
 * The request parser's shortcut: the objects' managed fields are left unparsed, and everything else
 * must be exactly what JSON.parse gives, for any text, malformed or hostile ones included.
 */
import fc from 'fast-check';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { MAX_DEPTH, parseWithoutManagedFields } from '../src/http/managed-fields';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Where Metacontroller puts objects: their metadata's managed fields may be left out. */
function requestObjects(request: unknown): Json[] {
  if (!isObject(request)) return [];
  const objects = [request.controller, request.parent, request.object];
  for (const field of ['children', 'related', 'attachments']) {
    const byKind = request[field];
    if (!isObject(byKind)) continue;
    for (const byName of Object.values(byKind)) if (isObject(byName)) objects.push(...Object.values(byName));
  }
  return objects.filter((o): o is Json => isObject(o) && isObject(o.metadata));
}

/**
 * JSON.parse's result, with the managed fields of the request objects that `ours` has without them
 * left undefined too: the only difference allowed, and only where Metacontroller puts objects.
 */
function expected(text: string, ours: unknown): unknown {
  const parsed: unknown = JSON.parse(text);
  const cut = requestObjects(ours);
  requestObjects(parsed).forEach((o, i) => {
    const metadata = o.metadata as Json;
    if ('managedFields' in metadata && cut[i] && (cut[i].metadata as Json).managedFields === undefined)
      metadata.managedFields = undefined;
  });
  return parsed;
}

/**
 * Parses `text` with the shortcut and checks it against JSON.parse: undefined where JSON.parse
 * throws, else JSON.parse's result less cut managed fields (or undefined: left to JSON.parse).
 */
function parseAndCompare(text: string): { ours: unknown; json: boolean } {
  const ours = parseWithoutManagedFields(text);
  let full: unknown;
  try {
    full = expected(text, ours);
  } catch {
    expect(ours).toBeUndefined();
    return { ours, json: false };
  }
  if (ours !== undefined) expect(ours).toStrictEqual(full);
  return { ours, json: true };
}

/** Any string, control characters, quotes, backslashes, braces and lone surrogates included. */
const anyString = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 8 }) },
  fc.string({ unit: 'binary', maxLength: 6 }),
  fc.constantFrom(
    'k:{"name":"agent"}',
    'f:spec',
    '.',
    '\\',
    '"',
    '{',
    '}',
    ']',
    '"managedFields":[',
    '\u0000',
    '\ud800',
  ),
);

/** A `fieldsV1` tree: objects of objects, down to `{}`. */
const fieldsV1 = fc.letrec((tie) => ({
  node: fc.dictionary(anyString, fc.oneof({ depthSize: 'small' }, fc.constant({}), tie('node')), { maxKeys: 4 }),
})).node;

const entry = fc.record(
  {
    apiVersion: anyString,
    fieldsType: fc.constant('FieldsV1'),
    fieldsV1,
    manager: anyString,
    operation: fc.constantFrom('Apply', 'Update'),
    subresource: anyString,
    time: anyString,
  },
  { requiredKeys: ['manager', 'fieldsV1'] },
);

/**
 * A managed-fields array's text, as the API server writes it, or damaged by one edit: a character
 * dropped or put in anywhere, the text cut short, or, most often, a token boundary edited (next to
 * a quote, comma, colon, brace or bracket), where a checker slightly too lenient would let it by.
 */
const managedFieldsText = fc
  .tuple(
    fc.array(entry, { minLength: 1, maxLength: 3 }),
    fc.noBias(fc.nat()),
    fc.oneof({ weight: 2, arbitrary: fc.constant('none') }, fc.constantFrom('drop', 'truncate', 'insert'), {
      weight: 4,
      arbitrary: fc.constantFrom('drop at a boundary', 'insert at a boundary'),
    }),
    fc.constantFrom(
      '{',
      '}',
      '[',
      ']',
      ',',
      ':',
      '"',
      '\\',
      '\\x',
      '\\a',
      '\\0',
      '\\u12',
      '\\U0041',
      ' ',
      '\u0001',
      '\u001f',
      '1',
      'null',
    ),
  )
  .map(([entries, at, edit, char]) => {
    const text = JSON.stringify(entries);
    const boundaries: number[] = [];
    for (let i = 1; i < text.length; i++)
      if ('{}[],:"'.includes(text.charAt(i)) || '{}[],:"'.includes(text.charAt(i - 1))) boundaries.push(i);
    const i = edit.endsWith('boundary') ? (boundaries[at % boundaries.length] ?? 0) : at % (text.length + 1);
    const damaged =
      edit === 'none'
        ? text
        : edit.startsWith('drop')
          ? text.slice(0, i) + text.slice(i + 1)
          : edit === 'truncate'
            ? text.slice(0, i)
            : text.slice(0, i) + char + text.slice(i);
    return { text: damaged, intact: damaged === text };
  });

/** Where a managed-fields array can sit: in an object Metacontroller sends, or in the user's data. */
const placements = {
  parent: (r, o) => void (r.parent = o),
  controller: (r, o) => void (r.controller = o),
  object: (r, o) => void (r.object = o),
  child: (r, o, i) => void (((r.children as Json)['ConfigMap.v1'] as Json)[`ns/c${i}`] = o),
  related: (r, o, i) => void (((r.related as Json)['Secret.v1'] as Json)[`ns/r${i}`] = o),
  attachment: (r, o, i) => void (((r.attachments as Json)['Job.batch/v1'] as Json)[`ns/a${i}`] = o),
  // Not where Metacontroller puts objects: the user's own data, which must arrive whole.
  inProgram: (r, o, i) =>
    void (((r.related as Json)['Program.pulumi.com/v1'] as Json)[`ns/p${i}`] = {
      metadata: { name: 'p' },
      program: { resources: { cm: { properties: o } } },
    }),
  inSpec: (r, o) => void (r.spec = { config: { pasted: o } }),
  inArray: (r, o) => void (r.list = [o]),
  topLevel: (r, o) => void Object.assign(r, { managedFields: '@MF@', extra: o }),
} satisfies Record<string, (request: Json, object: Json, i: number) => void>;
type Placement = keyof typeof placements;
const known = new Set<Placement>(['parent', 'controller', 'object', 'child', 'related', 'attachment']);

/** A request-shaped body with one to three objects carrying managed fields, each somewhere. */
const where = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...known) },
  fc.constantFrom(...(Object.keys(placements) as Placement[]).filter((p) => !known.has(p))),
);
const bodies = fc
  .tuple(fc.array(fc.tuple(where, managedFieldsText), { minLength: 1, maxLength: 3 }), fc.boolean())
  .map(([parts, spaced]) => {
    const request: Json = {
      children: { 'ConfigMap.v1': {} },
      related: { 'Secret.v1': {}, 'Program.pulumi.com/v1': {} },
      attachments: { 'Job.batch/v1': {} },
    };
    parts.forEach(([where], i) =>
      placements[where](
        request,
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `o${i}`, namespace: 'ns', managedFields: `@MF${i}@` },
          data: { a: 'b' },
        },
        i,
      ),
    );
    let text = JSON.stringify(request).replace(
      /"@MF(\d*)@"/g,
      (_, i: string) => parts[i === '' ? 0 : Number(i)]![1].text,
    );
    if (spaced) text = text.replace('"managedFields":', '"managedFields": ');
    // Every placement holds its own object, except a second parent, controller or object, which replaces the first.
    const single = new Set(parts.map(([where]) => where)).size === parts.length;
    const engages = single && parts.every(([where, mf]) => known.has(where) && mf.intact) && !spaced;
    return { text, engages };
  });

describe('parsing a Metacontroller request without its managed fields', () => {
  it('gives JSON.parse’s values for any body, less the request objects’ managed fields, or leaves the body to JSON.parse', () => {
    fc.assert(
      fc.property(bodies, ({ text, engages }) => {
        const { ours } = parseAndCompare(text);
        if (engages) expect(ours).not.toBeUndefined();
      }),
      { numRuns: 5000 },
    );
  });

  it('agrees with JSON.parse after every single edit of a managed-fields array: each character dropped, each of 20 put in at each place', () => {
    const entries = [
      {
        apiVersion: 'v1',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:metadata': { 'f:labels': { '.': {}, 'f:app': {} } }, 'k:{"name":"agent"}': { '.': {} } },
        manager: 'kube\\controller',
        operation: 'Update',
        time: '2026-11-24T00:00:00Z',
      },
      { fieldsV1: {}, manager: 'm\u00e9', subresource: 'status' },
    ];
    const intact = JSON.stringify(entries);
    const requestWith = (managedFields: string) =>
      `{"parent":{"metadata":{"name":"p","managedFields":${managedFields}}},"children":{"Job.batch/v1":{"ns/j":{"metadata":{"name":"j","managedFields":${intact}}}}}}`;
    const check = (text: string) => (parseAndCompare(text).json ? 1 : 0);
    expect(parseWithoutManagedFields(requestWith(intact))).not.toBeUndefined();
    const inserts = [
      '{',
      '}',
      '[',
      ']',
      ',',
      ':',
      '"',
      '\\',
      ' ',
      '\n',
      '\u0001',
      '\\x',
      '\\u12',
      '\\u00e9',
      '\\/',
      '1',
      'n',
      'null',
      'x',
      '{}',
    ];
    let valid = 0;
    for (let i = 0; i <= intact.length; i++) {
      if (i < intact.length) valid += check(requestWith(intact.slice(0, i) + intact.slice(i + 1)));
      for (const insert of inserts) valid += check(requestWith(intact.slice(0, i) + insert + intact.slice(i)));
    }
    expect(valid).toBeGreaterThan(100); // some edits stay JSON (inside a string, a space between tokens): those must agree too
  });

  it('leaves managed fields in the user’s data to JSON.parse: a Program holding pasted kubectl output arrives whole', () => {
    const pasted = { metadata: { name: 'cm', managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:data': {} } }] } };
    const request = {
      parent: { metadata: { name: 's', managedFields: [{ manager: 'm', fieldsV1: {} }] } },
      related: {
        'Program.pulumi.com/v1': {
          'ns/p': {
            metadata: { name: 'p', managedFields: [] },
            program: { resources: { cm: { properties: pasted } } },
          },
        },
      },
    };
    const text = JSON.stringify(request);
    expect(parseWithoutManagedFields(text)).toBeUndefined();
    const program = requestObjects(JSON.parse(text)).find((o) => o.program !== undefined);
    expect(program?.program).toEqual({ resources: { cm: { properties: pasted } } });
  });

  it.each([
    'steady-state-sync.json',
    'steady-state-workspace-sync.json',
    'steady-state-update-sync-1.json',
    'steady-state-update-sync-2.json',
    'steady-state-update-sync-3.json',
  ])('cuts every managed-fields array of a request recorded from a real cluster (%s), and nothing else', (name) => {
    const file: unknown = JSON.parse(readFileSync(join(__dirname, '..', '..', 'bench', 'requests', name), 'utf8'));
    const text = JSON.stringify(isObject(file) ? file.request : undefined);
    expect(text).toContain('managedFields');
    const ours = parseWithoutManagedFields(text);
    expect(ours).not.toBeUndefined();
    expect(ours).toStrictEqual(expected(text, ours));
    // The controller, the parent and at least its Workspace or Job and three more children or related objects.
    const objects = requestObjects(ours);
    expect(objects.length).toBeGreaterThanOrEqual(6);
    expect(objects.every((o) => (o.metadata as Json).managedFields === undefined)).toBe(true);
  });

  it('parses arrays nested deeper than it checks, and texts without managed fields, the usual way', () => {
    let deep: Json = {};
    for (let i = 0; i < MAX_DEPTH + 5; i++) deep = { [`f:${i}`]: deep };
    const text = JSON.stringify({
      parent: { metadata: { name: 'p', managedFields: [{ manager: 'm', fieldsV1: deep }] } },
    });
    expect(parseWithoutManagedFields(text)).toBeUndefined();
    expect(parseWithoutManagedFields('{"parent":{"metadata":{"name":"p"}}}')).toBeUndefined();
  });

  it('answers a damaged array of megabytes, leaving it to JSON.parse (no catastrophic backtracking)', () => {
    const entryText = JSON.stringify({ manager: 'm', fieldsV1: { 'f:a': { 'f:b': { 'f:c': {} } }, 'f:d': {} } });
    const text = `{"parent":{"metadata":{"name":"p","managedFields":[${Array.from({ length: 40_000 }, () => entryText).join(',')},]}}}`;
    expect(text.length).toBeGreaterThan(2_000_000);
    expect(parseWithoutManagedFields(text)).toBeUndefined(); // trailing comma: not JSON
    expect(() => {
      JSON.parse(text);
    }).toThrow();
  });
});
