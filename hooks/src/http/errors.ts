import type { FastifyError, FastifyInstance } from 'fastify';

/**
 * Every error answer is JSON naming what was wrong. A request that fails its route schema is a 400
 * naming the field (as a dotted path, e.g. `parent.metadata.name`); a body over the limit is a 413.
 * Anything else is a bug: 500 with a generic message (details only in the log).
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error.validation) {
      const first = error.validation[0];
      const field = fieldPath(
        first?.instancePath ?? '',
        (first?.params as { missingProperty?: string } | undefined)?.missingProperty,
      );
      const message = `${field || 'body'} ${first?.message ?? 'is invalid'}`;
      request.hookLog = { message: 'rejected malformed hook request', fields: { field } };
      return reply.code(400).send({ error: 'Bad Request', field, message });
    }
    const status = error.statusCode ?? 500;
    if (status === 413) return reply.code(413).send({ error: 'Payload Too Large', message: error.message });
    if (status >= 400 && status < 500)
      return reply.code(status).send({ error: error.code ?? 'Bad Request', message: error.message });
    request.log.error({ err: error }, 'hook failed');
    return reply
      .code(500)
      .send({ error: 'Internal Server Error', message: 'the hook failed; see the hook server log' });
  });
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: 'Not Found', message: `no hook at ${request.method} ${request.url}` });
  });
}

/** `/parent/metadata/name` → `parent.metadata.name`; a missing property is appended. */
export function fieldPath(instancePath: string, missing?: string): string {
  const parts = instancePath
    .split('/')
    .filter((p) => p !== '')
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  if (missing) parts.push(missing);
  return parts.join('.');
}
