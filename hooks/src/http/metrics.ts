import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** How long a Stack or Program not seen by this replica still counts (Metacontroller resyncs every 10 min). */
const FORGET_AFTER_MS = 30 * 60 * 1000;

export type HookName =
  | 'stack_customize'
  | 'stack_sync'
  | 'stack_finalize'
  | 'program_sync'
  | 'workspace_sync'
  | 'update_customize'
  | 'update_sync';

/**
 * Upstream's gauges (stacks_active, stacks_failing{namespace,name}, programs_active) rebuilt from
 * what the hooks see, plus per-hook latency and errors. The hooks hold no state, so each replica
 * reports only the objects it synced in the last 30 minutes. Metacontroller resyncs every object
 * at least every 10 minutes, through whichever replica the Service picks, so a replica usually
 * sees most objects, but nothing guarantees all: max() across replicas is a lower bound of the
 * total, and a Stack that recovered may still show as failing on a replica that has not seen it
 * since, for up to 30 minutes. Per-Stack truth is in the Stack's status (kube-state-metrics;
 * docs/observability.md).
 */
export class HookMetrics {
  readonly registry = new Registry();
  private readonly stacks = new Map<string, { failing: boolean; seen: number }>();
  private readonly programs = new Map<string, number>();
  readonly duration: Histogram<'hook'>;
  readonly errors: Counter<'hook' | 'reason'>;
  private readonly stacksFailing: Gauge<'namespace' | 'name'>;

  constructor(private readonly now: () => number = Date.now) {
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
      help: 'Hook requests answered with an error, by hook and reason (bad_request, payload_too_large, internal, …).',
      labelNames: ['hook', 'reason'],
      registers: [this.registry],
    });
    const stacksActive: Gauge = new Gauge({
      name: 'stacks_active',
      help: 'Stacks this replica synced in the last 30 minutes.',
      registers: [this.registry],
      collect: () => {
        this.forgetOld();
        stacksActive.set(this.stacks.size);
      },
    });
    this.stacksFailing = new Gauge({
      name: 'stacks_failing',
      help: '1 for a Stack whose last update failed, 0 once it succeeds, by namespace and name.',
      labelNames: ['namespace', 'name'],
      registers: [this.registry],
    });
    const programsActive: Gauge = new Gauge({
      name: 'programs_active',
      help: 'Programs this replica synced in the last 30 minutes.',
      registers: [this.registry],
      collect: () => {
        this.forgetOld();
        programsActive.set(this.programs.size);
      },
    });
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

  /** Records what a Stack sync saw; a finalized Stack is forgotten. */
  observeStack(namespace: string, name: string, lastState: string | undefined, finalized: boolean): void {
    const key = `${namespace}/${name}`;
    if (finalized) {
      this.stacks.delete(key);
      this.stacksFailing.remove({ namespace, name });
      return;
    }
    const failing = lastState === 'failed';
    this.stacks.set(key, { failing, seen: this.now() });
    if (lastState !== undefined) this.stacksFailing.set({ namespace, name }, failing ? 1 : 0);
  }

  observeProgram(namespace: string, name: string): void {
    this.programs.set(`${namespace}/${name}`, this.now());
  }

  private forgetOld(): void {
    const cutoff = this.now() - FORGET_AFTER_MS;
    for (const [key, v] of this.stacks) {
      if (v.seen < cutoff) {
        this.stacks.delete(key);
        const [namespace, name] = key.split('/') as [string, string];
        this.stacksFailing.remove({ namespace, name });
      }
    }
    for (const [key, seen] of this.programs) if (seen < cutoff) this.programs.delete(key);
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

/** Serves /metrics and times every hook request (errors included). */
export function metricsPlugin(app: FastifyInstance, opts: { metrics: HookMetrics }, done: () => void): void {
  const { metrics } = opts;
  app.get('/metrics', { logLevel: 'warn' }, async (_req, reply) => {
    reply.type(metrics.registry.contentType);
    return metrics.registry.metrics();
  });
  done();
}

/** Installed on the root instance so it sees every route, including 400s and 413s. */
export function instrument(app: FastifyInstance, metrics: HookMetrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const hook = HOOK_BY_URL[request.routeOptions.url ?? ''] ?? HOOK_BY_URL[request.url.split('?')[0] ?? ''];
    if (!hook) return;
    metrics.observeDuration(hook, reply.elapsedTime / 1000);
    if (reply.statusCode >= 400) {
      const reason =
        reply.statusCode === 400
          ? 'bad_request'
          : reply.statusCode === 413
            ? 'payload_too_large'
            : reply.statusCode >= 500
              ? 'internal'
              : `http_${reply.statusCode}`;
      metrics.errors.inc({ hook, reason });
    }
  });
}
