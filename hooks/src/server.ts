import Fastify, { type FastifyInstance, type FastifyServerFactoryHandler } from 'fastify';
import { randomUUID } from 'node:crypto';
import * as http from 'node:http';
import * as https from 'node:https';
import { createAjv } from '../../schemas';
import { SyncCache } from './cache/sync-cache';
import { DEFAULT_LIMITS, DEFAULT_OPERATIONS_MAX, type HookConfig, type ServerLimits } from './config';
import type { EventsAccess } from './events/kubernetes';
import { EventRecorder } from './events/recorder';
import { describeEgress, EgressPolicy } from './git/egress';
import { GitResolver } from './git/ls-remote';
import { installJsonBodyParser } from './http/body-parser';
import { Credentials, type TlsMaterial } from './http/credentials';
import { consoleLogStream } from './http/console-log';
import { installErrorHandler } from './http/errors';
import { BodyBudget, installGuard } from './http/guard';
import { healthPlugin, type Health } from './http/health';
import { HookMetrics, instrument, metricsPlugin } from './http/metrics';
import { programHooks, programServer, type ProgramServerAccess } from './http/program-routes';
import { installRequestLog, OneLinePerRequest } from './http/request-log';
import { stackHooks } from './http/stack-routes';
import { updateHooks, workspaceHooks } from './http/workspace-routes';
import type { Reviewer } from './kube/token-review';
import { ObjectGauges, type ObjectsAccess } from './objects/gauges';
import { mirrorTurn } from './budget/gate';
import type { ProgramServerApi } from './program/serve';

export interface ServerDeps {
  /** The hooks' only notion of time; tests pin it. */
  clock?: () => Date;
  git?: GitResolver;
  /** Pass false to silence logs (tests, benchmarks). */
  logger?: boolean;
  /** Where logs go (default stdout); tests capture them. */
  logStream?: NodeJS.WritableStream;
  /** Kubernetes Events on Stacks, Workspaces and Updates: the API to write them with, or why they are off (the default). */
  events?: EventsAccess;
  /** Upstream's gauges of Stacks and Programs: the API to list and watch them with, or why they are off (the default). */
  objects?: ObjectsAccess;
  /** The program server's TokenReviews and reads of Programs (program/serve.ts), or why it has none (the default). */
  programs?: { api: ProgramServerApi; via: string } | { off: string };
  /** What reviews the bearer tokens of scrapers when METRICS_AUTH is on (kube/token-review.ts). */
  reviewer?: Reviewer;
  /** How often the TLS and token files are read again (default 30 s). */
  credentialsReloadMs?: number;
  /** How long an event waits for its object to show in the mirror (default 30 s). */
  mirrorWaitMs?: number;
}

export interface HookServer {
  /** The hook routes, /metrics and the probes (config.port); closing it closes `programs` too. */
  app: FastifyInstance;
  /** The program server, `GET /programs/…` only (config.programPort), with the same certificate. */
  programs: FastifyInstance;
  health: Health;
  metrics: HookMetrics;
  /** The gauges derived from Stacks and Programs; undefined when they are off. */
  objects: ObjectGauges | undefined;
  /** Writes the events of Stacks, Workspaces and Updates; undefined when events are off. */
  events: EventRecorder | undefined;
  /** The certificate served and the tokens the hook routes accept. */
  credentials: Credentials;
  /** Reads the TLS and token files again and serves what changed (done every credentialsReloadMs). */
  reloadCredentials(): void;
  /** The request bodies held at once. */
  budget: BodyBudget;
}

/**
 * The HTTP or HTTPS server under Fastify, with every bound of `limits` set: Fastify sets only some
 * of them, and Node.js checks the headers and request timeouts only every 30 s by default, which
 * would let a slow body live 30 s past its timeout.
 */
function rawServer(
  handler: FastifyServerFactoryHandler,
  limits: ServerLimits,
  tls: TlsMaterial | undefined,
): http.Server {
  const options: http.ServerOptions = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(limits.headersTimeoutMs / 4))),
  };
  const server = tls
    ? https.createServer(
        { ...options, ...tls, minVersion: 'TLSv1.2', handshakeTimeout: limits.headersTimeoutMs },
        handler,
      )
    : http.createServer(options, handler);
  server.keepAliveTimeout = limits.keepAliveTimeoutMs;
  server.setTimeout(limits.connectionTimeoutMs);
  return server;
}

/** The first line a hook server logs: how it serves and who may call its hooks. */
function describeServing(config: HookConfig, credentials: Credentials): { level: 'info' | 'warn'; msg: string } {
  const scheme = credentials.tls ? 'HTTPS' : 'HTTP';
  if (credentials.required)
    return credentials.tls
      ? { level: 'info', msg: `hook server: ${scheme}, the hook routes require Metacontroller's bearer token` }
      : { level: 'warn', msg: `hook server: ${scheme}, the hook routes require a bearer token, sent in clear text` };
  const local = config.host === '127.0.0.1' || config.host === '::1' || config.host === 'localhost';
  return {
    level: local ? 'info' : 'warn',
    msg: `hook server: unauthenticated ${scheme} on ${config.host}:${config.port}: ${local ? 'for local use (curl)' : 'anyone who reaches this port may call the hooks'}; set TLS_CERT_FILE, TLS_KEY_FILE and AUTH_TOKEN_FILES to serve Metacontroller`,
  };
}

/**
 * The hook server: health endpoints and the Stack, Workspace, Update and Program hooks, each an encapsulated plugin
 * (http/), around the domain code (stack/, program/, git/). The server's only memory is its caches:
 * the git lookups' (git/ls-remote.ts) and the sync's (cache/sync-cache.ts).
 */
export function buildServer(config: HookConfig, deps: ServerDeps = {}): HookServer {
  const limits = config.limits ?? DEFAULT_LIMITS;
  const credentials = new Credentials(config, {
    info: (fields, msg) => app.log.info(fields, msg),
    warn: (fields, msg) => app.log.warn(fields, msg),
  });
  const logStream =
    config.logFormat === 'console' ? consoleLogStream(deps.logStream ?? process.stdout) : deps.logStream;
  // Two listeners with the same bounds, certificate and logs: the hook routes' and the program server's.
  const listener = (): FastifyInstance => {
    const instance: FastifyInstance = Fastify({
      serverFactory: (handler) => rawServer(handler, limits, credentials.tls),
      logger:
        deps.logger === false
          ? false
          : {
              level: config.logLevel,
              redact: ['req.headers.authorization', 'req.headers.cookie'],
              ...(logStream ? { stream: logStream } : {}),
            },
      bodyLimit: config.bodyLimit,
      // A Program's name may be 253 characters (/programs/:namespace/:name); longer is a 400 from its schema.
      routerOptions: { maxParamLength: 300 },
      genReqId: (req) => {
        const given = req.headers['x-request-id'];
        return typeof given === 'string' && given.length > 0 && given.length <= 128 ? given : randomUUID();
      },
      logController: new OneLinePerRequest(),
    });
    installErrorHandler(instance);
    installRequestLog(instance);
    return instance;
  };
  const app = listener();
  const programs = listener();
  const serving = describeServing(config, credentials);
  app.log[serving.level](serving.msg);
  const ajv = createAjv();
  app.setValidatorCompiler(({ schema }) => ajv.compile(schema));
  programs.setValidatorCompiler(({ schema }) => ajv.compile(schema));
  installJsonBodyParser(app);
  const health: Health = { ready: true };
  const clock = deps.clock ?? (() => new Date());
  const metrics = new HookMetrics();
  instrument(app, metrics);
  const git =
    deps.git ??
    new GitResolver({
      timeoutMs: config.gitTimeoutMs,
      cacheTtlMs: config.gitCacheTtlMs,
      ...(config.githubApiUrl ? { githubApiUrl: config.githubApiUrl } : {}),
      ...(config.sshKnownHosts ? { sshKnownHosts: config.sshKnownHosts } : {}),
      egress: new EgressPolicy(config.egress),
      counted: (hit) => metrics.countCacheLookup('git_lookup', hit),
    });
  if (!deps.git) app.log.info(describeEgress(config.egress), 'egress of the git lookups');
  const objectsAccess = deps.objects ?? { off: 'no Kubernetes API access given' };
  const objects = 'api' in objectsAccess ? new ObjectGauges(objectsAccess.api, { log: app.log }) : undefined;
  if ('api' in objectsAccess) app.log.info({ via: objectsAccess.via }, 'gauges of Stacks and Programs: on');
  else app.log.info({ why: objectsAccess.off }, 'gauges of Stacks and Programs: off');
  const access = deps.events ?? { off: 'no Kubernetes API access given' };
  // With the objects mirrored, events go only to objects the mirror holds (events/recorder.ts).
  const events =
    'api' in access
      ? new EventRecorder(access.api, {
          log: app.log,
          ...(objects ? { mirror: objects.mirror } : {}),
          ...(deps.mirrorWaitMs !== undefined ? { mirrorWaitMs: deps.mirrorWaitMs } : {}),
        })
      : undefined;
  if ('api' in access)
    app.log.info({ via: access.via, onlyWatchedObjects: objects !== undefined }, 'Kubernetes Events on Stacks: on');
  else app.log.info({ why: access.off }, 'Kubernetes Events on Stacks: off');
  // The operations budget works from the mirror of Stacks: off with it (budget/gate.ts).
  const turn = objects
    ? mirrorTurn({ max: config.operationsMax ?? DEFAULT_OPERATIONS_MAX }, () => objects.budgetFacts())
    : undefined;
  const budget = new BodyBudget(limits.bodyBytesInFlight);
  metrics.watchBodies(budget);
  app.register(healthPlugin, { health });
  if (config.metricsAuth && !deps.reviewer)
    throw new Error(
      'METRICS_AUTH=on: /metrics reviews bearer tokens with the Kubernetes API, and there is no access to it (set METRICS_AUTH=off to serve /metrics open)',
    );
  const reviewer = config.metricsAuth ? deps.reviewer : undefined;
  app.log.info(
    reviewer
      ? '/metrics: for callers the API server authenticates (TokenReview) and allows to get /metrics (SubjectAccessReview)'
      : '/metrics: open to whoever reaches the port (METRICS_AUTH=off)',
  );
  app.register(metricsPlugin, { metrics, ...(objects ? { objects } : {}), ...(reviewer ? { reviewer } : {}) });
  const cache = new SyncCache({
    ...(config.syncCacheMaxBytes !== undefined ? { maxBytes: config.syncCacheMaxBytes } : {}),
    counted: (name, hit) => metrics.countCacheLookup(name, hit),
  });
  metrics.reportCacheBytes(() => cache.bytes());
  // The hook routes, behind the credential check and the body budget (http/guard.ts).
  app.register((hooks, _opts, done) => {
    installGuard(hooks, { credentials, budget, bodyLimit: config.bodyLimit });
    hooks.register(stackHooks, {
      prefix: '/stack',
      config,
      git,
      clock,
      cache,
      ...(events ? { events } : {}),
      ...(turn ? { turn } : {}),
    });
    hooks.register(workspaceHooks, { prefix: '/workspace', config, clock, cache, ...(events ? { events } : {}) });
    hooks.register(updateHooks, { prefix: '/update', config, clock, cache, ...(events ? { events } : {}) });
    hooks.register(programHooks, { prefix: '/program', clock, config });
    done();
  });
  // The Programs, for the workspaces that run them, on a port of their own (the NetworkPolicy
  // admits workspace pods only there): they prove who they are with their own token.
  const programsAccess = deps.programs ?? { off: 'no Kubernetes API access given' };
  const programAccess: ProgramServerAccess =
    'off' in programsAccess
      ? programsAccess
      : objects
        ? { api: programsAccess.api, readers: (namespace, url) => objects.programReaders(namespace, url) }
        : { off: 'the hook server does not watch Workspaces (OBJECT_METRICS=off)' };
  if (config.programServer && 'off' in programAccess)
    app.log.warn({ why: programAccess.off }, 'Programs are not served');
  programs.register(programServer, { access: programAccess, serverUrl: config.programServer?.url });
  // A rotated Secret reaches the mounted files within a minute or so; this picks it up.
  const reloadCredentials = (): void => {
    const tls = credentials.reload();
    if (!tls) return;
    for (const instance of [app, programs]) (instance.server as https.Server).setSecureContext(tls);
  };
  const reload = setInterval(reloadCredentials, deps.credentialsReloadMs ?? 30_000);
  reload.unref();
  // The mirrors start with the server (app.ready(), listen or the first inject) and stop with it.
  app.addHook('onReady', (done) => {
    objects?.start();
    done();
  });
  app.addHook('onClose', async () => {
    clearInterval(reload);
    await programs.close();
    await git.close();
    await events?.close();
    await objects?.stop();
  });
  return { app, programs, health, metrics, objects, events, credentials, reloadCredentials, budget };
}
