/**
 * Bounded operations (docs/bounded-operations.md): an operation deadline, ephemeral-storage
 * requests and limits, and one image registry for every image the hooks put in pods. Each is off
 * unless set, so that an upstream manifest yields the same pods with or without this operator's
 * additions.
 */

/** Requests and limits of `ephemeral-storage` for one kind of container; a key that is absent is not set. */
export interface EphemeralStorage {
  request?: string;
  limit?: string;
}

export interface BoundedSettings {
  /** Default deadline of every operation, in seconds (OPERATION_DEADLINE_SECONDS); none when undefined. */
  operationDeadlineSeconds?: number;
  /** For the workspace container (WORKSPACE_EPHEMERAL_STORAGE_REQUEST, _LIMIT). */
  workspaceEphemeralStorage?: EphemeralStorage;
  /** For the Job's runner container (JOB_EPHEMERAL_STORAGE_REQUEST, _LIMIT). */
  jobEphemeralStorage?: EphemeralStorage;
  /** The registry (host, optionally with a path) every image is pulled from (IMAGE_REGISTRY). */
  imageRegistry?: string;
}

/** A Kubernetes resource quantity such as `2Gi`, `500M` or `1e9` (apimachinery's grammar, without signs). */
const QUANTITY = /^(\d+(\.\d*)?|\.\d+)([KMGTPE]i|[numkMGTPE]|[eE]\d+)?$/;

function quantity(name: string, v: string | undefined): string | undefined {
  if (v === undefined || v === '') return undefined;
  if (!QUANTITY.test(v)) throw new Error(`${name} must be a Kubernetes quantity such as 2Gi, not "${v}"`);
  return v;
}

function ephemeralStorage(prefix: string, env: NodeJS.ProcessEnv): EphemeralStorage | undefined {
  const request = quantity(`${prefix}_REQUEST`, env[`${prefix}_REQUEST`]);
  const limit = quantity(`${prefix}_LIMIT`, env[`${prefix}_LIMIT`]);
  if (request === undefined && limit === undefined) return undefined;
  return { ...(request !== undefined ? { request } : {}), ...(limit !== undefined ? { limit } : {}) };
}

/** A registry host (with an optional port and path): `registry.example.com`, `10.0.0.5:5000/mirror`. */
const REGISTRY = /^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?(:\d+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)*$/;

/** The bounded-operation settings from the hooks' environment; a malformed value is a startup error. */
export function boundedSettingsFromEnv(env: NodeJS.ProcessEnv): BoundedSettings {
  const settings: BoundedSettings = {};
  const deadline = env.OPERATION_DEADLINE_SECONDS;
  if (deadline !== undefined && deadline !== '') {
    const n = Number(deadline);
    if (!Number.isInteger(n) || n <= 0)
      throw new Error(`OPERATION_DEADLINE_SECONDS must be a positive integer, not "${deadline}"`);
    settings.operationDeadlineSeconds = n;
  }
  const workspace = ephemeralStorage('WORKSPACE_EPHEMERAL_STORAGE', env);
  if (workspace) settings.workspaceEphemeralStorage = workspace;
  const job = ephemeralStorage('JOB_EPHEMERAL_STORAGE', env);
  if (job) settings.jobEphemeralStorage = job;
  const registry = (env.IMAGE_REGISTRY ?? '').replace(/\/+$/, '');
  if (registry !== '') {
    if (!REGISTRY.test(registry))
      throw new Error(`IMAGE_REGISTRY must be a registry host with an optional path, not "${env.IMAGE_REGISTRY}"`);
    settings.imageRegistry = registry;
  }
  return settings;
}

/**
 * `image` pulled from `registry` instead: its registry host, if it names one, is replaced; Docker
 * Hub's short names gain the `library/` path that mirrors use (`busybox` → `<registry>/library/busybox`).
 */
export function withRegistry(image: string, registry: string | undefined): string {
  if (!registry || image === '') return image;
  const slash = image.indexOf('/');
  const first = slash < 0 ? '' : image.slice(0, slash);
  // The first component names a registry when it has a dot or a port, or is localhost (Docker's rule).
  const hasRegistry = first !== '' && (first.includes('.') || first.includes(':') || first === 'localhost');
  const path = hasRegistry ? image.slice(slash + 1) : slash < 0 ? `library/${image}` : image;
  return `${registry}/${path}`;
}
