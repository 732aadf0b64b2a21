/**
 * A Stack's `spec.outputsTo`: the Secret or ConfigMap of the user's naming that the Job's runner
 * writes the outputs of each successful `up` into (docs/outputs-to.md). The hooks put what to write
 * on the Update (annotation) and in the Job (env); the runner reports what it did in its result.
 * The hooks never see an output's value: only the runner reads them, and writes them there.
 */

/** The kinds a Stack's outputs may go to. */
export type OutputsToKind = 'Secret' | 'ConfigMap';

const KINDS: readonly string[] = ['Secret', 'ConfigMap'];

/** Names shared by the hooks and the runner. */
export const OutputsToKeys = {
  /** On the Update a Stack creates for an `up` (hooks): the OutputsToRequest, JSON. */
  annotation: 'pulumi.com/outputs-to',
  /** In the Job's runner container (hooks): the same OutputsToRequest, JSON. */
  env: 'PULUMI_OUTPUTS_TO',
  /** On the object the runner writes: the name of the Stack whose outputs it holds (with its owner reference). */
  label: 'pulumi.com/outputs-of',
} as const;

/** One output to write, and the key it goes under (default: its name). */
export interface OutputsToEntry {
  name: string;
  key?: string;
}

/** A Secret or ConfigMap in the Stack's namespace. */
export interface OutputsToObject {
  kind: OutputsToKind;
  name: string;
}

/** spec.outputsTo: the object, and which outputs (absent: all). */
export interface OutputsToTarget extends OutputsToObject {
  outputs?: OutputsToEntry[];
}

/** What the runner is asked to do after a successful `up`. */
export interface OutputsToRequest {
  /** The Stack that owns what is written (owner reference, label). */
  stack: { name: string; uid: string };
  /** Where the outputs go; absent when spec.outputsTo was removed and only `previous` is left to delete. */
  target?: OutputsToTarget;
  /** What an earlier `up` wrote, when it is not the target any more: deleted if it is still the Stack's. */
  previous?: OutputsToObject;
}

/** Outputs left out of the object, by why. Each list holds at most MAX_REPORTED_NAMES names; `total` counts them all. */
export interface OutputsToSkipped {
  /** Secret outputs, which never go into a ConfigMap. */
  secret?: string[];
  /** Output names that are no valid key, met when all outputs are written: list them with a `key`. */
  invalidKey?: string[];
  /** Listed outputs the stack does not have. */
  missing?: string[];
  total: number;
}

/** What the runner did (UpdateResult.outputsTo). */
export interface OutputsToReport extends OutputsToObject {
  /** written: the object holds the outputs; conflict: an object of that name is not the Stack's, and was left untouched. */
  state: 'written' | 'conflict';
  skipped?: OutputsToSkipped;
}

/** How many names each skipped list carries (a result's annotation is bounded). */
export const MAX_REPORTED_NAMES = 20;
/** How long a reported name may be; longer ones are cut. */
const MAX_REPORTED_NAME_LENGTH = 253;

/** The most entries spec.outputsTo.outputs may have (the schema's maxItems). */
export const MAX_OUTPUTS_TO_ENTRIES = 256;

const DATA_KEY = /^[-._a-zA-Z0-9]+$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Whether `key` may be a key of a Secret's or ConfigMap's data (Kubernetes' IsConfigMapKey). */
export function isDataKey(key: string): boolean {
  return key.length <= 253 && DATA_KEY.test(key) && key !== '.' && key !== '..' && !key.startsWith('..');
}

/** Whether `name` may name a Secret or ConfigMap (a DNS subdomain). */
export function isObjectName(name: string): boolean {
  return name.length <= 253 && DNS_SUBDOMAIN.test(name);
}

/** An output's value as it is written: a string as is, anything else as JSON text. */
export function outputText(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function objectOf(v: unknown, at: string): OutputsToObject | string {
  if (!isRecord(v)) return `${at} must be an object`;
  if (typeof v.kind !== 'string' || !KINDS.includes(v.kind)) return `${at}.kind must be Secret or ConfigMap`;
  if (typeof v.name !== 'string' || !isObjectName(v.name)) return `${at}.name must be a Secret or ConfigMap name`;
  return { kind: v.kind as OutputsToKind, name: v.name };
}

function entriesOf(v: unknown, at: string): OutputsToEntry[] | string {
  if (!Array.isArray(v) || v.length > MAX_OUTPUTS_TO_ENTRIES)
    return `${at} must be a list of at most ${MAX_OUTPUTS_TO_ENTRIES} entries`;
  const entries: OutputsToEntry[] = [];
  for (const [i, e] of v.entries()) {
    if (!isRecord(e) || typeof e.name !== 'string' || e.name === '') return `${at}[${i}].name must be a string`;
    const entry: OutputsToEntry = { name: e.name };
    if (e.key !== undefined) {
      if (typeof e.key !== 'string' || !isDataKey(e.key)) return `${at}[${i}].key must be a valid key`;
      entry.key = e.key;
    }
    if (!isDataKey(entry.key ?? entry.name)) return `${at}[${i}] needs a valid key`;
    entries.push(entry);
  }
  return entries;
}

/**
 * Parses an OutputsToRequest (the Update's annotation, the runner's env); a string says what is
 * wrong with it. Checked as strictly as the Stack's spec, since a hand-made Update may carry one.
 */
export function parseOutputsToRequest(raw: string): OutputsToRequest | string {
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return 'is not JSON';
  }
  if (!isRecord(v)) return 'must be a JSON object';
  const stack = v.stack;
  if (!isRecord(stack) || typeof stack.name !== 'string' || typeof stack.uid !== 'string' || stack.uid === '')
    return 'stack must name the Stack and its uid';
  const request: OutputsToRequest = { stack: { name: stack.name, uid: stack.uid } };
  if (v.target !== undefined) {
    const target = objectOf(v.target, 'target');
    if (typeof target === 'string') return target;
    const outputs = (v.target as Record<string, unknown>).outputs;
    if (outputs !== undefined) {
      const entries = entriesOf(outputs, 'target.outputs');
      if (typeof entries === 'string') return entries;
      request.target = { ...target, outputs: entries };
    } else {
      request.target = target;
    }
  }
  if (v.previous !== undefined) {
    const previous = objectOf(v.previous, 'previous');
    if (typeof previous === 'string') return previous;
    request.previous = previous;
  }
  if (request.target === undefined && request.previous === undefined)
    return 'names neither a target nor a previous object';
  return request;
}

function namesOf(v: unknown): string[] | undefined {
  if (!Array.isArray(v)) return undefined;
  const names = v
    .filter((n): n is string => typeof n === 'string')
    .slice(0, MAX_REPORTED_NAMES)
    .map((n) => n.slice(0, MAX_REPORTED_NAME_LENGTH));
  return names.length > 0 ? names : undefined;
}

/** The names as a report carries them: at most MAX_REPORTED_NAMES, each cut to a bounded length. */
export function reportedNames(names: readonly string[]): string[] {
  return namesOf(names) ?? [];
}

/** Parses a report (in a Job's result or an Update's status); undefined when it is not one. */
export function parseOutputsToReport(v: unknown): OutputsToReport | undefined {
  if (!isRecord(v)) return undefined;
  const object = objectOf(v, 'outputsTo');
  if (typeof object === 'string') return undefined;
  if (v.state !== 'written' && v.state !== 'conflict') return undefined;
  const report: OutputsToReport = { ...object, state: v.state };
  const s = v.skipped;
  if (isRecord(s) && typeof s.total === 'number' && Number.isSafeInteger(s.total) && s.total > 0) {
    const skipped: OutputsToSkipped = { total: s.total };
    for (const why of ['secret', 'invalidKey', 'missing'] as const) {
      const names = namesOf(s[why]);
      if (names) skipped[why] = names;
    }
    report.skipped = skipped;
  }
  return report;
}
