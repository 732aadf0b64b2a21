import { syncStack } from './controllers';
import { stackWorkspacePod } from './controllers';
import {
  applyChildren,
  makeStack,
  syncRequest,
  testConfig,
  withStatus,
  workspaceBecomesReady,
  workspaceHashOf,
} from './builders';
import {
  asChild,
  at,
  childOf,
  containerOf,
  envList,
  envValue,
  envVar,
  fetchContainerOf,
  templateOf,
  type PodTemplate,
} from './children';
import { ctx } from './stories';

const programSource = {
  kind: 'program' as const,
  name: 'my-program',
  digest: 'sha256:' + 'a'.repeat(64),
};

function podOf(spec: Parameters<typeof makeStack>[0]): PodTemplate {
  return templateOf(asChild(stackWorkspacePod(makeStack(spec), programSource, testConfig).statefulSet, 'StatefulSet'));
}
const pulumiContainer = (pod: PodTemplate) => containerOf(pod.spec, 'pulumi');
/** The init container after bootstrap: the one that fetches the source. */
const fetchOf = (pod: PodTemplate) => at(pod.spec.initContainers, 1, 'init container');
/** PULUMI_WORKSPACE_STACK, the stack settings `pko-agent serve` reads, parsed. */
const workspaceStackOf = (pod: PodTemplate): unknown =>
  JSON.parse(envValue(pulumiContainer(pod), 'PULUMI_WORKSPACE_STACK'));

describe('the workspace StatefulSet and Service', () => {
  it('are named after the Stack, as upstream', () => {
    const res = syncStack(syncRequest(makeStack()), ctx());
    const sts = childOf(res, 'StatefulSet');
    expect(sts.metadata.name).toBe('my-stack-workspace');
    expect(sts.spec?.serviceName).toBe('my-stack-workspace');
    expect(sts.spec?.replicas).toBe(1);
    expect(sts.metadata.labels).toEqual({ 'pulumi.com/stack-name': 'my-stack', 'pulumi.com/component': 'stack' });
    const selector = sts.spec?.selector.matchLabels;
    expect(selector).toEqual({
      'auto.pulumi.com/component': 'workspace',
      'auto.pulumi.com/workspace-name': 'my-stack',
    });
    const svc = childOf(res, 'Service');
    expect(svc.spec).toEqual({
      clusterIP: 'None',
      selector,
      ports: [{ name: 'http', port: 50051, targetPort: 50051, protocol: 'TCP' }],
    });
  });

  it('run as the restricted Pod Security profile by default', () => {
    const pod = podOf({});
    expect(pod.spec.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    const all = [...(pod.spec.initContainers ?? []), ...pod.spec.containers];
    expect(all.map((c) => c.name)).toEqual(['bootstrap', 'fetch', 'pulumi']);
    for (const c of all) {
      expect(c.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] },
      });
    }
    expect(pod.spec.terminationGracePeriodSeconds).toBe(600);
  });

  it('set no security context with the baseline profile', () => {
    const pod = podOf({ workspaceTemplate: { spec: { securityProfile: 'baseline' } } });
    expect(pod.spec.securityContext).toBeUndefined();
    expect(pulumiContainer(pod).securityContext).toBeUndefined();
  });

  it("download the Program from the hook server with the pod's own token, checking the digest", () => {
    const pod = podOf({});
    const fetch = fetchOf(pod);
    expect(fetch.name).toBe('fetch');
    expect(fetch.image).toBe(testConfig.agentImage);
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'program']);
    expect(fetch.env).toEqual(
      expect.arrayContaining([
        { name: 'PROGRAM_URL', value: 'https://pulumi-mc-hooks.pulumi-system.svc/programs/team-a/my-program' },
        { name: 'PROGRAM_DIGEST', value: programSource.digest },
        { name: 'PROGRAM_CA', value: testConfig.programServer!.ca },
      ]),
    );
    // A token for the hooks' audience only, bound to the pod, short-lived; mounted in fetch alone.
    expect(pod.spec.volumes).toContainEqual({
      name: 'program-token',
      projected: {
        sources: [
          { serviceAccountToken: { audience: 'programs.pulumi-mc-hooks', expirationSeconds: 600, path: 'token' } },
        ],
      },
    });
    expect(fetch.volumeMounts).toContainEqual({
      name: 'program-token',
      mountPath: '/var/run/secrets/pulumi.com/program-token',
      readOnly: true,
    });
    const pulumi = pod.spec.containers.find((c) => c.name === 'pulumi');
    expect(pulumi?.volumeMounts?.map((m) => m.name)).not.toContain('program-token');
  });

  it('pass the backend, access token and envRefs in upstream order, Secret values only by reference', () => {
    const pod = podOf({
      backend: 'file:///state',
      accessTokenSecret: 'pulumi-token',
      envRefs: {
        ZED: { type: 'Secret', secret: { name: 'creds', key: 'zed' } },
        PULUMI_CONFIG_PASSPHRASE: { type: 'Literal', literal: { value: 'test' } },
        EMPTY: { type: 'Literal', literal: { value: '' } },
      },
    });
    const env = envList(pulumiContainer(pod)).slice(0, 6);
    expect(env).toEqual([
      { name: 'PULUMI_BACKEND_URL', value: 'file:///state' },
      { name: 'PULUMI_ACCESS_TOKEN', valueFrom: { secretKeyRef: { name: 'pulumi-token', key: 'accessToken' } } },
      // An empty value is left out: the API server drops it, and it would never compare equal.
      { name: 'EMPTY' },
      { name: 'PULUMI_CONFIG_PASSPHRASE', value: 'test' },
      { name: 'ZED', valueFrom: { secretKeyRef: { name: 'creds', key: 'zed' } } },
      // The names (never the values) of the variables from Secrets, for the agent's redactor: every
      // variable the Workspace sets from a Secret, the access token too.
      { name: 'PULUMI_SECRET_ENV_NAMES', value: 'PULUMI_ACCESS_TOKEN,ZED' },
    ]);
  });

  it('name no secret variables when envRefs has no Secret', () => {
    const pod = podOf({ envRefs: { A: { type: 'Literal', literal: { value: '1' } } } });
    expect(envList(pulumiContainer(pod)).map((e) => e.name)).not.toContain('PULUMI_SECRET_ENV_NAMES');
  });

  it('translate config, configRef, secrets and secretsRef as upstream, Secret values as mounted files', () => {
    const pod = podOf({
      config: { 'aws:region': 'us-west-2', nested: { a: [1, 2] } },
      configRef: { settings: { name: 'app-config', key: 'settings.json', json: true } },
      secrets: { legacy: 'inline-secret' },
      secretsRef: {
        password: { type: 'Secret', secret: { name: 'db', key: 'password' } },
        apiKey: { type: 'Literal', literal: { value: 'lit' } },
      },
    });
    const c = pulumiContainer(pod);
    expect(workspaceStackOf(pod)).toEqual({
      name: 'dev',
      create: true,
      config: [
        { key: 'aws:region', value: 'us-west-2', secret: false },
        { key: 'nested', value: { a: [1, 2] }, secret: false },
        {
          key: 'settings',
          valueFrom: { path: '/var/run/configmaps/stacks.pulumi.com/configmaps/app-config/settings.json', json: true },
          secret: false,
        },
        { key: 'legacy', value: 'inline-secret', secret: true },
        { key: 'apiKey', value: 'lit', secret: true },
        {
          key: 'password',
          valueFrom: { path: '/var/run/secrets/stacks.pulumi.com/secrets/db/password' },
          secret: true,
        },
      ],
    });
    expect(pod.spec.volumes).toEqual(
      expect.arrayContaining([
        { name: 'configmap-app-config', configMap: { name: 'app-config' } },
        { name: 'secret-db', secret: { secretName: 'db' } },
      ]),
    );
    expect(c.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: 'secret-db', mountPath: '/var/run/secrets/stacks.pulumi.com/secrets/db', readOnly: true },
        {
          name: 'configmap-app-config',
          mountPath: '/var/run/configmaps/stacks.pulumi.com/configmaps/app-config',
          readOnly: true,
        },
      ]),
    );
  });

  it('honour useLocalStackOnly, secretsProvider and environment', () => {
    const pod = podOf({ useLocalStackOnly: true, secretsProvider: 'passphrase', environment: ['org/env'] });
    expect(workspaceStackOf(pod)).toMatchObject({
      create: false,
      secretsProvider: 'passphrase',
      environment: ['org/env'],
    });
  });

  it('add envs and envSecrets as envFrom', () => {
    expect(pulumiContainer(podOf({ envs: ['cm1'], envSecrets: ['s1'] })).envFrom).toEqual([
      { configMapRef: { name: 'cm1' } },
      { secretRef: { name: 's1' } },
    ]);
  });

  it('merge workspaceTemplate like a strategic merge patch', () => {
    const pod = podOf({
      serviceAccountName: 'from-spec',
      workspaceTemplate: {
        metadata: { labels: { team: 'a' } },
        spec: {
          image: 'example.test/custom-agent:1',
          serviceAccountName: 'from-template',
          resources: { requests: { cpu: '1', memory: '1Gi' } },
          pulumiLogLevel: 3,
          env: [{ name: 'EXTRA', value: '1' }],
          podTemplate: {
            metadata: { annotations: { 'example.test/a': 'b' } },
            spec: {
              nodeSelector: { disk: 'ssd' },
              volumes: [{ name: 'cache', emptyDir: {} }],
              initContainers: [{ name: 'setup', image: 'busybox', command: ['sh', '-c', 'echo A=1 >> $PULUMI_ENV'] }],
              containers: [
                { name: 'pulumi', volumeMounts: [{ name: 'cache', mountPath: '/cache' }] },
                { name: 'sidecar', image: 'busybox' },
              ],
            },
          },
        },
      },
    });
    expect(pod.spec.serviceAccountName).toBe('from-template');
    expect(pod.spec.nodeSelector).toEqual({ disk: 'ssd' });
    expect(pod.metadata.annotations?.['example.test/a']).toBe('b');
    expect(pod.spec.initContainers?.map((c) => c.name)).toEqual(['bootstrap', 'fetch', 'setup']);
    expect(pod.spec.containers.map((c) => c.name)).toEqual(['pulumi', 'sidecar']);
    const c = pulumiContainer(pod);
    expect(c.image).toBe('example.test/custom-agent:1');
    expect(c.resources).toEqual({ requests: { cpu: '1', memory: '1Gi' } });
    expect(c.volumeMounts?.map((m) => m.name)).toEqual(['share', 'cache']);
    expect(envVar(c, 'EXTRA')).toEqual({ name: 'EXTRA', value: '1' });
    expect(envVar(c, 'PULUMI_LOG_LEVEL')).toEqual({ name: 'PULUMI_LOG_LEVEL', value: '3' });
    expect(pod.spec.volumes?.map((v) => v.name)).toContain('cache');
    // Every container, the user's too, gets upstream's dynamic env file.
    const all = [...(pod.spec.initContainers ?? []), ...pod.spec.containers];
    expect(all).toHaveLength(5);
    for (const x of all) expect(envVar(x, 'PULUMI_ENV')).toEqual({ name: 'PULUMI_ENV', value: '/share/.env' });
  });

  it('change the template hash whenever the pod would change', () => {
    const a = stackWorkspacePod(makeStack(), programSource, testConfig);
    const b = stackWorkspacePod(
      makeStack({ envRefs: { X: { type: 'Literal', literal: { value: '1' } } } }),
      programSource,
      testConfig,
    );
    const c = stackWorkspacePod(makeStack(), programSource, testConfig);
    expect(a.hash).toMatch(/^[0-9a-f]{16}$/);
    expect(a.hash).not.toBe(b.hash);
    expect(a.hash).toBe(c.hash);
    expect(workspaceHashOf(asChild(a.statefulSet, 'StatefulSet'))).toBe(a.hash);
  });

  it('fetch git sources with credentials only as secretKeyRefs', () => {
    const stack = makeStack({
      programRef: undefined,
      projectRepo: 'https://git.example.test/org/repo.git',
      commit: 'a'.repeat(40),
      repoDir: 'infra',
      shallow: true,
      gitAuth: { accessToken: { type: 'Secret', secret: { name: 'git', key: 'token' } } },
    });
    const res = syncStack(syncRequest(stack, [], []), ctx());
    const fetch = fetchContainerOf(childOf(res, 'StatefulSet'));
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'git']);
    expect(fetch.env).toEqual(
      expect.arrayContaining([
        { name: 'GIT_URL', value: 'https://git.example.test/org/repo.git' },
        { name: 'GIT_REVISION', value: 'a'.repeat(40) },
        { name: 'GIT_DIR', value: 'infra' },
        { name: 'GIT_SHALLOW', value: 'true' },
        { name: 'GIT_TOKEN', valueFrom: { secretKeyRef: { name: 'git', key: 'token' } } },
      ]),
    );
  });

  it('map the legacy gitAuthSecret to every key, optional', () => {
    const stack = makeStack({
      programRef: undefined,
      projectRepo: 'https://git.example.test/r.git',
      commit: 'b'.repeat(40),
      gitAuthSecret: 'legacy',
    });
    const fetch = fetchContainerOf(childOf(syncStack(syncRequest(stack, [], []), ctx()), 'StatefulSet'));
    const refs = envList(fetch).flatMap((e) => {
      const ref = e.valueFrom?.secretKeyRef;
      return ref ? [[e.name, ref.key, ref.optional]] : [];
    });
    expect(refs).toEqual([
      ['GIT_SSH_PRIVATE_KEY', 'sshPrivateKey', true],
      ['GIT_USERNAME', 'username', true],
      ['GIT_PASSWORD', 'password', true],
      ['GIT_TOKEN', 'accessToken', true],
    ]);
  });

  it('fetch Flux artifacts by URL and digest', () => {
    const stack = makeStack({
      programRef: undefined,
      fluxSource: {
        sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'repo' },
        dir: 'stacks/dev',
      },
    });
    const repo = {
      apiVersion: 'source.toolkit.fluxcd.io/v1',
      kind: 'GitRepository',
      metadata: { name: 'repo', namespace: 'team-a' },
      status: {
        artifact: {
          url: 'http://source-controller/repo.tar.gz',
          revision: 'main@sha1:' + 'c'.repeat(40),
          digest: 'sha256:' + 'd'.repeat(64),
          path: 'x',
          lastUpdateTime: '2026-11-22T09:00:00Z',
        },
      },
    };
    const fluxCtx = { ...ctx(), config: { ...testConfig, fluxMaxUntarSizeBytes: '1000' } };
    const r1 = syncStack(syncRequest(stack, [], [repo]), fluxCtx);
    const fetch = fetchContainerOf(childOf(r1, 'StatefulSet'));
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'flux']);
    expect(envList(fetch).filter((e) => e.name.startsWith('FLUX_') || e.name === 'PULUMI_ENV')).toEqual([
      { name: 'FLUX_URL', value: 'http://source-controller/repo.tar.gz' },
      { name: 'FLUX_DIGEST', value: 'sha256:' + 'd'.repeat(64) },
      { name: 'FLUX_DIR', value: 'stacks/dev' },
      { name: 'FLUX_MAX_UNTAR_SIZE_BYTES', value: '1000' },
      { name: 'PULUMI_ENV', value: '/share/.env' },
    ]);
    // The fetch container can report a failure in the workspace's status ConfigMap, for its template.
    expect(
      envList(fetch).filter((e) => ['POD_NAMESPACE', 'PULUMI_WORKSPACE_STATUS_CONFIGMAP'].includes(e.name)),
    ).toEqual([
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
      { name: 'PULUMI_WORKSPACE_STATUS_CONFIGMAP', value: 'my-stack-workspace-status' },
    ]);
    expect(envList(fetch).map((e) => e.name)).toContain('PULUMI_WORKSPACE_HASH');
    const ready = workspaceBecomesReady(applyChildren([], r1.children));
    const r2 = syncStack(syncRequest(withStatus(stack, r1), ready, [repo]), fluxCtx);
    expect(r2.status.currentUpdate?.commit).toBe('main@sha1:' + 'c'.repeat(40));
  });
});
