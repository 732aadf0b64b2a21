import * as fs from 'node:fs';
import type * as http from 'node:http';
import type * as k8s from '@kubernetes/client-node';
import { Env, Paths, WORKSPACE_PORT, type WorkspaceStackSpec } from '../../../contract';
import { parseFlags } from '../lib/args';
import { loadEnvFile } from '../lib/envfile';
import { AgentError, errorMessage } from '../lib/errors';
import { loadKubeConfig } from '../lib/kube';
import { logger } from '../lib/log';
import { hostPath } from '../lib/paths';
import { redactor } from '../lib/redact';
import { allowAll, KubeAuthorizer, type Authorizer } from './auth';
import { AuthCheck, kubeReviewApi } from './auth-check';
import { removeTempDirs } from './operation';
import { ensureWritableHome } from './home';
import { killChildren } from './pulumi';
import { createWorkspaceServer, type WorkspaceServer } from './server';
import { StatusReporter } from './status';
import { Workspace } from './workspace';

export const SERVE_FLAGS = ['port', 'host', 'auth-mode', 'workspace', 'env-file'] as const;

const invalidArguments = (message: string): AgentError =>
  new AgentError(message, { reason: 'InvalidArguments', exitCode: 2 });

function parseStackSpec(raw: string | undefined): WorkspaceStackSpec {
  if (!raw) throw invalidArguments(`${Env.workspaceStack} is not set: it names the stack and its config`);
  let v: unknown;
  try {
    v = JSON.parse(raw);
  } catch {
    throw invalidArguments(`${Env.workspaceStack} is not valid JSON`);
  }
  const s = v as Partial<WorkspaceStackSpec>;
  if (typeof s !== 'object' || s === null || typeof s.name !== 'string' || s.name === '') {
    throw invalidArguments(`${Env.workspaceStack} must be an object with a stack "name"`);
  }
  if (s.config !== undefined && !Array.isArray(s.config))
    throw invalidArguments(`${Env.workspaceStack}: "config" must be a list`);
  return {
    name: s.name,
    create: s.create !== false,
    config: s.config ?? [],
    ...(s.secretsProvider ? { secretsProvider: s.secretsProvider } : {}),
    ...(s.environment ? { environment: s.environment } : {}),
  };
}

type Flags = Partial<Record<(typeof SERVE_FLAGS)[number], string>>;

function listenAddress(flags: Flags, env: NodeJS.ProcessEnv): { port: number; host: string } {
  const port = Number(flags.port ?? env.PKO_AGENT_PORT ?? WORKSPACE_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw invalidArguments(`invalid port "${flags.port ?? env.PKO_AGENT_PORT}"`);
  return { port, host: flags.host ?? env.PKO_AGENT_HOST ?? '0.0.0.0' };
}

function authModeOf(flags: Flags, env: NodeJS.ProcessEnv): 'none' | 'kube' {
  const authMode = flags['auth-mode'] ?? env.PKO_AGENT_AUTH_MODE ?? 'kube';
  if (authMode !== 'none' && authMode !== 'kube')
    throw invalidArguments(`--auth-mode must be none or kube, not "${authMode}"`);
  return authMode;
}

/** Upstream's dynamic env file: variables an init container appended (never overriding the pod's). */
function loadPodEnvFile(flags: Flags, env: NodeJS.ProcessEnv): void {
  const envFile = hostPath(flags['env-file'] ?? (env[Env.pulumiEnv] || Paths.envFile));
  const loaded = loadEnvFile(envFile);
  if (loaded.length) logger.info('loaded variables from the env file', { file: envFile, names: loaded.join(',') });
}

/** Kubernetes access when only the status report needs it: its absence is logged, not fatal. */
function optionalKubeConfig(env: NodeJS.ProcessEnv): k8s.KubeConfig | undefined {
  try {
    return loadKubeConfig(env);
  } catch (e) {
    logger.warn('no Kubernetes access: the workspace status is not reported', { error: errorMessage(e) });
    return undefined;
  }
}

/** --auth-mode kube: whom callers' tokens are for, and which workspace they must be allowed to use. */
function kubeAuthTarget(
  namespace: string,
  env: NodeJS.ProcessEnv,
): { audiences: string[]; namespace: string; name: string } {
  const audience = env[Env.workspaceAudience];
  const name = env[Env.stackName];
  if (!audience || !namespace || !name)
    throw invalidArguments(`--auth-mode kube needs ${Env.workspaceAudience}, ${Env.podNamespace} and ${Env.stackName}`);
  return { audiences: [audience], namespace, name };
}

/** The project directory with the workspace symlink resolved. */
function projectDir(flags: Flags): string {
  const dir = hostPath(flags.workspace ?? Paths.workspace);
  try {
    return fs.realpathSync(dir);
  } catch {
    return dir; // reported by the workspace as InitializationFailed
  }
}

/** Listens; the port actually bound (--port 0 picks one). */
async function listen(server: http.Server, host: string, port: number): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e) => reject(new AgentError(`cannot listen on ${host}:${port}: ${errorMessage(e)}`)));
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  return typeof address === 'object' && address ? address.port : port;
}

/**
 * SIGTERM and SIGINT: the first drains the server, interrupts the running operation and waits for
 * it, flushes the status report and closes the server (exit 0); the second kills every Pulumi
 * process at once (exit 1).
 */
function exitOnSignals(workspace: Workspace, served: WorkspaceServer, reporter: StatusReporter): Promise<number> {
  let signals = 0;
  return new Promise<number>((resolve) => {
    const shutDown = async (sig: NodeJS.Signals): Promise<void> => {
      const result = await workspace.shutdown(`the workspace received ${sig}`);
      if (result) logger.info('the running operation ended', { state: result.state, reason: result.reason });
      killChildren('SIGINT');
      await reporter.settled(5000);
      await new Promise<void>((closed) => {
        served.server.close(() => closed());
        setTimeout(closed, 5000).unref();
      });
      resolve(0);
    };
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
      served.drain();
      void shutDown(sig);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
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
  const { port, host } = listenAddress(flags, env);
  const authMode = authModeOf(flags, env);
  loadPodEnvFile(flags, env);
  ensureWritableHome(env);
  const stack = parseStackSpec(env[Env.workspaceStack]);
  const namespace = env[Env.podNamespace] ?? '';
  const statusConfigMap = env[Env.workspaceStatusConfigMap] ?? '';

  let kubeConfig: k8s.KubeConfig | undefined;
  let authorizer: Authorizer;
  let authCheck: AuthCheck | undefined;
  if (authMode === 'kube') {
    kubeConfig = loadKubeConfig(env);
    const target = kubeAuthTarget(namespace, env);
    // TokenReview and SubjectAccessReview of each caller; first, that this pod may make them.
    authCheck = new AuthCheck({
      api: kubeReviewApi(kubeConfig, target),
      onChange: (state) => workspace.setCallerVerification(state),
    });
    const check = authCheck;
    authorizer = new KubeAuthorizer({ kubeConfig, ...target, onForbidden: () => check.recheck() });
  } else {
    kubeConfig = statusConfigMap && namespace ? optionalKubeConfig(env) : undefined;
    logger.warn('authentication is off (--auth-mode none): any caller may run operations');
    authorizer = allowAll;
  }
  const reporter = new StatusReporter(
    kubeConfig && statusConfigMap && namespace ? { kubeConfig, namespace, name: statusConfigMap } : undefined,
  );
  if (!reporter.enabled)
    logger.info(
      `workspace status reporting is off (needs ${Env.podNamespace}, ${Env.workspaceStatusConfigMap} and Kubernetes access)`,
    );

  const workDir = projectDir(flags);
  const workspace = new Workspace({
    workDir,
    stack,
    hash: env[Env.workspaceHash] ?? '',
    reporter,
    redactor,
    logLevel: Number(env[Env.pulumiLogLevel] ?? 0) || 0,
    verifiesCallers: authCheck !== undefined,
  });
  const served = createWorkspaceServer({ workspace, authorizer });
  const actualPort = await listen(served.server, host, port);
  logger.info('workspace server listening', {
    address: `${host}:${actualPort}`,
    auth: authMode,
    stack: stack.name,
    dir: workDir,
  });
  // For tests and local use: the chosen port when --port 0.
  if (env.PKO_AGENT_PORT_FILE) fs.writeFileSync(env.PKO_AGENT_PORT_FILE, String(actualPort));

  const exited = exitOnSignals(workspace, served, reporter);
  const stopChecking = new AbortController();
  void exited.then(() => stopChecking.abort());
  void authCheck
    ?.run(stopChecking.signal)
    .catch((e) => logger.error('the access check crashed', { error: errorMessage(e) }));
  void workspace
    .initialize()
    .catch((e) => logger.error('workspace initialisation crashed', { error: errorMessage(e) }));
  return exited;
}
