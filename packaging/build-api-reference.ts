/**
 * Writes docs/api-reference.md, the reference of the Stack, Program, Workspace and Update kinds, from
 * their JSON Schemas (schemas/*.schema.json) and the generated CRDs
 * (printer columns). Every field, its type, whether it is required or deprecated, and its
 * description as written in the schema (which is also what `kubectl explain` prints).
 *
 *   node dist/packaging/build-api-reference.js            write it
 *   node dist/packaging/build-api-reference.js --check    exit 1 if it is stale
 */
import * as fs from 'node:fs';
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import * as yaml from 'js-yaml';
import { updateSchema, workspaceSchema } from '../schemas';
import { readRepoFile, repoPath } from './lib/repo';

export const API_REFERENCE_FILE = 'docs/api-reference.md';

/** The JSON Schema keywords schemas/*.schema.json use (see schemas/README.md). */
interface Schema {
  $ref?: string;
  $defs?: Record<string, Schema>;
  type?: string | string[];
  format?: string;
  description?: string;
  deprecated?: boolean;
  enum?: (string | number | boolean | null)[];
  maxLength?: number;
  minLength?: number;
  minimum?: number;
  maximum?: number;
  pattern?: string;
  items?: Schema;
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  required?: string[];
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-validations'?: { rule: string; message: string }[];
  [keyword: string]: unknown;
}

interface Kind {
  kind: string;
  plural: string;
  /** The schema with every definition it uses (the Workspace's and Update's borrow the Stack's). */
  schema: () => Schema;
  crdFile: string;
}

const fromFile = (file: string) => (): Schema => JSON.parse(readRepoFile(file)) as Schema;

const KINDS: Kind[] = [
  {
    kind: 'Stack',
    plural: 'stacks',
    schema: fromFile('schemas/stack.schema.json'),
    crdFile: 'manifests/crds/pulumi.com_stacks.yaml',
  },
  {
    kind: 'Program',
    plural: 'programs',
    schema: fromFile('schemas/program.schema.json'),
    crdFile: 'manifests/crds/pulumi.com_programs.yaml',
  },
  {
    kind: 'Workspace',
    plural: 'workspaces',
    schema: () => structuredClone(workspaceSchema),
    crdFile: 'manifests/crds/auto.pulumi.com_workspaces.yaml',
  },
  {
    kind: 'Update',
    plural: 'updates',
    schema: () => structuredClone(updateSchema),
    crdFile: 'manifests/crds/auto.pulumi.com_updates.yaml',
  },
];

function anchor(kind: string, def: string): string {
  return `${kind}-${def}`.toLowerCase();
}

function defName(ref: string): string {
  const m = /^#\/\$defs\/(.+)$/.exec(ref);
  if (!m) throw new Error(`unsupported $ref ${ref}`);
  return m[1]!;
}

/** One line of Markdown table text: no newlines, pipes escaped. */
function cell(text: string): string {
  return text
    .replace(/\s*\n\s*/g, ' ')
    .replace(/\|/g, '\\|')
    .trim();
}

function typeOf(s: Schema, kind: string): string {
  if (s.$ref) {
    const name = defName(s.$ref);
    return `[${name}](#${anchor(kind, name)})`;
  }
  if (s['x-kubernetes-int-or-string']) return 'integer or string';
  const types = Array.isArray(s.type) ? s.type : s.type ? [s.type] : [];
  if (types.length === 0) return 'JSON';
  if (types.includes('array')) return `[]${typeOf(s.items ?? {}, kind)}`;
  if (types.includes('object')) {
    if (s.additionalProperties && typeof s.additionalProperties === 'object')
      return `map[string]${typeOf(s.additionalProperties, kind)}`;
    return 'object';
  }
  const base = types.join(' or ');
  return s.format ? `${base} (${s.format})` : base;
}

function notes(s: Schema, required: boolean): string {
  const out: string[] = [];
  if (required) out.push('**Required.**');
  if (s.deprecated && !/^Deprecated\b/.test(s.description ?? '')) out.push('**Deprecated.**');
  if (s.description) out.push(s.description);
  if (Array.isArray(s.enum)) out.push(`One of ${s.enum.map((v) => `\`${String(v)}\``).join(', ')}.`);
  if (s.maxLength !== undefined) out.push(`At most ${s.maxLength} characters.`);
  if (s.minLength !== undefined) out.push(`At least ${s.minLength} character${s.minLength === 1 ? '' : 's'}.`);
  if (s.minimum !== undefined) out.push(`Minimum ${s.minimum}.`);
  if (s.maximum !== undefined) out.push(`Maximum ${s.maximum}.`);
  if (s.pattern !== undefined && !s['x-kubernetes-int-or-string']) out.push(`Pattern \`${s.pattern}\`.`);
  const items = s.items;
  if (items && Array.isArray(items.enum))
    out.push(`Items: one of ${items.enum.map((v) => `\`${String(v)}\``).join(', ')}.`);
  return cell(out.join(' '));
}

/** A field table for an object schema (the properties of a definition or of the root). */
function fieldTable(s: Schema, kind: string, defs: Record<string, Schema>): string {
  const required = new Set(s.required ?? []);
  const rows = Object.entries(s.properties ?? {}).map(([name, prop]) => {
    // A `$ref` with local overrides (the root's metadata): describe with the referenced definition's text.
    const described = prop.description
      ? prop
      : prop.$ref
        ? { ...prop, description: defs[defName(prop.$ref)]?.description }
        : prop;
    return `| \`${name}\` | ${typeOf(prop, kind)} | ${notes(described, required.has(name))} |`;
  });
  const lines = ['| Field | Type | Description |', '|---|---|---|', ...rows];
  if (s['x-kubernetes-preserve-unknown-fields']) {
    lines.push(
      '',
      'Fields not listed here are accepted and kept as given (this is a Kubernetes type of which only the fields the operator reads are described).',
    );
  } else if (s.additionalProperties !== false && s.properties) {
    lines.push('', 'Other fields are accepted.');
  }
  return lines.join('\n');
}

/** Definitions reachable from the root, in order of first mention (breadth first). */
function reachable(root: Schema, defs: Record<string, Schema>): string[] {
  const order: string[] = [];
  const queue: Schema[] = [root];
  const visit = (s: unknown) => {
    if (!s || typeof s !== 'object') return;
    const o = s as Schema;
    if (typeof o.$ref === 'string') {
      const name = defName(o.$ref);
      if (!order.includes(name)) {
        order.push(name);
        queue.push(defs[name]!);
      }
    }
    for (const [k, v] of Object.entries(o)) {
      if (k === 'properties' && v && typeof v === 'object')
        for (const p of Object.values(v as Record<string, unknown>)) visit(p);
      else if (k === 'items' || k === 'additionalProperties') visit(v);
    }
  };
  while (queue.length > 0) visit(queue.shift());
  return order;
}

interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  priority?: number;
}

function crdFacts(file: string): {
  group: string;
  version: string;
  categories: string[];
  shortNames: string[];
  columns: PrinterColumn[];
  status: boolean;
} {
  const { spec } = yaml.load(readRepoFile(file)) as V1CustomResourceDefinition;
  const version = spec.versions.find((v) => v.storage) ?? spec.versions[0];
  if (!version) throw new Error(`${file}: no versions`);
  return {
    group: spec.group,
    version: version.name,
    categories: spec.names.categories ?? [],
    shortNames: spec.names.shortNames ?? [],
    columns: version.additionalPrinterColumns ?? [],
    status: version.subresources?.status !== undefined,
  };
}

function kindSection(k: Kind): string {
  const schema = k.schema();
  const defs = schema.$defs ?? {};
  const crd = crdFacts(k.crdFile);
  const out: string[] = [];
  out.push(`## ${k.kind}`, '', schema.description ?? '', '');
  out.push('| | |', '|---|---|');
  out.push(`| API version | \`${crd.group}/${crd.version}\` |`);
  out.push(`| Scope | namespaced |`);
  out.push(
    `| kubectl | \`kubectl get ${k.plural}\`${crd.categories.length ? `, or \`kubectl get ${crd.categories.join(',')}\` (category)` : ''}${crd.shortNames.length ? `; short names ${crd.shortNames.map((s) => `\`${s}\``).join(', ')}` : ''} |`,
  );
  out.push(`| Status subresource | ${crd.status ? 'yes' : 'no'} |`);
  const rules = schema['x-kubernetes-validations'] ?? [];
  if (rules.length) out.push(`| Validation | ${rules.map((r) => cell(`${r.message} (\`${r.rule}\`)`)).join('; ')} |`);
  out.push('');
  if (crd.columns.length) {
    out.push(`\`kubectl get ${k.plural}\` columns (priority 1 and above: \`-o wide\`):`, '');
    out.push('| Column | Type | From | Priority |', '|---|---|---|---|');
    for (const c of crd.columns) out.push(`| ${c.name} | ${c.type} | \`${cell(c.jsonPath)}\` | ${c.priority ?? 0} |`);
    out.push('');
  }
  out.push(
    `<a id="${anchor(k.kind, k.kind)}"></a>`,
    '',
    `### ${k.kind} (object)`,
    '',
    fieldTable(schema, k.kind, defs),
    '',
  );
  for (const name of reachable(schema, defs)) {
    const def = defs[name]!;
    out.push(`<a id="${anchor(k.kind, name)}"></a>`, '', `### ${k.kind}: ${name}`, '');
    if (def.description) out.push(def.description, '');
    if (def.properties) {
      out.push(fieldTable(def, k.kind, defs), '');
    } else {
      out.push(
        `Type: ${typeOf({ ...def, $ref: undefined }, k.kind)}.${def.pattern ? ` Pattern \`${def.pattern}\`.` : ''}`,
        '',
      );
    }
  }
  return out.join('\n');
}

export function renderApiReference(): string {
  const head = [
    '# API reference',
    '',
    '<!-- GENERATED by packaging/build-api-reference.ts from schemas/*.schema.json and manifests/crds/. Do not edit: change the schemas and run `npm run generate`. -->',
    '',
    'The `pulumi.com/v1` and `auto.pulumi.com/v1alpha1` kinds, field for field compatible with the Pulumi Kubernetes Operator v2:',
    KINDS.map((k) => `[${k.kind}](#${k.kind.toLowerCase()})`).join(', '),
    '. Field descriptions are the ones `kubectl explain` prints. How the operator acts on them: [design.md](design.md);',
    'what differs from upstream: [migration.md](migration.md).',
    '',
    'TypeScript Pulumi programs get typed classes generated from the same schemas, `pulumi.v1.Stack` and',
    "`pulumi.v1.Program` (as crd2pulumi lays out upstream's CRDs), from `pulumi-metacontroller-operator/pulumi`:",
    'see [install-with-pulumi.md](install-with-pulumi.md#typed-classes-for-typescript).',
    '',
  ]
    .join('\n')
    .replace('\n. Field', '. Field');
  return `${head}\n${KINDS.map(kindSection).join('\n')}`.replace(/\n{3,}/g, '\n\n').replace(/\n*$/, '\n');
}

export function main(argv: string[] = process.argv.slice(2)): number {
  const want = renderApiReference();
  const file = repoPath(API_REFERENCE_FILE);
  const have = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
  if (argv.includes('--check')) {
    if (have !== want) {
      process.stderr.write(`${API_REFERENCE_FILE} is stale: run npm run generate\n`);
      return 1;
    }
    return 0;
  }
  if (have !== want) fs.writeFileSync(file, want);
  process.stdout.write(`${API_REFERENCE_FILE}: ${have === want ? 'up to date' : 'written'}\n`);
  return 0;
}

if (require.main === module) process.exitCode = main();
