/**
 * The Workspace a Stack runs in (upstream's Stack → Workspace mapping: name = the Stack's, the
 * Stack's environment, source and one stack, then `workspaceTemplate` strategic-merged on top, then
 * `envs`/`envSecrets` appended), and whether the observed Workspace is ready for an operation.
 */
import type { V1EnvFromSource, V1EnvVar, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import type { Stack, StackSpec, Workspace, WorkspaceSpec } from '../../../schemas/generated/types';
import { Paths, type ConfigItem, type WorkspaceStackSpec } from '../../../contract';
import type { HookConfig } from '../config';
import { shortHash } from '../lib/json';
import { observedCondition } from '../lib/conditions';
import type { Json, KObject } from '../lib/k8s';
import { childDigest } from '../lib/kept-children';
import { strategicMerge } from '../lib/merge';
import { stackLabels } from '../workspace/pod';
import { WORKSPACE_HOLD } from '../workspace/sync';
import { programUrl, type FetchSource, type SecretEnv } from '../workspace/source';
import { AUTO_API_VERSION } from '../lib/api-versions';

/**
 * On the Workspace: hash of what the Stack asked for (spec and labels: both shape the pod); the
 * Stack waits until the Workspace reports on it.
 */
export const WORKSPACE_SPEC_HASH = 'pulumi.com/workspace-spec-hash';

/** The Workspace held for the Update `update` that starts in this answer. */
export function heldFor(workspace: KObject, update: string): KObject {
  return {
    ...workspace,
    metadata: { ...workspace.metadata, annotations: { ...workspace.metadata.annotations, [WORKSPACE_HOLD]: update } },
  };
}

function sorted<T>(record: Record<string, T> | undefined): [string, T][] {
  return Object.entries(record ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** An env var that the API server stores as given (an empty value is omitted, else it would never compare equal). */
function literalEnv(name: string, value: string): V1EnvVar {
  return value === '' ? { name } : { name, value };
}

/**
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
  for (const [name, ref] of sorted(spec.envRefs)) {
    if (ref.type === 'Literal') env.push(literalEnv(name, ref.literal?.value ?? ''));
    else if (ref.type === 'Secret' && ref.secret) {
      env.push({ name, valueFrom: { secretKeyRef: { name: ref.secret.name, key: ref.secret.key } } });
    }
  }
  return env;
}

function envFrom(spec: StackSpec): V1EnvFromSource[] {
  return [
    ...(spec.envs ?? []).map((name) => ({ configMapRef: { name } })),
    ...(spec.envSecrets ?? []).map((name) => ({ secretRef: { name } })),
  ];
}

/** The Workspace's git credentials, in upstream's fields, from the fetch container's env names. */
function gitAuthOf(auth: SecretEnv[]): Record<string, unknown> | undefined {
  const fields: Record<string, string> = {
    GIT_SSH_PRIVATE_KEY: 'sshPrivateKey',
    GIT_USERNAME: 'username',
    GIT_PASSWORD: 'password',
    GIT_TOKEN: 'token',
  };
  const app: Record<string, string> = {
    GIT_GITHUB_APP_ID: 'appID',
    GIT_GITHUB_APP_INSTALLATION_ID: 'installationID',
    GIT_GITHUB_APP_PRIVATE_KEY: 'privateKey',
  };
  const out: Record<string, unknown> = {};
  const githubApp: Record<string, unknown> = {};
  for (const a of auth) {
    const selector = { name: a.secret, key: a.key, ...(a.optional ? { optional: true } : {}) };
    const field = Object.hasOwn(fields, a.env) ? fields[a.env] : undefined;
    const appField = Object.hasOwn(app, a.env) ? app[a.env] : undefined;
    if (field !== undefined) out[field] = selector;
    else if (appField !== undefined) githubApp[appField] = selector;
  }
  if (Object.keys(githubApp).length) out.githubApp = githubApp;
  return Object.keys(out).length ? out : undefined;
}

/** The Workspace's source fields for a resolved source (a Program as a Flux source with its artifact URL, as upstream). */
function sourceFields(source: FetchSource, namespace: string, config: HookConfig): WorkspaceSpec {
  switch (source.kind) {
    case 'git': {
      const git: NonNullable<WorkspaceSpec['git']> = { url: source.url, ref: source.revision };
      if (source.dir) git.dir = source.dir;
      if (source.shallow) git.shallow = true;
      const auth = gitAuthOf(source.auth);
      if (auth) git.auth = auth;
      return { git };
    }
    case 'flux':
      return { flux: { url: source.url, digest: source.digest, ...(source.dir ? { dir: source.dir } : {}) } };
    case 'program':
      return {
        flux: { url: programUrl(config.programServer?.url ?? '', namespace, source.name), digest: source.digest },
      };
    case 'local':
      return { local: { dir: source.dir } };
    case 'projectInfo':
      return { projectInfo: { name: source.name, runtime: source.runtime } };
    case 'none':
      return {};
  }
}

export interface DesiredStackWorkspace {
  workspace: KObject;
  /** WORKSPACE_SPEC_HASH: what the observed Workspace must carry to count as this one. */
  hash: string;
  /** What `status.childDigests` records of it (kept-children.ts): hashed once, cached with it. */
  digest: string;
}

/** The Workspace `<stack>` for a Stack and its resolved source. */
export function stackWorkspace(stack: Stack, source: FetchSource, config: HookConfig): DesiredStackWorkspace {
  const spec = stack.spec;
  const name = stack.metadata.name;
  const namespace = stack.metadata.namespace ?? '';
  const template = spec.workspaceTemplate;
  const { stack: wsStack, volumes, mounts } = workspaceStack(spec);
  let ws: WorkspaceSpec = { ...sourceFields(source, namespace, config) };
  if (spec.serviceAccountName) ws.serviceAccountName = spec.serviceAccountName;
  const env = pulumiEnv(spec);
  if (env.length) ws.env = env;
  if (volumes.length)
    ws.podTemplate = {
      spec: { volumes, containers: [{ name: 'pulumi', volumeMounts: mounts }] },
    } as WorkspaceSpec['podTemplate'];
  ws.stacks = [wsStack];
  if (template?.spec) ws = strategicMerge(ws, template.spec);
  // The source is the one resolved (a template's `local` is, unless a destroy runs from projectInfo).
  delete ws.local;
  ws = { ...ws, ...sourceFields(source, namespace, config) };
  // The image is written out, as upstream's Workspaces show it (`kubectl get workspace`: IMAGE).
  ws.image ||= config.workspaceImage[ws.securityProfile === 'baseline' ? 'baseline' : 'restricted'];
  const from = [...envFrom(spec), ...((template?.spec?.envFrom ?? []) as V1EnvFromSource[])];
  if (from.length) ws.envFrom = from;
  const labels = { ...template?.metadata?.labels, ...stackLabels(name, 'stack') };
  const hash = shortHash({ spec: ws, labels }, 16);
  const workspace: Workspace & KObject = {
    apiVersion: AUTO_API_VERSION,
    kind: 'Workspace',
    metadata: {
      name,
      namespace,
      labels,
      annotations: { ...template?.metadata?.annotations, [WORKSPACE_SPEC_HASH]: hash },
    },
    spec: ws,
  };
  return { workspace, hash, digest: childDigest(workspace, namespace) };
}

export type StackWorkspaceReadiness =
  { state: 'ready' } | { state: 'waiting'; message: string } | { state: 'failed'; reason: string; message: string };

/**
 * Whether the observed Workspace is the desired one (its spec hash), reported on by the Workspace
 * controller for its current generation, and Ready; a Stalled Workspace is a failure, reported as
 * upstream's Stack does (`<reason>: <message>`).
 */
export function stackWorkspaceReadiness(observed: Workspace | undefined, hash: string): StackWorkspaceReadiness {
  const waiting = { state: 'waiting', message: 'waiting for workspace readiness' } as const;
  if (!observed || observed.metadata.annotations?.[WORKSPACE_SPEC_HASH] !== hash) return waiting;
  if (observed.status?.observedGeneration !== observed.metadata.generation) return waiting;
  const stalled = observedCondition(observed.status, 'Stalled');
  if (stalled?.status === 'True') {
    const reason = typeof stalled.reason === 'string' ? stalled.reason : 'WorkspaceFailed';
    const message = typeof stalled.message === 'string' ? stalled.message : 'the workspace failed';
    return { state: 'failed', reason, message: `${reason}: ${message}` };
  }
  return observedCondition(observed.status, 'Ready')?.status === 'True' ? { state: 'ready' } : waiting;
}
