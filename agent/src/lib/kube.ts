import type * as k8s from '@kubernetes/client-node';
import { AgentError, errorMessage } from './errors';
import { hostRoot } from './paths';
import { sleep } from './sleep';

/**
 * @kubernetes/client-node is an ES module, which Node.js loads with require(). Loaded lazily so
 * that subcommands without Kubernetes access (fetch) do not pay for it.
 */
export function k8sModule(): typeof k8s {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load has no import statement
  return require('@kubernetes/client-node') as typeof k8s;
}

/**
 * Kubernetes access: a kubeconfig named by KUBECONFIG (local runs, tests), else the pod's
 * ServiceAccount (KUBERNETES_SERVICE_HOST/PORT, token and ca.crt at the standard path).
 */
export function loadKubeConfig(env: NodeJS.ProcessEnv = process.env): k8s.KubeConfig {
  const k = k8sModule();
  const kc = new k.KubeConfig();
  if (env.KUBECONFIG) {
    const file = env.KUBECONFIG.split(':').find((f) => f !== '');
    if (!file) throw new AgentError('KUBECONFIG is empty');
    try {
      kc.loadFromFile(file);
    } catch (e) {
      throw new AgentError(`cannot load the kubeconfig ${file}: ${errorMessage(e)}`);
    }
    return kc;
  }
  if (env.KUBERNETES_SERVICE_HOST) {
    try {
      kc.loadFromCluster(hostRoot(env));
    } catch (e) {
      throw new AgentError(`cannot load the in-cluster Kubernetes configuration: ${errorMessage(e)}`);
    }
    return kc;
  }
  throw new AgentError('no Kubernetes access: set KUBECONFIG, or run in a pod (KUBERNETES_SERVICE_HOST)');
}

/** Options that make a patch call send a JSON merge patch. */
export function mergePatchOptions(): k8s.ConfigurationOptions {
  const k = k8sModule();
  return k.setHeaderOptions('Content-Type', k.PatchStrategy.MergePatch);
}

/** HTTP status of a failed client-node call; undefined for anything else (a network failure). */
export function apiStatus(e: unknown): number | undefined {
  return e instanceof k8sModule().ApiException ? e.code : undefined;
}

/** The `message` of a Kubernetes Status body, given as text or parsed. */
function statusMessage(body: unknown): string | undefined {
  let parsed: unknown = body;
  if (typeof body === 'string') {
    try {
      parsed = JSON.parse(body);
    } catch {
      return body.slice(0, 300);
    }
  }
  if (typeof parsed === 'object' && parsed !== null && 'message' in parsed && typeof parsed.message === 'string')
    return parsed.message;
  return undefined;
}

/** A short description of a failed API call: status and the Status message, never the request. */
export function apiErrorMessage(e: unknown): string {
  if (!(e instanceof k8sModule().ApiException)) return errorMessage(e);
  const message = statusMessage(e.body);
  return `HTTP ${e.code}${message ? `: ${message}` : ''}`;
}

/**
 * Retries an API call on transient failures (network, 429, 5xx), with backoff; other errors at
 * once. Fails with an AgentError that carries the last answer's HTTP status.
 */
export async function withRetries<T>(what: string, fn: () => Promise<T>, attempts = 5, firstDelayMs = 500): Promise<T> {
  let delay = firstDelayMs;
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (e) {
      const status = apiStatus(e);
      const transient = status === undefined || status === 429 || status >= 500;
      if (!transient || i >= attempts)
        throw new AgentError(`${what}: ${apiErrorMessage(e)}`, status === undefined ? {} : { status });
      await sleep(delay);
      delay = Math.min(delay * 2, 10_000);
    }
  }
}

/** JSON merge patch of annotations only; a value of null removes a key. */
export function annotationsPatch(annotations: Record<string, string | null>): object {
  return { metadata: { annotations } };
}
