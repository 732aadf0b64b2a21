/**
 * Generates the typed Pulumi resource classes (schemas/generated/pulumi-v1.ts) from the Stack and
 * Program schemas: what crd2pulumi makes of upstream's CRDs, for TypeScript Pulumi programs.
 *
 * Each kind becomes a `pulumi.CustomResource` subclass with the type token
 * `kubernetes:pulumi.com/v1:<Kind>`, as crd2pulumi generates them, rather than a subclass of
 * `@pulumi/kubernetes`'s `apiextensions.CustomResource`:
 *  - at run time the classes need only `@pulumi/pulumi`; `@pulumi/kubernetes` gives types only
 *    (ObjectMeta), so a program's own copy of it is the one that counts;
 *  - no provider version is pinned (`apiextensions.CustomResource` pins the version of the copy of
 *    `@pulumi/kubernetes` it comes from), so the Stack uses the same default `kubernetes` provider as
 *    the program's other Kubernetes resources;
 *  - the token is the one `new k8s.apiextensions.CustomResource(name, {apiVersion: 'pulumi.com/v1',
 *    kind: 'Stack', ...})` registers, as upstream's examples do, so moving such a program to the typed
 *    class keeps every URN (nothing is replaced).
 *
 * The input types are the generated types (schemas/generated/types.ts) with every field, at every
 * depth, also accepting a pulumi Input (an Output or a Promise): one source of truth, and the
 * schema's descriptions show up on hover.
 */
import { programSchema, stackSchema, type JsonSchema } from './index';

export const PULUMI_CLASSES_FILE = 'schemas/generated/pulumi-v1.ts';

const GROUP = 'pulumi.com';
const VERSION = 'v1';
/** Root fields every Kubernetes object has, or that the API server writes: not arguments. */
const NOT_ARGUMENTS = new Set(['apiVersion', 'kind', 'metadata', 'status']);

interface Field {
  name: string;
  type: string;
  required: boolean;
  description: string;
}

function object(value: unknown, what: string): { [key: string]: unknown } {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new Error(`${what}: expected an object`);
  return value as { [key: string]: unknown };
}

function text(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new Error(`${what}: expected a string`);
  return value;
}

/** The definition a root property refers to. */
function refTarget(schema: JsonSchema, property: { [key: string]: unknown }, at: string): { [key: string]: unknown } {
  const ref = text(property.$ref, `${at}/$ref`);
  const name = /^#\/\$defs\/(\w+)$/.exec(ref)?.[1];
  if (name === undefined) throw new Error(`${at}: expected a local $ref, got ${ref}`);
  return object(object(schema.$defs, '$defs')[name], `$defs/${name}`);
}

/** The TypeScript type a root property names: the title of the definition it refers to. */
function refTitle(schema: JsonSchema, property: { [key: string]: unknown }, at: string): string {
  return text(refTarget(schema, property, at).title, `${at}: the title of its definition`);
}

function doc(description: string, indent: string): string {
  const lines = description.split('\n').map((line) => (line === '' ? `${indent} *` : `${indent} * ${line}`));
  return `${indent}/**\n${lines.join('\n')}\n${indent} */\n`;
}

function classFor(schema: JsonSchema): { code: string; types: string[] } {
  const kind = text(schema.title, 'schema title');
  const properties = object(schema.properties, `${kind} properties`);
  const required = new Set(Array.isArray(schema.required) ? schema.required.map(String) : []);
  const fields: Field[] = [];
  for (const [name, value] of Object.entries(properties)) {
    if (NOT_ARGUMENTS.has(name)) continue;
    const property = object(value, `${kind}.${name}`);
    fields.push({
      name,
      type: refTitle(schema, property, `${kind}.${name}`),
      required: required.has(name),
      // The field's own description, else its type's (kubectl explain shows the same).
      description: text(
        property.description ?? refTarget(schema, property, `${kind}.${name}`).description,
        `${kind}.${name} description`,
      ),
    });
  }
  const statusType = refTitle(schema, object(properties.status, `${kind}.status`), `${kind}.status`);
  const apiVersion = `${GROUP}/${VERSION}`;
  const token = `kubernetes:${apiVersion}:${kind}`;

  let code = doc(`The arguments of a {@link ${kind}}.`, '');
  code += `export interface ${kind}Args {\n`;
  code += doc('Standard object metadata. `name` defaults to the resource name with a random suffix.', '  ');
  code += `  metadata?: pulumi.Input<k8s.types.input.meta.v1.ObjectMeta>;\n`;
  for (const field of fields) {
    code += doc(field.description, '  ');
    code += `  ${field.name}${field.required ? '' : '?'}: DeepInput<${field.type}>;\n`;
  }
  code += '}\n\n';

  code += doc(`${text(schema.description, `${kind} description`)}\n\nPulumi type token \`${token}\`.`, '');
  code += `export class ${kind} extends pulumi.CustomResource {\n`;
  code += `  static readonly __pulumiType = '${token}';\n\n`;
  code += doc(`Reads an existing ${kind}: \`id\` is \`<namespace>/<name>\`.`, '  ');
  code += `  static get(name: string, id: pulumi.Input<pulumi.ID>, opts?: pulumi.CustomResourceOptions): ${kind} {\n`;
  code += `    // With opts.id the engine reads the object; the arguments are not used.\n`;
  // A cast only when some argument is required (a needless one fails the linter).
  const noArgs = fields.some((f) => f.required) ? `{} as ${kind}Args` : '{}';
  code += `    return new ${kind}(name, ${noArgs}, { ...opts, id });\n`;
  code += '  }\n\n';
  code += doc(`Whether \`obj\` is a ${kind}, also when it comes from another copy of this module.`, '  ');
  code += `  static override isInstance(obj: unknown): obj is ${kind} {\n`;
  code += `    return pulumi.CustomResource.isInstance(obj) && (obj as { __pulumiType?: unknown }).__pulumiType === ${kind}.__pulumiType;\n`;
  code += '  }\n\n';
  // `declare`: the engine sets these; a class field would reset them after super() returns.
  code += `  declare readonly apiVersion: pulumi.Output<'${apiVersion}'>;\n`;
  code += `  declare readonly kind: pulumi.Output<'${kind}'>;\n`;
  code += `  declare readonly metadata: pulumi.Output<k8s.types.output.meta.v1.ObjectMeta>;\n`;
  for (const field of fields) code += `  declare readonly ${field.name}: pulumi.Output<${field.type}>;\n`;
  code += doc(
    'Observed state, as the operator last wrote it (read when the resource is created, updated or refreshed).',
    '  ',
  );
  code += `  declare readonly status: pulumi.Output<${statusType} | undefined>;\n\n`;
  code += `  constructor(name: string, args: ${kind}Args, opts?: pulumi.CustomResourceOptions) {\n`;
  code += `    const inputs: pulumi.Inputs = {\n`;
  code += `      apiVersion: '${apiVersion}',\n`;
  code += `      kind: '${kind}',\n`;
  code += `      metadata: args.metadata,\n`;
  for (const field of fields) code += `      ${field.name}: args.${field.name},\n`;
  code += `      // Listed so that the engine fills the output property.\n`;
  code += `      status: undefined,\n`;
  code += `    };\n`;
  code += `    super(${kind}.__pulumiType, name, inputs, opts);\n`;
  code += '  }\n';
  code += '}\n';
  return { code, types: [...fields.map((f) => f.type), statusType] };
}

const DEEP_INPUT = `type Primitive = string | number | boolean | bigint | symbol | null;

/**
 * \`T\` where every field, at every depth, may also be a pulumi Input (an Output or a Promise).
 * \`undefined\` is taken off first so that an optional \`boolean\` stays \`Input<boolean>\` rather than
 * \`Input<true> | Input<false>\`, which an \`Output<boolean>\` would not match.
 */
export type DeepInput<T> = undefined extends T ? DeepInputOf<Exclude<T, undefined>> | undefined : DeepInputOf<T>;

type DeepInputOf<T> = [T] extends [Primitive]
  ? pulumi.Input<T>
  : [T] extends [readonly (infer E)[]]
    ? pulumi.Input<DeepInput<E>[]>
    : [T] extends [object]
      ? pulumi.Input<{ [K in keyof T]: DeepInput<T[K]> }>
      : pulumi.Input<T>;
`;

/** The file's content, after the generated-file header. */
export function pulumiClassesFile(): string {
  const classes = [stackSchema, programSchema].map(classFor);
  const types = [...new Set(classes.flatMap((c) => c.types))].sort();
  return [
    "import * as pulumi from '@pulumi/pulumi';",
    "import type * as k8s from '@pulumi/kubernetes';",
    `import type { ${types.join(', ')} } from './types';`,
    '',
    DEEP_INPUT,
    classes.map((c) => c.code).join('\n'),
  ].join('\n');
}
