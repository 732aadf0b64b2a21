import { configFromEnv, type HookConfig } from './config';
import { kubeEventsApi } from './events/kubernetes';
import { kubeAccessFromEnv } from './kube/access';
import { kubeReviewApi, TokenReviewer } from './kube/token-review';
import { kubeObjectsApi, kubeProgramGetter } from './objects/kubernetes';
import { buildServer, type HookServer, type ServerDeps } from './server';

export interface RunningServer extends HookServer {
  /** Fails readiness, finishes the requests in flight, then closes. Idempotent. */
  shutdown(signal: string): Promise<void>;
}

export async function startHookServer(config: HookConfig, deps: ServerDeps = {}): Promise<RunningServer> {
  const server = buildServer(config, deps);
  let closing: Promise<void> | undefined;
  const shutdown = (signal: string): Promise<void> => {
    closing ??= (async () => {
      // Readiness fails first so the Service stops routing new hook calls here; Metacontroller
      // retries anything refused. In-flight requests complete before the server closes.
      server.health.ready = false;
      server.app.log.info({ signal }, 'shutting down');
      await server.app.close();
    })();
    return closing;
  };
  await server.app.listen({ port: config.port, host: config.host });
  // The program server only when workspaces are told where it is (PROGRAM_SERVER_URL).
  if (config.programServer)
    await server.programs.listen({ port: config.programPort, host: config.host }).catch(async (e: unknown) => {
      await server.app.close();
      throw e;
    });
  return { ...server, shutdown };
}

/** Entry point of the hooks image: `node dist/hooks/src/main.js`. */
async function main(): Promise<void> {
  const config = configFromEnv();
  const access = kubeAccessFromEnv();
  // One reviewer, so one cache of answers and one bound on reviews in flight, for both /metrics's
  // scrapers and the workspace pods downloading Programs.
  const reviewed = 'kc' in access ? { ...access, reviewer: new TokenReviewer(kubeReviewApi(access.kc)) } : access;
  const running = await startHookServer(config, {
    events: 'kc' in access ? { api: kubeEventsApi(access.kc), via: access.via } : access,
    objects:
      config.objectMetrics === false
        ? { off: 'OBJECT_METRICS=off' }
        : 'kc' in access
          ? { api: kubeObjectsApi(access.kc), via: access.via }
          : access,
    programs:
      'reviewer' in reviewed
        ? { api: { reviewer: reviewed.reviewer, getProgram: kubeProgramGetter(reviewed.kc) }, via: reviewed.via }
        : reviewed,
    ...('reviewer' in reviewed && config.metricsAuth ? { reviewer: reviewed.reviewer } : {}),
  });
  const onSignal = (signal: string) => {
    running.shutdown(signal).then(
      () => process.exit(0),
      (err: unknown) => {
        running.app.log.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
