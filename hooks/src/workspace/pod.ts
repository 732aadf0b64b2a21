import type {
  V1Container,
  V1EnvFromSource,
  V1EnvVar,
  V1PodTemplateSpec,
  V1Service,
  V1StatefulSet,
  V1Volume,
  V1VolumeMount,
} from '@kubernetes/client-node';
import type { Stack, StackSpec } from '../../../schemas/generated/types';
import {
  AGENT_COMMAND,
  Annotations,
  AUTH_DELEGATOR_CLUSTER_ROLE,
  Env,
  INJECTED_AGENT_DIR,
  Labels,
  parseWorkspaceStatus,
  parseSshUrl,
  Paths,
  WORKSPACE_PORT,
  WORKSPACE_UNAUTHENTICATED,
  type ConfigItem,
  type WorkspaceStackSpec,
} from '../../../contract';
import type { HookConfig } from '../config';
import { knownHostsLinesFor } from '../git/known-hosts';
import { shortHash, stableStringify } from '../lib/json';
import type { Json, KObject, Typed } from '../lib/k8s';
import { strategicMerge } from '../lib/merge';
import type { WorkspaceSource } from './source';

/** `<stack>-workspace`: the StatefulSet and its headless Service (pod `<stack>-workspace-0`), as upstream. */
export function workspaceName(stack: string): string {
  return `${stack}-workspace`;
}

/** Audience of the tokens callers present to a workspace (upstream: `<workspace>.<namespace>`). */
export function workspaceAudience(stack: string, namespace: string): string {
  return `${stack}.${namespace}`;
}

export function workspaceUrl(stack: string, namespace: string): string {
  return `http://${workspaceName(stack)}.${namespace}.svc:${WORKSPACE_PORT}`;
}

export function workspaceServiceAccount(spec: StackSpec): string {
  return spec.workspaceTemplate?.spec?.serviceAccountName ?? spec.serviceAccountName ?? 'default';
}

function podSelector(stack: string): Record<string, string> {
  return { [Labels.workspaceComponent]: 'workspace', [Labels.workspaceName]: stack };
}

export function stackLabels(stack: string, component: string): Record<string, string> {
  return { [Labels.stackName]: stack, [Labels.component]: component };
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

function sorted<T>(record: Record<string, T> | undefined): [string, T][] {
  return Object.entries(record ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** An env var that the API server stores as given (an empty value is omitted, else it would never compare equal). */
function literalEnv(name: string, value: string): V1EnvVar {
  return value === '' ? { name } : { name, value };
}

/**
 * The stack settings for `pko-agent serve` and the volumes they need (upstream's UpdateConfig:
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L1737):
 * config, configRef (ConfigMap files), secrets, secretsRef (Secret files), each group sorted by
 * key. Secret-sourced values reach the pod only as mounted files.
 */
export function workspaceStack(spec: StackSpec): {
  stack: WorkspaceStackSpec;
  volumes: Json<V1Volume>[];
  mounts: V1VolumeMount[];
} {
  const config: ConfigItem[] = [];
  const volumes = new Map<string, Json<V1Volume>>();
  const mounts = new Map<string, V1VolumeMount>();
  for (const [key, value] of sorted<unknown>(spec.config)) config.push({ key, value, secret: false });
  for (const [key, ref] of sorted(spec.configRef)) {
    const volume = `configmap-${ref.name}`;
    const dir = `${Paths.configMaps}/${ref.name}`;
    volumes.set(volume, { name: volume, configMap: { name: ref.name } });
    mounts.set(volume, { name: volume, mountPath: dir, readOnly: true });
    const valueFrom: ConfigItem['valueFrom'] = { path: `${dir}/${ref.key}` };
    if (ref.json) valueFrom.json = true;
    config.push({ key, valueFrom, secret: false });
  }
  for (const [key, value] of sorted(spec.secrets)) config.push({ key, value: String(value), secret: true });
  for (const [key, ref] of sorted(spec.secretsRef)) {
    if (ref.type === 'Literal') {
      config.push({ key, value: ref.literal?.value ?? '', secret: true });
    } else if (ref.type === 'Secret' && ref.secret) {
      const volume = `secret-${ref.secret.name}`;
      const dir = `${Paths.secrets}/${ref.secret.name}`;
      volumes.set(volume, { name: volume, secret: { secretName: ref.secret.name } });
      mounts.set(volume, { name: volume, mountPath: dir, readOnly: true });
      config.push({ key, valueFrom: { path: `${dir}/${ref.secret.key}` }, secret: true });
    }
  }
  const stack: WorkspaceStackSpec = { name: spec.stack, create: spec.useLocalStackOnly !== true, config };
  if (spec.secretsProvider) stack.secretsProvider = spec.secretsProvider;
  if (spec.environment?.length) stack.environment = [...spec.environment];
  return { stack, volumes: [...volumes.values()], mounts: [...mounts.values()] };
}

/**
 * The user's environment for Pulumi, in upstream's order (SetEnvRefsForWorkspace:
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L1418):
 * backend, access token, envRefs by key.
 */
function pulumiEnv(spec: StackSpec): V1EnvVar[] {
  const env: V1EnvVar[] = [];
  if (spec.backend) env.push(literalEnv('PULUMI_BACKEND_URL', spec.backend));
  if (spec.accessTokenSecret) {
    env.push({
      name: 'PULUMI_ACCESS_TOKEN',
      valueFrom: { secretKeyRef: { name: spec.accessTokenSecret, key: 'accessToken' } },
    });
  }
  const secretNames: string[] = [];
  for (const [name, ref] of sorted(spec.envRefs)) {
    if (ref.type === 'Literal') env.push(literalEnv(name, ref.literal?.value ?? ''));
    else if (ref.type === 'Secret' && ref.secret) {
      env.push({ name, valueFrom: { secretKeyRef: { name: ref.secret.name, key: ref.secret.key } } });
      secretNames.push(name);
    }
  }
  // Names only: the agent masks these variables' values in what it logs and reports.
  if (secretNames.length) env.push(literalEnv(Env.secretEnvNames, secretNames.join(',')));
  return env;
}

function envFrom(spec: StackSpec): V1EnvFromSource[] {
  return [
    ...(spec.envs ?? []).map((name) => ({ configMapRef: { name } })),
    ...(spec.envSecrets ?? []).map((name) => ({ secretRef: { name } })),
  ];
}

/** The init container that puts the project at /share/workspace, per source kind. */
function fetchContainer(
  source: WorkspaceSource,
  config: HookConfig,
  workspaceNameOf: string,
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
    case 'program':
      env.push(
        literalEnv(Env.programFile, `${Paths.programDir}/Pulumi.yaml`),
        literalEnv(Env.programDigest, source.digest),
      );
      volumes.push({ name: 'program', configMap: { name: source.configMap } });
      mounts.push({ name: 'program', mountPath: Paths.programDir, readOnly: true });
      break;
    case 'local':
      env.push(literalEnv(Env.localDir, source.dir));
      break;
    case 'projectInfo':
      env.push(literalEnv(Env.projectName, source.name), literalEnv(Env.projectRuntime, source.runtime));
      break;
    case 'none':
      return { volumes };
  }
  // Who to report a failed fetch to: the workspace StatefulSet, for the template this pod runs.
  env.push(...workspaceIdentityEnv(workspaceNameOf));
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

/** What an agent in the workspace pod needs to report on its StatefulSet. */
function workspaceIdentityEnv(wsName: string): V1EnvVar[] {
  return [
    { name: Env.podNamespace, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
    { name: Env.podName, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } },
    {
      name: Env.workspaceHash,
      valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${Annotations.workspaceHash}']` } },
    },
    { name: Env.workspaceName, value: wsName },
  ];
}

export interface DesiredWorkspace {
  statefulSet: KObject;
  service: KObject;
  /** Hash of the desired pod template; the workspace is ready for an operation once it runs this. */
  hash: string;
}

/**
 * The workspace StatefulSet and Service for a Stack and its resolved source: upstream's Workspace
 * StatefulSet (https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/auto/workspace_controller.go#L526),
 * with our agent (injected by the bootstrap init container) in place of upstream's.
 */
export function desiredWorkspace(stack: Stack, source: WorkspaceSource, config: HookConfig): DesiredWorkspace {
  const spec = stack.spec;
  const name = stack.metadata.name;
  const namespace = stack.metadata.namespace ?? '';
  const wsName = workspaceName(name);
  const template = spec.workspaceTemplate;
  const restricted = (template?.spec?.securityProfile ?? 'restricted') === 'restricted';
  const { stack: wsStack, volumes: configVolumes, mounts: configMounts } = workspaceStack(spec);
  const fetch = fetchContainer(source, config, wsName);

  const env: V1EnvVar[] = [
    ...pulumiEnv(spec),
    ...workspaceIdentityEnv(wsName),
    { name: Env.stackName, value: name },
    { name: Env.workspaceAudience, value: workspaceAudience(name, namespace) },
    { name: Env.workspaceStack, value: stableStringify(wsStack) },
  ];
  if (template?.spec?.pulumiLogLevel)
    env.push({ name: Env.pulumiLogLevel, value: String(template.spec.pulumiLogLevel) });

  const pulumi: V1Container = {
    name: 'pulumi',
    image: template?.spec?.image || config.workspaceImage[restricted ? 'restricted' : 'baseline'],
    // The injected agent (bootstrapContainer), under tini, in the user's image.
    command: [Paths.tini, '--', Paths.agentNode, Paths.agentBundle, 'serve'],
    workingDir: Paths.workspace,
    ports: [{ name: 'http', containerPort: WORKSPACE_PORT }],
    env,
    volumeMounts: [{ ...SHARE_MOUNT }, ...configMounts],
    readinessProbe: { httpGet: { path: '/readyz', port: WORKSPACE_PORT }, periodSeconds: 5 },
    resources: (template?.spec?.resources as V1Container['resources']) ?? { requests: { cpu: '100m', memory: '64Mi' } },
  };
  if (template?.spec?.imagePullPolicy) pulumi.imagePullPolicy = template.spec.imagePullPolicy;
  for (const e of (template?.spec?.env ?? []) as V1EnvVar[]) {
    const i = pulumi.env!.findIndex((x) => x.name === e.name);
    if (i >= 0) pulumi.env![i] = e;
    else pulumi.env!.push(e);
  }
  const from = [...envFrom(spec), ...((template?.spec?.envFrom ?? []) as V1EnvFromSource[])];
  if (from.length) pulumi.envFrom = from;

  let pod: Json<V1PodTemplateSpec> = {
    metadata: { labels: { ...podSelector(name), [Labels.stackName]: name } },
    spec: {
      serviceAccountName: workspaceServiceAccount(spec),
      terminationGracePeriodSeconds: 600,
      initContainers: [bootstrapContainer(config), ...(fetch.container ? [fetch.container] : [])],
      containers: [pulumi],
      volumes: [{ name: 'share', emptyDir: {} }, ...fetch.volumes, ...configVolumes],
    },
  };
  if (restricted) {
    pod.spec!.securityContext = { ...RESTRICTED_POD_SECURITY };
    for (const c of [...pod.spec!.initContainers!, ...pod.spec!.containers])
      c.securityContext = structuredClone(RESTRICTED_CONTAINER_SECURITY);
  }
  const userPod = template?.spec?.podTemplate as Json<V1PodTemplateSpec> | undefined;
  if (userPod) {
    // The user's init containers run after ours (upstream enforces the order): fetch must come first.
    const { initContainers: userInit, ...userSpec } = (userPod.spec ?? {}) as NonNullable<
      Json<V1PodTemplateSpec>['spec']
    >;
    const ours = pod.spec!.initContainers!;
    pod = strategicMerge(pod, { ...userPod, spec: userSpec });
    const merged = strategicMerge({ initContainers: ours }, { initContainers: userInit ?? [] }).initContainers;
    pod.spec!.initContainers = merged;
  }
  // Upstream's dynamic env: every container sees PULUMI_ENV, so an init container can add variables.
  for (const c of [...(pod.spec!.initContainers ?? []), ...pod.spec!.containers]) {
    c.env = [...(c.env ?? []).filter((e) => e.name !== Env.pulumiEnv), { name: Env.pulumiEnv, value: Paths.envFile }];
  }
  pod.metadata = { ...pod.metadata, labels: { ...pod.metadata?.labels, ...podSelector(name) } };
  const hash = shortHash(pod, 16);
  pod.metadata.annotations = { ...pod.metadata.annotations, [Annotations.workspaceHash]: hash };

  const metaLabels = {
    ...template?.metadata?.labels,
    ...stackLabels(name, 'stack'),
  };
  const metaAnnotations = template?.metadata?.annotations;
  const statefulSet: Typed<V1StatefulSet> = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: wsName, namespace, labels: metaLabels },
    spec: {
      replicas: 1,
      podManagementPolicy: 'Parallel',
      serviceName: wsName,
      selector: { matchLabels: podSelector(name) },
      template: pod,
    },
  };
  if (metaAnnotations && Object.keys(metaAnnotations).length) statefulSet.metadata.annotations = { ...metaAnnotations };

  const serviceMeta = template?.spec?.serviceTemplate?.metadata;
  const service: Typed<V1Service> = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: wsName, namespace, labels: { ...serviceMeta?.labels, ...stackLabels(name, 'stack') } },
    spec: {
      clusterIP: 'None',
      selector: podSelector(name),
      ports: [{ name: 'http', port: WORKSPACE_PORT, targetPort: WORKSPACE_PORT, protocol: 'TCP' }],
    },
  };
  if (serviceMeta?.annotations && Object.keys(serviceMeta.annotations).length)
    service.metadata.annotations = { ...serviceMeta.annotations };
  return { statefulSet, service, hash };
}

/**
 * The command that grants the workspace's ServiceAccount what it needs to verify callers, as the
 * pod runs it (the observed template: a podTemplate may name another account than the spec). The
 * binding's name is the one manifests/stack-rbac.yaml and the chart give it.
 */
function authDelegatorFix(observed: Typed<V1StatefulSet>): string {
  const namespace = observed.metadata.namespace ?? 'default';
  const account = observed.spec?.template?.spec?.serviceAccountName || 'default';
  return (
    `To grant ${AUTH_DELEGATOR_CLUSTER_ROLE} to the workspace's ServiceAccount ${namespace}/${account}: ` +
    `kubectl create clusterrolebinding pulumi-operator:auth-delegator:${namespace}:${account} ` +
    `--clusterrole=${AUTH_DELEGATOR_CLUSTER_ROLE} --serviceaccount=${namespace}:${account}`
  );
}

export type WorkspaceReadiness =
  { state: 'ready' } | { state: 'waiting'; message: string } | { state: 'failed'; reason: string; message: string };

/**
 * Whether the observed workspace runs the desired template and its agent is ready for operations.
 * The agent's own report (annotation on the StatefulSet) carries failures the probe cannot.
 */
export function workspaceReadiness(observed: Typed<V1StatefulSet> | undefined, hash: string): WorkspaceReadiness {
  if (!observed) return { state: 'waiting', message: 'waiting for workspace readiness' };
  const report = parseWorkspaceStatus(observed.metadata.annotations?.[Annotations.workspaceStatus]);
  if (report && report.hash === hash && report.state === 'Failed') {
    const reason = report.reason ?? 'InitializationFailed';
    let message = `${reason}: ${report.message ?? 'the workspace failed'}`;
    if (reason === WORKSPACE_UNAUTHENTICATED) message += `. ${authDelegatorFix(observed)}`;
    return { state: 'failed', reason, message };
  }
  const observedHash = observed.spec?.template?.metadata?.annotations?.[Annotations.workspaceHash];
  const st = observed.status;
  const rolledOut =
    observedHash === hash &&
    (st?.observedGeneration ?? 0) >= (observed.metadata.generation ?? 0) &&
    (!st?.updateRevision || st.updateRevision === st.currentRevision) &&
    (st?.readyReplicas ?? 0) >= 1;
  if (rolledOut && report?.hash === hash && report.state === 'Ready') return { state: 'ready' };
  return { state: 'waiting', message: 'waiting for workspace readiness' };
}
