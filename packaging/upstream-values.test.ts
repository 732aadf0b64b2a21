/**
 * Upstream's Helm values against our chart, without helm: every key of upstream's values.yaml
 * (vendored unchanged) is in values.schema.json and has a row in docs/migration.md's "Helm values"
 * table, the table names upstream's keys only, and the file is valid under the schema. What the
 * chart renders for each row: packaging/chart.e2e.ts, with the real helm.
 */
import * as fs from 'node:fs';
import Ajv from 'ajv';
import {
  chartSchema,
  helmValuesTable,
  rowOf,
  schemaNodeOf,
  UPSTREAM_COMMENTED_KEYS,
  UPSTREAM_TEMPLATE_KEYS,
  UPSTREAM_VALUES,
  upstreamValues,
  valueKeys,
} from './lib/upstream-values';

const schema = chartSchema();
const rows = helmValuesTable();
const { keys, unknown } = valueKeys(upstreamValues(), schema);

test('every key of upstream values.yaml is a property of values.schema.json', () => {
  expect(keys.length).toBeGreaterThan(40);
  expect(unknown).toEqual([]);
});

test("upstream's values.yaml is valid under values.schema.json, and a key the schema lacks is not", () => {
  const validate = new Ajv({ strict: false, allErrors: true }).compile(schema);
  const valid = validate(upstreamValues());
  expect(validate.errors ?? []).toEqual([]);
  expect(valid).toBe(true);
  const controller = upstreamValues().controller as Record<string, unknown>;
  expect(validate({ ...upstreamValues(), controller: { ...controller, zapDevel: true } })).toBe(false);
});

test('docs/migration.md has a row for every key of it (or for its parent: `resources` for resources.limits)', () => {
  expect(keys.filter((k) => !rowOf(rows, k))).toEqual([]);
});

test('the keys upstream documents in comments only are commented out in its file, in the schema and in the table', () => {
  const text = fs.readFileSync(UPSTREAM_VALUES, 'utf8');
  for (const key of UPSTREAM_COMMENTED_KEYS) {
    const name = key.split('.').pop()!;
    expect({ key, commented: new RegExp(`^\\s*#\\s*${name}:`, 'm').test(text) }).toEqual({ key, commented: true });
    expect({ key, inSchema: schemaNodeOf(schema, key) !== undefined }).toEqual({ key, inSchema: true });
    expect({ key, row: rowOf(rows, key) !== undefined }).toEqual({ key, row: true });
  }
  for (const key of UPSTREAM_TEMPLATE_KEYS) {
    expect({ key, inSchema: schemaNodeOf(schema, key) !== undefined }).toEqual({ key, inSchema: true });
    expect({ key, row: rowOf(rows, key) !== undefined }).toEqual({ key, row: true });
  }
});

test("the table names upstream's values only, each once", () => {
  const named = rows.flatMap((r) => r.keys);
  const upstream = new Set([...keys, ...UPSTREAM_COMMENTED_KEYS, ...UPSTREAM_TEMPLATE_KEYS]);
  expect(named.filter((k) => !upstream.has(k) && !keys.some((leaf) => leaf.startsWith(`${k}.`)))).toEqual([]);
  expect(named.filter((k, i) => named.indexOf(k) !== i)).toEqual([]);
});
