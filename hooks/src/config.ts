import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { version } from '../../package.json';
import { boundedSettingsFromEnv, withRegistry, type BoundedSettings } from './bounded/settings';
import { DEFAULT_SYNC_CACHE_MAX_BYTES } from './cache/sync-cache';
import { egressRulesFromEnv, type EgressRules } from './git/egress';
import { errorMessage, errorCode } from './lib/errors';
import type { ReclaimPolicy, WorkspaceCacheSettings } from './stack/hibernation';

/** Settings of the hook server, from its environment. Nothing here is per request. */
export interface HookConfig extends BoundedSettings {
  /** The hook routes' port (PORT): Metacontroller's calls, /metrics and the probes. */
  port: number;
  /**
   * The program server's port (PROGRAM_PORT, default 8081): only `GET /programs/…`, for workspace
   * pods, so that a NetworkPolicy can admit them here and not to the hook routes. Listened on only
   * when PROGRAM_SERVER_URL is set.
   */
  programPort: number;
  host: string;
  /** The image of the bootstrap and fetch init containers and of the Job runner (IMAGE_REGISTRY applied). */
  agentImage: string;
  /** Default workspace images (no `workspaceTemplate.spec.image`), per security profile (IMAGE_REGISTRY applied). */
  workspaceImage: { restricted: string; baseline: string };
  agentImagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  /** Passed to the fetch container (upstream's FLUX_MAX_UNTAR_SIZE_BYTES). */
  fluxMaxUntarSizeBytes?: string;
  /** Largest request body accepted, in bytes. */
  bodyLimit: number;
  /** What the sync's caches hold at most, in bytes (SYNC_CACHE_MAX_BYTES; cache/sync-cache.ts). */
  syncCacheMaxBytes?: number;
  logLevel: string;
  /** LOG_FORMAT: pino's JSON lines (default), or `console` lines like upstream's `--zap-encoder=console`. */
  logFormat?: LogFormat;
  /** Git ref lookups: per-request timeout and how long answers are cached. */
  gitTimeoutMs: number;
  gitCacheTtlMs: number;
  /** GitHub's API root for GitHub App credentials (GITHUB_API_URL; GitHub Enterprise: https://<host>/api/v3). */
  githubApiUrl?: string;
  /**
   * The SSH host keys trusted for SSH git URLs, as known_hosts text (from the files SSH_KNOWN_HOSTS
   * names); the branch lookups and the fetch container check servers against them.
   */
  sshKnownHosts?: string;
  /** Which hosts the git lookups may connect to, besides the addresses always denied (EGRESS_ALLOW, EGRESS_DENY). */
  egress?: EgressRules;
  /**
   * Derive upstream's gauges (stacks_active, stacks_failing, programs_active) from the Stacks and
   * Programs, listed and watched with the hooks' identity, and write events only about the Stacks,
   * Workspaces and Updates that watch holds (OBJECT_METRICS=on, the default; off: no such gauges,
   * events about whatever a hook call names, and the ServiceAccount needs no access to those kinds).
   */
  objectMetrics?: boolean;
  /**
   * The operations budget (budget/operations.ts): Stacks in operation at once, cluster-wide
   * (OPERATIONS_MAX, default {@link DEFAULT_OPERATIONS_MAX}; 0: no budget). Needs the mirror of
   * Stacks (OBJECT_METRICS=on); without it every operation starts at once.
   */
  operationsMax?: number;
  /**
   * The reclaim policy of a Stack that names none (WORKSPACE_RECLAIM_DEFAULT; default Retain, as
   * upstream): `Delete` makes every such Stack hibernate (stack/hibernation.ts).
   */
  workspaceReclaimDefault?: ReclaimPolicy;
  /**
   * The per-Stack cache volume `<stack>-cache` (WORKSPACE_CACHE_SIZE, a quantity; unset: none),
   * its StorageClass (WORKSPACE_CACHE_STORAGE_CLASS) and whether retained workspaces get one too
   * (WORKSPACE_CACHE_RETAINED=on; hibernating ones always do).
   */
  workspaceCache?: WorkspaceCacheSettings;
  /**
   * The server's certificate chain and key, PEM files (TLS_CERT_FILE, TLS_KEY_FILE): HTTPS when set,
   * plain HTTP otherwise. Re-read when they change (a rotated Secret).
   */
  tls?: { certFile: string; keyFile: string };
  /**
   * Files each holding one bearer token the hook routes accept (AUTH_TOKEN_FILES, colon-separated;
   * missing files skipped, so a Secret's optional second key can carry the previous token during a
   * rotation). Unset: the hook routes ask for no credential (local use only).
   */
  authTokenFiles?: string[];
  /** Timeouts and the cap on request bodies in flight; DEFAULT_LIMITS when absent. */
  limits?: ServerLimits;
  /**
   * Only callers whose bearer token the API server authenticates (TokenReview) and who may `get`
   * the non-resource URL /metrics (SubjectAccessReview) read /metrics (METRICS_AUTH=on; the
   * default when the hook routes ask for a token, as upstream's `--metrics-secure`). Off: /metrics
   * is open to whoever reaches the port (`npm start` on 127.0.0.1).
   */
  metricsAuth?: boolean;
  /**
   * Where workspace pods download Programs from this server (PROGRAM_SERVER_URL, e.g.
   * https://pulumi-mc-hooks.pulumi-system.svc:9443, the Service's port to PROGRAM_PORT) and the PEM of the CA its certificate is checked
   * against (read from PROGRAM_SERVER_CA_FILE). Unset: Programs have no artifact (Stalled).
   */
  programServer?: { url: string; ca: string };
}

/** What one caller can hold of the hook server: time and memory (docs/security.md, "The hook server"). */
export interface ServerLimits {
  /** Until the request's headers are in (HEADERS_TIMEOUT_MS); also bounds a TLS handshake. */
  headersTimeoutMs: number;
  /** Until the whole request, body included, is in (REQUEST_TIMEOUT_MS): a slow body is cut off with 408. */
  requestTimeoutMs: number;
  /** How long an idle kept-alive connection waits for its next request (KEEP_ALIVE_TIMEOUT_MS). */
  keepAliveTimeoutMs: number;
  /** A connection with no traffic at all for this long is closed (CONNECTION_TIMEOUT_MS). */
  connectionTimeoutMs: number;
  /**
   * Bytes of request bodies held at once, over all requests (BODY_BYTES_IN_FLIGHT): a request that
   * would go past it is refused with 429 and Retry-After, which Metacontroller retries without an
   * error event.
   */
  bodyBytesInFlight: number;
}

/**
 * Metacontroller's hook calls take at most their webhook `timeout` (10 s by default and in our
 * manifests): every bound below leaves room for that and holds nothing much longer.
 */
export const DEFAULT_LIMITS: ServerLimits = {
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 60_000,
  connectionTimeoutMs: 90_000,
  bodyBytesInFlight: 32 * 1024 * 1024,
};

export const DEFAULT_OPERATIONS_MAX = 20;

/** The program server's port in the container (PROGRAM_PORT); the manifests name it `programs`. */
const DEFAULT_PROGRAM_PORT = 8081;

export const DEFAULT_AGENT_IMAGE = `ghcr.io/pulumi-mc-operator/agent:v${version}`;

/**
 * The flags the hooks image runs node with (the Dockerfile's CMD). Under the chart's 512 MiB memory
 * limit V8 gives the young generation 1 MB semi-spaces, so each sync request's objects (a 25 KB
 * request parses into a few hundred KB) outlive a scavenge and are promoted and marked; 16 MB
 * semi-spaces took about a quarter off the CPU of a resync for about 30 MiB more RSS
 * (docs/benchmarks.md, "Control plane").
 */
export const HOOKS_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=16'];

/** The Pulumi CLI release this operator is built and tested with (the Dockerfile's PULUMI_VERSION). */
export const PULUMI_VERSION = '3.274.1';

/**
 * Upstream's default workspace images, pinned to the supported release instead of `latest`: the
 * official non-root image for the restricted profile, the root one for baseline.
 */
export const DEFAULT_WORKSPACE_IMAGE = {
  restricted: `pulumi/pulumi:${PULUMI_VERSION}-nonroot`,
  baseline: `pulumi/pulumi:${PULUMI_VERSION}`,
} as const;

function pullPolicy(v: string | undefined): HookConfig['agentImagePullPolicy'] {
  if (!v) return undefined;
  const lower = v.toLowerCase();
  if (lower === 'always') return 'Always';
  if (lower === 'never') return 'Never';
  if (lower === 'ifnotpresent') return 'IfNotPresent';
  throw new Error(`AGENT_IMAGE_PULL_POLICY must be Always, IfNotPresent or Never, not "${v}"`);
}

export type LogFormat = 'json' | 'console';

function logFormat(v: string | undefined): LogFormat {
  if (v === undefined || v === '' || v === 'json') return 'json';
  if (v === 'console') return 'console';
  throw new Error(`LOG_FORMAT must be json or console, not "${v}"`);
}

function positiveInt(name: string, v: string | undefined, fallback: number): number {
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n <= 0) throw new Error(`${name} must be a positive integer, not "${v}"`);
  return n;
}

function nonNegativeInt(name: string, v: string | undefined, fallback: number): number {
  if (v === undefined || v === '') return fallback;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} must be a whole number (0 or more), not "${v}"`);
  return n;
}

function onOff(name: string, v: string | undefined, fallback: boolean): boolean {
  if (v === undefined || v === '') return fallback;
  const lower = v.toLowerCase();
  if (lower === 'on' || lower === 'true') return true;
  if (lower === 'off' || lower === 'false') return false;
  throw new Error(`${name} must be on or off, not "${v}"`);
}

/**
 * The known_hosts text the hooks trust: the files SSH_KNOWN_HOSTS names (colon-separated), else
 * upstream's defaults ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts (go-git's), missing ones
 * skipped. A SSH_KNOWN_HOSTS whose files are all missing is a configuration error.
 */
export function readKnownHosts(env: NodeJS.ProcessEnv): string {
  const named = (env.SSH_KNOWN_HOSTS ?? '').split(':').filter((f) => f !== '');
  const files =
    named.length > 0 ? named : [join(env.HOME || homedir(), '.ssh', 'known_hosts'), '/etc/ssh/ssh_known_hosts'];
  const texts: string[] = [];
  for (const file of files) {
    try {
      texts.push(readFileSync(file, 'utf8'));
    } catch (e) {
      if (errorCode(e) !== 'ENOENT')
        throw new Error(`SSH_KNOWN_HOSTS: cannot read ${file}: ${errorMessage(e)}`, { cause: e });
    }
  }
  if (named.length > 0 && texts.length === 0) throw new Error(`SSH_KNOWN_HOSTS: none of ${named.join(', ')} exists`);
  return texts.map((t) => (t.endsWith('\n') || t === '' ? t : `${t}\n`)).join('');
}

/** The settings of who may call the hook server and what a call may hold, from the environment. */
function servingFromEnv(
  env: NodeJS.ProcessEnv,
  bodyLimit: number,
): Pick<HookConfig, 'tls' | 'authTokenFiles' | 'limits' | 'metricsAuth'> {
  const certFile = env.TLS_CERT_FILE ?? '';
  const keyFile = env.TLS_KEY_FILE ?? '';
  if ((certFile === '') !== (keyFile === ''))
    throw new Error('TLS_CERT_FILE and TLS_KEY_FILE go together: set both (HTTPS) or neither (HTTP)');
  const tokenFiles = (env.AUTH_TOKEN_FILES ?? '').split(':').filter((f) => f !== '');
  const limits: ServerLimits = {
    headersTimeoutMs: positiveInt('HEADERS_TIMEOUT_MS', env.HEADERS_TIMEOUT_MS, DEFAULT_LIMITS.headersTimeoutMs),
    requestTimeoutMs: positiveInt('REQUEST_TIMEOUT_MS', env.REQUEST_TIMEOUT_MS, DEFAULT_LIMITS.requestTimeoutMs),
    keepAliveTimeoutMs: positiveInt(
      'KEEP_ALIVE_TIMEOUT_MS',
      env.KEEP_ALIVE_TIMEOUT_MS,
      DEFAULT_LIMITS.keepAliveTimeoutMs,
    ),
    connectionTimeoutMs: positiveInt(
      'CONNECTION_TIMEOUT_MS',
      env.CONNECTION_TIMEOUT_MS,
      DEFAULT_LIMITS.connectionTimeoutMs,
    ),
    bodyBytesInFlight: positiveInt('BODY_BYTES_IN_FLIGHT', env.BODY_BYTES_IN_FLIGHT, DEFAULT_LIMITS.bodyBytesInFlight),
  };
  // Node.js refuses a headers timeout above the request timeout; a body budget below one body's
  // limit would refuse the largest bodies for ever.
  if (limits.headersTimeoutMs > limits.requestTimeoutMs)
    throw new Error(
      `HEADERS_TIMEOUT_MS (${limits.headersTimeoutMs}) must not exceed REQUEST_TIMEOUT_MS (${limits.requestTimeoutMs})`,
    );
  if (limits.bodyBytesInFlight < bodyLimit)
    throw new Error(
      `BODY_BYTES_IN_FLIGHT (${limits.bodyBytesInFlight}) must be at least BODY_LIMIT_BYTES (${bodyLimit})`,
    );
  return {
    ...(certFile !== '' ? { tls: { certFile, keyFile } } : {}),
    ...(tokenFiles.length > 0 ? { authTokenFiles: tokenFiles } : {}),
    limits,
    metricsAuth: onOff('METRICS_AUTH', env.METRICS_AUTH, tokenFiles.length > 0),
  };
}

/** A Kubernetes quantity as a claim's size takes it (a number and an optional suffix). */
const QUANTITY = /^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$/;
/** A StorageClass name: a DNS subdomain. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function workspaceCacheFromEnv(env: NodeJS.ProcessEnv): WorkspaceCacheSettings | undefined {
  const size = env.WORKSPACE_CACHE_SIZE ?? '';
  const storageClass = env.WORKSPACE_CACHE_STORAGE_CLASS ?? '';
  if (size === '') {
    if (storageClass !== '') throw new Error('WORKSPACE_CACHE_STORAGE_CLASS needs WORKSPACE_CACHE_SIZE');
    return undefined;
  }
  if (size.length > 32 || !QUANTITY.test(size))
    throw new Error(`WORKSPACE_CACHE_SIZE must be a quantity such as 2Gi, not ${JSON.stringify(size.slice(0, 40))}`);
  if (storageClass !== '' && (storageClass.length > 253 || !DNS_SUBDOMAIN.test(storageClass)))
    throw new Error(
      `WORKSPACE_CACHE_STORAGE_CLASS must be a StorageClass name, not ${JSON.stringify(storageClass.slice(0, 40))}`,
    );
  return {
    size,
    ...(storageClass !== '' ? { storageClassName: storageClass } : {}),
    retained: onOff('WORKSPACE_CACHE_RETAINED', env.WORKSPACE_CACHE_RETAINED, false),
  };
}

/**
 * `knownHosts`: how the trusted host keys are read (render reads only the files SSH_KNOWN_HOSTS
 * names); `readFile`: how PROGRAM_SERVER_CA_FILE is read (tests of the manifests: a stand-in).
 */
export function configFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  knownHosts: (env: NodeJS.ProcessEnv) => string = readKnownHosts,
  readFile: (file: string) => string = (file) => readFileSync(file, 'utf8'),
): HookConfig {
  const bounded = boundedSettingsFromEnv(env);
  const image = (ref: string): string => withRegistry(ref, bounded.imageRegistry);
  const bodyLimit = positiveInt('BODY_LIMIT_BYTES', env.BODY_LIMIT_BYTES, 8 * 1024 * 1024);
  const serving = servingFromEnv(env, bodyLimit);
  const config: HookConfig = {
    ...bounded,
    ...serving,
    port: positiveInt('PORT', env.PORT, 8080),
    programPort: positiveInt('PROGRAM_PORT', env.PROGRAM_PORT, DEFAULT_PROGRAM_PORT),
    // Without a credential to ask for, only this machine may call (npm start, curl).
    host: env.HOST || (serving.authTokenFiles ? '0.0.0.0' : '127.0.0.1'),
    agentImage: image(env.AGENT_IMAGE || DEFAULT_AGENT_IMAGE),
    workspaceImage: {
      restricted: image(env.WORKSPACE_IMAGE || DEFAULT_WORKSPACE_IMAGE.restricted),
      baseline: image(env.WORKSPACE_IMAGE_BASELINE || DEFAULT_WORKSPACE_IMAGE.baseline),
    },
    bodyLimit,
    syncCacheMaxBytes: positiveInt('SYNC_CACHE_MAX_BYTES', env.SYNC_CACHE_MAX_BYTES, DEFAULT_SYNC_CACHE_MAX_BYTES),
    logLevel: env.LOG_LEVEL || 'info',
    logFormat: logFormat(env.LOG_FORMAT),
    gitTimeoutMs: positiveInt('GIT_TIMEOUT_MS', env.GIT_TIMEOUT_MS, 2000),
    gitCacheTtlMs: positiveInt('GIT_CACHE_TTL_MS', env.GIT_CACHE_TTL_MS, 20_000),
    ...(env.GITHUB_API_URL ? { githubApiUrl: env.GITHUB_API_URL } : {}),
    egress: egressRulesFromEnv(env),
    objectMetrics: onOff('OBJECT_METRICS', env.OBJECT_METRICS, true),
    operationsMax: nonNegativeInt('OPERATIONS_MAX', env.OPERATIONS_MAX, DEFAULT_OPERATIONS_MAX),
  };
  const reclaim = env.WORKSPACE_RECLAIM_DEFAULT ?? '';
  if (reclaim !== '') {
    if (reclaim !== 'Retain' && reclaim !== 'Delete')
      throw new Error(
        `WORKSPACE_RECLAIM_DEFAULT must be Retain or Delete, not ${JSON.stringify(reclaim.slice(0, 40))}`,
      );
    config.workspaceReclaimDefault = reclaim;
  }
  const cache = workspaceCacheFromEnv(env);
  if (cache) config.workspaceCache = cache;
  const trusted = knownHosts(env);
  if (trusted !== '') config.sshKnownHosts = trusted;
  const policy = pullPolicy(env.AGENT_IMAGE_PULL_POLICY);
  if (policy) config.agentImagePullPolicy = policy;
  if (env.FLUX_MAX_UNTAR_SIZE_BYTES) config.fluxMaxUntarSizeBytes = env.FLUX_MAX_UNTAR_SIZE_BYTES;
  const programServer = programServerFromEnv(env, readFile);
  if (programServer) config.programServer = programServer;
  if (config.programPort === config.port)
    throw new Error(`PROGRAM_PORT must differ from PORT (${config.port}): the program server has a port of its own`);
  return config;
}

/** PROGRAM_SERVER_URL and PROGRAM_SERVER_CA_FILE go together: an https URL without path, and a PEM file. */
function programServerFromEnv(env: NodeJS.ProcessEnv, readFile: (file: string) => string): HookConfig['programServer'] {
  const url = env.PROGRAM_SERVER_URL ?? '';
  const caFile = env.PROGRAM_SERVER_CA_FILE ?? '';
  if (url === '' && caFile === '') return undefined;
  if (url === '' || caFile === '')
    throw new Error('PROGRAM_SERVER_URL and PROGRAM_SERVER_CA_FILE go together: set both or neither');
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`PROGRAM_SERVER_URL is not a URL: ${JSON.stringify(url)}`);
  }
  if (parsed.protocol !== 'https:' || parsed.pathname !== '/' || parsed.search !== '' || parsed.username !== '')
    throw new Error(`PROGRAM_SERVER_URL must be https://<host>[:<port>], not ${JSON.stringify(url)}`);
  let ca: string;
  try {
    ca = readFile(caFile);
  } catch (e) {
    throw new Error(`PROGRAM_SERVER_CA_FILE: cannot read ${caFile}: ${errorMessage(e)}`, { cause: e });
  }
  if (!ca.includes('-----BEGIN CERTIFICATE-----'))
    throw new Error(`PROGRAM_SERVER_CA_FILE: ${caFile} holds no PEM certificate`);
  return { url: parsed.origin, ca };
}
