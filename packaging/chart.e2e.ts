/**
 * charts/pulumi-operator with the real helm (e2e/toolchain/build.sh helm): lint, the default
 * rendering against manifests/install.yaml and stack-rbac.yaml, a rendering with every value
 * changed (packaging/testdata/chart-values.yaml), and values the schema must reject.
 */
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { V1PodSpec } from '@kubernetes/client-node';
import * as yaml from 'js-yaml';
import { Agent, request } from 'undici';
import { configFromEnv, DEFAULT_AGENT_IMAGE, DEFAULT_WORKSPACE_IMAGE } from '../hooks/src/config';
import { describeEgress } from '../hooks/src/git/egress';
import { buildServer } from '../hooks/src/server';
import { CHART_DIR, helm, helmTemplate, removeHelmHome } from './lib/helm';
import {
  findObject,
  isKind,
  type K8sObject,
  type KindOf,
  type KnownKinds,
  loadObjects,
  objectKey,
  readRepoFile,
  repoPath,
  required,
} from './lib/repo';

const VALUES = repoPath('packaging', 'testdata', 'chart-values.yaml');
const install = loadObjects(readRepoFile('manifests/install.yaml'));
const pkg = JSON.parse(readRepoFile('package.json')) as { version: string };

afterAll(() => removeHelmHome());

const envOf = (d: KindOf<'Deployment'>) =>
  Object.fromEntries(
    required(d.spec?.template.spec?.containers[0]?.env, `${d.metadata.name} has env`).map((e) => [e.name, e.value]),
  );

describe('chart metadata', () => {
  test('helm lint --strict passes with the default values and with every value changed', async () => {
    for (const args of [[], ['-f', VALUES]]) {
      const r = await helm(['lint', '--strict', CHART_DIR, ...args]);
      expect({ args, code: r.code, out: r.code === 0 ? '' : r.stdout + r.stderr }).toEqual({ args, code: 0, out: '' });
    }
  }, 60_000);

  test('appVersion is the package version; the CRDs are the generated ones', () => {
    const chart = yaml.load(readRepoFile('charts/pulumi-operator/Chart.yaml')) as {
      appVersion: string;
      apiVersion: string;
    };
    expect(chart.apiVersion).toBe('v2');
    expect(chart.appVersion).toBe(pkg.version);
    const crds = fs.readdirSync(path.join(CHART_DIR, 'crds')).sort();
    expect(crds).toEqual(fs.readdirSync(repoPath('manifests', 'crds')).sort());
    for (const f of crds)
      expect(readRepoFile(`charts/pulumi-operator/crds/${f}`)).toBe(readRepoFile(`manifests/crds/${f}`));
  });
});

describe('helm template with the default values', () => {
  let objects: K8sObject[];
  beforeAll(async () => {
    ({ objects } = await helmTemplate('pulumi-operator', 'pulumi-system'));
  }, 60_000);

  test('renders the hook server, its Secrets, PodDisruptionBudget, NetworkPolicy, RBAC and the controllers, no ServiceMonitor, no CRDs', () => {
    expect(objects.map(objectKey).sort()).toEqual(
      [
        'NetworkPolicy/pulumi-system/pulumi-operator',
        'Secret/pulumi-system/pulumi-operator-auth',
        'Secret/pulumi-system/pulumi-operator-tls',
        'ClusterRole/pulumi-operator:hooks',
        'ClusterRole/pulumi-operator:stacks-editor',
        'ClusterRole/pulumi-operator:stacks-viewer',
        'ClusterRoleBinding/pulumi-operator:hooks',
        'CompositeController/pulumi-stacks',
        'CompositeController/pulumi-updates',
        'CompositeController/pulumi-workspaces',
        'DecoratorController/pulumi-programs',
        'Deployment/pulumi-system/pulumi-operator',
        'PodDisruptionBudget/pulumi-system/pulumi-operator',
        'Service/pulumi-system/pulumi-operator',
        'ServiceAccount/pulumi-system/pulumi-operator',
      ].sort(),
    );
  });

  test("uses the default images: hooks v<appVersion>, and the hooks' own default agent image", () => {
    const d = findObject(objects, 'Deployment', 'pulumi-operator');
    expect(d.spec?.template.spec?.containers[0]?.image).toBe(`ghcr.io/pulumi-mc-operator/hooks:v${pkg.version}`);
    expect(envOf(d).AGENT_IMAGE).toBe(DEFAULT_AGENT_IMAGE);
    // No workspace image settings: the hooks default to pulumi/pulumi:<supported version>-nonroot.
    expect(envOf(d).WORKSPACE_IMAGE).toBeUndefined();
    expect(configFromEnv(envOf(d)).workspaceImage).toEqual(DEFAULT_WORKSPACE_IMAGE);
    // No bounded-operation settings: no deadline, no ephemeral storage, the images' own registries.
    for (const name of [
      'IMAGE_REGISTRY',
      'OPERATION_DEADLINE_SECONDS',
      'WORKSPACE_EPHEMERAL_STORAGE_REQUEST',
      'WORKSPACE_EPHEMERAL_STORAGE_LIMIT',
      'JOB_EPHEMERAL_STORAGE_REQUEST',
      'JOB_EPHEMERAL_STORAGE_LIMIT',
    ])
      expect(envOf(d)[name]).toBeUndefined();
    // No egress lists: only the addresses always denied.
    expect(envOf(d).EGRESS_ALLOW).toBeUndefined();
    expect(envOf(d).EGRESS_DENY).toBeUndefined();
  });

  test('the controllers call the Service the chart names after the release, over HTTPS with its Secrets', () => {
    for (const kind of ['CompositeController', 'DecoratorController'] as const) {
      for (const c of objects.filter((o): o is KindOf<typeof kind> => isKind(o, kind))) {
        for (const h of Object.values(required(c.spec?.hooks, `${kind} has hooks`))) {
          expect(h.webhook?.service).toEqual({
            name: 'pulumi-operator',
            namespace: 'pulumi-system',
            port: 443,
            protocol: 'https',
          });
          expect(h.webhook?.caBundle).toEqual({
            secretRef: { name: 'pulumi-operator-tls', namespace: 'pulumi-system', key: 'ca.crt' },
          });
          expect(h.webhook?.authorization).toEqual({
            type: 'Bearer',
            secretRef: { name: 'pulumi-operator-auth', namespace: 'pulumi-system', key: 'token' },
          });
        }
      }
    }
  });

  test('makes a certificate for the Service, signed by the CA in the same Secret, and a token the hook server takes', async () => {
    const tls = findObject(objects, 'Secret', 'pulumi-operator-tls');
    expect(tls.type).toBe('kubernetes.io/tls');
    const data = (key: string) =>
      Buffer.from(required(tls.data?.[key], `the TLS Secret has ${key}`), 'base64').toString('utf8');
    const ca = new X509Certificate(data('ca.crt'));
    const cert = new X509Certificate(data('tls.crt'));
    expect(ca.ca).toBe(true);
    expect(cert.verify(ca.publicKey)).toBe(true);
    for (const host of ['pulumi-operator.pulumi-system', 'pulumi-operator.pulumi-system.svc'])
      expect(cert.checkHost(host)).toBe(host);
    const token = Buffer.from(
      required(findObject(objects, 'Secret', 'pulumi-operator-auth').data?.token, 'the auth Secret has a token'),
      'base64',
    ).toString('utf8');
    expect(token).toMatch(/^[A-Za-z0-9]{64}$/);
    // The hook server serves them, as the Deployment mounts them, and checks out against ca.crt.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-chart-tls-'));
    const files = { cert: path.join(dir, 'tls.crt'), key: path.join(dir, 'tls.key'), token: path.join(dir, 'token') };
    fs.writeFileSync(files.cert, data('tls.crt'));
    fs.writeFileSync(files.key, data('tls.key'));
    fs.writeFileSync(files.token, token);
    const d = findObject(objects, 'Deployment', 'pulumi-operator');
    expect(envOf(d)).toMatchObject({
      TLS_CERT_FILE: '/etc/pulumi-operator/tls/tls.crt',
      TLS_KEY_FILE: '/etc/pulumi-operator/tls/tls.key',
      AUTH_TOKEN_FILES: '/etc/pulumi-operator/auth/token:/etc/pulumi-operator/auth/previous-token',
    });
    const { app } = buildServer(
      {
        ...configFromEnv({ TLS_CERT_FILE: files.cert, TLS_KEY_FILE: files.key, AUTH_TOKEN_FILES: files.token }),
        logLevel: 'silent',
      },
      { logger: false },
    );
    await app.listen({ port: 0, host: '127.0.0.1' });
    const agent = new Agent({ connect: { ca: data('ca.crt'), servername: 'pulumi-operator.pulumi-system' } });
    try {
      const res = await request(`https://127.0.0.1:${(app.server.address() as AddressInfo).port}/stack/customize`, {
        dispatcher: agent,
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: '{}',
      });
      await res.body.dump();
      expect(res.statusCode).toBe(400); // past TLS and the token: the empty body is refused
    } finally {
      await agent.close();
      await app.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('the NetworkPolicy admits Metacontroller and the monitoring namespace to the hook port only', () => {
    const policy = findObject(objects, 'NetworkPolicy', 'pulumi-operator');
    expect(policy.spec?.podSelector?.matchLabels).toEqual(
      findObject(objects, 'Deployment', 'pulumi-operator').spec?.selector.matchLabels,
    );
    expect(policy.spec?.ingress).toEqual([
      {
        from: ['metacontroller', 'monitoring'].map((ns) => ({
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
        })),
        ports: [{ port: 'https', protocol: 'TCP' }],
      },
    ]);
  });

  test('matches manifests/install.yaml object for object (named pulumi-mc-hooks, labels aside)', async () => {
    const { objects: same } = await helmTemplate('pulumi-operator', 'pulumi-system', [
      '--set',
      'fullnameOverride=pulumi-mc-hooks',
    ]);
    const pairs: [keyof KnownKinds, string, string][] = [
      ['Deployment', 'pulumi-mc-hooks', 'pulumi-mc-hooks'],
      ['Service', 'pulumi-mc-hooks', 'pulumi-mc-hooks'],
      ['PodDisruptionBudget', 'pulumi-mc-hooks', 'pulumi-mc-hooks'],
      ['CompositeController', 'pulumi-stacks', 'pulumi-stacks'],
      ['DecoratorController', 'pulumi-programs', 'pulumi-programs'],
      ['CompositeController', 'pulumi-workspaces', 'pulumi-workspaces'],
      ['CompositeController', 'pulumi-updates', 'pulumi-updates'],
      ['NetworkPolicy', 'pulumi-mc-hooks', 'pulumi-mc-hooks'],
      ['ServiceAccount', 'pulumi-mc-hooks', 'pulumi-mc-hooks'],
      ['ClusterRole', 'pulumi-mc-hooks:stacks-editor', 'pulumi-operator:stacks-editor'],
      ['ClusterRole', 'pulumi-mc-hooks:stacks-viewer', 'pulumi-operator:stacks-viewer'],
      ['ClusterRole', 'pulumi-mc-hooks:hooks', 'pulumi-operator:hooks'],
    ];
    const strip = (o: K8sObject) => {
      const { metadata, ...rest } = o;
      return {
        ...rest,
        namespace: metadata.namespace,
        aggregation: Object.keys(metadata.labels ?? {}).filter((l) => l.startsWith('rbac.')),
      };
    };
    for (const [kind, chartName, installName] of pairs) {
      expect({ kind, object: strip(findObject(same, kind, chartName)) }).toEqual({
        kind,
        object: strip(findObject(install, kind, installName)),
      });
    }
    // The binding names its role after the release: the same subject, the role paired above.
    const chartBinding = findObject(same, 'ClusterRoleBinding', 'pulumi-mc-hooks:hooks');
    const installBinding = findObject(install, 'ClusterRoleBinding', 'pulumi-operator:hooks');
    expect(chartBinding.subjects).toEqual(installBinding.subjects);
    expect(chartBinding.roleRef).toEqual({ ...installBinding.roleRef, name: 'pulumi-mc-hooks:hooks' });
    // Everything install.yaml has besides the Namespace and the CRDs (the chart's crds/) is in the chart.
    const covered = install.filter((o) => o.kind !== 'Namespace' && o.kind !== 'CustomResourceDefinition');
    expect(covered.length).toBe(pairs.length + 1);
    // The Secrets install.yaml leaves to manifests/hooks-credentials.sh: the same names and keys.
    expect(Object.keys(findObject(same, 'Secret', 'pulumi-mc-hooks-tls').data ?? {}).sort()).toEqual([
      'ca.crt',
      'tls.crt',
      'tls.key',
    ]);
    expect(Object.keys(findObject(same, 'Secret', 'pulumi-mc-hooks-auth').data ?? {})).toEqual(['token']);
  }, 60_000);

  test('grants Stacks nothing of its own by default, as manifests/stack-rbac.yaml (the hooks grant per Stack)', () => {
    const stackRbac = loadObjects(readRepoFile('manifests/stack-rbac.yaml'));
    expect(stackRbac.filter((o) => o.kind === 'ClusterRole' || o.kind === 'Role')).toEqual([]);
    expect(objects.filter((o) => o.metadata.name.endsWith(':stack-workspace'))).toEqual([]);
  });

  test('every namespaced object is in the release namespace', () => {
    for (const o of objects.filter(
      (x) => !['ClusterRole', 'ClusterRoleBinding', 'CompositeController', 'DecoratorController'].includes(x.kind),
    )) {
      expect({ o: objectKey(o), ns: o.metadata.namespace }).toEqual({ o: objectKey(o), ns: 'pulumi-system' });
    }
  });
});

describe('helm template with every value changed (packaging/testdata/chart-values.yaml)', () => {
  let objects: K8sObject[];
  let d: KindOf<'Deployment'>;
  let pod: V1PodSpec;
  beforeAll(async () => {
    ({ objects } = await helmTemplate('platform', 'infra', ['-f', VALUES]));
    d = findObject(objects, 'Deployment', 'platform-pulumi-operator');
    pod = required(d.spec?.template.spec, 'the Deployment has a pod spec');
  }, 60_000);

  test('global.imageRegistry overrides both images; tag and digest as given', () => {
    expect(pod.containers[0]?.image).toBe('registry.example.com/acme/pulumi-hooks:1.2.3');
    expect(pod.containers[0]?.imagePullPolicy).toBe('Always');
    expect(envOf(d).AGENT_IMAGE).toBe(
      'registry.example.com/acme/pulumi-agent@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef',
    );
    expect(envOf(d).AGENT_IMAGE_PULL_POLICY).toBe('IfNotPresent');
    expect(pod.imagePullSecrets).toEqual([{ name: 'registry-credentials' }]);
  });

  test('hook settings become the environment variables the hook server reads', () => {
    expect(envOf(d)).toMatchObject({
      PORT: '8080',
      LOG_LEVEL: 'debug',
      GIT_TIMEOUT_MS: '5000',
      GIT_CACHE_TTL_MS: '60000',
      BODY_LIMIT_BYTES: '16777216',
      FLUX_MAX_UNTAR_SIZE_BYTES: '209715200',
      EGRESS_ALLOW: '10.0.0.0/8,*.git.example.com',
      EGRESS_DENY: '10.96.0.0/12,fd00::/8',
      NODE_OPTIONS: '--max-old-space-size=384',
      IMAGE_REGISTRY: 'registry.example.com',
      OPERATION_DEADLINE_SECONDS: '3600',
      WORKSPACE_EPHEMERAL_STORAGE_REQUEST: '2Gi',
      WORKSPACE_EPHEMERAL_STORAGE_LIMIT: '10Gi',
      JOB_EPHEMERAL_STORAGE_REQUEST: '64Mi',
      JOB_EPHEMERAL_STORAGE_LIMIT: '256Mi',
    });
    // …and the hook server accepts them (SSH_KNOWN_HOSTS names the ConfigMap's file, here a copy).
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-chart-'));
    const knownHosts = path.join(dir, 'known_hosts');
    fs.writeFileSync(
      knownHosts,
      findObject(objects, 'ConfigMap', 'platform-pulumi-operator-ssh-known-hosts').data?.known_hosts ?? '',
    );
    const config = configFromEnv({ ...envOf(d), SSH_KNOWN_HOSTS: knownHosts });
    fs.rmSync(dir, { recursive: true, force: true });
    expect(config.sshKnownHosts).toMatch(/^git\.example\.com ssh-ed25519 AAAA/);
    const egress = describeEgress(config.egress);
    expect(egress.allow).toEqual(['10.0.0.0/8', '*.git.example.com']);
    expect(egress.deny.slice(-3)).toEqual(['192.0.0.192/32', '10.96.0.0/12', 'fd00::/8']);
    expect(config).toMatchObject({
      logLevel: 'debug',
      gitTimeoutMs: 5000,
      gitCacheTtlMs: 60000,
      githubApiUrl: 'https://github.example/api/v3',
      bodyLimit: 16777216,
      fluxMaxUntarSizeBytes: '209715200',
      agentImagePullPolicy: 'IfNotPresent',
      imageRegistry: 'registry.example.com',
      operationDeadlineSeconds: 3600,
      workspaceEphemeralStorage: { request: '2Gi', limit: '10Gi' },
      jobEphemeralStorage: { request: '64Mi', limit: '256Mi' },
      workspaceImage: {
        restricted: 'registry.example.com/acme/pulumi-python:3.274.1-nonroot',
        baseline: 'registry.example.com/acme/pulumi-python:3.274.1',
      },
    });
  });

  test('sshKnownHosts: a ConfigMap mounted read-only where SSH_KNOWN_HOSTS points', () => {
    const cm = findObject(objects, 'ConfigMap', 'platform-pulumi-operator-ssh-known-hosts');
    expect(cm.metadata.namespace).toBe('infra');
    expect(cm.data?.known_hosts).toMatch(/^git\.example\.com ssh-ed25519 AAAA\S+\n$/);
    expect(envOf(d).SSH_KNOWN_HOSTS).toBe('/etc/pulumi-operator/ssh/known_hosts');
    expect(pod.containers[0]?.volumeMounts).toContainEqual({
      name: 'ssh-known-hosts',
      mountPath: '/etc/pulumi-operator/ssh',
      readOnly: true,
    });
    expect(pod.volumes).toContainEqual({
      name: 'ssh-known-hosts',
      configMap: { name: 'platform-pulumi-operator-ssh-known-hosts' },
    });
  });

  test('replicas, resources, scheduling and pod metadata', () => {
    expect(d.spec?.replicas).toBe(3);
    expect(pod.containers[0]?.resources).toEqual({
      requests: { cpu: '100m', memory: '256Mi' },
      limits: { cpu: '1', memory: '1Gi' },
    });
    expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
    expect(pod.tolerations).toEqual([{ key: 'dedicated', operator: 'Equal', value: 'platform', effect: 'NoSchedule' }]);
    expect(
      pod.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms[0]
        ?.matchExpressions?.[0]?.key,
    ).toBe('kubernetes.io/arch');
    expect(pod.topologySpreadConstraints).toBeUndefined();
    expect(pod.priorityClassName).toBe('system-cluster-critical');
    const { 'checksum/ssh-known-hosts': checksum, ...annotations } = d.spec?.template.metadata?.annotations ?? {};
    expect(annotations).toEqual({ 'example.com/scrape': 'true' });
    expect(checksum).toMatch(/^[0-9a-f]{64}$/); // rolls the hook pods when sshKnownHosts changes
    expect(d.spec?.template.metadata?.labels).toMatchObject({
      team: 'platform',
      'app.kubernetes.io/instance': 'platform',
    });
    expect(pod.serviceAccountName).toBe('hooks');
    expect(findObject(objects, 'ServiceAccount', 'hooks').metadata.annotations).toEqual({
      'example.com/owner': 'platform',
    });
    // The events binding follows the ServiceAccount's name.
    expect(findObject(objects, 'ClusterRoleBinding', 'platform-pulumi-operator:hooks').subjects).toEqual([
      { kind: 'ServiceAccount', name: 'hooks', namespace: 'infra' },
    ]);
    expect(pod.automountServiceAccountToken).toBe(true);
  });

  test('the PodDisruptionBudget uses maxUnavailable; the Service port feeds the controllers', () => {
    const pdb = findObject(objects, 'PodDisruptionBudget', 'platform-pulumi-operator');
    expect(pdb.spec).toMatchObject({ maxUnavailable: 1 });
    expect(pdb.spec?.minAvailable).toBeUndefined();
    const svc = findObject(objects, 'Service', 'platform-pulumi-operator');
    expect(svc.spec?.ports?.[0]?.port).toBe(8443);
    const cc = findObject(objects, 'CompositeController', 'pulumi-stacks');
    expect(cc.spec?.resyncPeriodSeconds).toBe(300);
    for (const name of ['pulumi-workspaces', 'pulumi-updates'])
      expect(findObject(objects, 'CompositeController', name).spec?.resyncPeriodSeconds).toBe(1800);
    for (const h of Object.values(required(cc.spec?.hooks, 'the CompositeController has hooks'))) {
      expect(h.webhook).toMatchObject({
        timeout: '20s',
        service: { name: 'platform-pulumi-operator', namespace: 'infra', port: 8443, protocol: 'https' },
      });
    }
  });

  test('existing Secrets: none made, the Deployment and the controllers use them', () => {
    expect(objects.filter((o) => o.kind === 'Secret')).toEqual([]);
    expect(pod.volumes).toContainEqual({
      name: 'tls',
      secret: {
        secretName: 'platform-hooks-certificate',
        items: [
          { key: 'tls.crt', path: 'tls.crt' },
          { key: 'tls.key', path: 'tls.key' },
        ],
      },
    });
    expect(pod.volumes).toContainEqual({ name: 'auth', secret: { secretName: 'platform-hooks-token' } });
    for (const kind of ['CompositeController', 'DecoratorController'] as const)
      for (const c of objects.filter((o): o is KindOf<typeof kind> => isKind(o, kind)))
        for (const h of Object.values(required(c.spec?.hooks, `${kind} has hooks`))) {
          expect(h.webhook?.caBundle?.secretRef).toEqual({
            name: 'platform-hooks-certificate',
            namespace: 'infra',
            key: 'ca.crt',
          });
          expect(h.webhook?.authorization?.secretRef).toEqual({
            name: 'platform-hooks-token',
            namespace: 'infra',
            key: 'token',
          });
        }
  });

  test("the NetworkPolicy admits Metacontroller's namespace and the peers of metricsFrom", () => {
    const policy = findObject(objects, 'NetworkPolicy', 'platform-pulumi-operator');
    expect(policy.spec?.ingress).toEqual([
      {
        from: [
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'mc-system' } } },
          {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'observability' } },
            podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
          },
        ],
        ports: [{ port: 'https', protocol: 'TCP' }],
      },
    ]);
  });

  test("extra RBAC rules and the Stack ServiceAccounts' bindings", () => {
    // The ClusterRole holds exactly the extra rules (what the programs need).
    const role = findObject(objects, 'ClusterRole', 'platform-pulumi-operator:stack-workspace');
    expect(role.rules).toEqual([
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'create', 'update', 'patch', 'delete'] },
    ]);
    expect(findObject(objects, 'ServiceAccount', 'pulumi').metadata.namespace).toBe('team-a');
    expect(objects.filter((o) => o.kind === 'ServiceAccount' && o.metadata.name === 'deployer')).toEqual([]);
    for (const [ns, name] of [
      ['team-a', 'pulumi'],
      ['team-b', 'deployer'],
    ] as const) {
      const rb = objects.find((o) => o.kind === 'RoleBinding' && o.metadata.namespace === ns)!;
      expect(rb.roleRef).toMatchObject({ kind: 'ClusterRole', name: role.metadata.name });
      expect(rb.subjects).toEqual([{ kind: 'ServiceAccount', name, namespace: ns }]);
      const crb = findObject(objects, 'ClusterRoleBinding', `platform-pulumi-operator:auth-delegator:${ns}:${name}`);
      expect(crb.roleRef).toMatchObject({ kind: 'ClusterRole', name: 'system:auth-delegator' });
    }
  });

  test("the ServiceMonitor scrapes /metrics of the hook Service's pods", () => {
    const sm = findObject(objects, 'ServiceMonitor', 'platform-pulumi-operator');
    expect(sm.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(sm.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack' });
    expect(sm.spec?.selector?.matchLabels).toEqual(
      findObject(objects, 'Service', 'platform-pulumi-operator').metadata.labels && d.spec?.selector.matchLabels,
    );
    expect(sm.spec?.namespaceSelector).toEqual({ matchNames: ['infra'] });
    expect(sm.spec?.endpoints?.[0]).toMatchObject({
      port: 'https',
      scheme: 'https',
      // The hook server's certificate names the Service; the CA is the TLS Secret's.
      tlsConfig: {
        serverName: 'platform-pulumi-operator.infra',
        ca: { secret: { name: 'platform-hooks-certificate', key: 'ca.crt' } },
      },
      path: '/metrics',
      interval: '15s',
      scrapeTimeout: '5s',
    });
    expect(sm.spec?.endpoints?.[0]?.metricRelabelings?.[0]?.action).toBe('drop');
  });

  test('controllers, user roles, events, the gauges from objects, the workspace role, the ServiceAccount and the NetworkPolicy can each be turned off', async () => {
    const { objects: none } = await helmTemplate('x', 'ns', [
      '--set',
      'events.enabled=false',
      '--set',
      'objectMetrics.enabled=false',
      '--set',
      'controllers.create=false',
      '--set',
      'rbac.userRoles=false',
      '--set',
      'rbac.stackWorkspace.create=false',
      '--set',
      'serviceAccount.create=false',
      '--set',
      'podDisruptionBudget.enabled=false',
      '--set',
      'networkPolicy.enabled=false',
    ]);
    // The hook server's Secrets stay: it serves HTTPS with the token, controllers or not.
    expect(none.map((o) => o.kind).sort()).toEqual(['Deployment', 'Secret', 'Secret', 'Service']);
    const pod = findObject(none, 'Deployment', 'x-pulumi-operator').spec?.template.spec;
    expect(pod?.serviceAccountName).toBe('default');
    // Events and the gauges from objects off: no token, as before the hooks wrote any.
    expect(pod?.automountServiceAccountToken).toBe(false);
    expect(pod?.containers[0]?.env).toContainEqual({ name: 'OBJECT_METRICS', value: 'off' });
  }, 60_000);

  test('each of events and the gauges from objects grants only its own rules', async () => {
    for (const [flag, rules] of [
      [
        'events.enabled=false',
        [{ apiGroups: ['pulumi.com'], resources: ['stacks', 'programs'], verbs: ['list', 'watch'] }],
      ],
      ['objectMetrics.enabled=false', [{ apiGroups: [''], resources: ['events'], verbs: ['create'] }]],
    ] as const) {
      const { objects: rendered } = await helmTemplate('x', 'ns', ['--set', flag]);
      expect(findObject(rendered, 'ClusterRole', 'x-pulumi-operator:hooks').rules).toEqual(rules);
      const pod = findObject(rendered, 'Deployment', 'x-pulumi-operator').spec?.template.spec;
      expect(pod?.automountServiceAccountToken).toBe(true);
    }
  }, 60_000);
});

describe('values the schema rejects', () => {
  test.each([
    [['--set', 'replicaCount=0'], 'replicaCount'],
    [['--set', 'unknownKey=1'], 'unknownKey'],
    [['--set', 'image.pullPolicy=Sometimes'], 'pullPolicy'],
    [['--set', 'agentImage.digest=latest'], 'digest'],
    [['--set', 'hooks.logLevel=loud'], 'logLevel'],
    // One entry per list item: a comma would make two entries of one (EGRESS_DENY is comma-separated).
    [['--set-json', 'hooks.egress.deny=["10.0.0.0/8,fd00::/8"]'], 'deny'],
    [['--set', 'hooks.egress.allow=10.0.0.0/8'], 'allow'],
    [['--set', 'controllers.webhookTimeout=10'], 'webhookTimeout'],
    [['--set', 'podDisruptionBudget.maxUnavailable=1'], 'not both'],
    [['--set', 'hooks.operationDeadlineSeconds=-1'], 'operationDeadlineSeconds'],
    [['--set', 'hooks.tls.validityDays=0'], 'validityDays'],
    [['--set', 'networkPolicy.metacontrollerNamespace='], 'metacontrollerNamespace'],
    [['--set', 'hooks.ephemeralStorage.workspace.limit=lots'], 'limit'],
  ])(
    '%j',
    async (args, mention) => {
      const r = await helm(['template', 'x', CHART_DIR, ...args]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(mention);
    },
    60_000,
  );
});
