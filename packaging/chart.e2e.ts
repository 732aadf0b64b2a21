/**
 * charts/pulumi-operator with the real helm (e2e/toolchain/build.sh helm): lint, the default
 * rendering against manifests/install.yaml and stack-rbac.yaml, a rendering with every value
 * changed (packaging/testdata/chart-values.yaml), and values the schema must reject. Then
 * upstream's chart values (docs/migration.md, "Helm values"): its values.yaml unchanged, every
 * value it has that ours honours changed, the ones refused, and a `helm install` of its
 * values.yaml on the test bed's real node.
 */
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import type { V1Container, V1PodSpec } from '@kubernetes/client-node';
import * as yaml from 'js-yaml';
import { Agent, request } from 'undici';
import { configFromEnv, DEFAULT_AGENT_IMAGE, DEFAULT_WORKSPACE_IMAGE } from '../hooks/src/config';
import { describeEgress } from '../hooks/src/git/egress';
import { TokenReviewer } from '../hooks/src/kube/token-review';
import { buildServer } from '../hooks/src/server';
import { eventually } from '../e2e/testbed/helpers';
import { IMAGE_REFS } from '../e2e/testbed/images/refs';
import { type PodBed, startPodBed } from '../e2e/testbed/pod-bed';
import { ApiClient } from './lib/apply';
import { CHART_DIR, helm, helmTemplate, removeHelmHome } from './lib/helm';
import {
  findObject,
  isKind,
  type KObject,
  type KindOf,
  type KnownKinds,
  loadObjects,
  objectKey,
  readRepoFile,
  repoPath,
  required,
} from './lib/repo';
import { chartSchema, helmValuesTable, type Treatment, UPSTREAM_VALUES, valueKeys } from './lib/upstream-values';

const VALUES = repoPath('packaging', 'testdata', 'chart-values.yaml');
const install = loadObjects(readRepoFile('manifests/install.yaml'));
const pkg = JSON.parse(readRepoFile('package.json')) as { version: string };

afterAll(() => removeHelmHome());

const envOf = (d: KindOf<'Deployment'>) =>
  Object.fromEntries(
    required(d.spec?.template.spec?.containers[0]?.env, `${d.metadata.name} has env`).map((e) => [e.name, e.value]),
  );

/** The hooks' config from a Deployment's env, its PROGRAM_SERVER_CA_FILE (the Secret's ca.crt) read as a stand-in PEM. */
const deployedConfig = (env: NodeJS.ProcessEnv) =>
  configFromEnv(env, undefined, () => '-----BEGIN CERTIFICATE-----\nthe Secret ca.crt\n-----END CERTIFICATE-----\n');

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
  let objects: KObject[];
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
        'ClusterRole/pulumi-operator:metrics-reader',
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
    expect(deployedConfig(envOf(d)).workspaceImage).toEqual(DEFAULT_WORKSPACE_IMAGE);
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
        // Only the certificate and the token are under test: /metrics open, no API to review scrapers with.
        metricsAuth: false,
        logLevel: 'silent',
      },
      {
        logger: false,
        // METRICS_AUTH is on with the token: an API server that authenticates no scraper.
        reviewer: new TokenReviewer({
          tokenReview: () => Promise.resolve({ authenticated: false }),
          subjectAccessReview: () => Promise.resolve({ allowed: false }),
        }),
      },
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

  test('the NetworkPolicy admits Metacontroller and the monitoring namespace to the hook port, workspace pods only to the Programs port', () => {
    const policy = findObject(objects, 'NetworkPolicy', 'pulumi-operator');
    expect(policy.spec?.podSelector?.matchLabels).toEqual(
      findObject(objects, 'Deployment', 'pulumi-operator').spec?.selector.matchLabels,
    );
    expect(policy.spec?.ingress).toEqual([
      {
        from: [
          ...['metacontroller', 'monitoring'].map((ns) => ({
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
          })),
        ],
        ports: [{ port: 'https', protocol: 'TCP' }],
      },
      {
        // Workspace pods of any namespace (anyone who creates pods can set the label), for their Program.
        from: [{ namespaceSelector: {}, podSelector: { matchLabels: { 'auto.pulumi.com/component': 'workspace' } } }],
        ports: [{ port: 'programs', protocol: 'TCP' }],
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
      ['ClusterRole', 'pulumi-mc-hooks:metrics-reader', 'pulumi-operator:metrics-reader'],
    ];
    const strip = (o: KObject) => {
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
  let objects: KObject[];
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
      PROGRAM_PORT: '8081',
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
    const config = deployedConfig({ ...envOf(d), SSH_KNOWN_HOSTS: knownHosts });
    fs.rmSync(dir, { recursive: true, force: true });
    expect(config.sshKnownHosts).toMatch(/^git\.example\.com ssh-ed25519 AAAA/);
    const egress = describeEgress(config.egress);
    expect(egress.allow).toEqual(['10.0.0.0/8', '*.git.example.com']);
    expect(egress.deny.slice(-3)).toEqual(['192.0.0.192/32', '10.96.0.0/12', 'fd00::/8']);
    expect(config).toMatchObject({
      logLevel: 'debug',
      gitTimeoutMs: 5000,
      gitCacheTtlMs: 60000,
      operationsMax: 8,
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

  test('the PodDisruptionBudget uses maxUnavailable; the Service port feeds the controllers, its Programs port PROGRAM_SERVER_URL', () => {
    const pdb = findObject(objects, 'PodDisruptionBudget', 'platform-pulumi-operator');
    expect(pdb.spec).toMatchObject({ maxUnavailable: 1 });
    expect(pdb.spec?.minAvailable).toBeUndefined();
    const svc = findObject(objects, 'Service', 'platform-pulumi-operator');
    expect(svc.spec?.ports?.map((p) => [p.name, p.port, p.targetPort])).toEqual([
      ['https', 8443, 'https'],
      ['programs', 9444, 'programs'],
    ]);
    expect(envOf(findObject(objects, 'Deployment', 'platform-pulumi-operator')).PROGRAM_SERVER_URL).toBe(
      'https://platform-pulumi-operator.infra.svc:9444',
    );
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
          { key: 'ca.crt', path: 'ca.crt' },
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
      {
        from: [{ namespaceSelector: {}, podSelector: { matchLabels: { 'auto.pulumi.com/component': 'workspace' } } }],
        ports: [{ port: 'programs', protocol: 'TCP' }],
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
      // metricsAuth: the token of serviceMonitor.bearerTokenSecret.
      authorization: { type: 'Bearer', credentials: { name: 'prometheus-scrape-token', key: 'token' } },
    });
    expect(sm.spec?.endpoints?.[0]?.metricRelabelings?.[0]?.action).toBe('drop');
  });

  test('metricsAuth.readers are bound to the metrics-reader ClusterRole, which may get /metrics only', () => {
    expect(findObject(objects, 'ClusterRole', 'platform-pulumi-operator:metrics-reader').rules).toEqual([
      { nonResourceURLs: ['/metrics'], verbs: ['get'] },
    ]);
    const binding = findObject(objects, 'ClusterRoleBinding', 'platform-pulumi-operator:metrics-reader');
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'platform-pulumi-operator:metrics-reader',
    });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'prometheus-k8s', namespace: 'monitoring' }]);
    expect(envOf(d).METRICS_AUTH).toBe('on');
  });

  test('controllers, user roles, events, the gauges from objects, the workspace role, the ServiceAccount and the NetworkPolicy can each be turned off', async () => {
    const { objects: none } = await helmTemplate('x', 'ns', [
      '--set',
      'events.enabled=false',
      '--set',
      'objectMetrics.enabled=false',
      '--set',
      'metricsAuth.enabled=false',
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
    // Events, the gauges from objects and metricsAuth off: no token, as before the hooks wrote any.
    expect(pod?.automountServiceAccountToken).toBe(false);
    expect(pod?.containers[0]?.env).toContainEqual({ name: 'OBJECT_METRICS', value: 'off' });
    expect(pod?.containers[0]?.env).toContainEqual({ name: 'METRICS_AUTH', value: 'off' });
  }, 60_000);

  test('each of events, the gauges from objects (with the program server) and metricsAuth grants only its own rules', async () => {
    const reviews = [
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    ];
    // The program server gets the Program it serves, after reviewing the workspace's token.
    const watches = [
      { apiGroups: ['pulumi.com'], resources: ['stacks'], verbs: ['list', 'watch'] },
      { apiGroups: ['pulumi.com'], resources: ['programs'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['auto.pulumi.com'], resources: ['workspaces', 'updates'], verbs: ['list', 'watch'] },
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    ];
    const events = [{ apiGroups: [''], resources: ['events'], verbs: ['create'] }];
    for (const [flags, rules] of [
      [['events.enabled=false', 'metricsAuth.enabled=false'], watches],
      [['objectMetrics.enabled=false', 'metricsAuth.enabled=false'], events],
      [['events.enabled=false', 'objectMetrics.enabled=false'], reviews],
    ] as const) {
      const { objects: rendered } = await helmTemplate(
        'x',
        'ns',
        flags.flatMap((f) => ['--set', f]),
      );
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

/*
 * Upstream's values (its chart's values.yaml, vendored unchanged), against the table of
 * docs/migration.md "Helm values": honoured values change the rendering as upstream's templates
 * do, the others are refused with a message; then the file is installed on the test bed.
 */
const UPSTREAM_CHANGED = repoPath('packaging', 'testdata', 'upstream-values-changed.yaml');
const helmValuesRows = helmValuesTable();

/** The hook pod this chart renders with its own values, to compare a rendering with upstream's against. */
async function ourHookPod(release: string, namespace: string): Promise<V1PodSpec> {
  const { objects } = await helmTemplate(release, namespace);
  return required(findObject(objects, 'Deployment', `${release}-pulumi-operator`).spec?.template.spec, 'a pod spec');
}

const keysOfRows = (treatment: Treatment) =>
  helmValuesRows.filter((r) => r.treatment === treatment).flatMap((r) => r.keys);

describe("upstream's values.yaml, unchanged", () => {
  let objects: KObject[];
  let d: KindOf<'Deployment'>;
  let pod: V1PodSpec;
  beforeAll(async () => {
    ({ objects } = await helmTemplate('pko', 'pulumi-kubernetes-operator', ['-f', UPSTREAM_VALUES]));
    d = findObject(objects, 'Deployment', 'pko-pulumi-operator');
    pod = required(d.spec?.template.spec, 'the Deployment has a pod spec');
  }, 60_000);

  test('helm lint --strict passes with it', async () => {
    const r = await helm(['lint', '--strict', CHART_DIR, '-f', UPSTREAM_VALUES]);
    expect({ code: r.code, out: r.code === 0 ? '' : r.stdout + r.stderr }).toEqual({ code: 0, out: '' });
  }, 60_000);

  test('renders the hook server with one replica, its RBAC and the controllers; no PodDisruptionBudget, which would block drains', () => {
    expect(objects.map(objectKey).sort()).toEqual(
      [
        'ClusterRole/pko-pulumi-operator:hooks',
        'ClusterRole/pko-pulumi-operator:metrics-reader',
        'ClusterRole/pko-pulumi-operator:stacks-editor',
        'ClusterRole/pko-pulumi-operator:stacks-viewer',
        'ClusterRoleBinding/pko-pulumi-operator:hooks',
        'NetworkPolicy/pulumi-kubernetes-operator/pko-pulumi-operator',
        'Secret/pulumi-kubernetes-operator/pko-pulumi-operator-auth',
        'Secret/pulumi-kubernetes-operator/pko-pulumi-operator-tls',
        'CompositeController/pulumi-stacks',
        'CompositeController/pulumi-updates',
        'CompositeController/pulumi-workspaces',
        'DecoratorController/pulumi-programs',
        'Deployment/pulumi-kubernetes-operator/pko-pulumi-operator',
        'Service/pulumi-kubernetes-operator/pko-pulumi-operator',
        'ServiceAccount/pulumi-kubernetes-operator/pko-pulumi-operator',
      ].sort(),
    );
    expect(d.spec?.replicas).toBe(1);
  });

  test("upstream's default image (docker.io/pulumi/pulumi-kubernetes-operator, no tag) is this chart's hook image", async () => {
    const { objects: ours } = await helmTemplate('pko', 'pulumi-kubernetes-operator');
    const image = findObject(ours, 'Deployment', 'pko-pulumi-operator').spec?.template.spec?.containers[0]?.image;
    expect(image).toBe(`ghcr.io/pulumi-mc-operator/hooks:v${pkg.version}`);
    expect(pod.containers[0]?.image).toBe(image);
    expect(pod.containers[0]?.imagePullPolicy).toBe('IfNotPresent');
    expect(envOf(d).AGENT_IMAGE).toBe(DEFAULT_AGENT_IMAGE);
    expect(pod.imagePullSecrets).toBeUndefined(); // upstream's ""
  }, 60_000);

  test('controller.logLevel and controller.logFormat become LOG_LEVEL and LOG_FORMAT, which the hook server reads', () => {
    expect(envOf(d)).toMatchObject({ LOG_LEVEL: 'info', LOG_FORMAT: 'console' });
    expect(envOf(d).FLUX_MAX_UNTAR_SIZE_BYTES).toBeUndefined(); // flux.maxUntarSizeBytes ""
    expect(deployedConfig(envOf(d))).toMatchObject({ logLevel: 'info', logFormat: 'console' });
  });

  test('the strategy, grace period, resources and security contexts are upstream’s, over this chart’s', async () => {
    expect(d.spec?.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } });
    expect(pod.terminationGracePeriodSeconds).toBe(300);
    expect(pod.containers[0]?.resources).toEqual({
      limits: { cpu: '200m', memory: '128Mi' },
      requests: { cpu: '200m', memory: '128Mi' },
    });
    // Helm merges maps: this chart's seccompProfile and read-only root file system stay.
    expect(pod.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(pod.containers[0]?.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
    // Nothing added to this chart's own pod: no container, init container, volume or port.
    const ours = await ourHookPod('pko', 'pulumi-kubernetes-operator');
    expect(pod.containers.map((c) => c.name)).toEqual(['hooks']);
    expect(pod.initContainers).toBeUndefined();
    expect(pod.volumes).toEqual(ours.volumes);
    expect(pod.containers[0]?.ports).toEqual(ours.containers[0]?.ports);
  }, 60_000);

  test('rbac.createClusterAggregationRoles: true aggregates the viewer to view, and both roles cover Workspaces and Updates', async () => {
    const viewer = findObject(objects, 'ClusterRole', 'pko-pulumi-operator:stacks-viewer');
    expect(viewer.metadata.labels).toMatchObject({ 'rbac.authorization.k8s.io/aggregate-to-view': 'true' });
    expect(viewer.rules).toContainEqual({
      apiGroups: ['auto.pulumi.com'],
      resources: ['workspaces', 'updates', 'workspaces/status', 'updates/status'],
      verbs: ['get', 'list', 'watch'],
    });
    const editor = findObject(objects, 'ClusterRole', 'pko-pulumi-operator:stacks-editor');
    expect(editor.rules?.map((r) => r.apiGroups)).toEqual([
      ['pulumi.com'],
      ['pulumi.com'],
      ['auto.pulumi.com'],
      ['auto.pulumi.com'],
    ]);
    // Unset (this chart's default): not aggregated to view, Stacks and Programs only.
    const { objects: ours } = await helmTemplate('pko', 'pulumi-kubernetes-operator');
    const oursViewer = findObject(ours, 'ClusterRole', 'pko-pulumi-operator:stacks-viewer');
    expect(oursViewer.metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-view']).toBeUndefined();
    expect(oursViewer.rules?.map((r) => r.apiGroups)).toEqual([['pulumi.com']]);
  }, 60_000);

  test("controller.metricsSecure: true (upstream's default) secures /metrics, false serves it open", async () => {
    const { objects: plain } = await helmTemplate('pko', 'pulumi-kubernetes-operator', [
      '-f',
      UPSTREAM_VALUES,
      '--set',
      'controller.metricsSecure=false',
    ]);
    const metricsAuthOf = (rendered: KObject[]) =>
      findObject(rendered, 'Deployment', 'pko-pulumi-operator').spec?.template.spec?.containers[0]?.env?.find(
        (e) => e.name === 'METRICS_AUTH',
      )?.value;
    expect(metricsAuthOf(objects)).toBe('on');
    expect(metricsAuthOf(plain)).toBe('off');
    const reviews = (rendered: KObject[]) =>
      findObject(rendered, 'ClusterRole', 'pko-pulumi-operator:hooks').rules?.filter((r) =>
        r.apiGroups?.some((g) => g.endsWith('.k8s.io')),
      );
    expect(reviews(objects)).toEqual([
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    ]);
    // The program server's TokenReviews stay (objectMetrics.enabled): no SubjectAccessReview.
    expect(reviews(plain)).toEqual([
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
    ]);
    expect(findObject(objects, 'ClusterRole', 'pko-pulumi-operator:metrics-reader').rules).toEqual([
      { nonResourceURLs: ['/metrics'], verbs: ['get'] },
    ]);
    expect(plain.filter((o) => o.metadata.name.endsWith(':metrics-reader'))).toEqual([]);
    expect(keysOfRows('accepted, no effect')).toEqual([]);
  }, 60_000);
});

describe('every upstream value ours honours, changed (packaging/testdata/upstream-values-changed.yaml)', () => {
  let objects: KObject[];
  let d: KindOf<'Deployment'>;
  let pod: V1PodSpec;
  let hooks: V1Container;
  beforeAll(async () => {
    ({ objects } = await helmTemplate('platform', 'infra', ['-f', UPSTREAM_VALUES, '-f', UPSTREAM_CHANGED]));
    d = findObject(objects, 'Deployment', 'platform-hooks');
    pod = required(d.spec?.template.spec, 'the Deployment has a pod spec');
    hooks = required(pod.containers[0], 'the pod has a container');
  }, 60_000);

  /** Honoured values a test of their own changes: each turns off objects the others are seen on. */
  const ON_THEIR_OWN = ['rbac.create', 'serviceAccount.create'];

  test('every row of the table marked honoured is changed here, or in a test of its own', () => {
    const changed = valueKeys(
      yaml.load(fs.readFileSync(UPSTREAM_CHANGED, 'utf8')) as Record<string, unknown>,
      chartSchema(),
    ).keys;
    const covered = (key: string) =>
      ON_THEIR_OWN.includes(key) || changed.some((c) => c === key || c.startsWith(`${key}.`));
    expect(keysOfRows('honoured').filter((k) => !covered(k))).toEqual([]);
  });

  test('deploymentStrategy, replicaCount, terminationGracePeriodSeconds, deploymentAnnotations, names', () => {
    expect(d.spec?.strategy).toEqual({ type: 'Recreate' });
    expect(d.spec?.replicas).toBe(3);
    expect(pod.terminationGracePeriodSeconds).toBe(60);
    expect(d.metadata.annotations).toEqual({ 'example.com/deployed-by': 'gitops' });
    expect(d.spec?.selector.matchLabels).toMatchObject({ 'app.kubernetes.io/name': 'hooks' });
    // With three replicas the PodDisruptionBudget is back.
    expect(findObject(objects, 'PodDisruptionBudget', 'platform-hooks').spec?.minAvailable).toBe(1);
  });

  test('image.*, imagePullSecrets', () => {
    expect(hooks.image).toBe('registry.example.com/acme/pulumi-hooks:1.2.3');
    expect(hooks.imagePullPolicy).toBe('Always');
    expect(pod.imagePullSecrets).toEqual([{ name: 'registry-credentials' }]);
  });

  test('controller.logLevel 2, controller.logFormat json, flux.maxUntarSizeBytes -1, extraEnv', () => {
    const env = envOf(d);
    expect(env).toMatchObject({
      LOG_LEVEL: 'trace',
      FLUX_MAX_UNTAR_SIZE_BYTES: '-1',
      NODE_OPTIONS: '--max-old-space-size=384',
    });
    expect(env.LOG_FORMAT).toBeUndefined();
    expect(hooks.env?.at(-1)?.name).toBe('NODE_OPTIONS'); // after the chart's own
    expect(configFromEnv(env)).toMatchObject({ logLevel: 'trace', logFormat: 'json', fluxMaxUntarSizeBytes: '-1' });
  });

  test('rbac.createClusterRole false, rbac.createRole, rbac.createClusterAggregationRoles false', () => {
    const rbac = objects.filter((o) => o.kind.endsWith('Role') || o.kind.endsWith('RoleBinding'));
    expect(rbac.map(objectKey).sort()).toEqual([
      'Role/infra/platform-hooks:hooks',
      'RoleBinding/infra/platform-hooks:hooks',
    ]);
    expect(findObject(objects, 'Role', 'platform-hooks:hooks').rules).toEqual([
      { apiGroups: [''], resources: ['events'], verbs: ['create'] },
    ]);
    const binding = findObject(objects, 'RoleBinding', 'platform-hooks:hooks');
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'platform-hooks:hooks',
    });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'hooks-sa', namespace: 'infra' }]);
  });

  test('serviceAccount.*, pod, Deployment and Service metadata', () => {
    expect(pod.serviceAccountName).toBe('hooks-sa');
    expect(findObject(objects, 'ServiceAccount', 'hooks-sa').metadata.annotations).toEqual({
      'example.com/owner': 'platform',
    });
    expect(d.spec?.template.metadata?.annotations).toEqual({ 'example.com/scrape': 'true' });
    expect(d.spec?.template.metadata?.labels).toMatchObject({ team: 'platform' });
    expect(findObject(objects, 'Service', 'platform-hooks').metadata.annotations).toEqual({
      'example.com/service': 'hooks',
    });
  });

  test('security contexts, resources and scheduling', () => {
    expect(pod.securityContext).toMatchObject({ fsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } });
    expect(hooks.securityContext).toMatchObject({ runAsUser: 65532, readOnlyRootFilesystem: true });
    expect(hooks.resources).toEqual({
      limits: { cpu: '1', memory: '1Gi' },
      requests: { cpu: '200m', memory: '128Mi' },
    });
    expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux' });
    expect(pod.tolerations).toEqual([{ key: 'dedicated', operator: 'Equal', value: 'platform', effect: 'NoSchedule' }]);
    expect(pod.affinity?.nodeAffinity).toBeDefined();
  });

  test('extraVolumes, extraVolumeMounts, extraPorts, initContainers, extraSidecars', async () => {
    // After this chart's own volumes, mounts and ports.
    const ours = await ourHookPod('platform', 'infra');
    expect(pod.volumes?.map((v) => v.name)).toEqual([...(ours.volumes ?? []).map((v) => v.name), 'extra']);
    expect(pod.volumes?.at(-1)).toEqual({ name: 'extra', configMap: { name: 'hooks-extra' } });
    expect(hooks.volumeMounts?.map((m) => m.name)).toEqual([
      ...(ours.containers[0]?.volumeMounts ?? []).map((m) => m.name),
      'extra',
    ]);
    expect(hooks.volumeMounts?.at(-1)).toEqual({ name: 'extra', mountPath: '/extra', readOnly: true });
    expect(hooks.ports).toEqual([
      ...(ours.containers[0]?.ports ?? []),
      { name: 'http-extra', containerPort: 9091, protocol: 'TCP' },
    ]);
    expect(pod.initContainers?.map((c) => c.name)).toEqual(['wait']);
    // The hook container stays first: kubectl logs and exec default to it.
    expect(pod.containers.map((c) => c.name)).toEqual(['hooks', 'sidecar-example']);
  }, 60_000);

  test('serviceMonitor.*: interval, labels, metricRelabelings, timeout, targetLabels, namespace', () => {
    const sm = findObject(objects, 'ServiceMonitor', 'platform-hooks');
    expect(sm.metadata.namespace).toBe('monitoring');
    expect(sm.metadata.labels).toMatchObject({ release: 'kube-prometheus-stack' });
    expect(sm.spec?.namespaceSelector).toEqual({ matchNames: ['infra'] });
    expect(sm.spec?.endpoints?.[0]).toMatchObject({ path: '/metrics', interval: '15s', scrapeTimeout: '5s' });
    expect(sm.spec?.endpoints?.[0]?.metricRelabelings?.[0]?.action).toBe('drop');
    expect(sm.spec?.targetLabels).toEqual(['team']);
    // controller.metricsSecure false: /metrics is open, Prometheus sends no token.
    expect(sm.spec?.endpoints?.[0]).not.toHaveProperty('bearerTokenFile');
    expect(sm.spec?.endpoints?.[0]).not.toHaveProperty('authorization');
    expect(envOf(d).METRICS_AUTH).toBe('off');
  });

  test('rbac.create false: no ClusterRole, Role or binding at all, the ServiceAccounts of Stacks still made', async () => {
    const { objects: none } = await helmTemplate('x', 'ns', [
      '-f',
      UPSTREAM_VALUES,
      '--set',
      'rbac.create=false',
      '--set',
      'rbac.createRole=true',
      '--set-json',
      'rbac.stackWorkspace={"extraRules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}],"serviceAccounts":[{"namespace":"team-a","name":"pulumi","create":true}]}',
    ]);
    expect(none.filter((o) => /Role(Binding)?$/.test(o.kind)).map(objectKey)).toEqual([]);
    expect(findObject(none, 'ServiceAccount', 'pulumi').metadata.namespace).toBe('team-a');
  }, 60_000);

  test('serviceAccount.create false: the pods run as the account named, or default', async () => {
    const { objects: rendered } = await helmTemplate('x', 'ns', [
      '-f',
      UPSTREAM_VALUES,
      '--set',
      'serviceAccount.create=false',
    ]);
    expect(rendered.filter((o) => o.kind === 'ServiceAccount')).toEqual([]);
    expect(findObject(rendered, 'Deployment', 'x-pulumi-operator').spec?.template.spec?.serviceAccountName).toBe(
      'default',
    );
  }, 60_000);
});

/** Upstream values refused over upstream's file: the helm arguments, and what the message says. */
const REFUSED: [key: string, args: string[], message: string][] = [
  [
    'leaderElection.leaseDuration',
    ['--set', 'leaderElection.leaseDuration=120s'],
    'leaderElection.leaseDuration=120s: the hook server elects no leader',
  ],
  [
    'leaderElection.renewDeadline',
    ['--set', 'leaderElection.renewDeadline=90s'],
    "leaderElection.renewDeadline=90s: the hook server elects no leader (its replicas are stateless and all serve), and Metacontroller's leader election is set where Metacontroller is installed. Remove it, or leave upstream's default 45s.",
  ],
  ['leaderElection.retryPeriod', ['--set', 'leaderElection.retryPeriod=5s'], 'leaderElection.retryPeriod=5s'],
  ['kubeAPI.timeout', ['--set', 'kubeAPI.timeout=60s'], "kubeAPI.timeout=60s: the hook server's few API calls"],
  [
    'rbac.extraRules',
    ['--set-json', 'rbac.extraRules=[{"apiGroups":["example.com"],"resources":["sources"],"verbs":["get"]}]'],
    'rbac.extraRules: the hook server reads nothing from the API server',
  ],
  [
    'controller.advertisedAddress',
    ['--set', 'controller.advertisedAddress=pko.pko.svc'],
    'controller.advertisedAddress: Programs are served by the hook server',
  ],
  [
    'serviceMonitor.telemetryPath',
    ['--set', 'serviceMonitor.telemetryPath=/custom'],
    'serviceMonitor.telemetryPath=/custom: the hook server serves its metrics at /metrics only',
  ],
  [
    'image.tag',
    ['--set', 'image.tag=v2.9.0'],
    "image: docker.io/pulumi/pulumi-kubernetes-operator:v2.9.0 is upstream's operator, which this chart does not run",
  ],
  [
    'image.registry',
    ['--set', 'image.registry=mirror.example.com'],
    "image: mirror.example.com/pulumi/pulumi-kubernetes-operator is upstream's operator",
  ],
  [
    'controller.logLevel',
    ['--set', 'hooks.logLevel=debug'],
    "hooks.logLevel=debug and controller.logLevel (upstream's name)=info disagree: set one of them.",
  ],
  [
    'controller.logFormat',
    ['--set', 'hooks.logFormat=json'],
    "hooks.logFormat=json and controller.logFormat (upstream's name)=console disagree",
  ],
  [
    'flux.maxUntarSizeBytes',
    ['--set', 'flux.maxUntarSizeBytes=-1', '--set-string', 'hooks.fluxMaxUntarSizeBytes=1000'],
    'hooks.fluxMaxUntarSizeBytes=1000 and flux.maxUntarSizeBytes',
  ],
  [
    'serviceMonitor.timeout',
    [
      '--set',
      'serviceMonitor.enabled=true',
      '--set',
      'serviceMonitor.timeout=5s',
      '--set',
      'serviceMonitor.scrapeTimeout=20s',
    ],
    'serviceMonitor.scrapeTimeout=20s and serviceMonitor.timeout',
  ],
  [
    'rbac.createRole',
    ['--set', 'rbac.createClusterRole=false', '--set', 'rbac.createRole=true'],
    'the gauges of objectMetrics list Stacks and Programs in every namespace',
  ],
  ['rbac.createClusterAggregationRoles', ['--set', 'rbac.userRoles=false'], 'rbac.createClusterAggregationRoles=true'],
  ['controller.logLevel', ['--set', 'controller.logLevel=loud'], "at '/controller/logLevel': 'oneOf' failed"],
  [
    'controller.logFormat',
    ['--set', 'controller.logFormat=text'],
    "at '/controller/logFormat': value must be one of 'json', 'console'",
  ],
  ['deploymentStrategy', ['--set', 'deploymentStrategy=BlueGreen'], "at '/deploymentStrategy': value must be one of"],
];

describe("upstream values refused, with a message naming the value (over upstream's file)", () => {
  test.each(REFUSED)(
    '%s: %j',
    async (_key, args, message) => {
      const r = await helm(['template', 'x', CHART_DIR, '-f', UPSTREAM_VALUES, ...args]);
      expect({ code: r.code === 0 ? 0 : 'failed', message: r.stderr.includes(message) ? message : r.stderr }).toEqual({
        code: 'failed',
        message,
      });
    },
    60_000,
  );

  test("every row of the table marked upstream's default only has a refusal here", () => {
    const refused = new Set(REFUSED.map(([key]) => key));
    expect(keysOfRows("upstream's default only").filter((k) => !refused.has(k))).toEqual([]);
  });
});

describe("helm install of upstream's values.yaml on the test bed", () => {
  let bed: PodBed;
  let api: ApiClient;
  /** The test bed's hook image (localhost/pko-testbed/hooks:dev) in upstream's three image values. */
  const testbedImage = (() => {
    const m = required(
      /^([^/]+)\/(.+):([^:]+)$/.exec(IMAGE_REFS.hooks) ?? undefined,
      `${IMAGE_REFS.hooks} is registry/repository:tag`,
    );
    return ['--set', `image.registry=${m[1]}`, '--set', `image.repository=${m[2]}`, '--set', `image.tag=${m[3]}`];
  })();
  const kube = () => ['--kubeconfig', bed.cp.kubeconfigPath, '--namespace', bed.ns];

  beforeAll(async () => {
    bed = await startPodBed('pulumi-kubernetes-operator');
    api = new ApiClient(bed.cp.kubeConfig);
    const standIns = loadObjects(
      readRepoFile('packaging/testdata/metacontroller-crds.yaml'),
      'metacontroller-crds.yaml',
    );
    for (const crd of standIns) expect((await api.apply(crd, { dryRun: false })).status).toBeLessThan(300);
    for (const crd of standIns) await api.waitForCrd(crd);
  }, 300_000);

  afterAll(async () => {
    await api?.close();
    await bed?.stop();
  });

  test('installs it unchanged (but for the image): the hook server becomes ready under Pod Security "restricted" and logs console lines', async () => {
    const r = await helm([
      'install',
      'pko',
      CHART_DIR,
      ...kube(),
      '-f',
      UPSTREAM_VALUES,
      ...testbedImage,
      '--wait',
      '--timeout',
      '4m',
    ]);
    expect({ code: r.code, stderr: r.code === 0 ? '' : r.stderr }).toEqual({ code: 0, stderr: '' });
    // The install notes say what upstream's values mean here.
    expect(r.stdout).toContain('No PodDisruptionBudget');
    expect(r.stdout).toContain('controller.metricsSecure');
    expect(r.stdout).toContain('the built-in view role reads Stacks');
    const pods = await bed.core.listNamespacedPod({
      namespace: bed.ns,
      labelSelector: 'app.kubernetes.io/instance=pko,app.kubernetes.io/component=hooks',
    });
    expect(pods.items.map((p) => p.status?.conditions?.find((c) => c.type === 'Ready')?.status)).toEqual(['True']);
    const name = required(pods.items[0]?.metadata?.name, 'the hook pod has a name');
    const log = await eventually('the hook pod logs that it writes Events', async () => {
      const text = String(await bed.core.readNamespacedPodLog({ namespace: bed.ns, name, container: 'hooks' }));
      return text.includes('Kubernetes Events on Stacks: on') ? text : undefined;
    });
    // Console lines (kubectl logs also shows stderr, which is not the log): none of pino's JSON.
    const lines = log.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('{'))).toEqual([]);
    expect(lines.find((l) => l.includes('Kubernetes Events on Stacks: on'))).toMatch(
      /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\tinfo\tKubernetes Events on Stacks: on\t\{"via":"the ServiceAccount token of the pod"[,}]/,
    );
  }, 360_000);

  test('helm uninstall removes it', async () => {
    const r = await helm(['uninstall', 'pko', ...kube(), '--wait', '--timeout', '2m']);
    expect({ code: r.code, stderr: r.code === 0 ? '' : r.stderr }).toEqual({ code: 0, stderr: '' });
    const left = await bed.core.listNamespacedPod({
      namespace: bed.ns,
      labelSelector: 'app.kubernetes.io/instance=pko',
    });
    expect(left.items.filter((p) => !p.metadata?.deletionTimestamp)).toEqual([]);
  }, 180_000);
});
