/**
 * The whole operator on the test bed, wired as in a cluster: a real control plane and a real node
 * (kubelet, containerd, runc, CNI, CoreDNS) in the test network, our CRDs, the Metacontroller
 * controllers from manifests/metacontroller (driven by the in-process driver, or the real binary
 * with METACONTROLLER_BIN), the hook server on a real port, and workspace and Job pods running as
 * containers of the agent image built from our Dockerfile. Tests drive everything through the API
 * server, like kubectl. The hook server serves HTTPS and requires the bearer token, with the two
 * Secrets of manifests/hooks-credentials.sh (its certificate also names 127.0.0.1), which the
 * controllers' caBundle and authorization name, as install.yaml's do.
 */
import { chownSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadAll } from 'js-yaml';
import * as k8s from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import type { Stack } from '../../schemas/generated/types';
import { configFromEnv, type HookConfig } from '../../hooks/src/config';
import { kubeEventsApi } from '../../hooks/src/events/kubernetes';
import { kubeObjectsApi, kubeProgramGetter } from '../../hooks/src/objects/kubernetes';
import { kubeReviewApi, TokenReviewer } from '../../hooks/src/kube/token-review';
import type { EventRecorder } from '../../hooks/src/events/recorder';
import { startHookServer, type RunningServer } from '../../hooks/src/main';
import { condition } from '../../hooks/test/builders';
import { makeHookCredentials, type HookCredentials } from '../../hooks/test/credentials';
import { defined, hooksKubeConfig } from './cluster';
import { startControlPlane, type ControlPlane } from './control-plane';
import { distinctFreePorts, eventually } from './helpers';
import { ensureImages } from './images/containerd';
import { IMAGE_REFS } from './images/refs';
import { startControllers } from './metacontroller-harness';
import { startNode, type RealNode } from './node';
import { requireTestbedEnvironment } from './node/environment';
import { REPO_ROOT, requireToolchain } from './toolchain';

/** The agent image built from our Dockerfile (e2e/testbed/images), in the node's containerd. */
export const AGENT_IMAGE = IMAGE_REFS.agent;

export interface Operator {
  cp: ControlPlane;
  objects: k8s.KubernetesObjectApi;
  custom: k8s.CustomObjectsApi;
  core: k8s.CoreV1Api;
  batch: k8s.BatchV1Api;
  apps: k8s.AppsV1Api;
  node: RealNode;
  hooksPort: number;
  /** Where the hook server is served: https://127.0.0.1:<hooksPort>. */
  hooksUrl: string;
  /**
   * Where workspace pods download Programs from it, https://<node address>:<its program port>
   * (PROGRAM_SERVER_URL), and the CA they check it against: the hooks' config.programServer.
   */
  programServer: { url: string; ca: string };
  /**
   * A request to the hook server as Metacontroller makes it (HTTPS checked against the CA of the
   * hooks' Secret, with its bearer token), or with another Authorization header or none
   * (`authorization`). GET without a body.
   */
  hookRequest(path: string, options?: { body?: unknown; authorization?: string | null }): Promise<HookAnswer>;
  /** A container's log through the API server (kubelet), as `kubectl logs [--previous]`; '' when there is none. */
  logs(namespace: string, pod: string, container: string, options?: { previous?: boolean }): Promise<string>;
  /**
   * Follows a running container's log, as `kubectl logs -f`: what it logs until it ends stays
   * readable after the pod is gone (kubelet removes a deleted pod's logs).
   */
  followLogs(namespace: string, pod: string, container: string): Promise<FollowedLog>;
  /** Stops the hook server and starts a new one on the same port (the hooks hold no state). */
  restartHooks(): Promise<void>;
  /**
   * Stops the hook server: Metacontroller's calls fail (nothing a Stack owns changes, its status
   * stays) until the returned function starts a new one on the same port.
   */
  stopHooks(): Promise<() => Promise<void>>;
  /** What the running hook server's event writer did so far (it starts from zero on a restart). */
  hookEvents(): EventRecorder['counts'];
  /** Resolves when the running hook server's event writer has written (or given up on) every queued event. */
  hookEventsIdle(): Promise<void>;
  /** A namespace enforcing the restricted Pod Security profile, with the Stack RBAC and a state PVC. */
  namespace(name: string): Promise<string>;
  /** Where the PVC `pulumi-state` of a namespace lives on the node (a hostPath volume; the file backend). */
  stateDir(namespace: string): string;
  /**
   * A PersistentVolume for the claim `namespace/claim`, bound to it in advance (the test bed has no
   * provisioner): a directory of the node's disk, owned by uid 1000 (the workspace's user).
   * Returns the directory.
   */
  volumeForClaim(namespace: string, claim: string): Promise<string>;
  /** A Stack as the API server has it. */
  getStack(namespace: string, name: string): Promise<Stack>;
  /** A JSON merge patch of a Stack, as `kubectl patch stack --type merge` sends it. */
  patchStack(namespace: string, name: string, body: object): Promise<void>;
  /** Waits until the Stack is Ready for its current generation (and `after` holds, if given). */
  readyStack(namespace: string, name: string, after?: (stack: Stack) => boolean, timeoutMs?: number): Promise<Stack>;
  stop(): Promise<void>;
}

/** What the hook server answered. */
export interface HookAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export interface FollowedLog {
  /** Everything logged so far. */
  text(): string;
  /** Resolves when the log ends (the container stopped) or stop() was called. */
  ended: Promise<void>;
  stop(): void;
}

type Controllers = Awaited<ReturnType<typeof startControllers>>;

export interface OperatorOptions {
  /** Settings of the hook server on top of the test bed's (e.g. sshKnownHosts for a test's SSH server). */
  hookConfig?: Partial<HookConfig>;
}

export async function startOperator(options: OperatorOptions = {}): Promise<Operator> {
  const env = requireTestbedEnvironment();
  requireToolchain(['etcd', 'kubernetes', 'coredns', 'crictl']);
  await ensureImages(env.containerdSocket);
  const cp = await startControlPlane({ nodeAddress: env.nodeIp });
  const kc = cp.kubeConfig;
  let node: RealNode | undefined;
  let hooks: RunningServer | undefined;
  let controllers: Controllers | undefined;
  const stopAll = async (): Promise<void> => {
    await controllers?.stop().catch(() => undefined);
    await hooks?.shutdown('test').catch(() => undefined);
    await node?.stop().catch(() => undefined);
    await cp.stop();
  };
  try {
    node = await startNode(cp);
    const objects = k8s.KubernetesObjectApi.makeApiClient(kc);
    await installCrds(kc, objects);

    const { hookConfig, hookAccess, credentials } = await hookServerSettings(cp, objects, options);
    const hooksPort = hookConfig.port;
    const hooksUrl = `https://127.0.0.1:${hooksPort}`;
    hooks = await startHookServer(hookConfig, hookAccess);
    controllers = await startControllers({ kubeConfig: kc, kubeconfigPath: cp.kubeconfigPath, hooksBaseUrl: hooksUrl });
    const stopHooks = async (): Promise<() => Promise<void>> => {
      await hooks?.shutdown('test');
      hooks = undefined;
      return async () => {
        hooks = await startHookServer(hookConfig, hookAccess);
      };
    };
    return operatorOf(
      cp,
      node,
      objects,
      {
        port: hooksPort,
        url: hooksUrl,
        programServer: defined(hookConfig.programServer, 'the hooks serve Programs'),
        credentials,
      },
      {
        restartHooks: async () => (await stopHooks())(),
        stopHooks,
        hookEvents: () => ({ ...defined(hooks?.events, 'the hook server writes events').counts }),
        hookEventsIdle: () => defined(hooks?.events, 'the hook server writes events').idle(),
        stop: stopAll,
      },
    );
  } catch (e) {
    await stopAll();
    throw e;
  }
}

/** Our CRDs (manifests/crds), served. */
async function installCrds(kc: k8s.KubeConfig, objects: k8s.KubernetesObjectApi): Promise<void> {
  for (const file of readdirSync(join(REPO_ROOT, 'manifests', 'crds'))) {
    for (const doc of loadAll(readFileSync(join(REPO_ROOT, 'manifests', 'crds', file), 'utf8')))
      await objects.create(doc as k8s.KubernetesObject);
  }
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  await eventually('the CRDs to be served', async () => {
    await custom.listClusterCustomObject({ group: 'pulumi.com', version: 'v1', plural: 'stacks' });
    await custom.listClusterCustomObject({ group: 'pulumi.com', version: 'v1', plural: 'programs' });
    return true;
  });
}

/**
 * The hook server's settings (on a free loopback port), its access to the cluster, and its
 * credentials, whose Secrets are created here.
 */
async function hookServerSettings(
  cp: ControlPlane,
  objects: k8s.KubernetesObjectApi,
  options: OperatorOptions,
): Promise<{
  hookConfig: HookConfig;
  hookAccess: Parameters<typeof startHookServer>[1];
  credentials: HookCredentials;
}> {
  // The hooks write Events and watch Stacks and Programs as in a cluster: with the ServiceAccount,
  // ClusterRole and binding of manifests/install.yaml, through a token of that ServiceAccount.
  // Events go only to Stacks that watch holds, as in a cluster.
  const hooksKc = await hooksKubeConfig(cp.kubeConfig);
  // One reviewer for the workspaces' tokens and the scrapers', as hooks/src/main.ts.
  const reviewer = new TokenReviewer(kubeReviewApi(hooksKc));
  const hookAccess = {
    events: { api: kubeEventsApi(hooksKc), via: 'pulumi-mc-hooks' },
    objects: { api: kubeObjectsApi(hooksKc), via: 'pulumi-mc-hooks' },
    programs: { api: { reviewer, getProgram: kubeProgramGetter(hooksKc) }, via: 'pulumi-mc-hooks' },
    // Reviews the tokens of scrapers when a test turns METRICS_AUTH on (hookConfig.metricsAuth).
    reviewer,
  };
  // The hook server's certificate and token, as the quickstart makes them; Metacontroller reads
  // the Secrets when it starts the controllers.
  // Metacontroller calls the hooks on 127.0.0.1; workspace pods download Programs from the node
  // address (the hooks' Service address in a cluster), so the certificate names both.
  const credentials = makeHookCredentials(join(cp.dir, 'hooks-credentials'), {
    EXTRA_SANS: `IP:127.0.0.1,IP:${cp.nodeAddress}`,
  });
  for (const secret of credentials.secrets) await objects.create(secret);
  // The program server listens on a port of its own, as in a cluster (the Service's `programs`).
  const [port, programPort] = (await distinctFreePorts(2)) as [number, number];
  const hookConfig: HookConfig = {
    ...configFromEnv({}),
    ...credentials.serving,
    port,
    programPort,
    // Every address of the test network: no packet leaves it.
    host: '0.0.0.0',
    programServer: { url: `https://${cp.nodeAddress}:${programPort}`, ca: credentials.ca },
    agentImage: AGENT_IMAGE,
    logLevel: process.env.PKO_E2E_HOOK_LOGS ? 'info' : 'warn',
    ...options.hookConfig,
  };
  return { hookConfig, hookAccess, credentials };
}

/** A client of the hook server as Metacontroller is: HTTPS checked against the hooks' CA, its token. */
function hookClient(hooks: {
  url: string;
  credentials: HookCredentials;
}): Pick<Operator, 'hookRequest'> & { close(): Promise<void> } {
  const agent = new Agent({ connect: { ca: hooks.credentials.ca } });
  return {
    async hookRequest(path, options = {}) {
      const authorization =
        options.authorization === undefined ? `Bearer ${hooks.credentials.token}` : options.authorization;
      const res = await request(`${hooks.url}${path}`, {
        dispatcher: agent,
        method: options.body === undefined ? 'GET' : 'POST',
        headers: {
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(authorization === null ? {} : { authorization }),
        },
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      });
      return { status: res.statusCode, headers: res.headers, text: await res.body.text() };
    },
    close: () => agent.close(),
  };
}

function operatorOf(
  cp: ControlPlane,
  node: RealNode,
  objects: k8s.KubernetesObjectApi,
  hooks: { port: number; url: string; programServer: Operator['programServer']; credentials: HookCredentials },
  lifecycle: Pick<Operator, 'restartHooks' | 'stopHooks' | 'hookEvents' | 'hookEventsIdle' | 'stop'>,
): Operator {
  const kc = cp.kubeConfig;
  const client = hookClient(hooks);
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const custom = kc.makeApiClient(k8s.CustomObjectsApi);
  return {
    cp,
    objects,
    custom,
    core,
    batch: kc.makeApiClient(k8s.BatchV1Api),
    apps: kc.makeApiClient(k8s.AppsV1Api),
    node,
    hooksPort: hooks.port,
    hooksUrl: hooks.url,
    programServer: hooks.programServer,
    hookRequest: client.hookRequest,
    ...stackClient(custom),
    ...podLogs(kc, core),
    ...namespaces(node, objects),
    ...lifecycle,
    stop: async () => {
      await client.close();
      await lifecycle.stop();
    },
  };
}

/** Stacks as kubectl reads, patches and waits for them. */
function stackClient(custom: k8s.CustomObjectsApi): Pick<Operator, 'getStack' | 'patchStack' | 'readyStack'> {
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
    async patchStack(namespace, name, body) {
      await custom.patchNamespacedCustomObject(
        { group: 'pulumi.com', version: 'v1', namespace, plural: 'stacks', name, body },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
    },
    readyStack: (namespace, name, after, timeoutMs = 240_000) =>
      eventually(
        `Stack ${namespace}/${name} to be Ready`,
        async () => {
          const s = await getStack(namespace, name);
          const ready =
            condition(s, 'Ready')?.status === 'True' && s.status?.observedGeneration === s.metadata.generation;
          return ready && (!after || after(s)) ? s : undefined;
        },
        timeoutMs,
        500,
      ),
  };
}

/** Containers' logs through the API server (kubelet), as `kubectl logs [-f]`. */
function podLogs(kc: k8s.KubeConfig, core: k8s.CoreV1Api): Pick<Operator, 'logs' | 'followLogs'> {
  return {
    logs: (namespace, pod, container, options) =>
      core
        .readNamespacedPodLog({ namespace, name: pod, container, previous: options?.previous })
        .then((text) => String(text))
        .catch((e: unknown) => {
          // No such pod, or no such (previous) run of the container: nothing was logged.
          if (e instanceof k8s.ApiException && (e.code === 400 || e.code === 404)) return '';
          throw e;
        }),
    async followLogs(namespace, pod, container) {
      let text = '';
      let end: () => void = () => undefined;
      const ended = new Promise<void>((resolve) => (end = resolve));
      const sink = new Writable({
        write(chunk: Buffer, _encoding, callback) {
          text += chunk.toString('utf8');
          callback();
        },
        final(callback) {
          end();
          callback();
        },
      });
      const abort = await new k8s.Log(kc).log(namespace, pod, container, sink, () => end(), { follow: true });
      return {
        text: () => text,
        ended,
        stop: () => {
          abort.abort();
          end();
        },
      };
    },
  };
}

/**
 * Namespaces as the e2e tests use them (restricted Pod Security, the Stack RBAC, a state PVC), and
 * volumes of the node's disk bound to claims in advance (the test bed has no provisioner).
 */
function namespaces(
  node: RealNode,
  objects: k8s.KubernetesObjectApi,
): Pick<Operator, 'namespace' | 'stateDir' | 'volumeForClaim'> {
  const claimDir = (namespace: string, claim: string): string => join(node.dir, 'claims', namespace, claim);
  const stateDir = (namespace: string): string => claimDir(namespace, 'pulumi-state');
  const volumeForClaim = async (namespace: string, claim: string): Promise<string> => {
    const dir = claimDir(namespace, claim);
    mkdirSync(dir, { recursive: true });
    chownSync(dir, 1000, 1000);
    await objects.create({
      apiVersion: 'v1',
      kind: 'PersistentVolume',
      metadata: { name: `${claim}-${namespace}` },
      spec: {
        capacity: { storage: '1Gi' },
        accessModes: ['ReadWriteOnce'],
        persistentVolumeReclaimPolicy: 'Retain',
        storageClassName: '',
        hostPath: { path: dir, type: 'Directory' },
        claimRef: { namespace, name: claim },
      },
    } as k8s.KubernetesObject);
    return dir;
  };
  const stackRbac = readFileSync(join(REPO_ROOT, 'manifests', 'stack-rbac.yaml'), 'utf8');
  return {
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
      // The claim binds to a volume of the node's disk made for it: the test reads the file
      // backend's state from there, and the agent (uid 1000) writes it.
      await volumeForClaim(name, 'pulumi-state');
      await objects.create({
        apiVersion: 'v1',
        kind: 'PersistentVolumeClaim',
        metadata: { name: 'pulumi-state', namespace: name },
        spec: {
          accessModes: ['ReadWriteOnce'],
          storageClassName: '',
          volumeName: `pulumi-state-${name}`,
          resources: { requests: { storage: '1Gi' } },
        },
      });
      return name;
    },
    stateDir,
    volumeForClaim,
  };
}
