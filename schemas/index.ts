/**
 * The API's JSON Schemas (the single source of truth; see docs/design.md) and validators built from
 * them. Types generated from the same schemas are re-exported from ./generated/types.
 */
import Ajv2020 from 'ajv/dist/2020';
import type { ErrorObject, ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import stackSchemaJson from './stack.schema.json';
import programSchemaJson from './program.schema.json';
import metacontrollerSchemaJson from './metacontroller.schema.json';
import workspaceSchemaJson from './workspace.schema.json';
import updateSchemaJson from './update.schema.json';

export type * from './generated/types';

/** A JSON Schema document or sub-schema, as parsed JSON. */
export type JsonSchema = { [key: string]: unknown };

export const stackSchema: JsonSchema = stackSchemaJson;
export const programSchema: JsonSchema = programSchemaJson;
export const metacontrollerSchema: JsonSchema = metacontrollerSchemaJson;

function definitions(schema: JsonSchema): Record<string, unknown> {
  const defs = schema.$defs;
  return typeof defs === 'object' && defs !== null && !Array.isArray(defs) ? (defs as Record<string, unknown>) : {};
}

/** The names of the `#/$defs/<name>` a schema node refers to, at any depth. */
function referencedDefs(node: unknown, into: string[] = []): string[] {
  if (Array.isArray(node)) {
    for (const item of node) referencedDefs(item, into);
  } else if (typeof node === 'object' && node !== null) {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string') {
        const name = /^#\/\$defs\/([A-Za-z0-9_]+)$/.exec(value)?.[1];
        if (name === undefined) throw new Error(`only local "#/$defs/<name>" references are supported, got ${value}`);
        into.push(name);
      } else {
        referencedDefs(value, into);
      }
    }
  }
  return into;
}

/**
 * A schema completed with the shared definitions it refers to without defining them: each missing
 * `#/$defs/<name>` (and what that refers to in turn) is copied from the first of `libraries` that
 * defines it. So the auto.pulumi.com schemas use the Stack schema's Kubernetes types (PodSpec,
 * EnvVar, SecretKeySelector, ...) and workspace sources, which stay written once, in
 * stack.schema.json. The result is self-contained: ajv, the CRD generator and the TypeScript
 * generator read it like any other schema.
 */
function withSharedDefs(schema: JsonSchema, libraries: JsonSchema[]): JsonSchema {
  const defs: Record<string, unknown> = { ...definitions(schema) };
  const pending = referencedDefs(schema);
  for (let name = pending.shift(); name !== undefined; name = pending.shift()) {
    if (name in defs) continue;
    const library = libraries.find((candidate) => name in definitions(candidate));
    if (library === undefined) throw new Error(`${String(schema.$id)}: no schema defines $defs/${name}`);
    const def = structuredClone(definitions(library)[name]);
    defs[name] = def;
    referencedDefs(def, pending);
  }
  return { ...schema, $defs: defs };
}

/** `auto.pulumi.com/v1alpha1` Workspace, with the shared definitions of stack.schema.json it uses. */
export const workspaceSchema: JsonSchema = withSharedDefs(workspaceSchemaJson, [stackSchema]);
/** `auto.pulumi.com/v1alpha1` Update, with the shared definitions of the Stack and Workspace schemas it uses. */
export const updateSchema: JsonSchema = withSharedDefs(updateSchemaJson, [stackSchema, workspaceSchema]);

/** Kubernetes extension keywords: annotations for the CRD generator, no effect on validation. */
export const KUBERNETES_KEYWORDS = [
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
] as const;

/**
 * A strict ajv (draft 2020-12, formats, all errors) that knows the Kubernetes keywords and has the
 * schemas registered under their `$id`s.
 */
export function createAjv(): Ajv2020 {
  const ajv = new Ajv2020({ strict: true, allErrors: true, allowUnionTypes: true });
  addFormats(ajv);
  for (const keyword of KUBERNETES_KEYWORDS) ajv.addKeyword({ keyword });
  ajv.addSchema([stackSchema, programSchema, metacontrollerSchema, workspaceSchema, updateSchema]);
  return ajv;
}

export interface FieldError {
  /** Field path such as `spec.envRefs.FOO.type`, `spec.prerequisites[0].name` or `(root)`. */
  path: string;
  message: string;
}

export type ValidationResult = { ok: true } | { ok: false; errors: FieldError[] };

export type Validator = (value: unknown) => ValidationResult;

function fieldPath(instancePath: string, child?: string): string {
  const segments = instancePath === '' ? [] : instancePath.slice(1).split('/');
  if (child !== undefined) segments.push(child);
  let path = '';
  for (const raw of segments) {
    const segment = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^(0|[1-9][0-9]*)$/.test(segment)) path += `[${segment}]`;
    else path += path === '' ? segment : `.${segment}`;
  }
  return path === '' ? '(root)' : path;
}

function toFieldError(error: ErrorObject): FieldError {
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return { path: fieldPath(error.instancePath, String(params.missingProperty)), message: 'is required' };
    case 'additionalProperties':
      return {
        path: fieldPath(error.instancePath, String(params.additionalProperty)),
        message: 'is not a known field',
      };
    case 'enum': {
      const allowed = (params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ');
      return { path: fieldPath(error.instancePath), message: `must be one of ${allowed}` };
    }
    default:
      return { path: fieldPath(error.instancePath), message: error.message ?? 'is invalid' };
  }
}

/** Readable, de-duplicated field errors from ajv errors (e.g. a Fastify validation error's `validation`). */
export function fieldErrors(errors: readonly ErrorObject[]): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const fieldError = toFieldError(error);
    const key = `${fieldError.path}\u0000${fieldError.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(fieldError);
  }
  return out;
}

/** Turns an ajv validate function into a {@link Validator}. */
export function toValidator(validate: ValidateFunction): Validator {
  return (value: unknown) =>
    validate(value) ? { ok: true } : { ok: false, errors: fieldErrors(validate.errors ?? []) };
}

/** One line per error, e.g. `spec.stack is required; spec.refresh must be boolean`. */
export function formatErrors(errors: readonly FieldError[]): string {
  return errors.map((e) => `${e.path} ${e.message}`).join('; ');
}

let shared: Ajv2020 | undefined;
const cache = new Map<string, Validator>();

function lazy(ref: string): Validator {
  return (value: unknown) => {
    let validator = cache.get(ref);
    if (validator === undefined) {
      shared ??= createAjv();
      const validate = shared.getSchema(ref);
      if (validate === undefined) throw new Error(`schema ${ref} not found`);
      validator = toValidator(validate);
      cache.set(ref, validator);
    }
    return validator(value);
  };
}

const metacontrollerId = String(metacontrollerSchema.$id);

/**
 * Schemas of the hook request bodies, as references for an ajv made by {@link createAjv} (for
 * example Fastify's `schema.body` with `setValidatorCompiler(({ schema }) => ajv.compile(schema))`).
 */
export const requestSchemas = {
  compositeSync: { $ref: `${metacontrollerId}#/$defs/CompositeSyncRequest` },
  customize: { $ref: `${metacontrollerId}#/$defs/CustomizeRequest` },
  decoratorSync: { $ref: `${metacontrollerId}#/$defs/DecoratorSyncRequest` },
} as const;

export const validateStack: Validator = lazy(String(stackSchema.$id));
export const validateProgram: Validator = lazy(String(programSchema.$id));
export const validateWorkspace: Validator = lazy(String(workspaceSchema.$id));
export const validateUpdate: Validator = lazy(String(updateSchema.$id));
export const validateCompositeSyncRequest: Validator = lazy(requestSchemas.compositeSync.$ref);
export const validateCustomizeRequest: Validator = lazy(requestSchemas.customize.$ref);
export const validateDecoratorSyncRequest: Validator = lazy(requestSchemas.decoratorSync.$ref);
