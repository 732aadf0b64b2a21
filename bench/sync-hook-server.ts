/**
 * One server for the benchmark, in its own process: `hooks` (the real hook server, logging as
 * deployed), `bare` (Fastify as it comes) or `bare-parser` (the bare route with the hooks' JSON body
 * parser, so the hooks' own work can be told apart from their cheaper parsing).
 */
import Fastify from 'fastify';
import { installJsonBodyParser } from '../hooks/src/http/body-parser';
import { benchHookServer, type RequestKind, type ServerMessage } from './sync-hook-request';

// The benchmark asks for this process's CPU time around a run: CPU per request on one core.
process.on('message', (m) => {
  if (m === 'cpu') process.send!({ cpu: process.cpuUsage() } satisfies ServerMessage);
});

async function main(): Promise<void> {
  const [mode, bytes, request] = [process.argv[2], Number(process.argv[3]), process.argv[4] as RequestKind];
  if (mode === 'hooks') {
    // The configuration the request was made for (the same workspace) and its clock, so the Stack
    // is in steady state. Logging as deployed, to stdout, which the bench drains as a container
    // runtime does: it is part of answering a sync.
    const { app } = benchHookServer(request);
    await app.listen({ port: 0, host: '127.0.0.1' });
    process.send!({ port: (app.server.address() as { port: number }).port } satisfies ServerMessage);
  } else {
    // The baseline: Fastify parsing the same JSON body and answering the same number of bytes.
    const app = Fastify({ logger: false, bodyLimit: 8 * 1024 * 1024 });
    if (mode === 'bare-parser') installJsonBodyParser(app);
    const payload = JSON.stringify({ pad: 'x'.repeat(Math.max(0, bytes - 10)) });
    app.post('/stack/sync', async (_req, reply) => reply.type('application/json; charset=utf-8').send(payload));
    await app.listen({ port: 0, host: '127.0.0.1' });
    process.send!({ port: (app.server.address() as { port: number }).port } satisfies ServerMessage);
  }
}
void main();
