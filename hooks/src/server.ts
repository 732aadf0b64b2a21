import Fastify, { type FastifyInstance } from 'fastify';
import { randomUUID } from 'node:crypto';
import { createAjv } from '../../schemas';
import { SyncCache } from './cache/sync-cache';
import type { HookConfig } from './config';
import type { EventsAccess } from './events/kubernetes';
import { EventRecorder } from './events/recorder';
import { describeEgress, EgressPolicy } from './git/egress';
import { GitResolver } from './git/ls-remote';
import { installJsonBodyParser } from './http/body-parser';
import { consoleLogStream } from './http/console-log';
import { installErrorHandler } from './http/errors';
import { healthPlugin, type Health } from './http/health';
import { HookMetrics, instrument, metricsPlugin } from './http/metrics';
import { programHooks } from './http/program-routes';
import { installRequestLog, OneLinePerRequest } from './http/request-log';
import { stackHooks } from './http/stack-routes';
import { updateHooks, workspaceHooks } from './http/workspace-routes';
import { ObjectGauges, type ObjectsAccess } from './objects/gauges';

export interface ServerDeps {
  /** The hooks' only notion of time; tests pin it. */
  clock?: () => Date;
  git?: GitResolver;
  /** Pass false to silence logs (tests, benchmarks). */
  logger?: boolean;
  /** Where logs go (default stdout); tests capture them. */
  logStream?: NodeJS.WritableStream;
  /** Kubernetes Events on Stacks: the API to write them with, or why they are off (the default). */
  events?: EventsAccess;
  /** Upstream's gauges of Stacks and Programs: the API to list and watch them with, or why they are off (the default). */
  objects?: ObjectsAccess;
}

export interface HookServer {
  app: FastifyInstance;
  health: Health;
  metrics: HookMetrics;
  /** The gauges derived from Stacks and Programs; undefined when they are off. */
  objects: ObjectGauges | undefined;
  /** Writes the Stacks' events; undefined when events are off. */
  events: EventRecorder | undefined;
}

/**
 * The hook server: health endpoints and the Stack, Workspace, Update and Program hooks, each an encapsulated plugin
 * (http/), around the domain code (stack/, program/, git/). The server's only memory is its caches:
 * the git lookups' (git/ls-remote.ts) and the sync's (cache/sync-cache.ts).
 */
export function buildServer(config: HookConfig, deps: ServerDeps = {}): HookServer {
  const logStream =
    config.logFormat === 'console' ? consoleLogStream(deps.logStream ?? process.stdout) : deps.logStream;
  const app = Fastify({
    logger:
      deps.logger === false
        ? false
        : {
            level: config.logLevel,
            redact: ['req.headers.authorization', 'req.headers.cookie'],
            ...(logStream ? { stream: logStream } : {}),
          },
    bodyLimit: config.bodyLimit,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && given.length > 0 && given.length <= 128 ? given : randomUUID();
    },
    logController: new OneLinePerRequest(),
  });
  const ajv = createAjv();
  app.setValidatorCompiler(({ schema }) => ajv.compile(schema));
  installErrorHandler(app);
  installJsonBodyParser(app);
  installRequestLog(app);
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
  const access = deps.events ?? { off: 'no Kubernetes API access given' };
  const events = 'api' in access ? new EventRecorder(access.api, { log: app.log }) : undefined;
  if ('api' in access) app.log.info({ via: access.via }, 'Kubernetes Events on Stacks: on');
  else app.log.info({ why: access.off }, 'Kubernetes Events on Stacks: off');
  const objectsAccess = deps.objects ?? { off: 'no Kubernetes API access given' };
  const objects = 'api' in objectsAccess ? new ObjectGauges(objectsAccess.api, { log: app.log }) : undefined;
  if ('api' in objectsAccess) app.log.info({ via: objectsAccess.via }, 'gauges of Stacks and Programs: on');
  else app.log.info({ why: objectsAccess.off }, 'gauges of Stacks and Programs: off');
  app.register(healthPlugin, { health });
  app.register(metricsPlugin, { metrics, ...(objects ? { objects } : {}) });
  const cache = new SyncCache((name, hit) => metrics.countCacheLookup(name, hit));
  app.register(stackHooks, {
    prefix: '/stack',
    config,
    git,
    clock,
    cache,
    ...(events ? { events } : {}),
  });
  app.register(workspaceHooks, { prefix: '/workspace', config, clock, cache });
  app.register(updateHooks, { prefix: '/update', config, clock, cache });
  app.register(programHooks, { prefix: '/program', clock });
  // The mirrors start with the server (app.ready(), listen or the first inject) and stop with it.
  app.addHook('onReady', (done) => {
    objects?.start();
    done();
  });
  app.addHook('onClose', async () => {
    await git.close();
    await events?.close();
    await objects?.stop();
  });
  return { app, health, metrics, objects, events };
}
