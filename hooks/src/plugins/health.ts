import type { FastifyInstance } from 'fastify';

export interface Health {
  /** False once shutdown began, so the Service stops sending new hook calls here. */
  ready: boolean;
}

export async function healthPlugin(app: FastifyInstance, opts: { health: Health }): Promise<void> {
  app.get('/healthz', { logLevel: 'warn' }, async () => ({ status: 'ok' }));
  app.get('/readyz', { logLevel: 'warn' }, async (_req, reply) => {
    if (!opts.health.ready) return reply.code(503).send({ status: 'shutting down' });
    return { status: 'ok' };
  });
}
