/**
 * Generates, from the JSON Schemas in this folder:
 *  - the CustomResourceDefinitions of pulumi.com Stack and Program and auto.pulumi.com Workspace and
 *    Update (manifests/crds/ and the chart's crds/, byte-identical);
 *  - the TypeScript types (schemas/generated/types.ts);
 *  - the typed Pulumi resource classes Stack and Program (schemas/generated/pulumi-v1.ts, see
 *    pulumi-classes.ts).
 *
 * Run with `npm run generate`. `schemas/schemas.test.ts` fails when a generated file is stale.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as yaml from 'js-yaml';
import * as ts from 'typescript';
import { compile } from 'json-schema-to-typescript';
import {
  metacontrollerSchema,
  programSchema,
  stackSchema,
  updateSchema,
  workspaceSchema,
  type JsonSchema,
} from './index';
import { PULUMI_CLASSES_FILE, pulumiClassesFile } from './pulumi-classes';

export const CRD_HEADER = '# Generated from schemas/ by `npm run generate`. Do not edit.\n';
export const TYPES_HEADER = '/**\n * Generated from schemas/*.schema.json by `npm run generate`. Do not edit.\n */\n';

export const STACK_CRD_FILE = 'pulumi.com_stacks.yaml';
export const PROGRAM_CRD_FILE = 'pulumi.com_programs.yaml';
export const WORKSPACE_CRD_FILE = 'auto.pulumi.com_workspaces.yaml';
export const UPDATE_CRD_FILE = 'auto.pulumi.com_updates.yaml';
export const CRD_DIRS = ['manifests/crds', 'charts/pulumi-operator/crds'];
export const TYPES_FILE = 'schemas/generated/types.ts';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function asObject(value: unknown, what: string): JsonObject {
  if (!isObject(value)) throw new Error(`${what}: expected an object`);
  return value;
}

function asString(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new Error(`${what}: expected a string`);
  return value;
}

function clone<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

function defName(ref: string, at: string): string {
  const match = /^#\/\$defs\/([A-Za-z0-9_]+)$/.exec(ref);
  if (!match?.[1]) throw new Error(`${at}: only local "#/$defs/<name>" references are supported, got ${ref}`);
  return match[1];
}

// ---------------------------------------------------------------------------------------------
// JSON Schema -> structural openAPIV3Schema

/** Keywords the API server does not accept or that mean nothing without $defs. */
const DROPPED_KEYWORDS = new Set(['$schema', '$id', '$defs', '$comment', 'title', 'deprecated']);
/** Formats the API server knows and that we use. Others are dropped (the API server would ignore them). */
const CRD_FORMATS = new Set(['date-time', 'int32', 'int64']);
/** Keywords copied as they are. */
const COPIED_KEYWORDS = new Set([
  'type',
  'description',
  'default',
  'required',
  'enum',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'minItems',
  'maxItems',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
]);

function toStructural(node: JsonObject, defs: JsonObject, at: string): JsonObject {
  if (typeof node.$ref === 'string') {
    const name = defName(node.$ref, at);
    const target = asObject(defs[name], `${at}: $defs/${name}`);
    const out = toStructural(target, defs, `$defs/${name}`);
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' || key === 'deprecated') continue;
      if (key !== 'description') throw new Error(`${at}: only "description" may accompany $ref, found "${key}"`);
      // The field's own description first, then the type's (kubectl explain shows both).
      const own = asString(value, `${at}/description`);
      out.description = typeof out.description === 'string' ? `${own}\n\n${out.description}` : own;
    }
    return out;
  }
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (DROPPED_KEYWORDS.has(key)) continue;
    const here = `${at}/${key}`;
    switch (key) {
      case 'properties': {
        const props: JsonObject = {};
        for (const [name, sub] of Object.entries(asObject(value, here))) {
          props[name] = toStructural(asObject(sub, `${here}/${name}`), defs, `${here}/${name}`);
        }
        out.properties = props;
        break;
      }
      case 'items':
        out.items = toStructural(asObject(value, here), defs, here);
        break;
      case 'additionalProperties':
        if (value === false) break; // structural schemas prune unknown fields instead
        if (value === true)
          throw new Error(`${here}: use x-kubernetes-preserve-unknown-fields instead of additionalProperties: true`);
        out.additionalProperties = toStructural(asObject(value, here), defs, here);
        break;
      case 'format':
        if (typeof value === 'string' && CRD_FORMATS.has(value)) out.format = value;
        break;
      case 'type':
        if (Array.isArray(value)) {
          const types = value
            .map((t, i) => asString(t, `${here}/${i}`))
            .sort()
            .join(',');
          if (node['x-kubernetes-int-or-string'] === true && types === 'integer,string') {
            out.anyOf = [{ type: 'integer' }, { type: 'string' }];
            break;
          }
          throw new Error(`${here}: a list of types is only supported for x-kubernetes-int-or-string`);
        }
        out.type = value;
        break;
      default:
        if (!COPIED_KEYWORDS.has(key)) throw new Error(`${here}: keyword "${key}" is not supported in a CRD schema`);
        out[key] = clone(value);
    }
  }
  if (Array.isArray(out.required)) out.required = [...out.required].sort();
  return out;
}

/** Recursively sorts object keys (arrays keep their order) so the output is stable. */
function sortKeys(value: Json): Json {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (!isObject(value)) return value;
  const out: JsonObject = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeys(value[key] as Json);
  return out;
}

/** The openAPIV3Schema of a root schema: refs inlined, root `metadata` reduced to `type: object`. */
export function openAPIV3Schema(schema: JsonSchema): JsonObject {
  const root = clone(schema) as JsonObject;
  const defs = isObject(root.$defs) ? root.$defs : {};
  const properties = asObject(root.properties, 'root properties');
  properties.metadata = { type: 'object' };
  if (Array.isArray(root.required)) root.required = root.required.filter((r) => r !== 'metadata');
  if (Array.isArray(root.required) && root.required.length === 0) delete root.required;
  return sortKeys(toStructural(root, defs, '#')) as JsonObject;
}

function printerColumn(name: string, jsonPath: string, type: string, priority?: number): JsonObject {
  return { name, type, jsonPath, ...(priority ? { priority } : {}) };
}

const STACK_PRINTER_COLUMNS = [
  printerColumn('Stack', '.spec.stack', 'string', 10),
  printerColumn('Last Update', '.status.lastUpdate.state', 'string'),
  printerColumn('Age', '.status.lastUpdate.lastResyncTime', 'date'),
  printerColumn('Last Commit', '.status.lastUpdate.lastAttemptedCommit', 'string', 10),
  printerColumn('Ready', '.status.conditions[?(@.type=="Ready")].status', 'string'),
  printerColumn('Reconciling', '.status.conditions[?(@.type=="Reconciling")].reason', 'string'),
  printerColumn('Stalled', '.status.conditions[?(@.type=="Stalled")].reason', 'string'),
  printerColumn('Permalink', '.status.lastUpdate.permalink', 'string'),
];

const PROGRAM_PRINTER_COLUMNS = [
  printerColumn('Age', '.metadata.creationTimestamp', 'date'),
  printerColumn('URL', '.status.artifact.url', 'string'),
];

const WORKSPACE_PRINTER_COLUMNS = [
  printerColumn('Image', '.spec.image', 'string'),
  printerColumn('Ready', '.status.conditions[?(@.type=="Ready")].status', 'string'),
  printerColumn('Address', '.status.address', 'string'),
];

const UPDATE_PRINTER_COLUMNS = [
  printerColumn('Workspace', '.spec.workspaceName', 'string'),
  printerColumn('Type', '.spec.type', 'string', 10),
  printerColumn('Start Time', '.status.startTime', 'date', 10),
  printerColumn('End Time', '.status.endTime', 'date', 10),
  printerColumn('Progressing', '.status.conditions[?(@.type=="Progressing")].status', 'string'),
  printerColumn('Failed', '.status.conditions[?(@.type=="Failed")].status', 'string'),
  printerColumn('Complete', '.status.conditions[?(@.type=="Complete")].status', 'string'),
  printerColumn('URL', '.status.permalink', 'string'),
];

function crd(kind: string, plural: string, versions: JsonObject[], group = 'pulumi.com'): JsonObject {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${group}` },
    spec: {
      group,
      names: {
        categories: ['pulumi'],
        kind,
        listKind: `${kind}List`,
        plural,
        singular: kind.toLowerCase(),
      },
      scope: 'Namespaced',
      versions,
    },
  };
}

function version(name: string, storage: boolean, schema: JsonObject, columns: JsonObject[]): JsonObject {
  return {
    name,
    served: true,
    storage,
    subresources: { status: {} },
    ...(columns.length ? { additionalPrinterColumns: columns } : {}),
    schema: { openAPIV3Schema: schema },
  };
}

export function stackCrd(): JsonObject {
  const v1 = openAPIV3Schema(stackSchema);
  // v1alpha1: served for old clients, not stored; same spec, a status with only outputs and lastUpdate.
  const v1alpha1 = clone(v1);
  const v1Properties = asObject(v1.properties, 'Stack properties');
  const v1Status = asObject(v1Properties.status, 'Stack status');
  const v1StatusProperties = asObject(v1Status.properties, 'Stack status properties');
  asObject(v1alpha1.properties, 'Stack properties').status = sortKeys({
    type: 'object',
    description: 'Observed state of a Stack (reduced in v1alpha1: use pulumi.com/v1 for the full status).',
    properties: {
      outputs: clone(v1StatusProperties.outputs) as Json,
      lastUpdate: clone(v1StatusProperties.lastUpdate) as Json,
    },
  });
  v1alpha1.description =
    'Deprecated: use pulumi.com/v1, which has the same spec and a richer status. ' +
    asString(v1.description, 'Stack description');
  return crd('Stack', 'stacks', [
    version('v1', true, v1, STACK_PRINTER_COLUMNS),
    version('v1alpha1', false, v1alpha1, []),
  ]);
}

export function programCrd(): JsonObject {
  return crd('Program', 'programs', [version('v1', true, openAPIV3Schema(programSchema), PROGRAM_PRINTER_COLUMNS)]);
}

export function workspaceCrd(): JsonObject {
  const v1alpha1 = version('v1alpha1', true, openAPIV3Schema(workspaceSchema), WORKSPACE_PRINTER_COLUMNS);
  return crd('Workspace', 'workspaces', [v1alpha1], 'auto.pulumi.com');
}

export function updateCrd(): JsonObject {
  const v1alpha1 = version('v1alpha1', true, openAPIV3Schema(updateSchema), UPDATE_PRINTER_COLUMNS);
  return crd('Update', 'updates', [v1alpha1], 'auto.pulumi.com');
}

export function toYaml(document: JsonObject): string {
  return CRD_HEADER + yaml.dump(document, { lineWidth: 100, noRefs: true, sortKeys: false });
}

// ---------------------------------------------------------------------------------------------
// JSON Schema -> TypeScript

/**
 * Prepares a schema for json-schema-to-typescript: every `$ref` becomes a `tsType` naming the
 * definition's title (so a property's own description does not spawn a duplicate type), schemaless
 * values become `unknown`, and open objects get an index signature.
 */
function toTypeScriptSchema(node: Json, defs: JsonObject): Json {
  if (Array.isArray(node)) return node.map((n) => toTypeScriptSchema(n, defs));
  if (!isObject(node)) return node;
  if (typeof node.$ref === 'string') {
    const name = defName(node.$ref, 'typescript');
    const title = asObject(defs[name], `$defs/${name}`).title;
    if (typeof title !== 'string') throw new Error(`$defs/${name} has no title`);
    const out: JsonObject = { tsType: title };
    if (typeof node.description === 'string') out.description = node.description;
    if (node.deprecated === true) out.deprecated = true;
    return out;
  }
  const preserve = node['x-kubernetes-preserve-unknown-fields'] === true;
  if (preserve && node.type === undefined) {
    return typeof node.description === 'string'
      ? { tsType: 'unknown', description: node.description }
      : { tsType: 'unknown' };
  }
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (key.startsWith('x-kubernetes-') || key === '$schema' || key === '$id') continue;
    if (key === 'properties' || key === '$defs') {
      const mapped: JsonObject = {};
      for (const [name, sub] of Object.entries(asObject(value, key))) mapped[name] = toTypeScriptSchema(sub, defs);
      out[key] = mapped;
    } else if (key === 'items' || key === 'additionalProperties' || key === 'anyOf') {
      out[key] = toTypeScriptSchema(value, defs);
    } else {
      out[key] = clone(value);
    }
  }
  if (preserve && node.type === 'object' && node.additionalProperties === undefined) out.additionalProperties = true;
  return out;
}

const REFERENCED_BY =
  /\n \*\n \* This (?:interface|type) was referenced by `[^`]*`'s JSON-Schema\n \* via the `definition` "[^"]*"\./g;
const REFERENCED_BY_ONLY =
  /\/\*\*\n \* This (?:interface|type) was referenced by `[^`]*`'s JSON-Schema\n \* via the `definition` "[^"]*"\.\n \*\/\n/g;

const WRAPPER = 'GeneratedSchemaWrapper';

async function typesFor(schema: JsonSchema): Promise<string> {
  const defs = isObject(schema.$defs) ? schema.$defs : {};
  let prepared = asObject(toTypeScriptSchema(clone(schema) as Json, defs), 'schema');
  if (prepared.type !== 'object') {
    // json-schema-to-typescript emits $defs only under an object root: wrap, and drop the wrapper later.
    const { $defs, ...root } = prepared;
    prepared = {
      title: WRAPPER,
      type: 'object',
      properties: {},
      $defs: { ...asObject($defs ?? {}, '$defs'), [asString(schema.title, 'schema title')]: root },
    };
  }
  const output = await compile(prepared, asString(prepared.title, 'schema title'), {
    bannerComment: '',
    additionalProperties: false,
    unknownAny: true,
    strictIndexSignatures: false,
    unreachableDefinitions: true,
    declareExternallyReferenced: true,
    // json-schema-to-typescript formats with prettier, which needs dynamic import() (unavailable
    // under jest); the TypeScript printer formats instead (see formatTypes).
    format: false,
  });
  return formatTypes(output).replace(REFERENCED_BY_ONLY, '').replace(REFERENCED_BY, '');
}

/** Drops parentheses around a whole property, index signature or alias type: `a?: (A | B)`. */
function unwrapParentheses(context: ts.TransformationContext): ts.Transformer<ts.SourceFile> {
  const { factory } = context;
  const inner = (type: ts.TypeNode): ts.TypeNode => (ts.isParenthesizedTypeNode(type) ? inner(type.type) : type);
  const visit = (node: ts.Node): ts.Node => {
    const visited = ts.visitEachChild(node, visit, context);
    if (ts.isPropertySignature(visited) && visited.type && ts.isParenthesizedTypeNode(visited.type)) {
      return factory.updatePropertySignature(
        visited,
        visited.modifiers,
        visited.name,
        visited.questionToken,
        inner(visited.type),
      );
    }
    if (ts.isIndexSignatureDeclaration(visited) && ts.isParenthesizedTypeNode(visited.type)) {
      return factory.updateIndexSignature(visited, visited.modifiers, visited.parameters, inner(visited.type));
    }
    if (ts.isTypeAliasDeclaration(visited) && ts.isParenthesizedTypeNode(visited.type)) {
      return factory.updateTypeAliasDeclaration(
        visited,
        visited.modifiers,
        visited.name,
        visited.typeParameters,
        inner(visited.type),
      );
    }
    return visited;
  };
  return (file) => ts.visitNode(file, visit) as ts.SourceFile;
}

/** Prints generated declarations with the TypeScript printer, indented by two spaces. */
function formatTypes(code: string): string {
  const source = ts.createSourceFile('generated.ts', code, ts.ScriptTarget.ES2022, true);
  const result = ts.transform(source, [unwrapParentheses]);
  const file = result.transformed[0];
  if (file === undefined) throw new Error('no output from the TypeScript transform');
  const printed = ts.createPrinter({ newLine: ts.NewLineKind.LineFeed }).printFile(file);
  result.dispose();
  return printed
    .split('\n')
    .map((line) => {
      const indent = /^ */.exec(line)?.[0].length ?? 0;
      return ' '.repeat(Math.floor(indent / 4) * 2 + (indent % 4)) + line.slice(indent).trimEnd();
    })
    .join('\n');
}

/**
 * Joins the declarations of several generated files. A declaration that appears in more than one
 * schema (ObjectMeta, say) must be identical everywhere and is kept once.
 */
function mergeDeclarations(files: string[]): string {
  const kept: string[] = [];
  const seen = new Map<string, string>();
  for (const text of files) {
    const source = ts.createSourceFile('generated.ts', text, ts.ScriptTarget.ES2022, true);
    for (const statement of source.statements) {
      if (!ts.isInterfaceDeclaration(statement) && !ts.isTypeAliasDeclaration(statement)) {
        throw new Error(`unexpected statement in generated types: ${statement.getText(source)}`);
      }
      const name = statement.name.text;
      if (name === WRAPPER) continue;
      const code = statement.getText(source);
      const previous = seen.get(name);
      if (previous !== undefined) {
        if (previous !== code)
          throw new Error(`type ${name} is generated differently by two schemas; give them different titles`);
        continue;
      }
      seen.set(name, code);
      kept.push(text.slice(statement.getFullStart(), statement.getEnd()).trim());
    }
  }
  return kept.join('\n\n') + '\n';
}

export async function typesFile(): Promise<string> {
  const files: string[] = [];
  for (const schema of [stackSchema, programSchema, metacontrollerSchema, workspaceSchema, updateSchema])
    files.push(await typesFor(schema));
  return TYPES_HEADER + '\n' + mergeDeclarations(files);
}

// ---------------------------------------------------------------------------------------------

/** Every generated file: repository-relative path -> content. Writes nothing. */
export async function generateAll(): Promise<Map<string, string>> {
  const files = new Map<string, string>();
  const crds: Array<[string, JsonObject]> = [
    [STACK_CRD_FILE, stackCrd()],
    [PROGRAM_CRD_FILE, programCrd()],
    [WORKSPACE_CRD_FILE, workspaceCrd()],
    [UPDATE_CRD_FILE, updateCrd()],
  ];
  for (const [file, document] of crds) {
    const text = toYaml(document);
    for (const dir of CRD_DIRS) files.set(`${dir}/${file}`, text);
  }
  files.set(TYPES_FILE, await typesFile());
  files.set(PULUMI_CLASSES_FILE, TYPES_HEADER + '\n' + pulumiClassesFile());
  return files;
}

/**
 * The repository root: the nearest directory above this file with both package.json and
 * tsconfig.json (dist/ may hold a copy of package.json, never a tsconfig.json).
 */
export function repoRoot(): string {
  let dir = __dirname;
  while (!(fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'tsconfig.json')))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no package.json with tsconfig.json above ${__dirname}`);
    dir = parent;
  }
  return dir;
}

async function main(): Promise<void> {
  const root = repoRoot();
  for (const [file, content] of await generateAll()) {
    const target = path.join(root, file);
    fs.mkdirSync(path.dirname(target), { recursive: true });
    const current = fs.existsSync(target) ? fs.readFileSync(target, 'utf8') : undefined;
    if (current === content) {
      console.log(`unchanged ${file}`);
    } else {
      fs.writeFileSync(target, content);
      console.log(`wrote     ${file}`);
    }
  }
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
