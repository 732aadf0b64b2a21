import { Env } from '../../../contract';
import { AgentError, errorMessage } from '../lib/errors';
import { loadKubeConfig } from '../lib/kube';
import { logger } from '../lib/log';
import { redactor } from '../lib/redact';
import { StatusReporter } from '../serve/status';

/**
 * A fetch that fails (bad credentials, missing ref, digest mismatch) is reported in the workspace's
 * status ConfigMap as a Failed WorkspaceStatus for this pod's template, so the Stack shows it
 * (Stalled/WorkspaceFailed with the cause) instead of waiting for readiness forever. A Program's
 * download that fails for other reasons than its settings or its digest is not reported: the hook
 * server may not have seen the Workspace yet (403) or be restarting, which the init container's
 * retry resolves.
 */
export async function reportFetchFailure(
  kind: string,
  err: unknown,
  env: NodeJS.ProcessEnv = process.env,
): Promise<void> {
  const name = env[Env.workspaceStatusConfigMap];
  const namespace = env[Env.podNamespace];
  const hash = env[Env.workspaceHash];
  if (!name || !namespace || !hash) return;
  const reason = err instanceof AgentError ? err.reason : undefined;
  if (kind === 'program' && reason !== 'SpecInvalid' && reason !== 'DigestMismatch') return;
  try {
    const reporter = new StatusReporter({ kubeConfig: loadKubeConfig(env), namespace, name });
    reporter.report({
      hash,
      state: 'Failed',
      reason: 'SourceFetchFailed',
      message: redactor.redact(errorMessage(err)),
    });
    await reporter.settled(5000);
  } catch (e) {
    logger.warn('could not report the fetch failure', { error: errorMessage(e) });
  }
}
