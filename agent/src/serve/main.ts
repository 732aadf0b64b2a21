import * as fs from 'node:fs';
import { Env, Paths, WORKSPACE_PORT, type WorkspaceStackSpec } from '../../../contract';
import { parseFlags } from '../lib/args';
import { loadEnvFile } from '../lib/envfile';
import { AgentError, errorMessage } from '../lib/errors';
import { loadKubeConfig } from '../lib/kube';
import { logger } from '../lib/log';
import { hostPath } from '../lib/paths';
import { redactor } from '../lib/redact';
import { allowAll, KubeAuthorizer, type Authorizer } from './auth';
import { removeTempDirs } from './operation';
import { killChildren } from './pulumi';
import { createWorkspaceServer } from './server';
import { StatusReporter } from './status';
import { Workspace } from './workspace';

export const SERVE_FLAGS = ['port', 'host', 'auth-mode', 'workspace', 'env-file'] as const;

function parseStackSpec(raw: string | undefined): WorkspaceStackSpec {
  if (!raw)
    throw new AgentError(`${Env.workspaceStack} is not set: it names the stack and its config`, {
      reason: 'InvalidArguments',
      exitCode: 2,
    });
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw new AgentError(`${Env.workspaceStack} is not valid JSON`, { reason: 'InvalidArguments', exitCode: 2 });
  }
  const s = v as Partial<WorkspaceStackSpec>;
  if (typeof s !== 'object' || s === null || typeof s.name !== 'string' || s.name === '') {
    throw new AgentError(`${Env.workspaceStack} must be an object with a stack "name"`, {
      reason: 'InvalidArguments',
      exitCode: 2,
    });
  }
  if (s.config !== undefined && !Array.isArray(s.config))
    throw new AgentError(`${Env.workspaceStack}: "config" must be a list`, { reason: 'InvalidArguments', exitCode: 2 });
  return {
    name: s.name,
    create: s.create !== false,
    config: s.config ?? [],
    ...(s.secretsProvider ? { secretsProvider: s.secretsProvider } : {}),
    ...(s.environment ? { environment: s.environment } : {}),
  };
}

/**
 * `pko-agent serve`: the workspace server. Flags (all optional in a pod):
 * --port (env PKO_AGENT_PORT, default 50051), --host (0.0.0.0), --auth-mode none|kube (env
 * PKO_AGENT_AUTH_MODE, default kube), --workspace (default /share/workspace), --env-file
 * (default $PULUMI_ENV, else /share/.env).
 */
export async function serveCommand(argv: string[]): Promise<number> {
  const { flags } = parseFlags(argv, SERVE_FLAGS);
  const env = process.env;
  const port = Number(flags.port ?? env.PKO_AGENT_PORT ?? WORKSPACE_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new AgentError(`invalid port "${flags.port ?? env.PKO_AGENT_PORT}"`, {
      reason: 'InvalidArguments',
      exitCode: 2,
    });
  const host = flags.host ?? env.PKO_AGENT_HOST ?? '0.0.0.0';
  const authMode = flags['auth-mode'] ?? env.PKO_AGENT_AUTH_MODE ?? 'kube';
  if (authMode !== 'none' && authMode !== 'kube')
    throw new AgentError(`--auth-mode must be none or kube, not "${authMode}"`, {
      reason: 'InvalidArguments',
      exitCode: 2,
    });

  // Upstream's dynamic env file: variables an init container appended (never overriding the pod's).
  const envFile = hostPath(flags['env-file'] ?? (env[Env.pulumiEnv] || Paths.envFile));
  const loaded = loadEnvFile(envFile);
  if (loaded.length) logger.info('loaded variables from the env file', { file: envFile, names: loaded.join(',') });

  const stack = parseStackSpec(env[Env.workspaceStack]);
  const namespace = env[Env.podNamespace] ?? '';
  const workspaceName = env[Env.workspaceName] ?? '';

  let kubeConfig;
  if (authMode === 'kube' || (workspaceName && namespace)) {
    try {
      kubeConfig = loadKubeConfig(env);
    } catch (e) {
      if (authMode === 'kube') throw e;
      logger.warn('no Kubernetes access: the workspace status is not reported', { error: errorMessage(e) });
    }
  }
  const reporter = new StatusReporter(
    kubeConfig && workspaceName && namespace ? { kubeConfig, namespace, name: workspaceName } : undefined,
  );
  if (!reporter.enabled)
    logger.info('workspace status reporting is off (needs POD_NAMESPACE, PULUMI_WORKSPACE_NAME and Kubernetes access)');

  let authorizer: Authorizer = allowAll;
  if (authMode === 'kube') {
    const audience = env[Env.workspaceAudience];
    const name = env[Env.stackName];
    if (!audience || !namespace || !name) {
      throw new AgentError(
        `--auth-mode kube needs ${Env.workspaceAudience}, ${Env.podNamespace} and ${Env.stackName}`,
        { reason: 'InvalidArguments', exitCode: 2 },
      );
    }
    authorizer = new KubeAuthorizer({ kubeConfig: kubeConfig!, audiences: [audience], namespace, name });
  } else {
    logger.warn('authentication is off (--auth-mode none): any caller may run operations');
  }

  const logLevel = Number(env[Env.pulumiLogLevel] ?? 0) || 0;
  const hash = env[Env.workspaceHash] ?? '';
  const dir = hostPath(flags.workspace ?? Paths.workspace);
  let workDir = dir;
  try {
    workDir = fs.realpathSync(dir);
  } catch {
    /* reported by the workspace as InitializationFailed */
  }
  const workspace = new Workspace({ workDir, stack, hash, reporter, redactor, logLevel });
  const { server, drain } = createWorkspaceServer({ workspace, authorizer });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) => reject(new AgentError(`cannot listen on ${host}:${port}: ${errorMessage(e)}`)));
    server.listen(port, host, () => resolve());
  });
  const addr = server.address();
  const actualPort = typeof addr === 'object' && addr ? addr.port : port;
  logger.info('workspace server listening', {
    address: `${host}:${actualPort}`,
    auth: authMode,
    stack: stack.name,
    dir: workDir,
  });
  // For tests and local use: the chosen port when --port 0.
  if (env.PKO_AGENT_PORT_FILE) fs.writeFileSync(env.PKO_AGENT_PORT_FILE, String(actualPort));

  let signals = 0;
  const exited = new Promise<number>((resolve) => {
    const onSignal = (sig: NodeJS.Signals): void => {
      signals++;
      if (signals > 1) {
        logger.error(`second ${sig}: exiting now`);
        killChildren('SIGKILL');
        removeTempDirs();
        resolve(1);
        return;
      }
      logger.info(`${sig} received: interrupting any running operation, then exiting`);
      drain();
      void (async () => {
        const result = await workspace.shutdown(`the workspace received ${sig}`);
        if (result) logger.info('the running operation ended', { state: result.state, reason: result.reason });
        killChildren('SIGINT');
        await reporter.settled(5000);
        await new Promise<void>((r) => {
          server.close(() => r());
          setTimeout(r, 5000).unref();
        });
        resolve(0);
      })();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  void workspace
    .initialize()
    .catch((e) => logger.error('workspace initialisation crashed', { error: errorMessage(e) }));
  return exited;
}
