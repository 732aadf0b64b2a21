/**
 * The runner's part of a Stack's `spec.outputsTo` (docs/outputs-to.md): after a successful `up`,
 * the outputs go into the Secret or ConfigMap of the user's naming, owned by the Stack (a plain
 * owner reference: the garbage collector deletes it with the Stack, and no controller claims it)
 * and labelled `pulumi.com/outputs-of: <stack>`. An object of that name without both is someone
 * else's: it is left untouched and the report says `conflict`. The object an earlier `up` wrote,
 * when it is not the target any more, is deleted if it is still the Stack's.
 */
import type * as k8s from '@kubernetes/client-node';
import {
  isDataKey,
  Labels,
  OutputsToKeys,
  outputText,
  parseOutputsToRequest,
  reportedNames,
  type OutputsToEntry,
  type OutputsToKind,
  type OutputsToObject,
  type OutputsToReport,
  type OutputsToRequest,
  type OutputsToSkipped,
  type OutputsToTarget,
  type UpdateResult,
} from '../../../contract';
import type { OutputValue } from '../api';
import { AgentError, errorMessage } from '../lib/errors';
import { k8sModule, withRetries } from '../lib/kube';
import { say } from '../lib/log';

/** A Secret or ConfigMap as the runner reads and writes it. */
export interface DataObject {
  metadata: k8s.V1ObjectMeta;
  /** Secret: values in base64; ConfigMap: values as they are. */
  data?: Record<string, string>;
  [field: string]: unknown;
}

/** The calls the runner makes, on Secrets or ConfigMaps of its namespace. */
export interface OutputsToApi {
  /** The object, or undefined when there is none. */
  read(kind: OutputsToKind, name: string): Promise<DataObject | undefined>;
  /** false: an object of that name appeared meanwhile. */
  create(kind: OutputsToKind, body: DataObject): Promise<boolean>;
  /** false: the object changed since it was read (its resourceVersion). */
  replace(kind: OutputsToKind, body: DataObject): Promise<boolean>;
  /** Deletes the object if it still has `uid`. */
  remove(kind: OutputsToKind, name: string, uid: string): Promise<void>;
}

/** The request the hooks gave the runner (env PULUMI_OUTPUTS_TO), if any. */
export function readOutputsToRequest(env: NodeJS.ProcessEnv): OutputsToRequest | undefined {
  const raw = env[OutputsToKeys.env];
  if (raw === undefined || raw === '') return undefined;
  const request = parseOutputsToRequest(raw);
  if (typeof request === 'string')
    throw new AgentError(`${OutputsToKeys.env} ${request}`, { reason: 'InvalidArguments', exitCode: 2 });
  return request;
}

interface Selected {
  /** Key → value as written (not yet base64). */
  data: Map<string, string>;
  skipped: { secret: string[]; invalidKey: string[]; missing: string[] };
}

/** Which outputs go into the object, under which keys; and which are left out, and why. */
export function selectOutputs(target: OutputsToTarget, outputs: Record<string, OutputValue>): Selected {
  const entries: OutputsToEntry[] = target.outputs ?? Object.keys(outputs).map((name) => ({ name }));
  const selected: Selected = { data: new Map(), skipped: { secret: [], invalidKey: [], missing: [] } };
  for (const { name, key = name } of entries) {
    const output = Object.hasOwn(outputs, name) ? outputs[name] : undefined;
    if (output === undefined) selected.skipped.missing.push(name);
    else if (output.secret && target.kind === 'ConfigMap') selected.skipped.secret.push(name);
    else if (!isDataKey(key)) selected.skipped.invalidKey.push(name);
    else selected.data.set(key, outputText(output.value));
  }
  for (const list of Object.values(selected.skipped)) list.sort();
  return selected;
}

function skippedOf(selected: Selected): OutputsToSkipped | undefined {
  const { secret, invalidKey, missing } = selected.skipped;
  const total = secret.length + invalidKey.length + missing.length;
  if (total === 0) return undefined;
  const skipped: OutputsToSkipped = { total };
  if (secret.length) skipped.secret = reportedNames(secret);
  if (invalidKey.length) skipped.invalidKey = reportedNames(invalidKey);
  if (missing.length) skipped.missing = reportedNames(missing);
  return skipped;
}

/** Whether `o` is the Stack's: its owner reference and label, both as the runner writes them. */
export function isStacks(o: DataObject, stack: OutputsToRequest['stack']): boolean {
  const owned = (o.metadata.ownerReferences ?? []).some((r) => r.kind === 'Stack' && r.uid === stack.uid);
  return owned && o.metadata.labels?.[OutputsToKeys.label] === stack.name;
}

function dataOf(kind: OutputsToKind, selected: Selected): Record<string, string> {
  const encode = (v: string) => (kind === 'Secret' ? Buffer.from(v, 'utf8').toString('base64') : v);
  return Object.fromEntries([...selected.data].map(([k, v]) => [k, encode(v)]));
}

function newObject(request: OutputsToRequest, target: OutputsToObject, namespace: string, selected: Selected) {
  const { stack } = request;
  const body: DataObject = {
    apiVersion: 'v1',
    kind: target.kind,
    metadata: {
      name: target.name,
      namespace,
      labels: { [Labels.stackName]: stack.name, [OutputsToKeys.label]: stack.name },
      // Not a controller reference: Metacontroller claims a Stack's children by theirs.
      ownerReferences: [{ apiVersion: 'pulumi.com/v1', kind: 'Stack', name: stack.name, uid: stack.uid }],
    },
    data: dataOf(target.kind, selected),
  };
  if (target.kind === 'Secret') body.type = 'Opaque';
  return body;
}

/** The Stack's object with the new data; everything else on it (labels, annotations of others) is kept. */
function updatedObject(existing: DataObject, selected: Selected, kind: OutputsToKind): DataObject {
  const body: DataObject = { ...existing, data: dataOf(kind, selected) };
  delete body.stringData;
  delete body.binaryData;
  return body;
}

/** How often the runner reads again when the object changed under it. */
const ATTEMPTS = 3;

async function writeTarget(
  api: OutputsToApi,
  request: OutputsToRequest,
  target: OutputsToTarget,
  namespace: string,
  selected: Selected,
): Promise<'written' | 'conflict'> {
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    const existing = await api.read(target.kind, target.name);
    if (existing === undefined) {
      if (await api.create(target.kind, newObject(request, target, namespace, selected))) return 'written';
    } else if (!isStacks(existing, request.stack)) {
      return 'conflict';
    } else if (await api.replace(target.kind, updatedObject(existing, selected, target.kind))) {
      return 'written';
    }
  }
  throw new AgentError(`${target.kind} ${target.name} kept changing while the outputs were written`);
}

async function deletePrevious(api: OutputsToApi, request: OutputsToRequest, previous: OutputsToObject): Promise<void> {
  const existing = await api.read(previous.kind, previous.name);
  if (existing === undefined) return;
  const uid = existing.metadata.uid;
  if (!isStacks(existing, request.stack) || !uid) {
    say(`[pko-agent] ${previous.kind} ${previous.name} is not the Stack's any more: left as it is`);
    return;
  }
  await api.remove(previous.kind, previous.name, uid);
  say(`[pko-agent] deleted ${previous.kind} ${previous.name}, where earlier outputs were written`);
}

/**
 * Writes the outputs of a successful `up` where the request says, and deletes the object an earlier
 * `up` wrote; the report for the result (undefined without a target). Throws on API failures.
 */
export async function writeOutputsTo(
  api: OutputsToApi,
  request: OutputsToRequest,
  outputs: Record<string, OutputValue>,
  namespace: string,
): Promise<OutputsToReport | undefined> {
  const { target, previous } = request;
  let report: OutputsToReport | undefined;
  if (target) {
    const selected = selectOutputs(target, outputs);
    const state = await writeTarget(api, request, target, namespace, selected);
    report = { kind: target.kind, name: target.name, state };
    const skipped = skippedOf(selected);
    if (state === 'written' && skipped) report.skipped = skipped;
    say(
      state === 'written'
        ? `[pko-agent] outputs written to ${target.kind} ${target.name}: ${selected.data.size} key(s)` +
            (skipped ? `, ${skipped.total} output(s) left out` : '')
        : `[pko-agent] ${target.kind} ${target.name} exists and is not the Stack's: left untouched, outputs not written there`,
    );
  }
  // The outputs moved (or are no longer wanted): the old object goes, whatever became of the new one.
  if (previous && !(target && target.kind === previous.kind && target.name === previous.name))
    await deletePrevious(api, request, previous);
  return report;
}

/** The API calls through client-node, each retried on transient failures. */
export function kubeOutputsToApi(kubeConfig: k8s.KubeConfig, namespace: string): OutputsToApi {
  const core = kubeConfig.makeApiClient(k8sModule().CoreV1Api);
  const what = (kind: OutputsToKind, name: string | undefined) => `${kind} ${namespace}/${name ?? ''}`;
  const status = (e: unknown) => (e instanceof AgentError ? e.status : undefined);
  return {
    async read(kind, name) {
      try {
        const o = await withRetries(`reading ${what(kind, name)}`, () =>
          kind === 'Secret'
            ? core.readNamespacedSecret({ name, namespace })
            : core.readNamespacedConfigMap({ name, namespace }),
        );
        return o as DataObject;
      } catch (e) {
        if (status(e) === 404) return undefined;
        throw e;
      }
    },
    async create(kind, body) {
      try {
        await withRetries(`creating ${what(kind, body.metadata.name)}`, () =>
          kind === 'Secret'
            ? core.createNamespacedSecret({ namespace, body })
            : core.createNamespacedConfigMap({ namespace, body }),
        );
        return true;
      } catch (e) {
        if (status(e) === 409) return false;
        throw e;
      }
    },
    async replace(kind, body) {
      const name = body.metadata.name ?? '';
      try {
        await withRetries(`updating ${what(kind, name)}`, () =>
          kind === 'Secret'
            ? core.replaceNamespacedSecret({ name, namespace, body })
            : core.replaceNamespacedConfigMap({ name, namespace, body }),
        );
        return true;
      } catch (e) {
        if (status(e) === 409) return false;
        throw e;
      }
    },
    async remove(kind, name, uid) {
      const body = { preconditions: { uid } };
      try {
        await withRetries(`deleting ${what(kind, name)}`, () =>
          kind === 'Secret'
            ? core.deleteNamespacedSecret({ name, namespace, body })
            : core.deleteNamespacedConfigMap({ name, namespace, body }),
        );
      } catch (e) {
        // Gone already, or replaced by another object of that name (the uid precondition): not ours to delete.
        if (status(e) === 404 || status(e) === 409) return;
        throw e;
      }
    },
  };
}

/**
 * The result of a successful `up` with what was written where the hooks asked (env
 * PULUMI_OUTPUTS_TO; none: the result as it is). A conflict is reported, not a failure: the `up`
 * did succeed, and the Stack stalls on the report. Any other failure fails the result, as failing
 * to write the outputs Secret does, so that the Stack runs the `up` again.
 */
export async function withOutputsTo(
  result: UpdateResult,
  outputs: Record<string, OutputValue>,
  kube: { kubeConfig: k8s.KubeConfig; namespace: string; env: NodeJS.ProcessEnv },
): Promise<UpdateResult> {
  let request: OutputsToRequest | undefined;
  try {
    request = readOutputsToRequest(kube.env);
    if (!request) return result;
    const report = await writeOutputsTo(
      kubeOutputsToApi(kube.kubeConfig, kube.namespace),
      request,
      outputs,
      kube.namespace,
    );
    return report ? { ...result, outputsTo: report } : result;
  } catch (e) {
    const where = request?.target ? `${request.target.kind} ${request.target.name}` : 'spec.outputsTo';
    const failed: UpdateResult = {
      ...result,
      state: 'failed',
      reason: 'UpdateFailed',
      message: `the up succeeded, but its outputs could not be written to ${where}: ${errorMessage(e)}`,
    };
    delete failed.outputs;
    return failed;
  }
}
