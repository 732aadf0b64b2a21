import { configFromEnv } from './config';
import { buildServer } from './server';

/** Entry point of the hooks image: `node dist/hooks/src/main.js`. */
async function main(): Promise<void> {
  const config = configFromEnv();
  const { app, health } = buildServer(config);
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    // Fail readiness first so no new hook calls arrive, then finish the ones in flight.
    health.ready = false;
    app.log.info({ signal }, 'shutting down');
    try {
      await app.close();
      process.exit(0);
    } catch (err) {
      app.log.error({ err }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  await app.listen({ port: config.port, host: config.host });
}

main().catch((err) => {
  // eslint-disable-next-line no-console
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
