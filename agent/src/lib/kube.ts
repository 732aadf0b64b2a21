import type * as k8s from '@kubernetes/client-node';
import { AgentError, errorMessage } from './errors';
import { hostRoot } from './paths';

/**
 * @kubernetes/client-node is an ES module; Node 20.19+ loads it with require(). Loaded lazily so
 * that subcommands without Kubernetes access (fetch) do not pay for it.
 */
export function k8sModule(): typeof k8s {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
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

/** HTTP status of a client-node error, if it is one. */
export function apiStatus(e: unknown): number | undefined {
  if (typeof e === 'object' && e !== null && 'code' in e && typeof (e as { code: unknown }).code === 'number') {
    const code = (e as { code: number }).code;
    return code >= 100 && code < 600 ? code : undefined;
  }
  return undefined;
}

/** A short description of a failed API call: status and the Status message, never the request. */
export function apiErrorMessage(e: unknown): string {
  const code = apiStatus(e);
  if (code !== undefined) {
    const body = (e as { body?: unknown }).body;
    let message: string | undefined;
    if (typeof body === 'string') {
      try {
        const parsed = JSON.parse(body) as { message?: unknown };
        if (typeof parsed.message === 'string') message = parsed.message;
      } catch {
        message = body.slice(0, 300);
      }
    } else if (
      typeof body === 'object' &&
      body !== null &&
      typeof (body as { message?: unknown }).message === 'string'
    ) {
      message = (body as { message: string }).message;
    }
    return `HTTP ${code}${message ? `: ${message}` : ''}`;
  }
  return errorMessage(e);
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Retries an API call on transient failures (network, 429, 5xx), with backoff; other errors at once. */
export async function withRetries<T>(what: string, fn: () => Promise<T>, attempts = 5, firstDelayMs = 500): Promise<T> {
  let delay = firstDelayMs;
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (e) {
      const code = apiStatus(e);
      const transient = code === undefined || code === 429 || code >= 500;
      if (!transient || i >= attempts) throw new AgentError(`${what}: ${apiErrorMessage(e)}`);
      await sleep(delay);
      delay = Math.min(delay * 2, 10_000);
    }
  }
}

/** JSON merge patch of annotations only; a value of null removes a key. */
export function annotationsPatch(annotations: Record<string, string | null>): object {
  return { metadata: { annotations } };
}
