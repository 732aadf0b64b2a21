/** Paths and YAML helpers shared by the packaging scripts and tests. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as yaml from 'js-yaml';
import type {
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1ConfigMap,
  V1CustomResourceDefinition,
  V1Deployment,
  V1Namespace,
  V1NetworkPolicy,
  V1Secret,
  V1PodDisruptionBudget,
  V1PodSpec,
  V1Role,
  V1RoleBinding,
  V1Service,
  V1ServiceAccount,
} from '@kubernetes/client-node';
import type { KObject } from '../../e2e/testbed/metacontroller/kube';

/** A Kubernetes object as parsed from YAML: the test bed's one object type. */
export type { KObject };

/**
 * The repository root: the nearest directory above this file holding both package.json and
 * tsconfig.json (so it works from packaging/ under ts-jest and from dist/packaging/ when compiled).
 */
export function repoRoot(from: string = __dirname): string {
  let dir = from;
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'tsconfig.json'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`no repository root above ${from}`);
    dir = up;
  }
}

export const ROOT = repoRoot();

export function repoPath(...parts: string[]): string {
  return path.join(ROOT, ...parts);
}

export function readRepoFile(rel: string): string {
  return fs.readFileSync(repoPath(rel), 'utf8');
}

/** A Metacontroller hook (https://metacontroller.github.io/metacontroller/api/hook.html): a URL or a Service. */
export interface MetacontrollerHook {
  webhook?: {
    url?: string;
    path?: string;
    timeout?: string;
    service?: { name?: string; namespace?: string; port?: number; protocol?: string };
    /** The CA the server is checked against. */
    caBundle?: { secretRef?: { name: string; namespace: string; key?: string } };
    /** The Authorization header sent: `<type> <the Secret's value>`. */
    authorization?: { type?: string; secretRef: { name: string; namespace: string; key: string } };
  };
}

/** The parts of a CompositeController or DecoratorController the tests read. */
export interface MetacontrollerController {
  spec?: {
    /** A CompositeController's parent; a DecoratorController has `resources` instead. */
    parentResource?: { apiVersion: string; resource: string };
    resources?: { apiVersion: string; resource: string }[];
    childResources?: { apiVersion: string; resource: string }[];
    resyncPeriodSeconds?: number;
    hooks?: Record<string, MetacontrollerHook>;
  };
}

/** The parts of a Prometheus Operator ServiceMonitor the tests read. */
export interface ServiceMonitor {
  spec?: {
    selector?: { matchLabels?: Record<string, string> };
    namespaceSelector?: { matchNames?: string[] };
    endpoints?: {
      port?: string;
      scheme?: string;
      tlsConfig?: { serverName?: string; ca?: { secret?: { name: string; key: string } } };
      path?: string;
      interval?: string;
      scrapeTimeout?: string;
      metricRelabelings?: { action?: string }[];
    }[];
    targetLabels?: string[];
  };
}

/** The shape of each kind the manifests and the chart hold. */
export interface KnownKinds {
  ClusterRole: V1ClusterRole;
  ClusterRoleBinding: V1ClusterRoleBinding;
  CompositeController: MetacontrollerController;
  ConfigMap: V1ConfigMap;
  CustomResourceDefinition: V1CustomResourceDefinition;
  DecoratorController: MetacontrollerController;
  Deployment: V1Deployment;
  Namespace: V1Namespace;
  NetworkPolicy: V1NetworkPolicy;
  PodDisruptionBudget: V1PodDisruptionBudget;
  Role: V1Role;
  RoleBinding: V1RoleBinding;
  Secret: V1Secret;
  Service: V1Service;
  ServiceAccount: V1ServiceAccount;
  ServiceMonitor: ServiceMonitor;
}

export type KindOf<K extends keyof KnownKinds> = KObject & KnownKinds[K];

/**
 * Narrows a parsed object by its kind. Its fields are taken to have the kind's shape: the tests
 * assert on them, and manifests.e2e.ts has the API server validate every object strictly.
 */
export function isKind<K extends keyof KnownKinds>(o: KObject, kind: K): o is KindOf<K> {
  return o.kind === kind;
}

/** Every non-empty document of a multi-document YAML text. */
export function loadAll(text: string): unknown[] {
  return yaml.loadAll(text).filter((d) => d !== null && d !== undefined);
}

export function loadObjects(text: string, what = 'YAML'): KObject[] {
  return loadAll(text).map((d, i) => {
    const o = d as Partial<KObject>;
    if (
      typeof o !== 'object' ||
      typeof o.apiVersion !== 'string' ||
      typeof o.kind !== 'string' ||
      typeof o.metadata?.name !== 'string'
    ) {
      throw new Error(`${what}: document ${i + 1} is not a Kubernetes object (apiVersion, kind, metadata.name)`);
    }
    return o as KObject;
  });
}

export function objectKey(o: KObject): string {
  return `${o.kind}/${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;
}

/** `Kind/name` lookup that fails with the list of what there is. */
export function findObject<K extends keyof KnownKinds>(objects: KObject[], kind: K, name: string): KindOf<K> {
  const o = objects.find((x): x is KindOf<K> => isKind(x, kind) && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind}/${name} among: ${objects.map(objectKey).join(', ')}`);
  return o;
}

/** The value, or an error saying what was expected. */
export function required<T>(value: T | undefined, what: string): T {
  if (value === undefined) throw new Error(`expected: ${what}`);
  return value;
}

/** The pod spec of a StatefulSet or Job spec as the hooks build it. */
export function podSpecOf(workloadSpec: unknown): V1PodSpec {
  const template = isRecord(workloadSpec) ? workloadSpec.template : undefined;
  const spec = isRecord(template) ? template.spec : undefined;
  if (!isPodSpec(spec)) throw new Error('no spec.template.spec.containers');
  return spec;
}

/** A pod spec has its containers; the tests check the rest. */
function isPodSpec(value: unknown): value is V1PodSpec {
  return isRecord(value) && Array.isArray(value.containers);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
