import type { FastifyInstance } from 'fastify';
import type { Program } from '../../../schemas/generated/types';
import { requestSchemas } from '../../../schemas';
import type { ObjectMap } from '../lib/k8s';
import { syncProgram } from '../program/sync';

/** The Program DecoratorController's sync hook (version v2). */
export function programHooks(app: FastifyInstance, opts: { clock: () => Date }, done: () => void): void {
  app.post<{ Body: { object: Program; attachments?: ObjectMap; finalizing?: boolean } }>(
    '/sync',
    { schema: { body: requestSchemas.decoratorSync } },
    (request, reply) => {
      const body = request.body;
      const response = syncProgram(
        { object: body.object, attachments: body.attachments ?? {}, finalizing: body.finalizing === true },
        opts.clock(),
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
