/**
 * The hooks' Events on Stacks: created with the hooks' ServiceAccount (in a cluster) or the
 * kubeconfig named by KUBECONFIG (kube/access.ts). Without either, events are off and the hooks
 * work as before (`npm start` on a laptop, the unit tests).
 */
import type * as k8s from '@kubernetes/client-node';
import { k8sModule, kubeAccessFromEnv } from '../kube/access';
import type { EventBody, EventsApi } from './recorder';

/** The field manager of the Events the hooks create (metadata.managedFields). */
export const FIELD_MANAGER = 'pulumi-mc-hooks';

/** Events on (with the API to write them and where it points) or off (and why). */
export type EventsAccess = { api: EventsApi; via: string } | { off: string };

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
export function eventsAccessFromEnv(env: NodeJS.ProcessEnv = process.env, tokenExists?: () => boolean): EventsAccess {
  const access = kubeAccessFromEnv(env, tokenExists);
  return 'kc' in access ? { api: kubeEventsApi(access.kc), via: access.via } : access;
}
