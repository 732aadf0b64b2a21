/**
 * Self-tests of the pod runner against the real control plane (etcd, kube-apiserver,
 * kube-controller-manager from e2e/toolchain/build.sh): the real Job and StatefulSet controllers
 * must see the runner's pods complete, fail and become ready.
 * Run: npm run test:e2e -- e2e/testbed/pod-runner.e2e.ts
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { type ControlPlane, freePort, startControlPlane } from './control-plane';
import { DEFAULT_NODE_NAME, type PodRunner, startPodRunner } from './pod-runner';
import { eventually, sleep } from './eventually';

jest.setTimeout(180_000);

let cp: ControlPlane;
let runner: PodRunner;
let core: k8s.CoreV1Api;
let batch: k8s.BatchV1Api;
let apps: k8s.AppsV1Api;
let authn: k8s.AuthenticationV1Api;
/** Host dir for hostPath volumes and image binds; its parent is mode 0700 (only root may walk it). */
let hostDir: string;
let privateToolsDir: string;
const marker = `pko${process.pid}x${Date.now() % 100000}`;

beforeAll(async () => {
  cp = await startControlPlane();
  core = cp.kubeConfig.makeApiClient(k8s.CoreV1Api);
  batch = cp.kubeConfig.makeApiClient(k8s.BatchV1Api);
  apps = cp.kubeConfig.makeApiClient(k8s.AppsV1Api);
  authn = cp.kubeConfig.makeApiClient(k8s.AuthenticationV1Api);
  hostDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-pod-runner-test-'));
  fs.chmodSync(hostDir, 0o755);
  const privateParent = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-pod-runner-private-'));
  fs.chmodSync(privateParent, 0o700);
  privateToolsDir = path.join(privateParent, 'bin');
  fs.mkdirSync(privateToolsDir, { mode: 0o755 });
  fs.writeFileSync(
    path.join(privateToolsDir, 'pko-hello'),
    '#!/bin/sh\necho "hello from the image, uid $(id -u), args: $*"\n',
    { mode: 0o755 },
  );
  runner = await startPodRunner({
    kubeConfig: cp.kubeConfig,
    backoffInitialMs: 1000,
    backoffMaxMs: 4000,
    images: {
      'example.test/tools:*': {
        path: ['/opt/pko-e2e-tools/bin'],
        binds: { '/opt/pko-e2e-tools/bin': privateToolsDir },
        writableDirs: { '/home/pko': {} },
        env: { HOME: '/home/pko', IMAGE_ENV: 'from-image' },
        user: 1000,
        group: 1000,
      },
    },
  });
}, 180_000);

afterAll(async () => {
  await runner?.stop();
  await cp?.stop();
  if (hostDir) fs.rmSync(hostDir, { recursive: true, force: true });
  if (privateToolsDir) fs.rmSync(path.dirname(privateToolsDir), { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------

let nsCounter = 0;
async function namespace(labels: Record<string, string> = {}): Promise<string> {
  const name = `pr${process.pid}-${++nsCounter}`;
  await core.createNamespace({ body: { metadata: { name, labels } } });
  await eventually(`default ServiceAccount in ${name}`, () =>
    core.readNamespacedServiceAccount({ name: 'default', namespace: name }),
  );
  return name;
}

const readPod = (namespace: string, name: string): Promise<k8s.V1Pod> => core.readNamespacedPod({ name, namespace });

async function podInPhase(namespace: string, name: string, phases: string[], timeoutMs = 60_000): Promise<k8s.V1Pod> {
  return eventually(
    `pod ${namespace}/${name} in phase ${phases.join('|')}`,
    async () => {
      const p = await readPod(namespace, name);
      return phases.includes(p.status?.phase ?? '') ? p : undefined;
    },
    timeoutMs,
  );
}

function condition(
  obj: { status?: { conditions?: { type: string; status: string }[] } },
  type: string,
): string | undefined {
  return obj.status?.conditions?.find((c) => c.type === type)?.status;
}

async function isGone(read: () => Promise<unknown>): Promise<true | undefined> {
  try {
    await read();
    return undefined;
  } catch (e) {
    if (e instanceof k8s.ApiException && e.code === 404) return true;
    throw e;
  }
}

/** Lines KEY=VALUE of a log as a map. */
function parseKV(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** Running (non-zombie) processes whose command line contains needle. */
function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (cmdline.includes(needle) && state !== 'Z' && state !== 'X') out.push(Number(entry));
    } catch {
      /* gone */
    }
  }
  return out;
}

function pidAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

const restrictedSecurity: k8s.V1SecurityContext = {
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
};
const restrictedPodSecurity: k8s.V1PodSecurityContext = {
  runAsNonRoot: true,
  runAsUser: 1000,
  runAsGroup: 1000,
  fsGroup: 2000,
  seccompProfile: { type: 'RuntimeDefault' },
};

// ---------------------------------------------------------------------------------------------

describe('node and scheduling', () => {
  test('registers a Ready node and binds pods to it', async () => {
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

describe('environment', () => {
  test('env from Secrets, ConfigMaps, the downward API, envFrom and $(VAR) expansion reach the process', async () => {
    const ns = await namespace();
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 's' }, stringData: { password: 's3cr3t', other: 'x' } },
    });
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'cm' }, data: { color: 'blue', SIZE: 'L' } },
    });
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'envy', labels: { tier: 'backend' }, annotations: { 'example.com/note': 'hello world' } },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: ['sh', '-c'],
              // `$(printenv $v)` names no variable, so the kubelet leaves it to the shell; the two
              // last args are expanded by the kubelet ($(ECHOED)) or unescaped ($$ → $).
              args: [
                'for v in PASSWORD COLOR MISSING_OPT POD_NAME POD_NAMESPACE POD_UID NODE_NAME POD_IP SA NOTE TIER CPU_LIMIT MEM_REQ_MI CM_SIZE SEC_password GREETING KUBERNETES_SERVICE_HOST KUBERNETES_SERVICE_PORT HOSTNAME; do echo "$v=$(printenv $v)"; done; echo "ARG=$1 $2"',
                'sh',
                '$(ECHOED)',
                '$$(NOT_EXPANDED)',
              ],
              env: [
                { name: 'PASSWORD', valueFrom: { secretKeyRef: { name: 's', key: 'password' } } },
                { name: 'COLOR', valueFrom: { configMapKeyRef: { name: 'cm', key: 'color' } } },
                { name: 'MISSING_OPT', valueFrom: { secretKeyRef: { name: 'nope', key: 'k', optional: true } } },
                { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
                { name: 'POD_UID', valueFrom: { fieldRef: { fieldPath: 'metadata.uid' } } },
                { name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
                { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
                { name: 'SA', valueFrom: { fieldRef: { fieldPath: 'spec.serviceAccountName' } } },
                { name: 'NOTE', valueFrom: { fieldRef: { fieldPath: "metadata.annotations['example.com/note']" } } },
                { name: 'TIER', valueFrom: { fieldRef: { fieldPath: "metadata.labels['tier']" } } },
                { name: 'CPU_LIMIT', valueFrom: { resourceFieldRef: { resource: 'limits.cpu', divisor: '1m' } } },
                {
                  name: 'MEM_REQ_MI',
                  valueFrom: { resourceFieldRef: { resource: 'requests.memory', divisor: '1Mi' } },
                },
                { name: 'GREETING', value: 'hi $(POD_NAME) in $(POD_NAMESPACE), $$(POD_NAME) $(UNDEFINED)' },
                { name: 'ECHOED', value: 'from-args' },
              ],
              envFrom: [
                { configMapRef: { name: 'cm' }, prefix: 'CM_' },
                { secretRef: { name: 's' }, prefix: 'SEC_' },
              ],
              resources: { limits: { cpu: '250m', memory: '128Mi' }, requests: { cpu: '100m', memory: '64Mi' } },
            },
          ],
        },
      },
    });
    const pod = await podInPhase(ns, 'envy', ['Succeeded', 'Failed']);
    const log = runner.logs(ns, 'envy', 'main');
    expect(pod.status?.phase).toBe('Succeeded');
    const env = parseKV(log);
    expect(env).toMatchObject({
      PASSWORD: 's3cr3t',
      COLOR: 'blue',
      MISSING_OPT: '',
      POD_NAME: 'envy',
      POD_NAMESPACE: ns,
      POD_UID: pod.metadata?.uid,
      NODE_NAME: DEFAULT_NODE_NAME,
      POD_IP: '127.0.0.1',
      SA: 'default',
      NOTE: 'hello world',
      TIER: 'backend',
      CPU_LIMIT: '250',
      MEM_REQ_MI: '64',
      CM_SIZE: 'L',
      SEC_password: 's3cr3t',
      GREETING: 'hi envy in ' + ns + ', $(POD_NAME) $(UNDEFINED)',
      KUBERNETES_SERVICE_HOST: '127.0.0.1',
      KUBERNETES_SERVICE_PORT: new URL(cp.server).port,
      HOSTNAME: 'envy',
      ARG: 'from-args $(NOT_EXPANDED)',
    });
  });

  test('a missing Secret keeps the container waiting with CreateContainerConfigError until it exists', async () => {
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'w' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: ['sh', '-c', 'echo "V=$V"'],
              env: [{ name: 'V', valueFrom: { secretKeyRef: { name: 'later', key: 'k' } } }],
            },
          ],
        },
      },
    });
    const waiting = await eventually('CreateContainerConfigError', async () => {
      const p = await readPod(ns, 'w');
      const w = p.status?.containerStatuses?.[0]?.state?.waiting;
      return w?.reason === 'CreateContainerConfigError' ? w : undefined;
    });
    expect(waiting.message).toBe('secret "later" not found');
    expect((await readPod(ns, 'w')).status?.phase).toBe('Pending');
    expect(runner.logs(ns, 'w', 'main')).toBe('');
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'later' }, stringData: { k: 'now' } },
    });
    await podInPhase(ns, 'w', ['Succeeded']);
    expect(runner.logs(ns, 'w', 'main')).toBe('V=now\n');
  });
});

describe('volumes', () => {
  test('init containers run in order and share an emptyDir with the containers; Secret and ConfigMap files; read-only mounts; subPath', async () => {
    const ns = await namespace();
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'creds' }, stringData: { password: 'hunter2', user: 'admin' } },
    });
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: 'conf' }, data: { 'app.yaml': 'a: 1\n', other: 'o' } },
    });
    const share = '/var/run/pko-e2e-share';
    const secretDir = '/var/run/secrets/pko-e2e/creds';
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'vol' },
        spec: {
          restartPolicy: 'Never',
          initContainers: [
            {
              name: 'one',
              image: 'busybox',
              command: ['sh', '-c', `echo one >> ${share}/order`],
              volumeMounts: [{ name: 'share', mountPath: share }],
            },
            {
              name: 'two',
              image: 'busybox',
              command: ['sh', '-c', `echo two >> ${share}/order`],
              volumeMounts: [{ name: 'share', mountPath: share }],
            },
          ],
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: [
                'sh',
                '-c',
                [
                  `echo "ORDER=$(cat ${share}/order | tr '\\n' ,)"`,
                  `echo "PASSWORD=$(cat ${secretDir}/password)"`,
                  `echo "USER_FILE=$(test -e ${secretDir}/user && echo present || echo absent)"`,
                  `echo "MODE=$(stat -L -c %a ${secretDir}/password)"`,
                  `echo "CONF=$(cat /var/run/pko-e2e-app.yaml)"`,
                  `echo "WRITE_SECRET=$(touch ${secretDir}/x 2>/dev/null && echo ok || echo denied)"`,
                  `echo "WRITE_SHARE=$(touch ${share}/x 2>/dev/null && echo ok || echo denied)"`,
                  `echo "HOST_VIEW=$(test -e /proc/1/root && echo ok)"`,
                ].join('; '),
              ],
              volumeMounts: [
                { name: 'share', mountPath: share },
                { name: 'creds', mountPath: secretDir },
                { name: 'conf', mountPath: '/var/run/pko-e2e-app.yaml', subPath: 'app.yaml' },
              ],
            },
          ],
          volumes: [
            { name: 'share', emptyDir: {} },
            {
              name: 'creds',
              secret: { secretName: 'creds', items: [{ key: 'password', path: 'password', mode: 0o400 }] },
            },
            { name: 'conf', configMap: { name: 'conf' } },
          ],
        },
      },
    });
    const pod = await podInPhase(ns, 'vol', ['Succeeded', 'Failed']);
    const out = parseKV(runner.logs(ns, 'vol', 'main'));
    expect(pod.status?.phase).toBe('Succeeded');
    expect(out).toMatchObject({
      ORDER: 'one,two,',
      PASSWORD: 'hunter2',
      USER_FILE: 'absent',
      MODE: '400',
      CONF: 'a: 1',
      WRITE_SECRET: 'denied',
      WRITE_SHARE: 'ok',
    });
    expect(pod.status?.initContainerStatuses?.map((c) => [c.name, c.state?.terminated?.exitCode])).toEqual([
      ['one', 0],
      ['two', 0],
    ]);
    // Nothing was written to the host's paths: the mounts lived in the container's namespace.
    expect(fs.existsSync(`${share}/order`)).toBe(false);
    expect(fs.existsSync(`${secretDir}/password`)).toBe(false);
  });

  test('a Secret volume and a projected service account token appear at their mount paths; the token passes TokenReview; the default token works in-cluster', async () => {
    const ns = await namespace();
    await core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'files' }, stringData: { 'token.txt': 'file-secret' } },
    });
    const audience = `pko-e2e.${ns}`;
    const clientNode = path.resolve(
      __dirname,
      '..',
      '..',
      'node_modules',
      '@kubernetes',
      'client-node',
      'dist',
      'index.js',
    );
    const inCluster = [
      `import * as k8s from ${JSON.stringify(clientNode)};`,
      'const kc = new k8s.KubeConfig(); kc.loadFromCluster();',
      'const r = await kc.makeApiClient(k8s.AuthenticationV1Api).createSelfSubjectReview({ body: {} });',
      'console.log("WHOAMI=" + r.status.userInfo.username);',
    ].join('\n');
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'tok' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'main',
              image: 'node',
              command: ['sh', '-c'],
              args: [
                [
                  'echo "SECRET=$(cat /var/run/secrets/pko-e2e/files/token.txt)"',
                  'echo "TOKEN=$(cat /var/run/secrets/pulumi.com/workspace-token/token)"',
                  'echo "SA_NS=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace)"',
                  'echo "SA_CA=$(grep -c BEGIN /var/run/secrets/kubernetes.io/serviceaccount/ca.crt)"',
                  'node --input-type=module -e "$IN_CLUSTER"',
                ].join('; '),
              ],
              env: [{ name: 'IN_CLUSTER', value: inCluster }],
              volumeMounts: [
                { name: 'files', mountPath: '/var/run/secrets/pko-e2e/files', readOnly: true },
                { name: 'workspace-token', mountPath: '/var/run/secrets/pulumi.com/workspace-token', readOnly: true },
              ],
            },
          ],
          volumes: [
            { name: 'files', secret: { secretName: 'files' } },
            {
              name: 'workspace-token',
              projected: { sources: [{ serviceAccountToken: { audience, expirationSeconds: 3600, path: 'token' } }] },
            },
          ],
        },
      },
    });
    const pod = await podInPhase(ns, 'tok', ['Succeeded', 'Failed']);
    const log = runner.logs(ns, 'tok', 'main');
    const out = parseKV(log);
    expect({ phase: pod.status?.phase, log }).toMatchObject({ phase: 'Succeeded' });
    expect(out.SECRET).toBe('file-secret');
    expect(out.SA_NS).toBe(ns);
    expect(Number(out.SA_CA)).toBeGreaterThan(0);
    expect(out.WHOAMI).toBe(`system:serviceaccount:${ns}:default`);
    const review = await authn.createTokenReview({ body: { spec: { token: out.TOKEN!, audiences: [audience] } } });
    expect(review.status?.authenticated).toBe(true);
    expect(review.status?.audiences).toEqual([audience]);
    expect(review.status?.user?.username).toBe(`system:serviceaccount:${ns}:default`);
    // Bound to the pod.
    expect(review.status?.user?.extra?.['authentication.kubernetes.io/pod-name']).toEqual(['tok']);
    const wrongAudience = await authn.createTokenReview({
      body: { spec: { token: out.TOKEN!, audiences: ['someone-else'] } },
    });
    expect(wrongAudience.status?.authenticated).toBeFalsy();
  });

  test('ConfigMap volume updates reach a running container', async () => {
    const ns = await namespace();
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'live' }, data: { v: 'one' } } });
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'watcher' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: [
                'sh',
                '-c',
                'until [ "$(cat /var/run/pko-e2e-live/v)" = two ]; do sleep 0.2; done; echo "SAW=$(cat /var/run/pko-e2e-live/v)"',
              ],
              volumeMounts: [{ name: 'live', mountPath: '/var/run/pko-e2e-live' }],
            },
          ],
          volumes: [{ name: 'live', configMap: { name: 'live' } }],
        },
      },
    });
    await podInPhase(ns, 'watcher', ['Running']);
    await core.replaceNamespacedConfigMap({
      name: 'live',
      namespace: ns,
      body: { metadata: { name: 'live' }, data: { v: 'two' } },
    });
    await podInPhase(ns, 'watcher', ['Succeeded']);
    expect(runner.logs(ns, 'watcher', 'main')).toBe('SAW=two\n');
  });

  test('a mount path over a system directory is refused with a pod failure and an event', async () => {
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'bad' },
        spec: {
          restartPolicy: 'Never',
          containers: [
            { name: 'main', image: 'busybox', command: ['true'], volumeMounts: [{ name: 'e', mountPath: '/usr' }] },
          ],
          volumes: [{ name: 'e', emptyDir: {} }],
        },
      },
    });
    const pod = await podInPhase(ns, 'bad', ['Failed']);
    expect(pod.status?.reason).toBe('UnsafeMountPath');
    expect(pod.status?.message).toContain('/usr');
    const events = await core.listNamespacedEvent({
      namespace: ns,
      fieldSelector: 'involvedObject.name=bad,reason=UnsafeMountPath',
    });
    expect(events.items).toHaveLength(1);
  });
});

describe('security context and images', () => {
  test('a pod in a restricted namespace with runAsUser 1000 runs as uid 1000 with its groups', async () => {
    const ns = await namespace({ 'pod-security.kubernetes.io/enforce': 'restricted' });
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'r' },
        spec: {
          restartPolicy: 'Never',
          securityContext: restrictedPodSecurity,
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: [
                'sh',
                '-c',
                'echo "UID=$(id -u)"; echo "GID=$(id -g)"; echo "GROUPS=$(id -G)"; touch /var/run/pko-e2e-data/f && echo "DATA_GROUP=$(stat -c %g /var/run/pko-e2e-data/f)"; echo "ROOT_WRITE=$(touch /root/x 2>/dev/null && echo ok || echo denied)"; echo "SA_TOKEN=$(test -s /var/run/secrets/kubernetes.io/serviceaccount/token && cat /var/run/secrets/kubernetes.io/serviceaccount/token >/dev/null && echo readable)"; grep CapBnd /proc/self/status',
              ],
              securityContext: restrictedSecurity,
              volumeMounts: [{ name: 'data', mountPath: '/var/run/pko-e2e-data' }],
            },
          ],
          volumes: [{ name: 'data', emptyDir: {} }],
        },
      },
    });
    const pod = await podInPhase(ns, 'r', ['Succeeded', 'Failed']);
    const log = runner.logs(ns, 'r', 'main');
    expect({ phase: pod.status?.phase, log }).toMatchObject({ phase: 'Succeeded' });
    const out = parseKV(log);
    expect(out.UID).toBe('1000');
    expect(out.GID).toBe('1000');
    expect(out.GROUPS?.split(' ')).toEqual(expect.arrayContaining(['1000', '2000']));
    expect(out.DATA_GROUP).toBe('2000');
    expect(out.ROOT_WRITE).toBe('denied');
    expect(out.SA_TOKEN).toBe('readable');
    expect(log).toMatch(/CapBnd:\s+0000000000000000/);
  });

  test('runAsNonRoot without runAsUser on a root image is refused (CreateContainerConfigError)', async () => {
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'nr' },
        spec: {
          restartPolicy: 'Never',
          securityContext: { runAsNonRoot: true },
          containers: [{ name: 'main', image: 'busybox', command: ['true'] }],
        },
      },
    });
    const waiting = await eventually('CreateContainerConfigError', async () => {
      const w = (await readPod(ns, 'nr')).status?.containerStatuses?.[0]?.state?.waiting;
      return w?.reason === 'CreateContainerConfigError' ? w : undefined;
    });
    expect(waiting.message).toContain('runAsNonRoot and image will run as root');
  });

  test('an image from the registry: commands found on its PATH through a bind mount, its ENV, USER and writable home', async () => {
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'img' },
        spec: {
          restartPolicy: 'Never',
          securityContext: { runAsNonRoot: true },
          containers: [
            {
              name: 'main',
              image: 'example.test/tools:v1',
              command: [
                'sh',
                '-c',
                'pko-hello a b; echo "IMAGE_ENV=$IMAGE_ENV"; echo "HOME=$HOME"; touch "$HOME/f" && echo "HOME_WRITE=ok"; echo "BIN_WRITE=$(touch /opt/pko-e2e-tools/bin/x 2>/dev/null && echo ok || echo denied)"',
              ],
            },
            { name: 'missing', image: 'example.test/tools:v1', command: ['pko-no-such-command'] },
          ],
        },
      },
    });
    const pod = await podInPhase(ns, 'img', ['Failed', 'Succeeded']);
    const log = runner.logs(ns, 'img', 'main');
    expect(log).toContain('hello from the image, uid 1000, args: a b');
    expect(parseKV(log)).toMatchObject({
      IMAGE_ENV: 'from-image',
      HOME: '/home/pko',
      HOME_WRITE: 'ok',
      BIN_WRITE: 'denied',
    });
    expect(pod.status?.containerStatuses?.find((c) => c.name === 'main')?.state?.terminated?.exitCode).toBe(0);
    const missing = pod.status?.containerStatuses?.find((c) => c.name === 'missing')?.state?.terminated;
    expect(missing).toMatchObject({ exitCode: 128, reason: 'StartError' });
    expect(missing?.message).toContain('executable file not found in $PATH');
    expect(pod.status?.phase).toBe('Failed');
  });
});

describe('restarts and service names', () => {
  test('restartPolicy OnFailure restarts a failing container with back-off and counts restarts', async () => {
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

describe('deletion', () => {
  test('deleting a running pod delivers SIGTERM to the process, then the pod disappears', async () => {
    const ns = await namespace();
    const markers = path.join(hostDir, 'sigterm');
    fs.mkdirSync(markers);
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'term' },
        spec: {
          terminationGracePeriodSeconds: 60,
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: [
                'sh',
                '-c',
                'trap "echo got-sigterm > /markers/term; exit 0" TERM; echo started; while true; do sleep 0.2; done',
              ],
              lifecycle: {
                preStop: {
                  exec: { command: ['sh', '-c', 'test ! -e /markers/term && echo before-sigterm > /markers/prestop'] },
                },
              },
              volumeMounts: [{ name: 'markers', mountPath: '/markers' }],
            },
          ],
          volumes: [{ name: 'markers', hostPath: { path: markers, type: 'Directory' } }],
        },
      },
    });
    await eventually('running', async () =>
      (await readPod(ns, 'term')).status?.containerStatuses?.[0]?.state?.running ? true : undefined,
    );
    await eventually('started', () => (runner.logs(ns, 'term', 'main').includes('started') ? true : undefined));
    expect(fs.existsSync(path.join(markers, 'term'))).toBe(false);
    await core.deleteNamespacedPod({ name: 'term', namespace: ns });
    await eventually('pod gone', () => isGone(() => readPod(ns, 'term')));
    expect(fs.readFileSync(path.join(markers, 'prestop'), 'utf8')).toBe('before-sigterm\n');
    expect(fs.readFileSync(path.join(markers, 'term'), 'utf8')).toBe('got-sigterm\n');
  });

  test('a process that ignores SIGTERM is killed when the grace period ends', async () => {
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'stubborn' },
        spec: {
          terminationGracePeriodSeconds: 2,
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: ['sh', '-c', `trap "echo ignoring" TERM; while true; do sleep 0.2; done # ${marker}-stubborn`],
            },
          ],
        },
      },
    });
    await eventually('running', async () =>
      (await readPod(ns, 'stubborn')).status?.containerStatuses?.[0]?.state?.running ? true : undefined,
    );
    expect(processesMentioning(`${marker}-stubborn`).length).toBeGreaterThan(0);
    await core.deleteNamespacedPod({ name: 'stubborn', namespace: ns });
    await eventually('pod gone', () => isGone(() => readPod(ns, 'stubborn')));
    expect(runner.logs(ns, 'stubborn', 'main')).toContain('ignoring');
    expect(processesMentioning(`${marker}-stubborn`)).toEqual([]);
  });
});

describe('more runners', () => {
  test('a second runner on its own node, watching one namespace, streams container output', async () => {
    const ns = await namespace();
    const lines: string[] = [];
    const second = await startPodRunner({
      kubeConfig: cp.kubeConfig,
      nodeName: 'pko-e2e-node-2',
      namespaces: [ns],
      schedule: false,
      streamLogs: (l) => lines.push(l),
    });
    try {
      await core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: { name: 's' },
          spec: {
            nodeName: 'pko-e2e-node-2',
            restartPolicy: 'Never',
            containers: [
              { name: 'main', image: 'busybox', command: ['sh', '-c', 'echo one; echo two >&2; printf three'] },
            ],
          },
        },
      });
      const pod = await podInPhase(ns, 's', ['Succeeded']);
      expect(condition(pod, 'PodScheduled')).toBe('True');
      expect(second.logs(ns, 's', 'main')).toBe('one\ntwo\nthree');
      expect(runner.logs(ns, 's', 'main')).toBe('');
      expect(lines).toEqual(expect.arrayContaining([`[${ns}/s/main] one`, `[${ns}/s/main] two`]));
      const node = await core.readNode({ name: 'pko-e2e-node-2' });
      expect(condition(node, 'Ready')).toBe('True');
    } finally {
      await second.stop();
    }
  });
});

// Last: stops the runner.
describe('stop', () => {
  test('runner.stop() kills every process it started, removes the mount points it created and its temp dir', async () => {
    const ns = await namespace();
    const mountPath = `/var/run/pko-e2e-stop-${process.pid}`;
    const sleepA = 300000 + (process.pid % 10000) * 2;
    const sleepB = sleepA + 1;
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'forever' },
        spec: {
          terminationGracePeriodSeconds: 600,
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: [
                'sh',
                '-c',
                `trap "" TERM; sleep ${sleepA} & setsid sleep ${sleepB} & echo ready; wait # ${marker}-stop`,
              ],
              volumeMounts: [{ name: 'e', mountPath }],
            },
          ],
          volumes: [{ name: 'e', emptyDir: {} }],
        },
      },
    });
    await eventually('running', () => (runner.logs(ns, 'forever', 'main').includes('ready') ? true : undefined));
    const procs = runner.processes().filter((p) => p.namespace === ns);
    expect(procs).toHaveLength(1);
    const pids = [procs[0]!.reaperPid!, procs[0]!.initPid!];
    expect(pids.every(pidAlive)).toBe(true);
    expect(processesMentioning(`${marker}-stop`).length).toBeGreaterThan(0);
    const sleepers = (): number[] =>
      [...processesMentioning(String(sleepA)), ...processesMentioning(String(sleepB))].filter((pid) => {
        try {
          return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep\u0000');
        } catch {
          return false;
        }
      });
    expect(sleepers().length).toBeGreaterThanOrEqual(2);
    expect(fs.existsSync(mountPath)).toBe(true);
    const workDir = runner.workDir;

    await runner.stop();

    expect(pids.filter(pidAlive)).toEqual([]);
    expect(processesMentioning(`${marker}-stop`)).toEqual([]);
    expect(sleepers()).toEqual([]);
    expect(processesMentioning(workDir)).toEqual([]);
    expect(fs.existsSync(mountPath)).toBe(false);
    expect(fs.existsSync(workDir)).toBe(false);
    expect(runner.processes()).toEqual([]);
  });
});
