import type { Program, Stack } from '../../../schemas/generated/types';
import { formatErrors, validateCompositeSyncRequest, validateDecoratorSyncRequest } from '../../../schemas';
import type { HookConfig } from '../config';
import { ChildNotVerified, MalformedRequest, type KObject } from '../lib/k8s';
import { isRecord } from '../lib/json';
import { syncProgram, type ProgramSyncResponse } from '../program/sync';
import { Reasons } from '../stack/conditions';
import { customizeStack } from '../stack/customize';
import { planRefLookup } from '../stack/source';
import { syncStack, type StackSyncRequest, type StackSyncResponse } from '../stack/sync';
import { isFluxKind } from '../stack/validate';
import { InputError } from './exit-codes';
import { appliedOver, identity, isRelatedKind, objectMap, ownedBy, refuseDuplicates, selectRelated } from './objects';
import { PULUMI_API_VERSION } from '../lib/api-versions';
import { type RefLookup, refLookupKey } from '../git/ref-lookup';

export interface RenderInput {
  /** The desired objects (a GitOps repository's manifests): Stacks, Programs, Flux sources, Secrets, … */
  documents: readonly KObject[];
  /** The observed state: children of the Stacks and Programs, and objects as the cluster holds them. */
  observed: readonly KObject[];
}

export interface RenderSettings {
  config: HookConfig;
  now: Date;
  /** The git lookups' answers (--ref), by refLookupKey(url, ref). */
  refs: ReadonlyMap<string, RefLookup>;
  /** Leave out documents of kinds the hooks never read instead of refusing them. */
  skipUnknown: boolean;
}

/** One parent and the hook's answer for it, exactly as the hook server would send it. */
export interface Rendered<R> {
  kind: string;
  namespace: string;
  name: string;
  response: R;
}

export interface RenderResult {
  programs: Rendered<ProgramSyncResponse>[];
  stacks: Rendered<StackSyncResponse>[];
  /** Stacks and Programs the hooks find invalid: `Stack ns/name: <the Stalled condition's message>`. */
  invalid: string[];
  /** What the reader should know about the render (unresolved branches, unused --ref flags, skipped documents). */
  notes: string[];
}

const isStack = (o: KObject): boolean => o.kind === 'Stack' && o.apiVersion === PULUMI_API_VERSION;
const isProgram = (o: KObject): boolean => o.kind === 'Program' && o.apiVersion === PULUMI_API_VERSION;
const nameOf = (o: KObject): string => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const byName = (a: KObject, b: KObject): number => (nameOf(a) < nameOf(b) ? -1 : nameOf(a) > nameOf(b) ? 1 : 0);

/** Kinds the input may hold: what the hooks answer for, and what a Stack's customize hook can ask for. */
function isReadKind(o: KObject): boolean {
  if (isStack(o) || isProgram(o)) return true;
  if (o.apiVersion.startsWith('source.toolkit.fluxcd.io/')) return isFluxKind(o.kind);
  return o.apiVersion === 'v1' && isRelatedKind(o.kind);
}

/** The message of a Stalled/SpecInvalid condition in a hook's status, if that is what it says. */
function specInvalidMessage(status: { conditions?: unknown }): string | undefined {
  const conditions: unknown[] = Array.isArray(status.conditions) ? status.conditions : [];
  const stalled = conditions.filter(isRecord).find((c) => c.type === 'Stalled' && c.status === 'True');
  return stalled?.reason === Reasons.SpecInvalid ? String(stalled.message) : undefined;
}

function refused(parent: KObject, problem: string, status = 400): InputError {
  return new InputError(
    `${parent.kind} ${nameOf(parent)}: the hooks would refuse the request (HTTP ${status}): ${problem}`,
  );
}

/** The hooks' answer as a render's: a request they would refuse (400, 409) is an input error. */
function answered<T>(parent: KObject, answer: () => T): T {
  try {
    return answer();
  } catch (err) {
    if (err instanceof MalformedRequest) throw refused(parent, err.message);
    if (err instanceof ChildNotVerified) throw refused(parent, err.message, 409);
    throw err;
  }
}

/**
 * What the hooks answer for each Program and Stack of the input, given the observed state: the
 * Program hook first (a Stack sees its Program with the status that hook writes), then each
 * Stack's customize hook to pick its related objects and its sync hook. Pure: the git lookups'
 * answers come from `settings.refs`, and nothing here does I/O.
 */
export function render(input: RenderInput, settings: RenderSettings): RenderResult {
  const notes: string[] = [];
  const documents = input.documents.filter((o) => {
    if (isReadKind(o)) return true;
    if (!settings.skipUnknown)
      throw new InputError(
        `${identity(o)}: the hooks never read a ${o.kind} (${o.apiVersion}); pass --skip-unknown to leave such documents out`,
      );
    notes.push(`skipped ${identity(o)}: the hooks never read this kind`);
    return false;
  });
  refuseDuplicates(documents, 'the input');
  refuseDuplicates(input.observed, 'the observed state');

  const observedById = new Map(input.observed.map((o) => [identity(o), o]));
  const desiredIds = new Set(documents.map(identity));
  const desired = documents.map((o) => appliedOver(o, observedById.get(identity(o))));

  // 1. Programs: the Program controller has run by the time a Stack reads its Program.
  const programs: Rendered<ProgramSyncResponse>[] = [];
  const withProgramStatus = desired.map((object) => {
    if (!isProgram(object)) return object;
    const request = { object: object as Program, attachments: objectMap(ownedBy(object, input.observed)) };
    const check = validateDecoratorSyncRequest(request);
    if (!check.ok) throw refused(object, formatErrors(check.errors));
    const response = answered(object, () => syncProgram(request, settings.now, settings.config.programServer?.url));
    programs.push({
      kind: 'Program',
      namespace: object.metadata.namespace ?? '',
      name: object.metadata.name,
      response,
    });
    return { ...object, status: response.status };
  });

  // 2. Stacks, each with the related objects its customize hook selects from everything known.
  const pool = [...withProgramStatus, ...input.observed.filter((o) => !desiredIds.has(identity(o)))];
  const usedRefs = new Set<string>();
  const stacks = withProgramStatus
    .filter(isStack)
    .sort(byName)
    .map((object): Rendered<StackSyncResponse> => {
      const stack = object as unknown as Stack;
      const request: StackSyncRequest = {
        parent: stack,
        children: objectMap(ownedBy(object, input.observed)),
        related: selectRelated(customizeStack(stack).relatedResources, pool),
      };
      const check = validateCompositeSyncRequest(request);
      if (!check.ok) throw refused(object, formatErrors(check.errors));
      const lookups = lookupsFor(stack, request, settings.refs, usedRefs, notes);
      const response = answered(object, () =>
        syncStack(request, { config: settings.config, now: settings.now, lookups }),
      );
      return { kind: 'Stack', namespace: stack.metadata.namespace ?? '', name: stack.metadata.name, response };
    });

  for (const key of settings.refs.keys())
    if (!usedRefs.has(key)) notes.push(`--ref ${key}=… matches no branch a Stack of the input resolves`);
  programs.sort(byRendered);
  const invalid = [...programs, ...stacks].flatMap((r) => {
    const message = specInvalidMessage(r.response.status);
    return message === undefined ? [] : [`${r.kind} ${r.namespace}/${r.name}: ${message}`];
  });
  return { programs, stacks, invalid, notes };
}

function byRendered(a: Rendered<unknown>, b: Rendered<unknown>): number {
  const x = `${a.namespace}/${a.name}`;
  const y = `${b.namespace}/${b.name}`;
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * The lookup phase of the hook server without its I/O: the branch a Stack needs resolved is
 * planned by the hooks' own planRefLookup; its answer is the --ref given for it, or the refusal
 * the hooks' resolver gives without connecting (credentials it cannot use), or absent, which the
 * sync answers as a lookup that has not succeeded yet.
 */
function lookupsFor(
  stack: Stack,
  request: StackSyncRequest,
  refs: ReadonlyMap<string, RefLookup>,
  usedRefs: Set<string>,
  notes: string[],
): Map<string, RefLookup> {
  const lookups = new Map<string, RefLookup>();
  let plan;
  try {
    plan = stack.spec ? planRefLookup(stack, request.related) : undefined;
  } catch {
    return lookups; // a spec too broken to plan from: validation reports it
  }
  if (plan === undefined) return lookups;
  const key = refLookupKey(plan.url, plan.ref);
  const given = refs.get(key);
  if (given !== undefined) {
    // A --ref stands for a lookup that succeeded, credentials included: the Secrets need not be in the input.
    usedRefs.add(key);
    lookups.set(key, given);
  } else if (plan.unsupported !== undefined) {
    lookups.set(key, { error: plan.unsupported });
  } else {
    notes.push(
      `Stack ${stack.metadata.namespace}/${stack.metadata.name}: "${plan.ref}" of ${plan.url} is not resolved (no --ref ${key}=<sha>); ` +
        `rendered as the hooks answer before the lookup succeeds`,
    );
  }
  return lookups;
}
