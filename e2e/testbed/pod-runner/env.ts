/**
 * Container environment as the kubelet computes it (pkg/kubelet/kubelet_pods.go
 * makeEnvironmentVariables): envFrom first, then env in order, `$(VAR)` expansion of literal
 * values against what is defined so far and the service variables, downward API values from the
 * pod, Secret and ConfigMap values read from the API server.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import type { V1Container, V1ObjectFieldSelector, V1Pod, V1ResourceFieldSelector } from '@kubernetes/client-node';

/** What the pod runner reports as the pod's and host's IP. */
export const POD_IP = '127.0.0.1';

// ---------------------------------------------------------------------------------------------
// $(VAR) expansion: a port of k8s.io/kubernetes/third_party/forked/golang/expansion.

export type Mapping = (name: string) => string;

/** A mapping that looks names up in each context in turn and leaves unknown references as `$(NAME)`. */
export function mappingFor(...contexts: Record<string, string>[]): Mapping {
  return (name) => {
    for (const c of contexts) {
      if (Object.prototype.hasOwnProperty.call(c, name)) return c[name]!;
    }
    return `$(${name})`;
  };
}

function tryReadVariableName(input: string): { read: string; isVar: boolean; advance: number } {
  const c = input[0];
  if (c === '$') return { read: '$', isVar: false, advance: 1 };
  if (c === '(') {
    for (let i = 1; i < input.length; i++) {
      if (input[i] === ')') return { read: input.slice(1, i), isVar: true, advance: i + 1 };
    }
    return { read: '$(', isVar: false, advance: 1 };
  }
  return { read: `$${c ?? ''}`, isVar: false, advance: 1 };
}

export function expand(input: string, mapping: Mapping): string {
  let buf = '';
  let checkpoint = 0;
  for (let cursor = 0; cursor < input.length; cursor++) {
    if (input[cursor] === '$' && cursor + 1 < input.length) {
      buf += input.slice(checkpoint, cursor);
      const { read, isVar, advance } = tryReadVariableName(input.slice(cursor + 1));
      buf += isVar ? mapping(read) : read;
      cursor += advance;
      checkpoint = cursor + 1;
    }
  }
  return buf + input.slice(checkpoint);
}

// ---------------------------------------------------------------------------------------------
// Quantities (resource.Quantity), enough for resourceFieldRef.

const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/** The value of a quantity string in base units (cores, bytes). */
export function parseQuantity(q: string | number): number {
  if (typeof q === 'number') return q;
  const m = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$/.exec(q.trim());
  if (!m) throw new Error(`invalid quantity ${JSON.stringify(q)}`);
  const n = Number(m[1]);
  if (m[3] !== undefined) return n * 10 ** Number(m[3]);
  const suffix = m[2] ?? '';
  return n * (BINARY[suffix] ?? DECIMAL[suffix] ?? 1);
}

/** Node capacity the runner reports (and uses for limits a container does not set). */
export function nodeCapacity(): Record<string, string> {
  let storage = 100 * 2 ** 30;
  try {
    const st = fs.statfsSync(os.tmpdir());
    storage = st.blocks * st.bsize;
  } catch {
    /* keep the default */
  }
  return {
    cpu: String(os.cpus().length),
    memory: String(os.totalmem()),
    'ephemeral-storage': String(storage),
    pods: '110',
  };
}

/** kubelet's ExtractContainerResourceValue with node allocatable for unset limits. */
export function resourceFieldValue(
  sel: V1ResourceFieldSelector,
  container: V1Container | undefined,
  capacity: Record<string, string>,
): string {
  const [kind, resource] = sel.resource.split(/\.(.*)/s) as [string, string | undefined];
  if ((kind !== 'limits' && kind !== 'requests') || resource === undefined)
    throw new Error(`unsupported resource ${sel.resource}`);
  const limits = (container?.resources?.limits ?? {}) as Record<string, string>;
  const requests = (container?.resources?.requests ?? {}) as Record<string, string>;
  let raw: string | undefined = kind === 'limits' ? limits[resource] : requests[resource];
  if (raw === undefined)
    raw =
      kind === 'limits'
        ? capacity[resource]
        : resource === 'cpu' || resource === 'memory' || resource === 'ephemeral-storage'
          ? '0'
          : undefined;
  if (raw === undefined) throw new Error(`unsupported resource ${sel.resource}`);
  const divisor = parseQuantity(sel.divisor === undefined || sel.divisor === '' ? '1' : String(sel.divisor));
  if (divisor === 0) throw new Error('divisor is zero');
  const value = parseQuantity(raw);
  if (resource === 'cpu') {
    // In milli-units, rounded up, as the kubelet does.
    return String(Math.ceil(Math.ceil(value * 1000) / Math.round(divisor * 1000)));
  }
  return String(Math.ceil(value / divisor));
}

// ---------------------------------------------------------------------------------------------
// Downward API

export function fieldRefValue(
  sel: V1ObjectFieldSelector,
  pod: V1Pod,
  opts: { nodeName: string; forVolume?: boolean },
): string {
  const path = sel.fieldPath;
  const md = pod.metadata ?? {};
  const keyed = /^metadata\.(labels|annotations)\['(.*)'\]$/s.exec(path);
  if (keyed) {
    const map = (keyed[1] === 'labels' ? md.labels : md.annotations) ?? {};
    return map[keyed[2]!] ?? '';
  }
  switch (path) {
    case 'metadata.name':
      return md.name ?? '';
    case 'metadata.namespace':
      return md.namespace ?? '';
    case 'metadata.uid':
      return md.uid ?? '';
    case 'metadata.labels':
    case 'metadata.annotations': {
      if (!opts.forVolume) throw new Error(`fieldPath ${path} is only supported in downwardAPI volumes`);
      const map = (path === 'metadata.labels' ? md.labels : md.annotations) ?? {};
      // kubelet's FormatMap: sorted key="value" lines, values quoted as Go's %q.
      return Object.keys(map)
        .sort()
        .map((k) => `${k}=${JSON.stringify(map[k])}`)
        .join('\n');
    }
    case 'spec.nodeName':
      return pod.spec?.nodeName ?? opts.nodeName;
    case 'spec.serviceAccountName':
      return pod.spec?.serviceAccountName ?? '';
    case 'status.hostIP':
    case 'status.hostIPs':
    case 'status.podIP':
    case 'status.podIPs':
      return POD_IP;
    default:
      throw new Error(`unsupported fieldPath ${path}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Container env

export interface ApiObjects {
  /** Secret data decoded to strings (undefined: not found). */
  secret(namespace: string, name: string): Promise<Record<string, string> | undefined>;
  configMap(namespace: string, name: string): Promise<Record<string, string> | undefined>;
}

/** Raised when a container cannot be configured: its state becomes waiting CreateContainerConfigError. */
export class ContainerConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContainerConfigError';
  }
}

export interface EnvContext {
  pod: V1Pod;
  container: V1Container;
  nodeName: string;
  capacity: Record<string, string>;
  /** Variables the kubelet adds for services (KUBERNETES_SERVICE_HOST, ...). */
  serviceEnv: Record<string, string>;
  objects: ApiObjects;
}

/**
 * The container's env as a list (kubelet order: envFrom and env in definition order, then service
 * variables not already set). Throws ContainerConfigError for a missing non-optional Secret,
 * ConfigMap or key, with the kubelet's message.
 */
export async function containerEnv(ctx: EnvContext): Promise<[string, string][]> {
  const { pod, container, objects } = ctx;
  const ns = pod.metadata?.namespace ?? 'default';
  const tmp: Record<string, string> = {};
  const order: string[] = [];
  const set = (k: string, v: string): void => {
    if (!Object.prototype.hasOwnProperty.call(tmp, k)) order.push(k);
    tmp[k] = v;
  };
  const mapping = mappingFor(tmp, ctx.serviceEnv);

  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? '';
    if (from.configMapRef) {
      const name = from.configMapRef.name ?? '';
      const data = await objects.configMap(ns, name);
      if (data === undefined) {
        if (from.configMapRef.optional) continue;
        throw new ContainerConfigError(`configmap "${name}" not found`);
      }
      for (const [k, v] of Object.entries(data)) if (validEnvName(prefix + k)) set(prefix + k, v);
    } else if (from.secretRef) {
      const name = from.secretRef.name ?? '';
      const data = await objects.secret(ns, name);
      if (data === undefined) {
        if (from.secretRef.optional) continue;
        throw new ContainerConfigError(`secret "${name}" not found`);
      }
      for (const [k, v] of Object.entries(data)) if (validEnvName(prefix + k)) set(prefix + k, v);
    }
  }

  for (const e of container.env ?? []) {
    let value = e.value ?? '';
    if (value !== '') {
      value = expand(value, mapping);
    } else if (e.valueFrom) {
      const vf = e.valueFrom;
      if (vf.fieldRef) {
        value = fieldRefValue(vf.fieldRef, pod, { nodeName: ctx.nodeName });
      } else if (vf.resourceFieldRef) {
        const target = vf.resourceFieldRef.containerName
          ? [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find(
              (c) => c.name === vf.resourceFieldRef!.containerName,
            )
          : container;
        value = resourceFieldValue(vf.resourceFieldRef, target, ctx.capacity);
      } else if (vf.configMapKeyRef) {
        const { name = '', key, optional } = vf.configMapKeyRef;
        const data = await objects.configMap(ns, name);
        if (data === undefined) {
          if (optional) continue;
          throw new ContainerConfigError(`configmap "${name}" not found`);
        }
        if (!Object.prototype.hasOwnProperty.call(data, key)) {
          if (optional) continue;
          throw new ContainerConfigError(`couldn't find key ${key} in ConfigMap ${ns}/${name}`);
        }
        value = data[key]!;
      } else if (vf.secretKeyRef) {
        const { name = '', key, optional } = vf.secretKeyRef;
        const data = await objects.secret(ns, name);
        if (data === undefined) {
          if (optional) continue;
          throw new ContainerConfigError(`secret "${name}" not found`);
        }
        if (!Object.prototype.hasOwnProperty.call(data, key)) {
          if (optional) continue;
          throw new ContainerConfigError(`couldn't find key ${key} in Secret ${ns}/${name}`);
        }
        value = data[key]!;
      } else if ((vf as { fileKeyRef?: unknown }).fileKeyRef !== undefined) {
        throw new ContainerConfigError('pod runner: env valueFrom.fileKeyRef is not supported');
      }
    }
    set(e.name, value);
  }

  const out: [string, string][] = order.map((k) => [k, tmp[k]!]);
  for (const [k, v] of Object.entries(ctx.serviceEnv))
    if (!Object.prototype.hasOwnProperty.call(tmp, k)) out.push([k, v]);
  return out;
}

/** Relaxed env var names (GA since 1.34): printable ASCII except '=', not empty. */
function validEnvName(k: string): boolean {
  return k !== '' && /^[\x20-\x7e]+$/.test(k) && !k.includes('=');
}

/** The kubelet's command/args expansion against the final env. */
export function expandCommand(words: string[] | undefined, env: Record<string, string>): string[] {
  const mapping = mappingFor(env);
  return (words ?? []).map((w) => expand(w, mapping));
}

/** Variables of the `kubernetes` Service, pointing at the real API server on loopback. */
export function kubernetesServiceEnv(host: string, port: number): Record<string, string> {
  return {
    KUBERNETES_SERVICE_HOST: host,
    KUBERNETES_SERVICE_PORT: String(port),
    KUBERNETES_SERVICE_PORT_HTTPS: String(port),
    KUBERNETES_PORT: `tcp://${host}:${port}`,
    [`KUBERNETES_PORT_${port}_TCP`]: `tcp://${host}:${port}`,
    [`KUBERNETES_PORT_${port}_TCP_PROTO`]: 'tcp',
    [`KUBERNETES_PORT_${port}_TCP_PORT`]: String(port),
    [`KUBERNETES_PORT_${port}_TCP_ADDR`]: host,
  };
}
