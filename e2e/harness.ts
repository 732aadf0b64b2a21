/**
 * The whole operator on the test bed, wired as in a cluster: a real control plane, our CRDs, the
 * Metacontroller controllers from manifests/metacontroller (driven by the in-process driver, or
 * the real binary with METACONTROLLER_BIN), the hook server on a real port, and the pod runner
 * running workspace and Job pods with the agent from this repository (bin/pko-agent, built dist/)
 * and the real Pulumi CLI. Tests drive everything through the API server, like kubectl.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import * as k8s from '@kubernetes/client-node';
import type { V1Pod } from '@kubernetes/client-node';
import { WORKSPACE_PORT } from '../contract';
import type { Stack, StackCondition, StackSpec } from '../schemas/generated/types';
import { configFromEnv } from '../hooks/src/config';
import { startHookServer, type RunningServer } from '../hooks/src/main';
import { startControlPlane, freePort, type ControlPlane } from './testbed/control-plane';
import { startControllers } from './testbed/metacontroller-harness';
import { startPodRunner, type PodRunner } from './testbed/pod-runner';
import { REPO_ROOT, requireToolchain } from './testbed/toolchain';
import { eventually } from './testbed/eventually';

export { eventually };

export const AGENT_IMAGE = 'e2e.test/pko-agent:dev';

export interface Operator {
  cp: ControlPlane;
  objects: k8s.KubernetesObjectApi;
  custom: k8s.CustomObjectsApi;
  core: k8s.CoreV1Api;
  batch: k8s.BatchV1Api;
  apps: k8s.AppsV1Api;
  runner: PodRunner;
  hooksPort: number;
  /** Stops the hook server and starts a new one on the same port (the hooks hold no state). */
  restartHooks(): Promise<void>;
  /** A namespace enforcing the restricted Pod Security profile, with the Stack RBAC and a state PVC. */
  namespace(name: string): Promise<string>;
  /** Where the PVC `pulumi-state` of a namespace lives on this machine (the file backend). */
  stateDir(namespace: string): string;
  /** A Stack as the API server has it. */
  getStack(namespace: string, name: string): Promise<Stack>;
  /** Waits until the Stack is Ready for its current generation (and `after` holds, if given). */
  readyStack(namespace: string, name: string, after?: (stack: Stack) => boolean, timeoutMs?: number): Promise<Stack>;
  stop(): Promise<void>;
}

/** Whether an object exists: `read` is a typed client call; a 404 means no, any other error is thrown. */
export async function exists(read: () => Promise<unknown>): Promise<boolean> {
  try {
    await read();
    return true;
  } catch (e) {
    if (e instanceof k8s.ApiException && e.code === 404) return false;
    throw e;
  }
}

/** `value`, or an error naming `what` when it is missing (a failed expectation, typed). */
export function defined<T>(value: T | null | undefined, what: string): T {
  if (value === undefined || value === null) throw new Error(`${what} is missing`);
  return value;
}

/** The resources of a stack's checkpoint in a file backend (`<state>/.pulumi/stacks/<project>/<stack>.json`). */
export interface CheckpointResource {
  urn: string;
  type: string;
  outputs?: Record<string, unknown>;
}

/** The resources of a file backend's checkpoint, undefined when the file does not exist. */
export function checkpointResources(
  stateDir: string,
  project: string,
  stack: string,
): CheckpointResource[] | undefined {
  const file = join(stateDir, '.pulumi', 'stacks', project, `${stack}.json`);
  if (!existsSync(file)) return undefined;
  const doc = JSON.parse(readFileSync(file, 'utf8')) as {
    checkpoint?: { latest?: { resources?: CheckpointResource[] } };
  };
  return doc.checkpoint?.latest?.resources ?? [];
}

/** A condition of a Stack's (or a Program's) status, by type. */
export function stackCondition<C extends { type: string } = StackCondition>(
  object: { status?: { conditions?: C[] } } | undefined,
  type: string,
): C | undefined {
  return (object?.status?.conditions ?? []).find((c) => c.type === type);
}

type Controllers = Awaited<ReturnType<typeof startControllers>>;

/**
 * Every pod shares the host's network, so each workspace gets its own port: the workspace
 * container listens there and the Jobs of the same Stack call it there (docs/pod-runner.md).
 */
function portRewriter(): (pod: V1Pod) => V1Pod {
  const ports = new Map<string, number>();
  let next = 0;
  const portFor = (ns: string, stack: string): number => {
    const key = `${ns}/${stack}`;
    if (!ports.has(key)) ports.set(key, 40000 + (process.pid % 1000) * 20 + next++);
    return ports.get(key)!;
  };
  return (pod) => {
    const stack = pod.metadata?.labels?.['pulumi.com/stack-name'];
    const ns = pod.metadata?.namespace ?? 'default';
    if (!stack) return pod;
    const port = portFor(ns, stack);
    const copy = structuredClone(pod);
    for (const c of copy.spec?.containers ?? []) {
      if (c.name === 'pulumi') {
        c.env = [...(c.env ?? []), { name: 'PKO_AGENT_PORT', value: String(port) }];
        for (const p of c.ports ?? []) if (p.containerPort === WORKSPACE_PORT) p.containerPort = port;
        if (c.readinessProbe?.httpGet) c.readinessProbe.httpGet.port = port;
      }
      for (const e of c.env ?? []) {
        if (e.name === 'PULUMI_WORKSPACE_URL' && e.value) e.value = e.value.replace(`:${WORKSPACE_PORT}`, `:${port}`);
      }
    }
    return copy;
  };
}

export async function startOperator(): Promise<Operator> {
  // YAML programs need only the CLI and its YAML host; Node.js programs and the command provider
  // are the agent suite's business.
  const toolchain = requireToolchain(['etcd', 'kubernetes']);
  for (const bin of [toolchain.binaries.pulumi, toolchain.binaries.pulumiLanguageYaml]) {
    if (!existsSync(bin)) throw new Error(`${bin} is missing: run e2e/toolchain/build.sh pulumi`);
  }
  if (!existsSync(join(REPO_ROOT, 'dist', 'agent', 'src', 'main.js')))
    throw new Error('the agent is not built: run `npm run build` first');
  const cp = await startControlPlane();
  const kc = cp.kubeConfig;
  const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
  for (const file of readdirSync(join(REPO_ROOT, 'manifests', 'crds'))) {
    for (const doc of loadAll(readFileSync(join(REPO_ROOT, 'manifests', 'crds', file), 'utf8')))
      await objects.create(doc as k8s.KubernetesObject);
  }
  await eventually('the CRDs to be served', async () => {
    await kc
      .makeApiClient(k8s.CustomObjectsApi)
      .listClusterCustomObject({ group: 'pulumi.com', version: 'v1', plural: 'stacks' });
    await kc
      .makeApiClient(k8s.CustomObjectsApi)
      .listClusterCustomObject({ group: 'pulumi.com', version: 'v1', plural: 'programs' });
    return true;
  });

  const hooksPort = await freePort();
  const hookConfig = {
    ...configFromEnv({}),
    port: hooksPort,
    host: '127.0.0.1',
    agentImage: AGENT_IMAGE,
    logLevel: process.env.PKO_E2E_HOOK_LOGS ? 'info' : 'warn',
  };
  let hooks: RunningServer = await startHookServer(hookConfig);
  const controllers: Controllers = await startControllers({
    kubeConfig: kc,
    kubeconfigPath: cp.kubeconfigPath,
    hooksBaseUrl: `http://127.0.0.1:${hooksPort}`,
  });

  const runner = await startPodRunner({
    kubeConfig: kc,
    images: {
      [`${AGENT_IMAGE.split(':')[0]}:*`]: {
        path: ['/opt/pko/bin', '/opt/pulumi/bin'],
        binds: {
          '/opt/pko': REPO_ROOT,
          '/opt/pulumi/bin': toolchain.binDirs.pulumi,
          '/opt/pulumi-command/bin': toolchain.binDirs.command,
        },
        writableDirs: { '/home/pulumi': {} },
        env: {
          HOME: '/home/pulumi',
          PULUMI_SKIP_UPDATE_CHECK: 'true',
          PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
          PATH: `/opt/pko/bin:/opt/pulumi/bin:/opt/pulumi-command/bin:${process.env.PATH ?? '/usr/bin:/bin'}`,
        },
        user: 1000,
        group: 1000,
      },
    },
    transformPod: portRewriter(),
    backoffInitialMs: 500,
    backoffMaxMs: 5000,
  });

  const stackRbac = readFileSync(join(REPO_ROOT, 'manifests', 'stack-rbac.yaml'), 'utf8');
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  const getStack = async (namespace: string, name: string): Promise<Stack> =>
    (await custom.getNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1',
      namespace,
      plural: 'stacks',
      name,
    })) as Stack;
  return {
    getStack,
    readyStack: (namespace, name, after, timeoutMs = 240_000) =>
      eventually(
        `Stack ${namespace}/${name} to be Ready`,
        async () => {
          const s = await getStack(namespace, name);
          const ready =
            stackCondition(s, 'Ready')?.status === 'True' && s.status?.observedGeneration === s.metadata.generation;
          return ready && (!after || after(s)) ? s : undefined;
        },
        timeoutMs,
        500,
      ),
    cp,
    objects,
    custom,
    core: kc.makeApiClient(k8s.CoreV1Api),
    batch: kc.makeApiClient(k8s.BatchV1Api),
    apps: kc.makeApiClient(k8s.AppsV1Api),
    runner,
    hooksPort,
    async restartHooks() {
      await hooks.shutdown('test');
      hooks = await startHookServer(hookConfig);
    },
    async namespace(name) {
      await objects.create({
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: { name, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
      });
      for (const doc of loadAll(
        stackRbac.replace(/namespace: default/g, `namespace: ${name}`).replace(/:default:/g, `:${name}:`),
      )) {
        const obj = doc as k8s.KubernetesObject;
        if (!obj) continue;
        await objects.create(obj).catch((e: unknown) => {
          if (!(e instanceof k8s.ApiException && e.code === 409)) throw e;
        });
      }
      await objects.create({
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: 'pulumi-state', namespace: name },
        spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
      });
      return name;
    },
    stateDir: (namespace) => join(runner.workDir, 'claims', namespace, 'pulumi-state'),
    async stop() {
      await runner.stop().catch(() => undefined);
      await controllers.stop().catch(() => undefined);
      await hooks.shutdown('test').catch(() => undefined);
      await cp.stop();
    },
  };
}

/** The usual settings of an e2e Stack: a file backend on the namespace's PVC and a passphrase. */
export function e2eStackSpec(extra: Partial<StackSpec> & Pick<StackSpec, 'stack'>): StackSpec {
  return {
    serviceAccountName: 'pulumi',
    backend: 'file:///state',
    envRefs: { PULUMI_CONFIG_PASSPHRASE: { type: 'Literal', literal: { value: 'e2e-passphrase' } } },
    workspaceTemplate: {
      spec: {
        podTemplate: {
          spec: {
            volumes: [{ name: 'state', persistentVolumeClaim: { claimName: 'pulumi-state' } }],
            containers: [{ name: 'pulumi', volumeMounts: [{ name: 'state', mountPath: '/state' }] }],
          },
        },
      },
    },
    ...extra,
  };
}
