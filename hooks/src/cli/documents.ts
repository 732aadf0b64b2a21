import * as jsYaml from 'js-yaml';
import { CORE_SCHEMA, type Type } from 'js-yaml';
import { isRecord, MAX_NESTING, PROTOTYPE_KEY_PROBLEM, prototypeKeyPath, dottedPath } from '../lib/json';
import type { KObject } from '../lib/k8s';
import { readYaml, YamlBudgetError, type YamlBudget } from '../lib/yaml';
import { InputError } from './exit-codes';

/** One input text: a file's content, or stdin's. */
export interface InputText {
  /** What messages call it: the file's path, or `<stdin>`. */
  name: string;
  text: string;
}

/**
 * YAML 1.2's core schema with merge keys (`<<: *anchor`): times and binary stay strings, as the
 * API server keeps them, so what the hooks see is the JSON the cluster would hand them.
 */
// js-yaml exports its built-in types at run time; @types/js-yaml does not declare them.
const { merge } = (jsYaml as unknown as { types: { merge: Type } }).types;
const MANIFEST_SCHEMA = CORE_SCHEMA.extend({ implicit: [merge] });

/** How deep a document may nest. */
const READ_DEPTH = 10 * MAX_NESTING;

/** Kinds that are cluster-scoped among those the hooks read; every other object gets a namespace. */
const CLUSTER_SCOPED = new Set(['Namespace.v1']);

/**
 * The Kubernetes objects of one multi-document YAML (or JSON) text, in order: empty documents
 * skipped, a `List` expanded into its items, each namespaced object given `namespace` when it names
 * none (as `kubectl apply -n` would). Anything the API server would not have stored is an InputError
 * naming the document and the field, and so is a text past the YAML budgets (lib/yaml.ts), which
 * `budget` counts across the texts of one render.
 */
export function parseDocuments(input: InputText, namespace: string, budget?: YamlBudget): KObject[] {
  let documents: unknown[];
  try {
    // js-yaml stops at 100 levels by default; the hooks judge deeper specs themselves (SpecInvalid
    // past MAX_NESTING under spec), so documents read up to a depth well past it.
    documents = readYaml(input.text, {
      schema: MANIFEST_SCHEMA,
      filename: input.name,
      maxDepth: READ_DEPTH,
      ...(budget ? { budget } : {}),
    });
  } catch (err) {
    if (err instanceof YamlBudgetError) throw new InputError(`${input.name}: refused: ${err.message}`);
    // js-yaml's message starts with the problem and names the line; a stack overflow is too deep a document.
    const why = err instanceof RangeError ? 'nested too deeply to read' : (err as Error).message;
    throw new InputError(`${input.name}: not valid YAML: ${why}`);
  }
  const objects: KObject[] = [];
  documents.forEach((document, index) => {
    if (document === null || document === undefined) return;
    const where = `${input.name}: document ${index + 1}`;
    // A List (kubectl get -o yaml) names no object of its own: its items are the objects.
    if (isRecord(document) && document.kind === 'List' && document.apiVersion === 'v1') {
      const items = document.items;
      if (!Array.isArray(items)) throw new InputError(`${where}: items must be a list`);
      items.forEach((item, i) => objects.push(withNamespace(checkObject(item, `${where}, items[${i}]`), namespace)));
      return;
    }
    objects.push(withNamespace(checkObject(document, where), namespace));
  });
  return objects;
}

function checkObject(value: unknown, where: string): KObject {
  if (!isRecord(value))
    throw new InputError(`${where}: expected a Kubernetes object (a mapping), not ${typeName(value)}`);
  const refused = prototypeKeyPath(value);
  if (refused !== undefined)
    throw new InputError(`${where}: ${dottedPath('', refused).slice(1)} is refused: ${PROTOTYPE_KEY_PROBLEM}`);
  for (const field of ['apiVersion', 'kind'] as const) {
    if (typeof value[field] !== 'string' || value[field] === '')
      throw new InputError(`${where}: ${field} is required (a string)`);
  }
  const metadata = value.metadata;
  if (!isRecord(metadata)) throw new InputError(`${where}: metadata is required (a mapping)`);
  if (typeof metadata.name !== 'string' || metadata.name === '')
    throw new InputError(`${where}: metadata.name is required (a string)`);
  if (metadata.namespace !== undefined && typeof metadata.namespace !== 'string')
    throw new InputError(`${where}: metadata.namespace must be a string`);
  return value as KObject;
}

function withNamespace(object: KObject, namespace: string): KObject {
  if (object.metadata.namespace !== undefined || CLUSTER_SCOPED.has(`${object.kind}.${object.apiVersion}`))
    return object;
  return { ...object, metadata: { ...object.metadata, namespace } };
}

function typeName(value: unknown): string {
  if (Array.isArray(value)) return 'a list';
  return value === null ? 'null' : `a ${typeof value}`;
}
