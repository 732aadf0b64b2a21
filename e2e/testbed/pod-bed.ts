/**
 * Plain pods on the test bed's real node, for its self-test (node.e2e.ts) and packaging/images.e2e.ts: a
 * control plane and node with the images imported, a namespace that enforces the restricted Pod
 * Security Standard, and helpers to run a pod to its end, read its log and watch its containers.
 */
import * as k8s from '@kubernetes/client-node';
import { type ControlPlane, startControlPlane } from './control-plane';
import { eventually } from './helpers';
import { ensureImages } from './images/containerd';
import { type RealNode, startNode } from './node';
import { requireTestbedEnvironment } from './node/environment';

export interface PodBed {
  cp: ControlPlane;
  node: RealNode;
  core: k8s.CoreV1Api;
  ns: string;
  stop(): Promise<void>;
}

export async function startPodBed(ns: string): Promise<PodBed> {
  const env = requireTestbedEnvironment();
  await ensureImages(env.containerdSocket);
  const cp = await startControlPlane({ nodeAddress: env.nodeIp });
  let node: RealNode | undefined;
  try {
    node = await startNode(cp);
    const core = cp.kubeConfig.makeApiClient(k8s.CoreV1Api);
    await core.createNamespace({
      body: { metadata: { name: ns, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } },
    });
    await eventually('the default ServiceAccount', () =>
      core.readNamespacedServiceAccount({ namespace: ns, name: 'default' }),
    );
    const started = node;
    return {
      cp,
      node: started,
      core,
      ns,
      stop: async () => {
        await started.stop();
        await cp.stop();
      },
    };
  } catch (e) {
    await node?.stop();
    await cp.stop();
    throw e;
  }
}

/**
 * The restricted profile, without a user: `runAsNonRoot` makes kubelet check the image's own
 * USER (numeric and not 0), so the container runs as the image says.
 */
const RESTRICTED_POD: k8s.V1PodSecurityContext = {
  runAsNonRoot: true,
  seccompProfile: { type: 'RuntimeDefault' },
};
const RESTRICTED_CONTAINER: k8s.V1SecurityContext = {
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
};

/**
 * A one-container pod (container `main`) of a local image under the restricted profile; command and
 * args as given, else the image's; a read-only root file system unless `writableRoot`.
 */
export function podOf(
  ns: string,
  name: string,
  image: string,
  container: Omit<k8s.V1Container, 'name' | 'image' | 'securityContext'> = {},
  writableRoot = false,
): k8s.V1Pod {
  const securityContext = { ...RESTRICTED_CONTAINER, readOnlyRootFilesystem: !writableRoot };
  return {
    metadata: { name, namespace: ns },
    spec: {
      restartPolicy: 'Never',
      securityContext: RESTRICTED_POD,
      containers: [{ name: 'main', image, imagePullPolicy: 'Never', securityContext, ...container }],
    },
  };
}

/** Where a pod runs: any namespace of a control plane (a PodBed's, or an e2e suite's). */
type PodPlace = Pick<PodBed, 'core' | 'ns'>;

export async function finished(bed: PodPlace, name: string): Promise<k8s.V1Pod> {
  return eventually(
    `pod ${name} to finish`,
    async () => {
      const p = await bed.core.readNamespacedPod({ namespace: bed.ns, name });
      return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
    },
    120_000,
    500,
  );
}

export async function runningWithIp(bed: PodBed, name: string): Promise<string> {
  return eventually(
    `pod ${name} to run`,
    async () => {
      const p = await bed.core.readNamespacedPod({ namespace: bed.ns, name });
      const phase = p.status?.phase;
      if (phase === 'Failed' || phase === 'Succeeded') throw new Error(`pod ${name} ended: ${phase}`);
      return phase === 'Running' && p.status?.podIP ? p.status.podIP : undefined;
    },
    120_000,
    500,
  );
}

export const logOf = (bed: PodPlace, name: string): Promise<string> =>
  bed.core.readNamespacedPodLog({ namespace: bed.ns, name, container: 'main' }).then(String);

/** Runs a pod to its end; its phase and log. */
export async function runPod(bed: PodPlace, body: k8s.V1Pod): Promise<{ phase: string | undefined; log: string }> {
  const name = body.metadata?.name ?? '';
  await bed.core.createNamespacedPod({ namespace: bed.ns, body });
  const done = await finished(bed, name);
  return { phase: done.status?.phase, log: await logOf(bed, name) };
}

/**
 * Deletes a pod and returns how its container `main` ended, as kubelet reported it before the pod
 * went away (a watch sees the status updates of the grace period).
 */
export async function deleteAndWatchEnd(bed: PodBed, name: string): Promise<k8s.V1ContainerStateTerminated> {
  let terminated: k8s.V1ContainerStateTerminated | undefined;
  let gone = false;
  const request = await new k8s.Watch(bed.cp.kubeConfig).watch(
    `/api/v1/namespaces/${bed.ns}/pods`,
    { fieldSelector: `metadata.name=${name}` },
    (type: string, pod: k8s.V1Pod) => {
      const state = pod.status?.containerStatuses?.find((c) => c.name === 'main')?.state?.terminated;
      if (state) terminated = state;
      if (type === 'DELETED') gone = true;
    },
    () => undefined,
  );
  try {
    await bed.core.deleteNamespacedPod({ namespace: bed.ns, name, gracePeriodSeconds: 30 });
    await eventually(`pod ${name} to be gone`, () => gone, 60_000);
  } finally {
    request.abort();
  }
  if (!terminated) throw new Error(`pod ${name} went away without a terminated state for its container`);
  return terminated;
}

/** The image's configuration (OCI image config) as containerd holds it. */
export interface ImageConfig {
  User?: string;
  Entrypoint?: string[];
  Cmd?: string[];
  Env?: string[];
  WorkingDir?: string;
  ExposedPorts?: Record<string, unknown>;
}

export async function imageConfigOf(bed: PodBed, ref: string): Promise<ImageConfig> {
  const parsed = JSON.parse(await bed.node.crictl('inspecti', '-o', 'json', ref)) as {
    info?: { imageSpec?: { config?: ImageConfig } };
  };
  const config = parsed.info?.imageSpec?.config;
  if (!config) throw new Error(`crictl inspecti ${ref}: no image config in its output`);
  return config;
}
