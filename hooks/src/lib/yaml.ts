/**
 * Every YAML text the hooks' code parses goes through {@link readYaml}, within two budgets: the
 * text's size, and what its aliases add. js-yaml resolves an alias to the very value its anchor
 * names, so a few hundred bytes of nested aliases (a "billion laughs") parse at once into a graph
 * that is exabytes as a tree: whatever walks it as one (JSON, a copy, the render) runs out of
 * memory. An anchor may even name a collection that holds it: a cycle. So an alias to a string is
 * charged, as it is read, the length it adds to the text, and after parsing each document is
 * measured as the JSON it stands for, each object once, charging every repeat of an object its
 * measure; past the budget, or on a cycle, the text is refused with an error saying so. The work
 * is proportional to the text.
 */
import { loadAll, type LoadOptions, type Schema, type State } from 'js-yaml';

/** The largest text read, in UTF-8 bytes. */
export const MAX_YAML_TEXT_BYTES = 64 * 1024 * 1024;

/** What aliases may add, in bytes of JSON, to all the texts read with one budget. */
export const MAX_ALIAS_EXPANSION_BYTES = 16 * 1024 * 1024;

/** A text refused for its size, its aliases or a cycle; the message says which. */
export class YamlBudgetError extends Error {}

/** The bytes aliases may still add, shared by the texts of one run (a render reads many files). */
export interface YamlBudget {
  aliasBytes: number;
}

export function yamlBudget(aliasBytes = MAX_ALIAS_EXPANSION_BYTES): YamlBudget {
  return { aliasBytes };
}

export interface ReadYamlOptions {
  schema: Schema;
  /** Named in js-yaml's messages. */
  filename: string;
  /** How deep a document may nest, in the text and once its aliases are expanded. */
  maxDepth: number;
  budget?: YamlBudget;
}

/**
 * The documents of a multi-document YAML text, each refused (YamlBudgetError) if reading it as a
 * tree would take more than the budget allows. js-yaml's own errors (syntax, depth, merge keys past
 * its maxTotalMergeKeys) are thrown as they are.
 */
export function readYaml(text: string, options: ReadYamlOptions): unknown[] {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_YAML_TEXT_BYTES)
    throw new YamlBudgetError(`${bytes} bytes is more than the ${MAX_YAML_TEXT_BYTES} bytes read in one text`);
  const { schema, filename, maxDepth } = options;
  const budget = options.budget ?? yamlBudget();
  // Where each node being read starts: a string longer than its own text came from an alias.
  const starts: number[] = [];
  const listener = (event: 'open' | 'close', state: State): void => {
    if (event === 'open') {
      starts.push(state.position);
      return;
    }
    const start = starts.pop() ?? state.position;
    const result: unknown = state.result;
    if (typeof result === 'string' && result.length > state.position - start) {
      budget.aliasBytes -= result.length - (state.position - start);
      if (budget.aliasBytes < 0) throw new YamlBudgetError(aliasBomb);
    }
  };
  // maxDepth is a js-yaml option its types do not declare.
  const documents = loadAll(text, undefined, { schema, filename, maxDepth, listener } as LoadOptions);
  documents.forEach((document, index) => measure(document, index + 1, budget, maxDepth));
  return documents;
}

const aliasBomb = `its aliases expand to more than the ${MAX_ALIAS_EXPANSION_BYTES} bytes allowed (an alias bomb?)`;

/**
 * Measures a document as JSON (each object once: its size and height are remembered), charging
 * every repeat of an object (an alias) its size, and refusing what nests deeper than maxDepth once
 * expanded, or holds itself.
 */
function measure(document: unknown, number: number, budget: YamlBudget, maxDepth: number): void {
  const measured = new Map<object, { size: number; height: number }>();
  const open = new Set<object>();
  const refuse = (why: string): never => {
    throw new YamlBudgetError(`document ${number}: ${why}`);
  };
  const tooDeep = `nested more than ${maxDepth} levels deep once its aliases are expanded`;
  const walk = (value: unknown, depth: number): { size: number; height: number } => {
    if (value === null || typeof value !== 'object')
      return { size: typeof value === 'string' ? value.length + 2 : 8, height: 0 };
    const known = measured.get(value);
    if (known !== undefined) {
      // An alias: the object again, as a tree.
      budget.aliasBytes -= known.size;
      if (budget.aliasBytes < 0) refuse(aliasBomb);
      if (depth + known.height > maxDepth) refuse(tooDeep);
      return known;
    }
    if (open.has(value)) refuse('an alias refers to a collection that holds it (a cycle)');
    if (depth >= maxDepth) refuse(tooDeep);
    open.add(value);
    let size = 2;
    let height = 0;
    const add = (item: unknown, extra: number) => {
      const m = walk(item, depth + 1);
      size += m.size + extra;
      height = Math.max(height, m.height);
    };
    if (Array.isArray(value)) for (const item of value) add(item, 1);
    else for (const [key, item] of Object.entries(value)) add(item, key.length + 4);
    open.delete(value);
    const m = { size, height: height + 1 };
    measured.set(value, m);
    return m;
  };
  walk(document, 0);
}
