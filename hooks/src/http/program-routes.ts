import type { FastifyInstance } from 'fastify';
import type { Program } from '../../../schemas/generated/types';
import { PROGRAM_TOKEN_AUDIENCE, programPath } from '../../../contract';
import { requestSchemas } from '../../../schemas';
import type { HookConfig } from '../config';
import type { ObjectMap } from '../lib/k8s';
import { answerProgram, DownloadSlots, type ProgramReader, type ProgramServerApi } from '../program/serve';
import { syncProgram } from '../program/sync';

/** The Program DecoratorController's sync hook (version v2). */
export function programHooks(
  app: FastifyInstance,
  opts: { clock: () => Date; config: HookConfig },
  done: () => void,
): void {
  app.post<{ Body: { object: Program; attachments?: ObjectMap; finalizing?: boolean } }>(
    '/sync',
    { schema: { body: requestSchemas.decoratorSync } },
    (request, reply) => {
      const body = request.body;
      const response = syncProgram(
        { object: body.object, attachments: body.attachments ?? {}, finalizing: body.finalizing === true },
        opts.clock(),
        opts.config.programServer?.url,
      );
      request.hookLog = {
        message: 'program sync',
        fields: {
          program: `${body.object.metadata.namespace}/${body.object.metadata.name}`,
          revision: response.status.artifact?.revision,
        },
      };
      return reply.send(response);
    },
  );
  done();
}

/** The program server's access to the cluster, or why it has none. */
export type ProgramServerAccess =
  { api: ProgramServerApi; readers: (namespace: string, url: string) => ProgramReader[] | undefined } | { off: string };

/** Program downloads at once, of authorized callers; more are told to retry (429). */
const MAX_DOWNLOADS_IN_FLIGHT = 8;

const DNS_LABEL = '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$';
const DNS_SUBDOMAIN = '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$';

/**
 * `GET /programs/<namespace>/<name>`: a Program's rendered Pulumi.yaml, for the fetch container of
 * a workspace that runs it (program/serve.ts says who may read it). Served on the program server's
 * own port (PROGRAM_PORT), without the hook routes: the caller proves who it is with its own
 * ServiceAccount token, not Metacontroller's.
 */
export function programServer(
  app: FastifyInstance,
  opts: { access: ProgramServerAccess; serverUrl: string | undefined },
  done: () => void,
): void {
  const slots = new DownloadSlots(MAX_DOWNLOADS_IN_FLIGHT);
  app.get<{ Params: { namespace: string; name: string } }>(
    '/programs/:namespace/:name',
    {
      schema: {
        params: {
          type: 'object',
          required: ['namespace', 'name'],
          properties: {
            namespace: { type: 'string', minLength: 1, maxLength: 63, pattern: DNS_LABEL },
            name: { type: 'string', minLength: 1, maxLength: 253, pattern: DNS_SUBDOMAIN },
          },
        },
        headers: {
          type: 'object',
          properties: { authorization: { type: 'string', maxLength: 16384 } },
        },
      },
    },
    async (request, reply) => {
      const { namespace, name } = request.params;
      const access = opts.access;
      if ('off' in access || opts.serverUrl === undefined) {
        const why = 'off' in access ? access.off : 'PROGRAM_SERVER_URL is unset';
        return reply.code(503).send({ error: 'Service Unavailable', message: `Programs are not served: ${why}` });
      }
      const header = request.headers.authorization;
      const token = typeof header === 'string' && header.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
      const url = `${opts.serverUrl}${programPath(namespace, name)}`;
      const answer = await answerProgram(
        access.api,
        () => access.readers(namespace, url),
        slots,
        PROGRAM_TOKEN_AUDIENCE,
        namespace,
        name,
        token,
      );
      request.hookLog = {
        message: 'program download',
        fields: { program: `${namespace}/${name}`, status: answer.status },
        ...(answer.status === 403 ? { level: 'warn' as const } : {}),
      };
      if (answer.status === 200)
        return reply
          .code(200)
          .header('content-type', 'application/yaml; charset=utf-8')
          .header('x-program-digest', answer.digest)
          .send(answer.yaml);
      if (answer.status === 401) void reply.header('www-authenticate', 'Bearer realm="pulumi-mc-hooks programs"');
      if (answer.status === 429) void reply.header('retry-after', '1');
      return reply.code(answer.status).send({ error: ERROR_NAMES[answer.status], message: answer.message });
    },
  );
  done();
}

const ERROR_NAMES = {
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  429: 'Too Many Requests',
  503: 'Service Unavailable',
} as const;
