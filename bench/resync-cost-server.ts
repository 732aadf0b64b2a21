/**
 * One hook server for ./resync-cost.ts, in its own process: the real hook server of a built
 * checkout (argv[2], its root: this one, or a worktree of an earlier commit, so that two versions
 * can be measured side by side), configured for a recorded request (argv[3]: its agent image) and
 * with its clock at argv[4] (an hour after the recorded Stack's last update, so that the answers
 * are the steady ones whatever the day). Logs as deployed (LOG_LEVEL's default), to stdout, which
 * the driver drains as a container runtime does. With argv[2] `bare`: Fastify as it comes on route
 * argv[5], parsing the body and answering argv[6] bytes (what any hook pays per call).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Fastify from 'fastify';
import type { HookConfig } from '../hooks/src/config';
import type { HookServer, ServerDeps } from '../hooks/src/server';
import type { ServerMessage } from './sync-hook-request';

process.on('message', (m) => {
  if (m === 'cpu') process.send!({ cpu: process.cpuUsage() } satisfies ServerMessage);
});
// The driver gone (stopped mid-run), nothing is left listening.
process.on('disconnect', () => process.exit(0));

interface HookModules {
  buildServer: (config: HookConfig, deps?: ServerDeps) => HookServer;
  configFromEnv: (env: NodeJS.ProcessEnv) => HookConfig;
}

async function main(): Promise<void> {
  const [root, requestFile, now] = [process.argv[2]!, process.argv[3]!, new Date(process.argv[4]!)];
  if (root === 'bare') {
    const app = Fastify({ logger: false, bodyLimit: 8 * 1024 * 1024 });
    const payload = JSON.stringify({ pad: 'x'.repeat(Math.max(0, Number(process.argv[6]) - 10)) });
    app.post(process.argv[5]!, async (_req, reply) => reply.type('application/json; charset=utf-8').send(payload));
    await app.listen({ port: 0, host: '127.0.0.1' });
    process.send!({ port: (app.server.address() as { port: number }).port } satisfies ServerMessage);
    return;
  }
  // The checkout's own build (resolving its own node_modules), not this one's.
  const { buildServer } = (await import(join(root, 'dist', 'hooks', 'src', 'server.js'))) as Pick<
    HookModules,
    'buildServer'
  >;
  const { configFromEnv } = (await import(join(root, 'dist', 'hooks', 'src', 'config.js'))) as Pick<
    HookModules,
    'configFromEnv'
  >;
  const { agentImage, programServer } = JSON.parse(readFileSync(requestFile, 'utf8')) as {
    agentImage: string;
    programServer?: { url: string; ca: string };
  };
  const deployed = configFromEnv({});
  const { app } = buildServer(
    { ...deployed, agentImage, ...(programServer ? { programServer } : {}), bodyLimit: 8 * 1024 * 1024 },
    { clock: () => now },
  );
  await app.listen({ port: 0, host: '127.0.0.1' });
  process.send!({ port: (app.server.address() as { port: number }).port } satisfies ServerMessage);
}
void main();
