/**
 * Upstream's Helm values (its chart's values.yaml, vendored unchanged under e2e/testdata/upstream)
 * and the table of docs/migration.md, "Helm values", that says what our chart does with each.
 */
import * as fs from 'node:fs';
import * as yaml from 'js-yaml';
import { isRecord, readRepoFile, repoPath } from './repo';

export const UPSTREAM_VALUES = repoPath(
  'e2e',
  'testdata',
  'upstream',
  'deploy',
  'helm',
  'pulumi-operator',
  'values.yaml',
);

export function upstreamValues(): Record<string, unknown> {
  const values = yaml.load(fs.readFileSync(UPSTREAM_VALUES, 'utf8'));
  if (!isRecord(values)) throw new Error(`${UPSTREAM_VALUES} is not a YAML map`);
  return values;
}

/** Values upstream's values.yaml documents only in comments (`# timeout: 10s`). */
export const UPSTREAM_COMMENTED_KEYS = [
  'controller.advertisedAddress',
  'serviceMonitor.interval',
  'serviceMonitor.telemetryPath',
  'serviceMonitor.labels',
  'serviceMonitor.timeout',
  'serviceMonitor.targetLabels',
  'serviceMonitor.metricRelabelings',
];

/** Values only upstream's templates read (templates/servicemonitor.yaml), in no comment either. */
export const UPSTREAM_TEMPLATE_KEYS = ['serviceMonitor.namespace'];

/** The middle column of the table. */
export const TREATMENTS = ['honoured', 'accepted, no effect', "upstream's default only"] as const;
export type Treatment = (typeof TREATMENTS)[number];

export interface ValuesRow {
  /** The upstream values the row is about (every `a.b` in its first cell). */
  keys: string[];
  treatment: Treatment;
}

/** The rows of docs/migration.md's "Helm values" table. */
export function helmValuesTable(doc = readRepoFile('docs/migration.md')): ValuesRow[] {
  const start = doc.indexOf('\n## Helm values\n');
  if (start < 0) throw new Error('docs/migration.md has no "## Helm values" section');
  const end = doc.indexOf('\n## ', start + 1);
  const section = doc.slice(start, end < 0 ? undefined : end);
  return section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .map((line) => {
      const [first = '', treatment = ''] = line.split('|').slice(1, 3);
      const keys = [...first.matchAll(/`([A-Za-z][\w.]*)`/g)].map((m) => m[1]!);
      const t = treatment.trim();
      if (!(TREATMENTS as readonly string[]).includes(t)) throw new Error(`row of ${keys.join(', ')}: "${t}"`);
      return { keys, treatment: t as Treatment };
    });
}

/** What values.schema.json says of a value: its own properties, if it lists them one by one. */
interface SchemaNode {
  properties?: Record<string, SchemaNode>;
}

/** The schema node of a dotted key, or undefined when the schema has no such property. */
export function schemaNodeOf(schema: SchemaNode, key: string): SchemaNode | undefined {
  let node: SchemaNode | undefined = schema;
  for (const part of key.split('.')) node = node?.properties?.[part];
  return node;
}

/**
 * The dotted keys of a values map, as deep as the schema lists properties: `image.tag`, but
 * `resources.limits` and `podSecurityContext` whole (Kubernetes' own fields, passed through).
 * `unknown` holds the keys the schema has no property for.
 */
export function valueKeys(values: Record<string, unknown>, schema: SchemaNode): { keys: string[]; unknown: string[] } {
  const keys: string[] = [];
  const unknown: string[] = [];
  const walk = (map: Record<string, unknown>, node: SchemaNode, prefix: string) => {
    for (const [name, value] of Object.entries(map)) {
      const key = `${prefix}${name}`;
      const child = node.properties?.[name];
      if (!child) unknown.push(key);
      else if (child.properties && isRecord(value)) walk(value, child, `${key}.`);
      else keys.push(key);
    }
  };
  walk(values, schema, '');
  return { keys, unknown };
}

/** The chart's values.schema.json. */
export function chartSchema(): SchemaNode & Record<string, unknown> {
  return JSON.parse(readRepoFile('charts/pulumi-operator/values.schema.json')) as SchemaNode & Record<string, unknown>;
}

/** The row of a key: the row naming it, or one of its parents (`resources` for `resources.limits`). */
export function rowOf(rows: ValuesRow[], key: string): ValuesRow | undefined {
  const parts = key.split('.');
  for (let n = parts.length; n > 0; n--) {
    const name = parts.slice(0, n).join('.');
    const row = rows.find((r) => r.keys.includes(name));
    if (row) return row;
  }
  return undefined;
}
