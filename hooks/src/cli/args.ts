import { parseArgs } from 'node:util';
import { UsageError } from './exit-codes';
import { type RefLookup, refLookupKey } from '../git/ref-lookup';
import { errorMessage } from '../lib/errors';

export type OutputFormat = 'yaml' | 'json';

export interface RenderOptions {
  /** Files or directories with the Stacks, Programs and related objects; `-` (or none) is stdin. */
  files: string[];
  /** Files or directories with the observed state: the Stacks' children, or Stacks with their status. */
  observed: string[];
  /** The answers of the git lookups, by refLookupKey(url, ref). */
  refs: Map<string, RefLookup>;
  now: Date;
  output: OutputFormat;
  /** Namespace of the documents that name none (kubectl apply's default). */
  namespace: string;
  /** Leave out documents of kinds no hook reads, instead of refusing the input. */
  skipUnknown: boolean;
  help: boolean;
}

/** The clock when --now is not given: fixed, so that the same input always renders the same bytes. */
export const DEFAULT_NOW = '1970-01-01T00:00:00Z';

const FULL_SHA = /^([0-9a-f]{40}|[0-9a-f]{64})$/;

/** `<url>#<ref>=<sha>`: the url and ref exactly as the Stack spells them, and the commit found. */
function parseRef(text: string): [string, RefLookup] {
  const eq = text.lastIndexOf('=');
  const hash = eq < 0 ? -1 : text.lastIndexOf('#', eq);
  if (hash <= 0 || eq === hash + 1)
    throw new UsageError(`--ref "${text}": expected <repository url>#<branch>=<commit sha>`);
  const sha = text.slice(eq + 1);
  if (!FULL_SHA.test(sha))
    throw new UsageError(`--ref "${text}": "${sha}" is not a full commit SHA (40 or 64 lowercase hex digits)`);
  return [refLookupKey(text.slice(0, hash), text.slice(hash + 1, eq)), { sha }];
}

function parseNow(text: string): Date {
  const date = new Date(text);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(text) || Number.isNaN(date.getTime()))
    throw new UsageError(`--now "${text}": expected an RFC 3339 time such as 2026-01-31T12:00:00Z`);
  return date;
}

/** The options of `render`, from its arguments (after the word `render`). */
export function parseRenderArgs(args: readonly string[]): RenderOptions {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: true,
      strict: true,
      options: {
        filename: { type: 'string', short: 'f', multiple: true },
        observed: { type: 'string', multiple: true },
        ref: { type: 'string', multiple: true },
        now: { type: 'string' },
        output: { type: 'string', short: 'o' },
        namespace: { type: 'string', short: 'n' },
        'skip-unknown': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError(errorMessage(err));
  }
  const { values, positionals } = parsed;
  const output = values.output ?? 'yaml';
  if (output !== 'yaml' && output !== 'json') throw new UsageError(`--output "${output}": expected yaml or json`);
  const namespace = values.namespace ?? 'default';
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(namespace) || namespace.length > 63)
    throw new UsageError(`--namespace "${namespace}" is not a namespace name`);
  const refs = new Map<string, RefLookup>();
  for (const text of values.ref ?? []) {
    const [key, lookup] = parseRef(text);
    refs.set(key, lookup);
  }
  return {
    files: [...(values.filename ?? []), ...positionals],
    observed: values.observed ?? [],
    refs,
    now: parseNow(values.now ?? DEFAULT_NOW),
    output,
    namespace,
    skipUnknown: values['skip-unknown'] === true,
    help: values.help === true,
  };
}

export const RENDER_USAGE = `Usage: pulumi-metacontroller-operator render [flags] [FILE|DIR|-]...

Prints the children and status the hooks would answer for each Stack (and Program) in the input,
without a cluster or network. Input: multi-document YAML or JSON from files, directories (their
.yaml, .yml and .json files, recursively) or stdin (- or no file).

Flags:
  -f, --filename PATH       a file or directory of Stacks, Programs, Flux sources, Secrets (repeatable)
      --observed PATH       the observed state: the Stacks' children (by ownerReference) and Stacks or
                            Programs with their status, as kubectl get -o yaml prints them (repeatable)
      --ref URL#BRANCH=SHA  the commit a git branch resolves to (repeatable); unresolved branches
                            render as the hooks answer before their lookup succeeds
      --now TIME            the clock, RFC 3339 (default ${DEFAULT_NOW})
  -o, --output yaml|json    output format (default yaml)
  -n, --namespace NS        namespace of documents that name none (default "default")
      --skip-unknown        leave out documents of kinds the hooks never read instead of failing
  -h, --help                this text

Exit codes: 0 rendered; 1 a Stack or Program is invalid (Stalled SpecInvalid; the message names the
field); 2 bad command line; 3 unreadable input (missing file, bad YAML, unknown kind).
`;
