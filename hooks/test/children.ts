/**
 * Typed views of the children the hooks return. The hooks build children as loose JSON (KObject);
 * a test reads one through the @kubernetes/client-node model of its kind, in its JSON form, once
 * its kind is checked. Lookups a test relies on throw and say what is missing, so the test fails
 * there, never on an `undefined` read further on.
 */
import type {
  V1ConfigMap,
  V1Container,
  V1EnvVar,
  V1Job,
  V1PersistentVolumeClaim,
  V1ObjectMeta,
  V1PodSpec,
  V1Role,
  V1RoleBinding,
  V1Service,
  V1ServiceAccount,
  V1StatefulSet,
} from '@kubernetes/client-node';
import * as yaml from 'js-yaml';
import { Env } from '../../contract';
import type { KObject } from '../src/lib/k8s';
import { readRepoFile } from '../../packaging/lib/repo';
import { isRecord } from './json';

/** A client-node model as JSON carries it: its Date fields are RFC 3339 strings. */
type AsJson<T> = T extends Date
  ? string
  : T extends readonly (infer U)[]
    ? AsJson<U>[]
    : T extends object
      ? { [K in keyof T]: AsJson<T[K]> }
      : T;

/** The kinds of child a Stack has (manifests/metacontroller/stack-controller.yaml); ConfigMap is a Program's attachment too. */
interface Models {
  Workspace: KObject;
  Update: KObject;
  StatefulSet: V1StatefulSet;
  Service: V1Service;
  Job: V1Job;
  ConfigMap: V1ConfigMap;
  ServiceAccount: V1ServiceAccount;
  Role: V1Role;
  RoleBinding: V1RoleBinding;
  PersistentVolumeClaim: V1PersistentVolumeClaim;
}
type ChildKind = keyof Models;

type Metadata = AsJson<V1ObjectMeta> & { name: string };

/** A child of one kind, with what every object the hooks return has: apiVersion, kind and a name. */
export type Child<K extends ChildKind> = AsJson<Models[K]> & { apiVersion: string; kind: K; metadata: Metadata };

type PodSpec = AsJson<V1PodSpec>;
type Container = AsJson<V1Container>;
type EnvVar = AsJson<V1EnvVar>;
export interface PodTemplate {
  metadata: AsJson<V1ObjectMeta>;
  spec: PodSpec;
}

function describeValue(value: unknown): string {
  return isRecord(value) ? `${String(value.kind)} ${JSON.stringify(value.metadata)}` : JSON.stringify(value);
}

function isChild<K extends ChildKind>(value: unknown, kind: K): value is Child<K> {
  return (
    isRecord(value) &&
    value.kind === kind &&
    typeof value.apiVersion === 'string' &&
    isRecord(value.metadata) &&
    typeof value.metadata.name === 'string'
  );
}

/** An object seen as a child of `kind`; throws when it is something else. */
export function asChild<K extends ChildKind>(value: unknown, kind: K): Child<K> {
  if (!isChild(value, kind)) throw new Error(`expected a ${kind}, got ${describeValue(value)}`);
  return value;
}

/** Every child of `kind` in an answer (or in `{ children: cluster }`), in order. */
export function childrenOf<K extends ChildKind>(res: { children: readonly unknown[] }, kind: K): Child<K>[] {
  return res.children.filter((c) => isRecord(c) && c.kind === kind).map((c) => asChild(c, kind));
}

/** The child of `kind` (and `name`, if given); throws when there is none. */
export function childOf<K extends ChildKind>(res: { children: readonly unknown[] }, kind: K, name?: string): Child<K> {
  const found = childrenOf(res, kind).find((c) => name === undefined || c.metadata.name === name);
  if (!found) throw new Error(`no ${kind}${name === undefined ? '' : ` named ${name}`} among the children`);
  return found;
}

/** The item at `index`; throws when the list is shorter (or absent). */
export function at<T>(list: readonly T[] | undefined, index: number, what: string): T {
  const item = list?.[index];
  if (item === undefined) throw new Error(`no ${what} at index ${index}`);
  return item;
}

/** The pod template of a StatefulSet or a Job; throws when it has no metadata or spec. */
export function templateOf(workload: Child<'StatefulSet'> | Child<'Job'>): PodTemplate {
  const template = workload.spec?.template;
  if (!template?.metadata || !template.spec)
    throw new Error(`${workload.kind} ${workload.metadata.name} has no pod template`);
  return { ...template, metadata: template.metadata, spec: template.spec };
}

export function podSpecOf(workload: Child<'StatefulSet'> | Child<'Job'>): PodSpec {
  return templateOf(workload).spec;
}

/** The container `name` among a pod's containers (or its init containers). */
export function containerOf(pod: PodSpec, name: string, init = false): Container {
  const found = (init ? pod.initContainers : pod.containers)?.find((c) => c.name === name);
  if (!found) throw new Error(`no ${init ? 'init ' : ''}container named ${name}`);
  return found;
}

/** The workspace's first init container: the one that fetches the source. */
export function fetchContainerOf(sts: Child<'StatefulSet'>): Container {
  const fetch = podSpecOf(sts).initContainers?.find((c) => c.name === 'fetch');
  if (!fetch) throw new Error('the workspace pod has no fetch init container');
  return fetch;
}

/** A container's env list; throws when it has none. */
export function envList(container: Container): EnvVar[] {
  if (!container.env) throw new Error(`container ${container.name} has no env`);
  return container.env;
}

export function envVar(container: Container, name: string): EnvVar | undefined {
  return envList(container).find((e) => e.name === name);
}

/** The literal value of an env var; throws when it is absent or set by reference. */
export function envValue(container: Container, name: string): string {
  const value = envVar(container, name)?.value;
  if (value === undefined) throw new Error(`container ${container.name} has no value for ${name}`);
  return value;
}

/**
 * The operation a Job runs: its runner's first env var, PULUMI_OPERATION, parsed (the agent's own
 * parser checks the fields; a test compares them).
 */
export function operationOf(job: Child<'Job'>): Record<string, unknown> {
  const runner = at(podSpecOf(job).containers, 0, 'container');
  const first = at(runner.env, 0, 'env var');
  if (first.name !== Env.operation || first.value === undefined)
    throw new Error(`the runner's first env var is ${JSON.stringify(first)}, not ${Env.operation}`);
  const op: unknown = JSON.parse(first.value);
  if (!isRecord(op)) throw new Error(`${Env.operation} is not a JSON object: ${first.value}`);
  return op;
}

/**
 * `<apiVersion>/<resource>` of every child resource (attachment, for the Program's
 * DecoratorController) the Metacontroller manifest of a controller declares: the only children its
 * hook may answer with.
 */
export function declaredChildren(controller: 'stack' | 'workspace' | 'update' | 'program'): string[] {
  const file = `manifests/metacontroller/${controller}-controller.yaml`;
  const manifest: unknown = yaml.load(readRepoFile(file));
  const spec = isRecord(manifest) ? manifest.spec : undefined;
  const resources = isRecord(spec) ? (spec.childResources ?? spec.attachments) : undefined;
  if (!Array.isArray(resources)) throw new Error(`${file} declares no childResources or attachments`);
  return resources.map((r: unknown) => {
    if (!isRecord(r) || typeof r.apiVersion !== 'string' || typeof r.resource !== 'string')
      throw new Error(`${file}: not a child resource: ${JSON.stringify(r)}`);
    return `${r.apiVersion}/${r.resource}`;
  });
}

const PLURAL: Record<string, string> = {
  Workspace: 'workspaces',
  Update: 'updates',
  StatefulSet: 'statefulsets',
  Service: 'services',
  Job: 'jobs',
  ConfigMap: 'configmaps',
  ServiceAccount: 'serviceaccounts',
  Role: 'roles',
  RoleBinding: 'rolebindings',
};

/** `<apiVersion>/<resource>` of a child, as a controller manifest names its kind. */
export function resourceOf(child: { apiVersion?: unknown; kind?: unknown }): string {
  const kind = String(child.kind);
  return `${String(child.apiVersion)}/${Object.hasOwn(PLURAL, kind) ? PLURAL[kind] : kind.toLowerCase()}`;
}
