/**
 * The real node's self-test: what the operator's scenarios rely on, seen on plain pods. Pods run as
 * containers (crictl lists them), the restricted profile is enforced by kubelet and runc, cluster
 * DNS answers for Services, and a deleted pod gets SIGTERM and its grace period.
 */
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import * as k8s from '@kubernetes/client-node';
import { type ControlPlane, startControlPlane } from './control-plane';
import { eventually } from './eventually';
import { ensureImages } from './images/containerd';
import { IMAGE_REFS } from './images/refs';
import { type RealNode, startNode } from './node';
import { requireTestbedEnvironment } from './node/environment';

jest.setTimeout(180_000);

let cp: ControlPlane;
let node: RealNode;
let core: k8s.CoreV1Api;
const ns = 'node-self-test';

beforeAll(async () => {
  const env = requireTestbedEnvironment();
  await ensureImages(env.containerdSocket);
  cp = await startControlPlane({ nodeAddress: env.nodeIp });
  node = await startNode(cp);
  core = cp.kubeConfig.makeApiClient(k8s.CoreV1Api);
  await core.createNamespace({
    body: { metadata: { name: ns, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } },
  });
  await eventually('the default ServiceAccount', () =>
    core.readNamespacedServiceAccount({ namespace: ns, name: 'default' }),
  );
});

afterAll(async () => {
  await node?.stop();
  await cp?.stop();
});

const restricted = (): k8s.V1PodSecurityContext => ({
  runAsNonRoot: true,
  runAsUser: 1000,
  runAsGroup: 1000,
  seccompProfile: { type: 'RuntimeDefault' },
});
const container = { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } };

function pod(name: string, image: string, script: string): k8s.V1Pod {
  return {
    metadata: { name, namespace: ns, labels: { app: name } },
    spec: {
      restartPolicy: 'Never',
      securityContext: restricted(),
      containers: [
        {
          name: 'main',
          image,
          imagePullPolicy: 'Never',
          command: ['/bin/sh', '-c', script],
          securityContext: container,
        },
      ],
    },
  };
}

async function finished(name: string): Promise<k8s.V1Pod> {
  return eventually(
    `pod ${name} to finish`,
    async () => {
      const p = await core.readNamespacedPod({ namespace: ns, name });
      return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
    },
    120_000,
    500,
  );
}

const logOf = (name: string): Promise<string> =>
  core.readNamespacedPodLog({ namespace: ns, name, container: 'main' }).then(String);

describe('the real node', () => {
  it('runs a restricted pod as a container: uid 1000, read-only root, no capabilities', async () => {
    const body = pod(
      'restricted',
      IMAGE_REFS.debian,
      'id -u; grep CapEff /proc/self/status; touch /probe 2>&1 || true',
    );
    body.spec!.containers[0]!.securityContext = { ...container, readOnlyRootFilesystem: true };
    await core.createNamespacedPod({ namespace: ns, body });
    const done = await finished('restricted');
    expect(done.status?.phase).toBe('Succeeded');
    const log = await logOf('restricted');
    expect(log).toMatch(/^1000$/m);
    expect(log).toMatch(/^CapEff:\s+0000000000000000$/m);
    expect(log).toContain('Read-only file system');
    // A container of the run's containerd, not a process of the test's.
    const ps = await node.crictl('ps', '-a', '--name', 'main', '-o', 'json');
    expect(ps).toContain(done.status?.containerStatuses?.[0]?.containerID?.replace('containerd://', '') ?? 'no id');
  });

  it('refuses to start an image that runs as root under runAsNonRoot', async () => {
    const body = pod('as-root', IMAGE_REFS.debian, 'id -u');
    delete body.spec!.securityContext!.runAsUser;
    delete body.spec!.securityContext!.runAsGroup;
    await core.createNamespacedPod({ namespace: ns, body });
    const waiting = await eventually(
      'kubelet to refuse the container',
      async () => {
        const p = await core.readNamespacedPod({ namespace: ns, name: 'as-root' });
        const w = p.status?.containerStatuses?.[0]?.state?.waiting;
        return w?.reason === 'CreateContainerConfigError' ? w : undefined;
      },
      60_000,
      500,
    );
    expect(waiting.message).toContain('runAsNonRoot and image will run as root');
  });

  it('resolves Services through cluster DNS', async () => {
    await core.createNamespacedService({
      namespace: ns,
      body: { metadata: { name: 'web' }, spec: { clusterIP: 'None', selector: { app: 'web' }, ports: [{ port: 80 }] } },
    });
    await core.createNamespacedPod({ namespace: ns, body: pod('web', IMAGE_REFS.debian, 'sleep 300') });
    const web = await eventually('pod web to run', async () => {
      const p = await core.readNamespacedPod({ namespace: ns, name: 'web' });
      return p.status?.phase === 'Running' && p.status.podIP ? p : undefined;
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: pod(
        'resolver',
        IMAGE_REFS.debian,
        `getent hosts web.${ns}.svc.cluster.local; getent hosts kubernetes.default.svc.cluster.local; cat /etc/resolv.conf`,
      ),
    });
    const done = await finished('resolver');
    const log = await logOf('resolver');
    expect(done.status?.phase).toBe('Succeeded');
    expect(log).toContain(`${web.status?.podIP} `);
    expect(log).toMatch(/^10\.200\.128\.1\s+kubernetes\.default\.svc\.cluster\.local/m);
    expect(log).toContain('nameserver 10.200.128.10');
  });

  it('sends SIGTERM on delete and keeps the pod for its grace period', async () => {
    await core.createNamespacedPod({
      namespace: ns,
      body: pod(
        'graceful',
        IMAGE_REFS.debian,
        `trap 'echo got SIGTERM; exit 0' TERM; echo started; while :; do sleep 1; done`,
      ),
    });
    await eventually('pod graceful to log', async () =>
      (await logOf('graceful')).includes('started') ? true : undefined,
    );
    const follow = new k8s.Log(cp.kubeConfig);
    let text = '';
    const { Writable } = await import('node:stream');
    const abort = await follow.log(
      ns,
      'graceful',
      'main',
      new Writable({
        write(chunk: Buffer, _e, cb) {
          text += chunk.toString();
          cb();
        },
      }),
      { follow: true },
    );
    await core.deleteNamespacedPod({ namespace: ns, name: 'graceful', gracePeriodSeconds: 30 });
    await eventually('the container to log the SIGTERM', () => text.includes('got SIGTERM'), 30_000);
    abort.abort();
    await eventually(
      'pod graceful to be gone',
      async () =>
        (await core.readNamespacedPod({ namespace: ns, name: 'graceful' }).catch(() => undefined)) ? undefined : true,
      60_000,
    );
  });
});
