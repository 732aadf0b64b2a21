/**
 * The contract between the hooks and the agent: the only module both import (with ssh-url.ts and ssh-key.ts, re-exported here).
 * Keys, env var names, paths and the JSON formats the agent writes back as annotations.
 * Changing anything here changes the wire format between two separately deployed images:
 * add fields, never rename or repurpose them.
 */

export { parseSshUrl, sshHostLabel, uploadPackCommand, withSshUser, type SshRemote } from './ssh-url';
export { MAX_SSH_KEY_ROUNDS, sshKeyRoundsProblem } from './ssh-key';
export * from './outputs-to';
import { parseOutputsToReport, type OutputsToReport } from './outputs-to';

/** Labels on every child the hooks create. */
export const Labels = {
  /** Upstream's label on everything that belongs to a Stack. */
  stackName: 'pulumi.com/stack-name',
  /** Upstream's component label: `stack` on the workspace objects. */
  component: 'pulumi.com/component',
  /** Selects the workspace pod (upstream: auto.pulumi.com/component=workspace). */
  workspaceComponent: 'auto.pulumi.com/component',
  workspaceName: 'auto.pulumi.com/workspace-name',
  /** The operation a Job runs: up | preview | refresh | destroy. */
  updateType: 'auto.pulumi.com/update-type',
} as const;

/** Annotations. The agent's keys are never returned by the hooks, so Metacontroller keeps them. */
export const Annotations = {
  /** On Stacks: upstream's "force an update" request. */
  reconciliationRequest: 'pulumi.com/reconciliation-request',
  /** On the workspace pod template (hooks): hash of the desired template. */
  workspaceHash: 'pulumi.com/workspace-hash',
  /**
   * On the workspace StatefulSet: WorkspaceStatus JSON, as agents before the status ConfigMap wrote
   * it (WORKSPACE_STATUS_KEY); read only for the pod templates of those releases (docs/migration.md).
   */
  workspaceStatus: 'pulumi.com/workspace-status',
  /** On an operation's Job (agent): UpdateResult JSON. */
  updateResult: 'pulumi.com/update-result',
  /** On the outputs Secret (agent): JSON array of the keys that hold secret values (upstream's key). */
  secretOutputs: 'pulumi.com/secrets',
} as const;

/** Environment variables the hooks set in pod specs and the agent reads. */
export const Env = {
  /** JSON OperationRequest, in the Job's runner container. */
  operation: 'PULUMI_OPERATION',
  /** The operation's deadline in seconds, in the Job's runner container: it cancels the operation then. */
  operationDeadline: 'PULUMI_OPERATION_DEADLINE_SECONDS',
  /** Base URL of the workspace server, in the Job's runner container. */
  workspaceUrl: 'PULUMI_WORKSPACE_URL',
  /** Names the runner and workspace use to find their own objects. */
  podNamespace: 'POD_NAMESPACE',
  podName: 'POD_NAME',
  jobName: 'PULUMI_JOB_NAME',
  stackName: 'PULUMI_STACK_NAME',
  /**
   * The workspace's status ConfigMap (`<workspace>-workspace-status`), where the agent in the
   * workspace pod (fetch, serve) writes its WorkspaceStatus under WORKSPACE_STATUS_KEY.
   */
  workspaceStatusConfigMap: 'PULUMI_WORKSPACE_STATUS_CONFIGMAP',
  /** The desired pod template hash, so the workspace status names the template it runs. */
  workspaceHash: 'PULUMI_WORKSPACE_HASH',
  /** JSON WorkspaceStackSpec (stack name, create, config items, environments) for `serve`. */
  workspaceStack: 'PULUMI_WORKSPACE_STACK',
  /** Audience of the projected token callers present to the workspace: `<stack>.<namespace>`. */
  workspaceAudience: 'PULUMI_WORKSPACE_AUDIENCE',
  /** Upstream's dynamic env file: init containers may append KEY=VALUE lines. */
  pulumiEnv: 'PULUMI_ENV',
  /** The Pulumi Cloud token (spec.accessTokenSecret): a secret wherever the agent meets it. */
  pulumiAccessToken: 'PULUMI_ACCESS_TOKEN',
  /** The passphrase of the passphrase secrets provider: a secret wherever the agent meets it. */
  pulumiConfigPassphrase: 'PULUMI_CONFIG_PASSPHRASE',
  /**
   * Comma-separated names of the pod's variables whose values come from Secrets (envRefs of type
   * Secret): the agent masks their values in everything it logs or writes.
   */
  secretEnvNames: 'PULUMI_SECRET_ENV_NAMES',
  /** Fetch source settings (upstream names). */
  gitUrl: 'GIT_URL',
  gitRevision: 'GIT_REVISION',
  gitDir: 'GIT_DIR',
  gitShallow: 'GIT_SHALLOW',
  /** GitHub's API root for GitHub App token exchanges (GitHub Enterprise); default https://api.github.com. */
  githubApiUrl: 'GITHUB_API_URL',
  gitSshPrivateKey: 'GIT_SSH_PRIVATE_KEY',
  /** known_hosts lines for an SSH URL's server, from the hooks' SSH_KNOWN_HOSTS: the only host keys ssh trusts. */
  gitSshKnownHosts: 'GIT_SSH_KNOWN_HOSTS',
  gitUsername: 'GIT_USERNAME',
  /** Basic-auth password, or the SSH key's passphrase when GIT_SSH_PRIVATE_KEY is set (upstream). */
  gitPassword: 'GIT_PASSWORD',
  gitToken: 'GIT_TOKEN',
  gitHubAppId: 'GIT_GITHUB_APP_ID',
  gitHubAppInstallationId: 'GIT_GITHUB_APP_INSTALLATION_ID',
  gitHubAppPrivateKey: 'GIT_GITHUB_APP_PRIVATE_KEY',
  fluxUrl: 'FLUX_URL',
  fluxDigest: 'FLUX_DIGEST',
  fluxDir: 'FLUX_DIR',
  fluxMaxUntarSize: 'FLUX_MAX_UNTAR_SIZE_BYTES',
  /** The most entries a Flux artifact may hold (default 100000, `-1` no limit). */
  fluxMaxUntarEntries: 'FLUX_MAX_UNTAR_ENTRIES',
  /** The URL of a Program's rendered Pulumi.yaml on the hook server, and its expected digest. */
  programUrl: 'PROGRAM_URL',
  programDigest: 'PROGRAM_DIGEST',
  /** PEM of the CA the hook server's certificate is checked against. */
  programCa: 'PROGRAM_CA',
  projectName: 'PROJECT_NAME',
  projectRuntime: 'PROJECT_RUNTIME',
  localDir: 'LOCAL_DIR',
  pulumiLogLevel: 'PULUMI_LOG_LEVEL',
} as const;

/** Paths inside the workspace pod. */
export const Paths = {
  share: '/share',
  /** The project directory `serve` opens (a symlink into the fetched source, or the source itself). */
  workspace: '/share/workspace',
  source: '/share/source',
  envFile: '/share/.env',
  /** The injected agent (copied by the `bootstrap` init container): Node.js and the bundled agent. */
  agentNode: '/share/agent/node',
  agentBundle: '/share/agent/agent.js',
  /** tini, PID 1 of the workspace container: forwards signals, reaps what plugins leave behind. */
  tini: '/share/tini',
  /** HOME for the workspace when the image's own HOME is not writable (an image without a user 1000). */
  fallbackHome: '/share/home',
  /** Projected ServiceAccount token the runner presents to the workspace. */
  tokenDir: '/var/run/secrets/pulumi.com/workspace-token',
  token: '/var/run/secrets/pulumi.com/workspace-token/token',
  /** Projected ServiceAccount token (audience PROGRAM_TOKEN_AUDIENCE) the fetch container presents to the hook server. */
  programTokenDir: '/var/run/secrets/pulumi.com/program-token',
  programToken: '/var/run/secrets/pulumi.com/program-token/token',
  /** Upstream's mount roots for configRef ConfigMaps and secretsRef Secrets. */
  configMaps: '/var/run/configmaps/stacks.pulumi.com/configmaps',
  secrets: '/var/run/secrets/stacks.pulumi.com/secrets',
  /**
   * Update plans saved by previews (`<id>.json`), on the pod's shared emptyDir: kept while the
   * workspace pod lives, gone when it is replaced (an approval then finds no plan to apply).
   */
  plans: '/share/plans',
} as const;

/** A plan id: an Update's name, a DNS label, so it is safe as a file name. */
export const PLAN_ID = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** The result reason of an `up` whose plan is not in the workspace (the pod was replaced since the preview). */
export const PLAN_NOT_FOUND = 'PlanNotFound';

/** The workspace server's port (upstream's gRPC port number, kept for NetworkPolicies). */
export const WORKSPACE_PORT = 50051;

/** The agent's executable, as installed on the agent image's PATH. */
export const AGENT_COMMAND = 'pko-agent';

/** In the agent image: what the `bootstrap` init container copies into /share (tini, agent/). */
export const INJECTED_AGENT_DIR = '/opt/pko-agent';

export type OperationType = 'up' | 'preview' | 'refresh' | 'destroy';
export const OPERATION_TYPES: readonly OperationType[] = ['up', 'preview', 'refresh', 'destroy'];

export function isOperationType(v: unknown): v is OperationType {
  return typeof v === 'string' && (OPERATION_TYPES as readonly string[]).includes(v);
}

/** What the runner asks the workspace to do (env PULUMI_OPERATION). Fields mirror upstream's Update spec. */
export interface OperationRequest {
  type: OperationType;
  stack: string;
  message?: string;
  target?: string[];
  targetDependents?: boolean;
  refresh?: boolean;
  parallel?: number;
  expectNoChanges?: boolean;
  continueOnError?: boolean;
  replace?: string[];
  remove?: boolean;
  runProgram?: boolean;
  /** `refresh` only: `pulumi refresh --preview-only` (a drift check): the state is not changed. Ours. */
  previewOnly?: boolean;
  /** `preview` only: save the update plan under this id (a DNS label) in the workspace's plan directory. */
  savePlan?: string;
  /** `up` only: apply exactly the plan saved under this id (`pulumi up --plan`); fails `PlanNotFound` if it is gone. */
  plan?: string;
  /** Recover from an interrupted operation first: a stale lock of this workspace, pending operations (docs/self-healing.md). */
  selfHealing?: boolean;
}

export interface ProjectInfo {
  name: string;
  runtime: string;
}

/**
 * A timestamp as Kubernetes writes one (metav1.Time: RFC 3339 in UTC, whole seconds), the format of
 * every time in the results and statuses; log lines keep the milliseconds.
 */
export function rfc3339(date: Date = new Date(), precision: 'seconds' | 'milliseconds' = 'seconds'): string {
  const iso = date.toISOString();
  return precision === 'milliseconds' ? iso : iso.replace(/\.\d{3}Z$/, 'Z');
}

/** Masked value shown for secret outputs (upstream's). */
export const SECRET_MASK = '[secret]';

/** The result the runner writes on its Job (annotation pulumi.com/update-result). */
export interface UpdateResult {
  state: 'succeeded' | 'failed';
  type: OperationType;
  /** Summary message on success, the cause on failure. Never contains secret values. */
  message: string;
  /** Machine-readable cause on failure: UpdateFailed, UpdateConflict, Aborted, WorkspaceUnavailable, … */
  reason?: string;
  permalink?: string;
  /** RFC 3339 (rfc3339()). */
  startTime?: string;
  endTime?: string;
  projectInfo?: ProjectInfo;
  /**
   * Outputs with every secret value replaced by SECRET_MASK. Absent for preview/refresh/destroy.
   * With `outputsOmitted`, only those that fit in the annotation (fitOutputs()).
   */
  outputs?: Record<string, unknown>;
  /**
   * Set when the outputs were too large for the annotation and some or all were left out (an
   * older agent left them all out and sent no `outputs`); the outputs Secret has them all.
   */
  outputsOmitted?: boolean;
  /** With `outputsOmitted`: how many outputs the stack has, in the outputs Secret. */
  outputsTotal?: number;
  /** Name of the Secret holding the full outputs. */
  outputsSecret?: string;
  /** What the runner wrote to the Stack's `spec.outputsTo` object (an `up` of a Stack that sets one). */
  outputsTo?: OutputsToReport;
  /** `refresh` only: how many resources differ from the stack's state (drift). */
  changedResources?: number;
  /** `refresh` only: the URNs of the first of them (at most MAX_CHANGED_URNS). */
  changedUrns?: string[];
  /** Resource changes by operation (create, update, delete, replace, same, …): Pulumi's summary. */
  resourceChanges?: Record<string, number>;
}

/** How many URNs of changed resources a refresh's result carries (the count has them all). */
export const MAX_CHANGED_URNS = 20;

/**
 * The key of the WorkspaceStatus JSON in the data of the workspace's status ConfigMap
 * (Env.workspaceStatusConfigMap). The hooks make the ConfigMap and never set its data.
 */
export const WORKSPACE_STATUS_KEY = 'workspace-status';

/** State the agent in the workspace pod reports in its status ConfigMap (WORKSPACE_STATUS_KEY). */
export interface WorkspaceStatus {
  /** The pod template hash (PULUMI_WORKSPACE_HASH) of the pod that wrote this. */
  hash: string;
  state: 'Installing' | 'Ready' | 'Failed';
  /**
   * Upstream's Workspace condition reasons: InstallationFailed, InitializationFailed,
   * IncompatibleConfiguration, Unauthenticated ({@link WORKSPACE_UNAUTHENTICATED}), …
   */
  reason?: string;
  message?: string;
  pulumiVersion?: string;
  projectInfo?: ProjectInfo;
}

/**
 * The reason of a `Failed` WorkspaceStatus while the workspace cannot verify its callers: its
 * ServiceAccount may not create TokenReviews or SubjectAccessReviews (upstream's Workspace Ready
 * reason in that case). It lasts until the agent's next check succeeds; the pod is not restarted.
 */
export const WORKSPACE_UNAUTHENTICATED = 'Unauthenticated';

/** The ClusterRole that lets a workspace's ServiceAccount create TokenReviews and SubjectAccessReviews. */
export const AUTH_DELEGATOR_CLUSTER_ROLE = 'system:auth-delegator';

/**
 * The budget of a result annotation. Annotations are capped at 256 KiB in total per object, and the
 * Job also carries Metacontroller's last-applied copy and the user's annotations; outputs that would
 * take the result past this are left out (fitOutputs()).
 */
export const MAX_OUTPUTS_ANNOTATION_BYTES = 64 * 1024;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Parses an UpdateResult annotation; undefined when absent or not a well-formed result. */
export function parseUpdateResult(raw: string | undefined): UpdateResult | undefined {
  if (raw === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!isRecord(v)) return undefined;
  if (v.state !== 'succeeded' && v.state !== 'failed') return undefined;
  if (!isOperationType(v.type)) return undefined;
  const result: UpdateResult = {
    state: v.state,
    type: v.type,
    message: typeof v.message === 'string' ? v.message : '',
  };
  for (const k of ['reason', 'permalink', 'startTime', 'endTime', 'outputsSecret'] as const) {
    const value = v[k];
    if (typeof value === 'string') result[k] = value;
  }
  if (isRecord(v.projectInfo) && typeof v.projectInfo.name === 'string' && typeof v.projectInfo.runtime === 'string') {
    result.projectInfo = { name: v.projectInfo.name, runtime: v.projectInfo.runtime };
  }
  if (isRecord(v.outputs)) result.outputs = v.outputs;
  if (v.outputsOmitted === true) result.outputsOmitted = true;
  if (typeof v.outputsTotal === 'number' && Number.isSafeInteger(v.outputsTotal) && v.outputsTotal >= 0)
    result.outputsTotal = v.outputsTotal;
  const outputsTo = parseOutputsToReport(v.outputsTo);
  if (outputsTo) result.outputsTo = outputsTo;
  if (typeof v.changedResources === 'number' && Number.isSafeInteger(v.changedResources) && v.changedResources >= 0)
    result.changedResources = v.changedResources;
  if (Array.isArray(v.changedUrns))
    result.changedUrns = v.changedUrns.filter((u): u is string => typeof u === 'string').slice(0, MAX_CHANGED_URNS);
  const changes = parseResourceChanges(v.resourceChanges);
  if (changes) result.resourceChanges = changes;
  return result;
}

/** Resource change counts (non-negative integers by operation name); undefined when malformed. */
export function parseResourceChanges(v: unknown): Record<string, number> | undefined {
  if (!isRecord(v)) return undefined;
  const out: Record<string, number> = {};
  for (const [op, n] of Object.entries(v)) {
    if (!/^[a-z][a-z-]{0,40}$/.test(op) || typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) return undefined;
    out[op] = n;
  }
  return out;
}

/** Parses a WorkspaceStatus (the ConfigMap's value, or an earlier agent's annotation); undefined when absent or malformed. */
export function parseWorkspaceStatus(raw: string | undefined): WorkspaceStatus | undefined {
  if (raw === undefined) return undefined;
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    return undefined;
  }
  if (!isRecord(v) || typeof v.hash !== 'string') return undefined;
  if (v.state !== 'Installing' && v.state !== 'Ready' && v.state !== 'Failed') return undefined;
  const status: WorkspaceStatus = { hash: v.hash, state: v.state };
  for (const k of ['reason', 'message', 'pulumiVersion'] as const) {
    const value = v[k];
    if (typeof value === 'string') status[k] = value;
  }
  if (isRecord(v.projectInfo) && typeof v.projectInfo.name === 'string' && typeof v.projectInfo.runtime === 'string') {
    status.projectInfo = { name: v.projectInfo.name, runtime: v.projectInfo.runtime };
  }
  return status;
}

/**
 * Bytes of `value` as JSON (0 for what JSON leaves out, such as undefined); Infinity for a value
 * nested too deep for JSON.stringify (an output thousands of levels deep), which never fits.
 */
function jsonBytes(value: unknown): number {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    return Infinity;
  }
  return text === undefined ? 0 : Buffer.byteLength(text);
}

/** Sets an own member, even one named `__proto__` (an assignment would set the prototype instead). */
function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * The result as its annotation carries it: unchanged when it fits in MAX_OUTPUTS_ANNOTATION_BYTES,
 * else with only the outputs that fit. Outputs are taken whole, in key order, each one kept if it
 * still fits (a large one does not push out the small ones after it), so the same outputs always
 * give the same annotation; `outputsOmitted` and `outputsTotal` say that some were left out.
 */
export function fitOutputs(result: UpdateResult): UpdateResult {
  const outputs = result.outputs;
  if (outputs === undefined || jsonBytes(result) <= MAX_OUTPUTS_ANNOTATION_BYTES) return result;
  const keys = Object.keys(outputs)
    .filter((k) => jsonBytes(outputs[k]) > 0)
    .sort();
  const kept: Record<string, unknown> = {};
  const fitted: UpdateResult = { ...result, outputs: kept, outputsOmitted: true, outputsTotal: keys.length };
  // Each kept output adds `"key":value` to the `{}` already counted, and a comma after the first.
  let size = jsonBytes(fitted);
  let count = 0;
  for (const key of keys) {
    const entry = jsonBytes(key) + 1 + jsonBytes(outputs[key]) + (count > 0 ? 1 : 0);
    if (size + entry > MAX_OUTPUTS_ANNOTATION_BYTES) continue;
    setOwn(kept, key, outputs[key]);
    size += entry;
    count++;
  }
  return fitted;
}

/** Serialises a result for the annotation, with the outputs that fit (fitOutputs()). */
export function formatUpdateResult(result: UpdateResult): string {
  return JSON.stringify(fitOutputs(result));
}

/** Replaces secret output values by the mask; `secretKeys` lists the outputs Pulumi marked secret. */
export function maskOutputs(outputs: Record<string, unknown>, secretKeys: Iterable<string>): Record<string, unknown> {
  const secret = new Set(secretKeys);
  const masked: Record<string, unknown> = {};
  for (const key of Object.keys(outputs).sort()) setOwn(masked, key, secret.has(key) ? SECRET_MASK : outputs[key]);
  return masked;
}

/** Upstream's key rule for the outputs Secret: characters outside [-._a-zA-Z0-9] become `_`. */
export function outputSecretKey(name: string): string {
  return name.replace(/[^-._a-zA-Z0-9]/g, '_');
}

/** One stack config item for the workspace (upstream's Workspace ConfigItem). */
export interface ConfigItem {
  /** Taken verbatim (never as a property path); keys without `:` get the project name prefixed. */
  key: string;
  /** A JSON value given inline: strings are plain config, anything else is structured config. */
  value?: unknown;
  /** A file to read the value from (mounted ConfigMap or Secret key); `json` parses it as structured config. */
  valueFrom?: { path?: string; env?: string; json?: boolean };
  secret: boolean;
  /**
   * The key is a property path into a structured value (`pulumi config set --path`), as a
   * Workspace's `stacks[].config[].path`; a Stack's keys never are. Only for string values.
   */
  path?: boolean;
}

/** What `pko-agent serve` sets up in the workspace (env PULUMI_WORKSPACE_STACK). */
export interface WorkspaceStackSpec {
  name: string;
  /** Create the stack when it does not exist (false with useLocalStackOnly). */
  create: boolean;
  secretsProvider?: string;
  environment?: string[];
  config: ConfigItem[];
}

/** The audience of the tokens a workspace's fetch container presents for its Program. */
export const PROGRAM_TOKEN_AUDIENCE = 'programs.pulumi-mc-hooks';

/**
 * The most bytes of rendered Pulumi.yaml the hook server serves and the agent reads. A Program is
 * at most what the API server stores (about 1.5 MiB of JSON); its YAML is of the same order, so
 * this bound only stops a broken or hostile answer.
 */
export const MAX_PROGRAM_BYTES = 8 * 1024 * 1024;

/** The path of a Program's rendered Pulumi.yaml on the hook server. */
export function programPath(namespace: string, name: string): string {
  return `/programs/${namespace}/${name}`;
}
