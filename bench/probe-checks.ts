/**
 * What every 2xx answer of a sync hook must be, whatever the request: only children its controller
 * makes (the kinds its Metacontroller manifest declares, in the parent's namespace: never what a
 * forged last-applied annotation claims), no wait longer than a day, no raw control character in a
 * condition. The probe checks each answer (./probe-run.ts).
 */
import { MAX_RESYNC_SECONDS } from '../hooks/src/lib/time';
import { hasControlCharacter } from '../hooks/test/answers';
import { declaredChildren, resourceOf } from '../hooks/test/children';

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

const CONTROLLERS: Record<string, 'stack' | 'workspace' | 'update' | 'program'> = {
  '/stack/sync': 'stack',
  '/stack/finalize': 'stack',
  '/workspace/sync': 'workspace',
  '/update/sync': 'update',
  '/program/sync': 'program',
};

const declared = new Map<string, Set<string>>();
function declaredBy(controller: 'stack' | 'workspace' | 'update' | 'program'): Set<string> {
  let set = declared.get(controller);
  if (!set) declared.set(controller, (set = new Set(declaredChildren(controller))));
  return set;
}

/** A namespace name the API server accepts (a DNS-1123 label). */
function isNamespace(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 63 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(value);
}

/** The problems of a 2xx answer of `path` to `request` (its JSON text), one sentence each; none for other routes. */
export function answerProblems(path: string, request: Buffer | undefined, answerText: string): string[] {
  const controller = CONTROLLERS[path];
  if (!controller) return [];
  let answer: unknown;
  try {
    answer = JSON.parse(answerText);
  } catch {
    return ['the answer is not JSON'];
  }
  if (!isObject(answer)) return ['the answer is not an object'];
  const problems: string[] = [];
  let parentNamespace: unknown;
  try {
    // As the server reads it: a byte order mark is skipped.
    const body: unknown = JSON.parse((request?.toString('utf8') ?? '').replace(/^\uFEFF/, ''));
    const parent = isObject(body) ? (body.parent ?? body.object) : undefined;
    parentNamespace = isObject(parent) && isObject(parent.metadata) ? parent.metadata.namespace : undefined;
  } catch {
    // The answer came from Fastify's parser after all: its namespace is not ours to tell.
  }
  const children = answer[controller === 'program' ? 'attachments' : 'children'];
  for (const child of Array.isArray(children) ? children : []) {
    if (!isObject(child)) {
      problems.push(`a child that is no object: ${JSON.stringify(child)?.slice(0, 80)}`);
      continue;
    }
    const meta = isObject(child.metadata) ? child.metadata : {};
    const what = `${String(child.kind)} ${String(meta.name)}`;
    if (!declaredBy(controller).has(resourceOf(child)))
      problems.push(`${what} (${String(child.apiVersion)}) is not a kind the ${controller} controller makes`);
    // A parent whose namespace no API server would accept (a mutation) has no namespace to compare with.
    const namespace = meta.namespace ?? '';
    if (isNamespace(parentNamespace) && namespace !== parentNamespace)
      problems.push(`${what} is in namespace ${JSON.stringify(namespace)}, not the parent's`);
  }
  const resync = answer.resyncAfterSeconds;
  if (
    resync !== undefined &&
    !(Number.isInteger(resync) && (resync as number) >= 1 && (resync as number) <= MAX_RESYNC_SECONDS)
  )
    problems.push(`resyncAfterSeconds is ${JSON.stringify(resync)}, not 1 to ${MAX_RESYNC_SECONDS}`);
  const status = isObject(answer.status) ? answer.status : {};
  for (const c of Array.isArray(status.conditions) ? status.conditions : []) {
    if (isObject(c) && typeof c.message === 'string' && hasControlCharacter(c.message))
      problems.push(
        `condition ${String(c.type)} carries control characters: ${JSON.stringify(c.message).slice(0, 120)}`,
      );
  }
  return problems;
}
