import type { FastifyInstance } from 'fastify';

export interface Health {
  /** False once shutdown began, so the Service stops sending new hook calls here. */
  ready: boolean;
}

export function healthPlugin(app: FastifyInstance, opts: { health: Health }, done: () => void): void {
  app.get('/healthz', { logLevel: 'warn' }, (_req, reply) => reply.send({ status: 'ok' }));
  app.get('/readyz', { logLevel: 'warn' }, (_req, reply) => {
    if (!opts.health.ready) return reply.code(503).send({ status: 'shutting down' });
    return reply.send({ status: 'ok' });
  });
  done();
}
