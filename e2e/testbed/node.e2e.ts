/**
 * The real node's self-test: what the operator's scenarios rely on, seen on plain pods. Pods run as
 * containers (crictl lists them), the restricted profile is enforced by kubelet and runc, cluster
 * DNS answers for Services, and a deleted pod gets SIGTERM and its grace period.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import * as k8s from '@kubernetes/client-node';
import { eventually } from './helpers';
import { IMAGE_REFS } from './images/refs';
import { finished, logOf, type PodBed, podOf, runningWithIp, startPodBed } from './pod-bed';

jest.setTimeout(180_000);

let bed: PodBed;
const ns = 'node-self-test';

beforeAll(async () => {
  bed = await startPodBed(ns);
});

afterAll(async () => {
  await bed?.stop();
});

/** A pod of the Debian stand-in (whose image runs as root) as uid 1000, running `script`. */
function debianPod(name: string, script: string, options: { writableRoot?: boolean } = {}): k8s.V1Pod {
  const body = podOf(ns, name, IMAGE_REFS.debian, { command: ['/bin/sh', '-c', script] }, options.writableRoot ?? true);
  body.metadata!.labels = { app: name };
  body.spec!.securityContext = { ...body.spec!.securityContext, runAsUser: 1000, runAsGroup: 1000 };
  return body;
}

async function create(body: k8s.V1Pod): Promise<void> {
  await bed.core.createNamespacedPod({ namespace: ns, body });
}

describe('the real node', () => {
  it('runs a restricted pod as a container: uid 1000, read-only root, no capabilities', async () => {
    await create(
      debianPod('restricted', 'id -u; grep CapEff /proc/self/status; touch /probe 2>&1 || true', {
        writableRoot: false,
      }),
    );
    const done = await finished(bed, 'restricted');
    expect(done.status?.phase).toBe('Succeeded');
    const log = await logOf(bed, 'restricted');
    expect(log).toMatch(/^1000$/m);
    expect(log).toMatch(/^CapEff:\s+0000000000000000$/m);
    expect(log).toContain('Read-only file system');
    // A container of the run's containerd, not a process of the test's.
    const ps = await bed.node.crictl('ps', '-a', '--name', 'main', '-o', 'json');
    expect(ps).toContain(done.status?.containerStatuses?.[0]?.containerID?.replace('containerd://', '') ?? 'no id');
  });

  it('refuses to start an image that runs as root under runAsNonRoot', async () => {
    const body = debianPod('as-root', 'id -u');
    delete body.spec!.securityContext!.runAsUser;
    delete body.spec!.securityContext!.runAsGroup;
    await create(body);
    const waiting = await eventually(
      'kubelet to refuse the container',
      async () => {
        const p = await bed.core.readNamespacedPod({ namespace: ns, name: 'as-root' });
        const w = p.status?.containerStatuses?.[0]?.state?.waiting;
        return w?.reason === 'CreateContainerConfigError' ? w : undefined;
      },
      60_000,
      500,
    );
    expect(waiting.message).toContain('runAsNonRoot and image will run as root');
  });

  it('resolves Services through cluster DNS', async () => {
    await bed.core.createNamespacedService({
      namespace: ns,
      body: { metadata: { name: 'web' }, spec: { clusterIP: 'None', selector: { app: 'web' }, ports: [{ port: 80 }] } },
    });
    await create(debianPod('web', 'sleep 300'));
    const webIp = await runningWithIp(bed, 'web');
    await create(
      debianPod(
        'resolver',
        `getent hosts web.${ns}.svc.cluster.local; getent hosts kubernetes.default.svc.cluster.local; cat /etc/resolv.conf`,
      ),
    );
    const done = await finished(bed, 'resolver');
    const log = await logOf(bed, 'resolver');
    expect(done.status?.phase).toBe('Succeeded');
    expect(log).toContain(`${webIp} `);
    expect(log).toMatch(/^10\.200\.128\.1\s+kubernetes\.default\.svc\.cluster\.local/m);
    expect(log).toContain('nameserver 10.200.128.10');
  });

  it('sends SIGTERM on delete and keeps the pod for its grace period', async () => {
    await create(
      debianPod('graceful', `trap 'echo got SIGTERM; exit 0' TERM; echo started; while :; do sleep 1; done`),
    );
    await eventually('pod graceful to log', async () =>
      (await logOf(bed, 'graceful')).includes('started') ? true : undefined,
    );
    let text = '';
    const sink = new Writable({
      write(chunk: Buffer, _e, cb) {
        text += chunk.toString();
        cb();
      },
    });
    const abort = await new k8s.Log(bed.cp.kubeConfig).log(ns, 'graceful', 'main', sink, { follow: true });
    await bed.core.deleteNamespacedPod({ namespace: ns, name: 'graceful', gracePeriodSeconds: 30 });
    await eventually('the container to log the SIGTERM', () => text.includes('got SIGTERM'), 30_000);
    abort.abort();
    await eventually(
      'pod graceful to be gone',
      async () =>
        (await bed.core.readNamespacedPod({ namespace: ns, name: 'graceful' }).catch(() => undefined))
          ? undefined
          : true,
      60_000,
    );
  });
});
