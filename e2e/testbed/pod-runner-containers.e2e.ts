/**
 * Self-tests of the pod runner, part 2 of 3: what a container is given: its environment (Secrets,
 * ConfigMaps, the downward API), its volumes (emptyDir, Secret, ConfigMap, projected tokens,
 * subPath, refused mount paths), its security context and its image. Set-up: pod-runner-fixture.ts.
 * Run: npm run test:e2e -- e2e/testbed/pod-runner-containers.e2e.ts
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_NODE_NAME } from './pod-runner';
import { eventually } from './eventually';
import {
  bed,
  usePodRunnerBed,
  namespace,
  readPod,
  podInPhase,
  parseKV,
  restrictedSecurity,
  restrictedPodSecurity,
} from './pod-runner-fixture';

usePodRunnerBed();

describe('environment', () => {
  test('env from Secrets, ConfigMaps, the downward API, envFrom and $(VAR) expansion reach the process', async () => {
    const { cp, runner, core } = bed();
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
    const { runner, core } = bed();
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
    const { runner, core } = bed();
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
    const { runner, core, authn } = bed();
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
    const { runner, core } = bed();
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
    const { core } = bed();
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
    const { runner, core } = bed();
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
    const { core } = bed();
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
    const { runner, core } = bed();
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
