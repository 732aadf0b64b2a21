import type {
  V1Container,
  V1EnvVar,
  V1PodTemplateSpec,
  V1Service,
  V1StatefulSet,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { Workspace, WorkspaceStack } from '../../../schemas/generated/types';
import {
  AGENT_COMMAND,
  Annotations,
  Env,
  INJECTED_AGENT_DIR,
  Labels,
  parseSshUrl,
  Paths,
  PROGRAM_TOKEN_AUDIENCE,
  WORKSPACE_PORT,
  type ConfigItem,
  type WorkspaceStackSpec,
} from '../../../contract';
import { withEphemeralStorage } from '../bounded/resources';
import type { HookConfig } from '../config';
import { knownHostsLinesFor } from '../git/known-hosts';
import { shortHash, stableStringify } from '../lib/json';
import type { Json, KObject, Typed } from '../lib/k8s';
import { childDigest } from '../lib/kept-children';
import { strategicMerge } from '../lib/merge';
import { fetchSourceOf, programUrl, type FetchSource } from './source';

/** `<workspace>-workspace`: the StatefulSet and its headless Service (pod `<workspace>-workspace-0`), as upstream. */
export function workspaceName(workspace: string): string {
  return `${workspace}-workspace`;
}

/** `<workspace>-workspace-status`: the ConfigMap in which the workspace pod's agent reports its state. */
export function workspaceStatusName(workspace: string): string {
  return `${workspaceName(workspace)}-status`;
}

/** Audience of the tokens callers present to a workspace (upstream: `<workspace>.<namespace>`). */
export function workspaceAudience(workspace: string, namespace: string): string {
  return `${workspace}.${namespace}`;
}

export function workspaceUrl(workspace: string, namespace: string): string {
  return `http://${workspaceName(workspace)}.${namespace}.svc:${WORKSPACE_PORT}`;
}

/** Upstream's Workspace `status.address`: the workspace's host and port. */
export function workspaceAddress(workspace: string, namespace: string): string {
  return `${workspaceName(workspace)}.${namespace}:${WORKSPACE_PORT}`;
}

/** The account the workspace pod runs as: a podTemplate may name another than `spec.serviceAccountName`. */
export function workspacePodServiceAccount(ws: Workspace): string {
  const fromPod = ws.spec?.podTemplate?.spec?.serviceAccountName;
  if (typeof fromPod === 'string' && fromPod !== '') return fromPod;
  return ws.spec?.serviceAccountName || 'default';
}

function podSelector(workspace: string): Record<string, string> {
  return { [Labels.workspaceComponent]: 'workspace', [Labels.workspaceName]: workspace };
}

export function stackLabels(stack: string, component: string): Record<string, string> {
  return { [Labels.stackName]: stack, [Labels.component]: component };
}

/**
 * The labels a Workspace passes on to its StatefulSet, Service and pods: its own, but not the
 * label Metacontroller selects the Workspace's owner's children by (each child belongs to one parent).
 */
export function inheritedLabels(ws: Workspace): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(ws.metadata.labels ?? {})) if (k !== 'controller-uid') labels[k] = String(v);
  return labels;
}

/** Upstream's `restricted` profile: what the Pod Security `restricted` level requires, uid/gid 1000. */
export const RESTRICTED_CONTAINER_SECURITY = {
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] },
};
export const RESTRICTED_POD_SECURITY = {
  runAsNonRoot: true,
  runAsUser: 1000,
  runAsGroup: 1000,
  fsGroup: 1000,
  seccompProfile: { type: 'RuntimeDefault' },
};

const SHARE_MOUNT: V1VolumeMount = { name: 'share', mountPath: Paths.share };

/** An env var that the API server stores as given (an empty value is omitted, else it would never compare equal). */
function literalEnv(name: string, value: string): V1EnvVar {
  return value === '' ? { name } : { name, value };
}

/** The init container that puts the project at /share/workspace, per source kind. */
function fetchContainer(
  source: FetchSource,
  config: HookConfig,
  statusName: string,
  namespace: string,
): { container?: V1Container; volumes: Json<V1Volume>[] } {
  const env: V1EnvVar[] = [];
  const mounts: V1VolumeMount[] = [{ ...SHARE_MOUNT }];
  const volumes: Json<V1Volume>[] = [];
  switch (source.kind) {
    case 'git': {
      const remote = parseSshUrl(source.url);
      env.push(literalEnv(Env.gitUrl, source.url), literalEnv(Env.gitRevision, source.revision));
      if (source.dir) env.push(literalEnv(Env.gitDir, source.dir));
      if (source.shallow) env.push({ name: Env.gitShallow, value: 'true' });
      for (const a of source.auth) {
        const ref: { name: string; key: string; optional?: boolean } = { name: a.secret, key: a.key };
        if (a.optional) ref.optional = true;
        env.push({ name: a.env, valueFrom: { secretKeyRef: ref } });
      }
      // The host keys the hooks trust for this server: the fetch container's ssh trusts no others.
      if (remote) {
        const lines = knownHostsLinesFor(config.sshKnownHosts ?? '', remote.host, remote.port);
        if (lines !== '') env.push(literalEnv(Env.gitSshKnownHosts, lines));
      }
      // The same GitHub API the hooks use to resolve the branch (GitHub Enterprise).
      if (config.githubApiUrl && source.auth.some((a) => a.env === 'GIT_GITHUB_APP_ID'))
        env.push(literalEnv(Env.githubApiUrl, config.githubApiUrl));
      break;
    }
    case 'flux':
      env.push(literalEnv(Env.fluxUrl, source.url), literalEnv(Env.fluxDigest, source.digest));
      if (source.dir) env.push(literalEnv(Env.fluxDir, source.dir));
      if (config.fluxMaxUntarSizeBytes) env.push(literalEnv(Env.fluxMaxUntarSize, config.fluxMaxUntarSizeBytes));
      break;
    case 'program': {
      // Only a server that serves Programs makes this kind (fetchSourceOf).
      const server = config.programServer;
      if (server === undefined) throw new Error('a Program source without a program server');
      env.push(
        literalEnv(Env.programUrl, programUrl(server.url, namespace, source.name)),
        literalEnv(Env.programDigest, source.digest),
        literalEnv(Env.programCa, server.ca),
      );
      // The fetch container's identity for the hook server (program/serve.ts): a token of the pod's
      // ServiceAccount, bound to this pod, for the hooks' audience only, valid 10 minutes.
      volumes.push({
        name: 'program-token',
        projected: {
          sources: [
            { serviceAccountToken: { audience: PROGRAM_TOKEN_AUDIENCE, expirationSeconds: 600, path: 'token' } },
          ],
        },
      });
      mounts.push({ name: 'program-token', mountPath: Paths.programTokenDir, readOnly: true });
      break;
    }
    case 'local':
      env.push(literalEnv(Env.localDir, source.dir));
      break;
    case 'projectInfo':
      env.push(literalEnv(Env.projectName, source.name), literalEnv(Env.projectRuntime, source.runtime));
      break;
    case 'none':
      return { volumes };
  }
  // Where to report a failed fetch: the status ConfigMap, for the template this pod runs.
  env.push(...workspaceIdentityEnv(statusName));
  const kind = source.kind === 'projectInfo' ? 'project-info' : source.kind;
  const container: V1Container = {
    name: 'fetch',
    image: config.agentImage,
    command: [AGENT_COMMAND, 'fetch', kind],
    env,
    volumeMounts: mounts,
  };
  if (config.agentImagePullPolicy) container.imagePullPolicy = config.agentImagePullPolicy;
  return { container, volumes };
}

/**
 * Upstream's `bootstrap` init container: copies the self-contained agent (tini, Node.js and the
 * bundled agent) from the agent image into /share, so that the workspace container runs it in any
 * image that has the Pulumi CLI and glibc.
 */
function bootstrapContainer(config: HookConfig): V1Container {
  const container: V1Container = {
    name: 'bootstrap',
    image: config.agentImage,
    command: ['cp', '-R', `${INJECTED_AGENT_DIR}/.`, `${Paths.share}/`],
    volumeMounts: [{ ...SHARE_MOUNT }],
  };
  if (config.agentImagePullPolicy) container.imagePullPolicy = config.agentImagePullPolicy;
  return container;
}

/** What an agent in the workspace pod needs to report its state (in the status ConfigMap). */
function workspaceIdentityEnv(statusName: string): V1EnvVar[] {
  return [
    { name: Env.podNamespace, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
    { name: Env.podName, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
    {
      name: Env.workspaceHash,
      valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${Annotations.workspaceHash}']` } },
    },
    { name: Env.workspaceStatusConfigMap, value: statusName },
  ];
}

/** A pod template whose spec is there (the one the StatefulSet runs). */
type PodTemplate = Json<V1PodTemplateSpec> & { spec: NonNullable<Json<V1PodTemplateSpec>['spec']> };

export interface DesiredPod {
  statefulSet: KObject;
  service: KObject;
  /** Hash of the desired pod template; the workspace is ready for an operation once it runs this. */
  hash: string;
  /** What `status.childDigests` records of the StatefulSet and the Service (kept-children.ts), cached with them. */
  digests: { statefulSet: string; service: string };
}

/** The stack `pko-agent serve` selects and configures: the Workspace's first (the agent serves one). */
function agentStack(stack: WorkspaceStack | undefined): WorkspaceStackSpec {
  const config: ConfigItem[] = (stack?.config ?? []).map((item) => {
    const c: ConfigItem = { key: item.key ?? '', secret: item.secret === true };
    if (item.value !== undefined) c.value = item.value;
    if (item.valueFrom) c.valueFrom = { ...item.valueFrom };
    if (item.path === true) c.path = true;
    return c;
  });
  const spec: WorkspaceStackSpec = { name: stack?.name ?? '', create: stack?.create !== false, config };
  if (stack?.secretsProvider) spec.secretsProvider = stack.secretsProvider;
  if (stack?.environment?.length) spec.environment = [...stack.environment];
  return spec;
}

/**
 * The Workspace's own environment, then what the agent needs. The names of variables set from
 * Secrets go to the agent, which masks their values in what it logs and reports.
 */
function containerEnv(ws: Workspace): V1EnvVar[] {
  const name = ws.metadata.name;
  const namespace = ws.metadata.namespace ?? '';
  const ours: V1EnvVar[] = [
    ...workspaceIdentityEnv(workspaceStatusName(name)),
    { name: Env.stackName, value: name },
    { name: Env.workspaceAudience, value: workspaceAudience(name, namespace) },
    { name: Env.workspaceStack, value: stableStringify(agentStack(ws.spec?.stacks?.[0])) },
  ];
  if (ws.spec?.pulumiLogLevel) ours.push({ name: Env.pulumiLogLevel, value: String(ws.spec.pulumiLogLevel) });
  const reserved = new Set(ours.map((e) => e.name));
  const user = new Map<string, V1EnvVar>();
  for (const e of (ws.spec?.env ?? []) as V1EnvVar[]) if (!reserved.has(e.name)) user.set(e.name, e);
  const secretNames = [...user.values()].filter((e) => e.valueFrom?.secretKeyRef).map((e) => e.name);
  const env = [...user.values()];
  if (secretNames.length) env.push(literalEnv(Env.secretEnvNames, secretNames.join(',')));
  return [...env, ...ours];
}

/**
 * The workspace StatefulSet and Service of a Workspace: upstream's Workspace StatefulSet
 * (https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/auto/workspace_controller.go#L526),
 * with our agent (injected by the bootstrap init container) in place of upstream's.
 */
export function desiredPod(ws: Workspace, config: HookConfig): DesiredPod {
  const spec = ws.spec ?? {};
  const name = ws.metadata.name;
  const namespace = ws.metadata.namespace ?? '';
  const wsName = workspaceName(name);
  const restricted = (spec.securityProfile ?? 'restricted') !== 'baseline';
  const fetch = fetchContainer(
    fetchSourceOf(spec, namespace, config.programServer?.url),
    config,
    workspaceStatusName(name),
    namespace,
  );
  const labels = inheritedLabels(ws);

  const pulumi: V1Container = {
    name: 'pulumi',
    image: spec.image || config.workspaceImage[restricted ? 'restricted' : 'baseline'],
    // The injected agent (bootstrapContainer), under tini, in the user's image.
    command: [Paths.tini, '--', Paths.agentNode, Paths.agentBundle, 'serve'],
    workingDir: Paths.workspace,
    ports: [{ name: 'http', containerPort: WORKSPACE_PORT }],
    env: containerEnv(ws),
    volumeMounts: [{ ...SHARE_MOUNT }],
    readinessProbe: { httpGet: { path: '/readyz', port: WORKSPACE_PORT }, periodSeconds: 5 },
    resources: (spec.resources as V1Container['resources']) ?? { requests: { cpu: '100m', memory: '64Mi' } },
  };
  if (spec.imagePullPolicy) pulumi.imagePullPolicy = spec.imagePullPolicy;
  if (spec.envFrom?.length) pulumi.envFrom = [...spec.envFrom];

  const initContainers = [bootstrapContainer(config), ...(fetch.container ? [fetch.container] : [])];
  let pod: PodTemplate = {
    metadata: { labels: { ...labels, ...podSelector(name) } },
    spec: {
      serviceAccountName: spec.serviceAccountName || 'default',
      terminationGracePeriodSeconds: 600,
      initContainers,
      containers: [pulumi],
      volumes: [{ name: 'share', emptyDir: {} }, ...fetch.volumes],
    },
  };
  if (restricted) {
    pod.spec.securityContext = { ...RESTRICTED_POD_SECURITY };
    for (const c of [...initContainers, pulumi]) c.securityContext = structuredClone(RESTRICTED_CONTAINER_SECURITY);
  }
  const userPod = spec.podTemplate as Json<V1PodTemplateSpec> | undefined;
  if (userPod) {
    // The user's init containers run after ours (upstream enforces the order): fetch must come first.
    const { initContainers: userInit, ...userSpec } = (userPod.spec ?? {}) as PodTemplate['spec'];
    pod = strategicMerge(pod, { ...userPod, spec: userSpec });
    const merged = strategicMerge({ initContainers }, { initContainers: userInit ?? [] }).initContainers;
    pod.spec.initContainers = merged;
  }
  // The configured ephemeral storage, where the Workspace's resources and podTemplate set none.
  const storage = config.workspaceEphemeralStorage;
  if (storage)
    for (const c of pod.spec.containers)
      if (c.name === 'pulumi') c.resources = withEphemeralStorage(c.resources ?? {}, storage);
  // Upstream's dynamic env: every container sees PULUMI_ENV, so an init container can add variables.
  for (const c of [...(pod.spec.initContainers ?? []), ...pod.spec.containers]) {
    c.env = [...(c.env ?? []).filter((e) => e.name !== Env.pulumiEnv), { name: Env.pulumiEnv, value: Paths.envFile }];
  }
  pod.metadata = { ...pod.metadata, labels: { ...pod.metadata?.labels, ...podSelector(name) } };
  const hash = shortHash(pod, 16);
  pod.metadata.annotations = { ...pod.metadata.annotations, [Annotations.workspaceHash]: hash };

  const statefulSet: Typed<V1StatefulSet> = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: wsName, namespace, labels: { ...labels } },
    spec: {
      replicas: 1,
      podManagementPolicy: 'Parallel',
      serviceName: wsName,
      selector: { matchLabels: podSelector(name) },
      template: pod,
    },
  };

  const serviceMeta = spec.serviceTemplate?.metadata;
  const service: Typed<V1Service> = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: wsName, namespace, labels: { ...serviceMeta?.labels, ...labels } },
    spec: {
      clusterIP: 'None',
      selector: podSelector(name),
      ports: [{ name: 'http', port: WORKSPACE_PORT, targetPort: WORKSPACE_PORT, protocol: 'TCP' }],
    },
  };
  if (serviceMeta?.annotations && Object.keys(serviceMeta.annotations).length)
    service.metadata.annotations = { ...serviceMeta.annotations };
  const digests = { statefulSet: childDigest(statefulSet, namespace), service: childDigest(service, namespace) };
  return { statefulSet, service, hash, digests };
}
