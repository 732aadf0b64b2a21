/**
 * Self-tests of the pod runner, part 1 of 3: pods as the real controllers of kube-controller-manager
 * see them: node registration and binding, Jobs completing and failing, StatefulSet pods becoming
 * ready through probes, restarts (back-off, init container failure, liveness, sidecars, deadlines)
 * and service names. Set-up: pod-runner-fixture.ts.
 * Run: npm run test:e2e -- e2e/testbed/pod-runner-workloads.e2e.ts
 */
import * as k8s from '@kubernetes/client-node';
import { freePort } from './control-plane';
import { DEFAULT_NODE_NAME } from './pod-runner';
import { eventually, sleep } from './eventually';
import { bed, usePodRunnerBed, namespace, readPod, podInPhase, condition, isGone } from './pod-runner-fixture';

usePodRunnerBed();

describe('node and scheduling', () => {
  test('registers a Ready node and binds pods to it', async () => {
    const { runner, core } = bed();
    const node = await core.readNode({ name: DEFAULT_NODE_NAME });
    expect(condition(node, 'Ready')).toBe('True');
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'p' },
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'main', image: 'busybox', command: ['sh', '-c', 'echo hello; echo err >&2'] }],
        },
      },
    });
    const pod = await podInPhase(ns, 'p', ['Succeeded']);
    expect(pod.spec?.nodeName).toBe(DEFAULT_NODE_NAME);
    expect(condition(pod, 'PodScheduled')).toBe('True');
    expect(condition(pod, 'Initialized')).toBe('True');
    expect(condition(pod, 'Ready')).toBe('False');
    expect(pod.status?.podIP).toBe('127.0.0.1');
    expect(pod.status?.hostIP).toBe('127.0.0.1');
    expect(pod.status?.startTime).toBeDefined();
    const cs = pod.status?.containerStatuses?.[0];
    expect(cs?.name).toBe('main');
    expect(cs?.image).toBe('busybox');
    expect(cs?.imageID).toMatch(/^busybox@sha256:[0-9a-f]{64}$/);
    expect(cs?.state?.terminated?.exitCode).toBe(0);
    expect(cs?.state?.terminated?.reason).toBe('Completed');
    expect(cs?.state?.terminated?.startedAt).toBeDefined();
    expect(cs?.state?.terminated?.finishedAt).toBeDefined();
    expect(runner.logs(ns, 'p', 'main')).toBe('hello\nerr\n');
    await eventually('events', async () => {
      const events = await core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=p' });
      const reasons = events.items.map((e) => e.reason);
      return reasons.includes('Scheduled') && reasons.includes('Started') ? true : undefined;
    });
  });
});

describe('Jobs (real job controller)', () => {
  test("a Job whose pod runs `sh -c 'exit 0'` completes", async () => {
    const { batch } = bed();
    const ns = await namespace();
    await batch.createNamespacedJob({
      namespace: ns,
      body: {
        metadata: { name: 'ok' },
        spec: {
          backoffLimit: 0,
          template: {
            spec: {
              restartPolicy: 'Never',
              containers: [{ name: 'main', image: 'busybox', command: ['sh', '-c', 'exit 0'] }],
            },
          },
        },
      },
    });
    const job = await eventually('Job Complete', async () => {
      const j = await batch.readNamespacedJob({ name: 'ok', namespace: ns });
      return condition(j, 'Complete') === 'True' ? j : undefined;
    });
    expect(job.status?.succeeded).toBe(1);
    expect(condition(job, 'Failed')).toBeUndefined();
  });

  test('a Job whose pod exits 1 fails', async () => {
    const { core, batch } = bed();
    const ns = await namespace();
    await batch.createNamespacedJob({
      namespace: ns,
      body: {
        metadata: { name: 'ko' },
        spec: {
          backoffLimit: 0,
          template: {
            spec: {
              restartPolicy: 'Never',
              containers: [{ name: 'main', image: 'busybox', command: ['sh', '-c', 'exit 1'] }],
            },
          },
        },
      },
    });
    const job = await eventually('Job Failed', async () => {
      const j = await batch.readNamespacedJob({ name: 'ko', namespace: ns });
      return condition(j, 'Failed') === 'True' ? j : undefined;
    });
    expect(job.status?.failed).toBe(1);
    const pods = await core.listNamespacedPod({ namespace: ns, labelSelector: 'batch.kubernetes.io/job-name=ko' });
    expect(pods.items).toHaveLength(1);
    const pod = pods.items[0]!;
    expect(pod.status?.phase).toBe('Failed');
    expect(pod.status?.containerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 1, reason: 'Error' });
  });
});

describe('StatefulSets (real statefulset controller) and readiness', () => {
  test('a pod with an httpGet readinessProbe becomes Ready and readyReplicas becomes 1', async () => {
    const { apps } = bed();
    const ns = await namespace();
    const port = await freePort();
    await apps.createNamespacedStatefulSet({
      namespace: ns,
      body: {
        metadata: { name: 'web' },
        spec: {
          replicas: 1,
          serviceName: 'web',
          selector: { matchLabels: { app: 'web' } },
          template: {
            metadata: { labels: { app: 'web' } },
            spec: {
              terminationGracePeriodSeconds: 2,
              containers: [
                {
                  name: 'http',
                  image: 'python',
                  command: ['python3', '-m', 'http.server', String(port), '--bind', '127.0.0.1'],
                  workingDir: '/srv/pko-e2e-www',
                  ports: [{ name: 'http', containerPort: port }],
                  volumeMounts: [{ name: 'www', mountPath: '/srv/pko-e2e-www' }],
                  readinessProbe: {
                    httpGet: { path: '/', port: 'http' as unknown as k8s.IntOrString },
                    periodSeconds: 1,
                  },
                },
              ],
              volumes: [{ name: 'www', emptyDir: {} }],
            },
          },
        },
      },
    });
    const sts = await eventually('readyReplicas 1', async () => {
      const s = await apps.readNamespacedStatefulSet({ name: 'web', namespace: ns });
      return s.status?.readyReplicas === 1 ? s : undefined;
    });
    expect(sts.status?.readyReplicas).toBe(1);
    const pod = await readPod(ns, 'web-0');
    expect(pod.status?.phase).toBe('Running');
    expect(condition(pod, 'Ready')).toBe('True');
    expect(condition(pod, 'ContainersReady')).toBe('True');
    expect(pod.status?.containerStatuses?.[0]).toMatchObject({ ready: true, started: true, restartCount: 0 });
    expect(pod.status?.containerStatuses?.[0]?.state?.running?.startedAt).toBeDefined();
    // Scale to zero: the controller deletes the pod, the runner stops it and it disappears.
    await apps.patchNamespacedStatefulSetScale(
      { name: 'web', namespace: ns, body: { spec: { replicas: 0 } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await eventually('web-0 gone', () => isGone(() => readPod(ns, 'web-0')));
  });

  test('a pod whose probe fails stays running but not ready; an exec probe that succeeds makes it ready', async () => {
    const { core } = bed();
    const ns = await namespace();
    const closed = await freePort();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'p' },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [
            {
              name: 'unready',
              image: 'busybox',
              command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 0.2; done'],
              readinessProbe: {
                tcpSocket: { port: closed as unknown as k8s.IntOrString },
                periodSeconds: 1,
                failureThreshold: 1,
              },
            },
            {
              name: 'exec',
              image: 'busybox',
              command: ['sh', '-c', 'trap "exit 0" TERM; while true; do sleep 0.2; done'],
              // Runs inside the container: its UTS namespace (hostname) and its PID namespace.
              readinessProbe: {
                exec: {
                  command: [
                    'sh',
                    '-c',
                    'test "$(cat /proc/sys/kernel/hostname)" = p && grep -q "while true" /proc/1/cmdline',
                  ],
                },
                periodSeconds: 1,
              },
            },
          ],
        },
      },
    });
    const pod = await eventually('exec container ready', async () => {
      const p = await readPod(ns, 'p');
      return p.status?.containerStatuses?.find((c) => c.name === 'exec')?.ready ? p : undefined;
    });
    expect(pod.status?.phase).toBe('Running');
    // Several probe periods later, the tcp probe still fails: not ready, so neither is the pod.
    await sleep(3000);
    const again = await readPod(ns, 'p');
    const unready = again.status?.containerStatuses?.find((c) => c.name === 'unready');
    expect(unready?.state?.running).toBeDefined();
    expect(unready?.ready).toBe(false);
    expect(condition(again, 'Ready')).toBe('False');
    expect(condition(again, 'ContainersReady')).toBe('False');
    const events = await core.listNamespacedEvent({
      namespace: ns,
      fieldSelector: 'involvedObject.name=p,reason=Unhealthy',
    });
    expect(events.items.length).toBeGreaterThan(0);
    await core.deleteNamespacedPod({ name: 'p', namespace: ns });
    await eventually('pod gone', () => isGone(() => readPod(ns, 'p')));
  });
});

describe('restarts and service names', () => {
  test('restartPolicy OnFailure restarts a failing container with back-off and counts restarts', async () => {
    const { runner, core } = bed();
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'flaky' },
        spec: {
          restartPolicy: 'OnFailure',
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: [
                'sh',
                '-c',
                'n=$(cat /data/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /data/n; echo "attempt $n"; [ $n -ge 3 ]',
              ],
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            },
          ],
          volumes: [{ name: 'data', emptyDir: {} }],
        },
      },
    });
    const pod = await podInPhase(ns, 'flaky', ['Succeeded', 'Failed']);
    expect(pod.status?.phase).toBe('Succeeded');
    const cs = pod.status?.containerStatuses?.[0];
    expect(cs?.restartCount).toBe(2);
    expect(cs?.lastState?.terminated).toMatchObject({ exitCode: 1, reason: 'Error' });
    expect(runner.logs(ns, 'flaky', 'main')).toBe('attempt 3\n');
    expect(runner.logs(ns, 'flaky', 'main', { previous: true })).toBe('attempt 2\n');
  });

  test('a failing init container fails a restartPolicy Never pod; the containers never start', async () => {
    const { runner, core } = bed();
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'init-fails' },
        spec: {
          restartPolicy: 'Never',
          initContainers: [{ name: 'init', image: 'busybox', command: ['sh', '-c', 'echo failing; exit 3'] }],
          containers: [{ name: 'main', image: 'busybox', command: ['sh', '-c', 'echo should-not-run'] }],
        },
      },
    });
    const pod = await podInPhase(ns, 'init-fails', ['Failed', 'Succeeded']);
    expect(pod.status?.phase).toBe('Failed');
    expect(pod.status?.initContainerStatuses?.[0]?.state?.terminated).toMatchObject({ exitCode: 3, reason: 'Error' });
    expect(pod.status?.containerStatuses?.[0]?.state?.waiting?.reason).toBe('PodInitializing');
    expect(condition(pod, 'Initialized')).toBe('False');
    expect(runner.logs(ns, 'init-fails', 'init')).toBe('failing\n');
    expect(runner.logs(ns, 'init-fails', 'main')).toBe('');
  });

  test('a failing liveness probe restarts the container', async () => {
    const { core } = bed();
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'live' },
        spec: {
          terminationGracePeriodSeconds: 1,
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: ['sh', '-c', 'trap "exit 0" TERM; echo run >> /data/runs; while true; do sleep 0.2; done'],
              livenessProbe: {
                exec: { command: ['sh', '-c', 'test $(wc -l < /data/runs) -ge 2'] },
                periodSeconds: 1,
                failureThreshold: 2,
              },
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            },
          ],
          volumes: [{ name: 'data', emptyDir: {} }],
        },
      },
    });
    const pod = await eventually('restarted and running', async () => {
      const p = await readPod(ns, 'live');
      const cs = p.status?.containerStatuses?.[0];
      return (cs?.restartCount ?? 0) >= 1 && cs?.state?.running ? p : undefined;
    });
    expect(pod.status?.containerStatuses?.[0]?.restartCount).toBe(1);
    expect(pod.status?.containerStatuses?.[0]?.lastState?.terminated?.exitCode).toBe(0);
    // The second run passes the probe: no further restarts.
    await sleep(3500);
    expect((await readPod(ns, 'live')).status?.containerStatuses?.[0]?.restartCount).toBe(1);
    await core.deleteNamespacedPod({ name: 'live', namespace: ns });
    await eventually('pod gone', () => isGone(() => readPod(ns, 'live')));
  });

  test('a sidecar (restartable init container) runs beside the container and is stopped when it completes', async () => {
    const { runner, core } = bed();
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'side' },
        spec: {
          restartPolicy: 'Never',
          terminationGracePeriodSeconds: 5,
          initContainers: [
            {
              name: 'sidecar',
              image: 'busybox',
              restartPolicy: 'Always',
              command: [
                'sh',
                '-c',
                'trap "echo sidecar-stopped; exit 0" TERM; echo up > /data/sidecar; while true; do sleep 0.2; done',
              ],
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            },
          ],
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: ['sh', '-c', 'cat /data/sidecar'],
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            },
          ],
          volumes: [{ name: 'data', emptyDir: {} }],
        },
      },
    });
    const pod = await podInPhase(ns, 'side', ['Succeeded', 'Failed']);
    expect(pod.status?.phase).toBe('Succeeded');
    expect(runner.logs(ns, 'side', 'main')).toBe('up\n');
    await eventually('sidecar stopped', async () => {
      const p = await readPod(ns, 'side');
      return p.status?.initContainerStatuses?.[0]?.state?.terminated ? true : undefined;
    });
    expect(runner.logs(ns, 'side', 'sidecar')).toBe('sidecar-stopped\n');
  });

  test('activeDeadlineSeconds fails a running pod with DeadlineExceeded', async () => {
    const { core } = bed();
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'deadline' },
        spec: {
          restartPolicy: 'Always',
          activeDeadlineSeconds: 2,
          terminationGracePeriodSeconds: 1,
          containers: [{ name: 'main', image: 'busybox', command: ['sh', '-c', 'while true; do sleep 0.2; done'] }],
        },
      },
    });
    const pod = await podInPhase(ns, 'deadline', ['Failed', 'Succeeded']);
    expect(pod.status).toMatchObject({ phase: 'Failed', reason: 'DeadlineExceeded' });
    expect(pod.status?.containerStatuses?.[0]?.state?.terminated?.exitCode).toBe(137);
  });

  test('Service names resolve to loopback and the hostname is the pod name', async () => {
    const { runner, core } = bed();
    const ns = await namespace();
    await core.createNamespacedService({
      namespace: ns,
      body: { metadata: { name: 'ws' }, spec: { clusterIP: 'None', selector: { app: 'x' }, ports: [{ port: 80 }] } },
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'dns' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: [
                'sh',
                '-c',
                `getent hosts ws.${ns}.svc | cut -d' ' -f1; getent hosts ws | cut -d' ' -f1; hostname`,
              ],
            },
          ],
        },
      },
    });
    await podInPhase(ns, 'dns', ['Succeeded']);
    expect(runner.logs(ns, 'dns', 'main').split('\n')).toEqual(['127.0.0.1', '127.0.0.1', 'dns', '']);
  });
});
