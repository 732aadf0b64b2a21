/**
 * The hook server's only Kubernetes API access: creating Events, with the hooks' ServiceAccount
 * (in a cluster) or the kubeconfig named by KUBECONFIG. Without either, events are off and the
 * hooks work as before (`npm start` on a laptop, the unit tests).
 */
import { existsSync } from 'node:fs';
import type * as k8s from '@kubernetes/client-node';
import type { EventBody, EventsApi } from './recorder';

/** Where the kubelet mounts a pod's ServiceAccount token. */
export const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/** The field manager of the Events the hooks create (metadata.managedFields). */
export const FIELD_MANAGER = 'pulumi-mc-hooks';

/** Events on (with the API to write them and where it points) or off (and why). */
export type EventsAccess = { api: EventsApi; via: string } | { off: string };

/**
 * @kubernetes/client-node is an ES module, which Node.js loads with require(). Loaded only when
 * events are on, so the hooks start without it otherwise.
 */
function k8sModule(): typeof k8s {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- a lazy load has no import statement
  return require('@kubernetes/client-node') as typeof k8s;
}

/** The Events API of a kubeconfig. */
export function kubeEventsApi(kc: k8s.KubeConfig): EventsApi {
  const api = kc.makeApiClient(k8sModule().CoreV1Api);
  return {
    async create(body: EventBody) {
      // The times go as the strings they are: client-node passes a string through where its
      // model has a Date (as a Date, eventTime would lose the six digits a MicroTime needs).
      await api.createNamespacedEvent({
        namespace: body.metadata.namespace,
        body: body as unknown as k8s.CoreV1Event,
        fieldManager: FIELD_MANAGER,
      });
    },
  };
}

/** Events access from the environment: KUBECONFIG first (local runs), else the pod's ServiceAccount. */
export function eventsAccessFromEnv(
  env: NodeJS.ProcessEnv = process.env,
  tokenExists: () => boolean = () => existsSync(SERVICE_ACCOUNT_TOKEN),
): EventsAccess {
  try {
    const file = env.KUBECONFIG?.split(':').find((f) => f !== '');
    if (file) {
      const kc = new (k8sModule().KubeConfig)();
      kc.loadFromFile(file);
      return { api: kubeEventsApi(kc), via: `kubeconfig ${file} (${kc.getCurrentCluster()?.server ?? 'no server'})` };
    }
    if (env.KUBERNETES_SERVICE_HOST && tokenExists()) {
      const kc = new (k8sModule().KubeConfig)();
      kc.loadFromCluster();
      return { api: kubeEventsApi(kc), via: 'the ServiceAccount token of the pod' };
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
