import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { SyncCacheBytesName, SyncCacheName } from '../cache/sync-cache';
import type { ObjectGauges } from '../objects/gauges';

/** The caches counted in pulumi_hook_cache_requests_total: the sync's and the git lookups'. */
export type CacheName = SyncCacheName | 'git_lookup';

export type HookName =
  | 'stack_customize'
  | 'stack_sync'
  | 'stack_finalize'
  | 'program_sync'
  | 'workspace_sync'
  | 'update_customize'
  | 'update_sync';

/**
 * This replica's per-hook latency and errors. Upstream's gauges of Stacks and Programs are not
 * here: they come from the objects themselves (objects/gauges.ts), not from the requests one
 * replica happened to answer.
 */
export class HookMetrics {
  readonly registry = new Registry();
  readonly duration: Histogram<'hook'>;
  readonly errors: Counter<'hook' | 'reason'>;
  readonly cacheRequests: Counter<'cache' | 'result'>;
  /** What reports the bytes of request bodies held now (watchBodies); none before. */
  private bodies: { inFlight: number } | undefined;
  readonly cacheBytes: Gauge<'cache'>;
  /** Where pulumi_hook_cache_bytes is read from at each scrape: the server's SyncCache. */
  private cacheBytesOf: () => Partial<Record<SyncCacheBytesName, number>> = () => ({});

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    this.duration = new Histogram({
      name: 'pulumi_hook_request_duration_seconds',
      help: 'Time to answer a Metacontroller hook request, by hook.',
      labelNames: ['hook'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: [this.registry],
    });
    this.errors = new Counter({
      name: 'pulumi_hook_errors_total',
      help: 'Hook requests answered with an error, by hook and reason (bad_request, unauthorized, payload_too_large, overloaded, internal, …).',
      labelNames: ['hook', 'reason'],
      registers: [this.registry],
    });
    this.cacheRequests = new Counter({
      name: 'pulumi_hook_cache_requests_total',
      help: "Lookups in the hooks' caches (the sync's pure steps, git branch lookups), by cache and result (hit, miss).",
      labelNames: ['cache', 'result'],
      registers: [this.registry],
    });
    const bodies: Gauge = new Gauge({
      name: 'pulumi_hook_request_body_bytes_in_flight',
      help: 'Bytes of request bodies this replica holds now (reserved from BODY_BYTES_IN_FLIGHT; past it, requests get 429).',
      registers: [this.registry],
      collect: () => bodies.set(this.bodies?.inFlight ?? 0),
    });
    const bytesOf = () => this.cacheBytesOf();
    this.cacheBytes = new Gauge({
      name: 'pulumi_hook_cache_bytes',
      help: "Bytes held by each of the sync's caches, as their bounds count them (SYNC_CACHE_MAX_BYTES in all).",
      labelNames: ['cache'],
      registers: [this.registry],
      collect() {
        for (const [cache, bytes] of Object.entries(bytesOf())) this.set({ cache }, bytes);
      },
    });
  }

  /** Reports the bytes of request bodies `budget` holds, at each scrape. */
  watchBodies(budget: { inFlight: number }): void {
    this.bodies = budget;
  }

  /** pulumi_hook_cache_bytes reads `bytes` at each scrape. */
  reportCacheBytes(bytes: () => Partial<Record<SyncCacheBytesName, number>>): void {
    this.cacheBytesOf = bytes;
  }

  /** The cache counters' children, bound once rather than looked up by label on every lookup. */
  private readonly cacheCounts = new Map<string, { inc(): void }>();

  countCacheLookup(cache: CacheName, hit: boolean): void {
    const result = hit ? 'hit' : 'miss';
    const key = `${cache}/${result}`;
    let child = this.cacheCounts.get(key);
    if (!child) {
      child = this.cacheRequests.labels({ cache, result });
      this.cacheCounts.set(key, child);
    }
    child.inc();
  }

  /** The per-hook histogram children, bound once rather than looked up by label on every request. */
  private readonly durations = new Map<HookName, { observe(v: number): void }>();

  observeDuration(hook: HookName, seconds: number): void {
    let child = this.durations.get(hook);
    if (!child) {
      child = this.duration.labels({ hook });
      this.durations.set(hook, child);
    }
    child.observe(seconds);
  }
}

const HOOK_BY_URL: Record<string, HookName> = {
  '/stack/customize': 'stack_customize',
  '/stack/sync': 'stack_sync',
  '/stack/finalize': 'stack_finalize',
  '/program/sync': 'program_sync',
  '/workspace/sync': 'workspace_sync',
  '/update/customize': 'update_customize',
  '/update/sync': 'update_sync',
};

/**
 * Serves /metrics: the hooks' own metrics, then the gauges derived from Stacks and Programs when
 * they are on. Both are the same text format; a failure of the latter never hides the former.
 */
export function metricsPlugin(
  app: FastifyInstance,
  opts: { metrics: HookMetrics; objects?: Pick<ObjectGauges, 'metrics'> },
  done: () => void,
): void {
  const { metrics, objects } = opts;
  app.get('/metrics', { logLevel: 'warn' }, async (request, reply) => {
    reply.type(metrics.registry.contentType);
    const own = await metrics.registry.metrics();
    if (!objects) return own;
    try {
      return own + (await objects.metrics());
    } catch (err) {
      request.log.error({ err }, 'the gauges derived from Stacks and Programs failed; served without them');
      return own;
    }
  });
  done();
}

/** The `reason` of pulumi_hook_errors_total for the statuses the hook server answers on purpose. */
const ERROR_REASONS: Record<number, string> = {
  400: 'bad_request',
  401: 'unauthorized',
  413: 'payload_too_large',
  429: 'overloaded',
};

/** Installed on the root instance so it sees every route, including 400s and 413s. */
export function instrument(app: FastifyInstance, metrics: HookMetrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const hook = HOOK_BY_URL[request.routeOptions.url ?? ''] ?? HOOK_BY_URL[request.url.split('?')[0] ?? ''];
    if (!hook) return;
    metrics.observeDuration(hook, reply.elapsedTime / 1000);
    if (reply.statusCode >= 400) {
      const reason =
        ERROR_REASONS[reply.statusCode] ?? (reply.statusCode >= 500 ? 'internal' : `http_${reply.statusCode}`);
      metrics.errors.inc({ hook, reason });
    }
  });
}
