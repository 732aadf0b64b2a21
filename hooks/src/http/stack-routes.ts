import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Stack } from '../../../schemas/generated/types';
import { requestSchemas } from '../../../schemas';
import type { HookConfig } from '../config';
import type { SyncCache } from '../cache/sync-cache';
import type { HookEvent } from '../events/event';
import type { EventRecorder } from '../events/recorder';
import type { Turn } from '../budget/gate';
import type { GitResolver } from '../git/ls-remote';
import type { ObjectMap } from '../lib/k8s';
import { customizeStack } from '../stack/customize';
import { stackEvents } from '../stack/events';
import { planRefLookup } from '../stack/source';
import { syncStack, type StackSyncRequest } from '../stack/sync';
import { type RefLookup, refLookupKey } from '../git/ref-lookup';

const JSON_TYPE = 'application/json; charset=utf-8';

export interface StackHooksOptions {
  config: HookConfig;
  git: GitResolver;
  clock: () => Date;
  /** Remembers the sync's costly pure steps between requests. */
  cache: SyncCache;
  /** Writes the events a sync implies, in the background; absent when events are off. */
  events?: EventRecorder;
  /** The operations budget's answer for a Stack about to start an operation; absent: no budget. */
  turn?: Turn;
}

interface SyncBody {
  parent: Stack;
  children?: ObjectMap;
  related?: ObjectMap;
  finalizing?: boolean;
}

/**
 * The Stack CompositeController's hooks: customize, sync and finalize (hook version v2). The only
 * I/O is the bounded, cached git lookup; the rest is syncStack, a pure function, handed the
 * server's cache with the request.
 */
export function stackHooks(app: FastifyInstance, opts: StackHooksOptions, done: () => void): void {
  app.post<{ Body: { parent: Stack } }>(
    '/customize',
    { schema: { body: requestSchemas.customize } },
    (request, reply) => reply.send(customizeStack(request.body.parent)),
  );

  const sync = async (body: SyncBody, finalizing: boolean, request: FastifyRequest) => {
    const lookups = new Map<string, RefLookup>();
    const plan = safePlan(body);
    if (plan) lookups.set(refLookupKey(plan.url, plan.ref), await opts.git.resolve(plan));
    const req: StackSyncRequest = { parent: body.parent, finalizing };
    if (body.children) req.children = body.children;
    if (body.related) req.related = body.related;
    const now = opts.clock();
    const response = syncStack(req, {
      config: opts.config,
      now,
      lookups,
      cache: opts.cache,
      ...(opts.turn ? { turn: opts.turn } : {}),
    });
    recordEvents(opts.events, request, 'Stack', () =>
      stackEvents({
        stack: body.parent,
        observed: body.children,
        status: response.status,
        children: response.children,
        finalizing,
        now,
        ...(opts.config.workspaceReclaimDefault
          ? { workspaceReclaimDefault: opts.config.workspaceReclaimDefault }
          : {}),
      }),
    );
    const meta = body.parent.metadata;
    const ready = response.status.conditions?.find((c) => c.type !== 'Ready' && c.status === 'True');
    request.hookLog = {
      message: finalizing ? 'stack finalize' : 'stack sync',
      fields: {
        stack: `${meta.namespace}/${meta.name}`,
        generation: meta.generation,
        condition: ready ? `${ready.type}/${ready.reason}` : 'Ready',
        children: response.children.length,
        resyncAfterSeconds: response.resyncAfterSeconds,
        finalized: response.finalized,
      },
    };
    return response;
  };

  // Sent pre-serialised: the JSON of the children the cache handed out is reused, not rebuilt.
  app.post<{ Body: SyncBody }>('/sync', { schema: { body: requestSchemas.compositeSync } }, async (request, reply) => {
    const response = await sync(request.body, request.body.finalizing === true, request);
    return reply.type(JSON_TYPE).send(responseJson(response, opts.cache));
  });
  app.post<{ Body: SyncBody }>(
    '/finalize',
    { schema: { body: requestSchemas.compositeSync } },
    async (request, reply) => {
      const response = await sync(request.body, true, request);
      return reply.type(JSON_TYPE).send(responseJson(response, opts.cache));
    },
  );
  done();
}

/**
 * Hands the events a sync implies to the recorder (absent: events are off). A side effect of the
 * answer, never part of it: whatever happens here, the answer goes out.
 */
export function recordEvents(
  recorder: EventRecorder | undefined,
  request: FastifyRequest,
  kind: string,
  compute: () => HookEvent[],
): void {
  if (!recorder) return;
  try {
    recorder.record(compute());
  } catch (err) {
    request.log.error({ err }, `computing the ${kind} events failed`);
  }
}

/**
 * The same bytes as JSON.stringify(response), with each child's JSON from the cache's jsonOf
 * (which remembers the JSON of the frozen children it handed out).
 */
export function responseJson(response: object, cache: Pick<SyncCache, 'jsonOf'>): string {
  const parts: string[] = [];
  for (const [key, value] of Object.entries(response)) {
    if (value === undefined || typeof value === 'function') continue;
    const json =
      key === 'children' && Array.isArray(value)
        ? `[${value.map((c: unknown) => (c === undefined ? 'null' : cache.jsonOf(c))).join(',')}]`
        : JSON.stringify(value);
    parts.push(`${JSON.stringify(key)}:${json}`);
  }
  return `{${parts.join(',')}}`;
}

/** The git lookup this request needs; none when the spec is too broken to say (validation reports it). */
function safePlan(body: SyncBody) {
  try {
    return body.parent.spec ? planRefLookup(body.parent, body.related) : undefined;
  } catch {
    return undefined;
  }
}
