import type { FastifyInstance } from 'fastify';
import type { Update, Workspace } from '../../../schemas/generated/types';
import { requestSchemas } from '../../../schemas';
import type { SyncCache } from '../cache/sync-cache';
import type { HookConfig } from '../config';
import type { EventRecorder } from '../events/recorder';
import type { ObjectMap } from '../lib/k8s';
import { customizeUpdate } from '../update/customize';
import { updateEvents } from '../update/events';
import { syncUpdate } from '../update/sync';
import { workspaceEvents } from '../workspace/events';
import { syncWorkspace } from '../workspace/sync';
import { recordEvents, responseJson } from './stack-routes';

const JSON_TYPE = 'application/json; charset=utf-8';

interface SyncBody<P> {
  parent: P;
  children?: ObjectMap;
  related?: ObjectMap;
  finalizing?: boolean;
}

export interface AutoHooksOptions {
  config: HookConfig;
  clock: () => Date;
  /** The same cache as the Stack hooks': remembers the pod builder's and the result parser's answers. */
  cache: SyncCache;
  /** Writes the events a sync implies, in the background; absent when events are off. */
  events?: EventRecorder;
}

/** The Workspace CompositeController's sync hook (v2): the workspace StatefulSet, Service and Role. */
export function workspaceHooks(app: FastifyInstance, opts: AutoHooksOptions, done: () => void): void {
  app.post<{ Body: SyncBody<Workspace> }>(
    '/sync',
    { schema: { body: requestSchemas.compositeSync } },
    (request, reply) => {
      const body = request.body;
      const response = syncWorkspace(
        { parent: body.parent, ...(body.children ? { children: body.children } : {}) },
        { config: opts.config, now: opts.clock(), build: opts.cache.workspacePod },
      );
      recordEvents(opts.events, request, 'Workspace', () =>
        workspaceEvents({ workspace: body.parent, status: response.status }),
      );
      const meta = body.parent.metadata;
      const ready = response.status.conditions?.find((c) => c.type === 'Ready');
      request.hookLog = {
        message: 'workspace sync',
        fields: { workspace: `${meta.namespace}/${meta.name}`, generation: meta.generation, ready: ready?.reason },
      };
      return reply.type(JSON_TYPE).send(responseJson(response, opts.cache));
    },
  );
  done();
}

/** The Update CompositeController's hooks (v2): customize (its Workspace) and sync (its Job). */
export function updateHooks(app: FastifyInstance, opts: AutoHooksOptions, done: () => void): void {
  app.post<{ Body: { parent: Update } }>(
    '/customize',
    { schema: { body: requestSchemas.customize } },
    (request, reply) => reply.send(customizeUpdate(request.body.parent)),
  );
  app.post<{ Body: SyncBody<Update> }>(
    '/sync',
    { schema: { body: requestSchemas.compositeSync } },
    (request, reply) => {
      const body = request.body;
      const req = {
        parent: body.parent,
        ...(body.children ? { children: body.children } : {}),
        ...(body.related ? { related: body.related } : {}),
      };
      const response = syncUpdate(req, {
        config: opts.config,
        now: opts.clock(),
        updateResult: opts.cache.updateResult,
      });
      recordEvents(opts.events, request, 'Update', () =>
        updateEvents({ update: body.parent, related: body.related, status: response.status }),
      );
      const meta = body.parent.metadata;
      const complete = response.status.conditions?.find((c) => c.type === 'Complete');
      request.hookLog = {
        message: 'update sync',
        fields: {
          update: `${meta.namespace}/${meta.name}`,
          complete: complete?.status,
          children: response.children.length,
        },
      };
      return reply.type(JSON_TYPE).send(responseJson(response, opts.cache));
    },
  );
  done();
}
