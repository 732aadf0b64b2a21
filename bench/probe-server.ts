/**
 * The probe's hook server in its own process (./probe.ts forks it), so a crash is seen as an exit
 * and its memory as its own RSS. Logs as deployed, to stdout, which the probe drains.
 */
import { buildProbeServer } from './probe-hooks';

async function main(): Promise<void> {
  const { app } = buildProbeServer(process.stdout);
  await app.listen({ port: 0, host: '127.0.0.1' });
  process.send!({ port: (app.server.address() as { port: number }).port });
}
void main();
