/**
 * A Stack's `spec.outputsTo` on the Update's side (docs/outputs-to.md): the request the Stack put on
 * its Update (annotation) goes to the Job's runner (env), and the runner's identity may touch
 * exactly the objects it names: get and update the target, get and delete the previous object.
 * `create` cannot be limited by name: the identity may already create Secrets (the outputs Secret);
 * for a ConfigMap target it may create ConfigMaps too.
 */
import type { Update } from '../../../schemas/generated/types';
import { OutputsToKeys, parseOutputsToRequest, type OutputsToKind, type OutputsToRequest } from '../../../contract';

/** A rule of a Role. */
export interface PolicyRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

/**
 * The request an Update carries, undefined when none; a string says what is wrong with it. Only the
 * Stack that owns the Update may ask: otherwise anyone who may create Updates could have a Job write
 * or delete another Stack's outputs object by naming that Stack.
 */
export function outputsToRequestOf(update: Update): OutputsToRequest | string | undefined {
  const raw = update.metadata.annotations?.[OutputsToKeys.annotation];
  if (raw === undefined) return undefined;
  const request = parseOutputsToRequest(raw);
  if (typeof request === 'string') return request;
  const owned = (update.metadata.ownerReferences ?? []).some(
    (ref) => ref.kind === 'Stack' && ref.uid === request.stack.uid && ref.name === request.stack.name,
  );
  return owned ? request : `names Stack ${request.stack.name}, which does not own this Update`;
}

/** What is wrong with the request an Update carries, naming the annotation. */
export function outputsToProblem(update: Update): string | undefined {
  const request = outputsToRequestOf(update);
  return typeof request === 'string' ? `metadata.annotations["${OutputsToKeys.annotation}"] ${request}` : undefined;
}

/** The request, for the Job's env (undefined when none, or not well-formed: the Update fails then). */
export function validOutputsToRequest(update: Update): OutputsToRequest | undefined {
  const request = outputsToRequestOf(update);
  return typeof request === 'object' ? request : undefined;
}

const RESOURCES: Record<OutputsToKind, string> = { Secret: 'secrets', ConfigMap: 'configmaps' };

/** The rules the Job's identity needs for the request of its Update. */
export function outputsToRules(update: Update): PolicyRule[] {
  const request = validOutputsToRequest(update);
  if (!request) return [];
  const rules: PolicyRule[] = [];
  const { target, previous } = request;
  if (target) {
    const resource = RESOURCES[target.kind];
    // Secrets: `create` is granted already, for the outputs Secret.
    if (target.kind === 'ConfigMap') rules.push({ apiGroups: [''], resources: [resource], verbs: ['create'] });
    rules.push({ apiGroups: [''], resources: [resource], verbs: ['get', 'update'], resourceNames: [target.name] });
  }
  if (previous) {
    rules.push({
      apiGroups: [''],
      resources: [RESOURCES[previous.kind]],
      verbs: ['get', 'delete'],
      resourceNames: [previous.name],
    });
  }
  return rules;
}

/** The runner's env var that carries the request, if the Update has one. */
export function outputsToEnv(update: Update): { name: string; value: string }[] {
  const request = validOutputsToRequest(update);
  return request ? [{ name: OutputsToKeys.env, value: JSON.stringify(request) }] : [];
}
