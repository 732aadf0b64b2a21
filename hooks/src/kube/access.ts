/**
 * How the hook server reaches the Kubernetes API, if at all: the kubeconfig named by KUBECONFIG
 * (local runs), else the pod's ServiceAccount. Without either the hooks work without the API
 * (`npm start` on a laptop, the unit tests): Events and the gauges derived from objects are off.
 */
import { existsSync } from 'node:fs';
import type * as k8s from '@kubernetes/client-node';

/** Where the kubelet mounts a pod's ServiceAccount token. */
export const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/** A kubeconfig and where it points, or why there is none. */
export type KubeAccess = { kc: k8s.KubeConfig; via: string } | { off: string };

/**
 * @kubernetes/client-node is an ES module, which Node.js loads with require(). Loaded only when the
 * API is used, so the hooks start without it otherwise.
 */
export function k8sModule(): typeof k8s {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load has no import statement
  return require('@kubernetes/client-node') as typeof k8s;
}

/**
 * Call options for client-node's API clients that abort the call, its answer's body included, after
 * `ms`: the clients have no timeout of their own, so an API server that never answers would hold
 * the caller, and the socket, for good.
 */
export function abortAfter(ms: number): k8s.ConfigurationOptions {
  const { Observable } = k8sModule();
  return {
    middleware: [
      {
        pre: (context) => {
          context.setSignal(AbortSignal.timeout(ms));
          return new Observable(Promise.resolve(context));
        },
        post: (response) => new Observable(Promise.resolve(response)),
      },
    ],
    middlewareMergeStrategy: 'append',
  };
}

/** API access from the environment: KUBECONFIG first (local runs), else the pod's ServiceAccount. */
export function kubeAccessFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  tokenExists: () => boolean = () => existsSync(SERVICE_ACCOUNT_TOKEN),
): KubeAccess {
  try {
    const file = env.KUBECONFIG?.split(':').find((f) => f !== '');
    if (file) {
      const kc = new (k8sModule().KubeConfig)();
      kc.loadFromFile(file);
      return { kc, via: `kubeconfig ${file} (${kc.getCurrentCluster()?.server ?? 'no server'})` };
    }
    if (env.KUBERNETES_SERVICE_HOST && tokenExists()) {
      const kc = new (k8sModule().KubeConfig)();
      kc.loadFromCluster();
      return { kc, via: 'the ServiceAccount token of the pod' };
    }
  } catch (e) {
    return { off: `cannot load the Kubernetes configuration: ${e instanceof Error ? e.message : String(e)}` };
  }
  return {
    off: env.KUBERNETES_SERVICE_HOST
      ? `no ServiceAccount token at ${SERVICE_ACCOUNT_TOKEN} (automountServiceAccountToken is false)`
      : 'no Kubernetes API access (not in a pod, KUBECONFIG unset)',
  };
}
