/**
 * manifests/: the generated quickstart install.yaml (fresh, the same objects as the kustomization),
 * the hook server's Deployment against the hook server itself (port, probes, env, user), the
 * Metacontroller controllers against the Service and the hook routes, the Stack ServiceAccount's
 * RBAC against what the pods do, and the kube-state-metrics config against the schemas.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { V1EnvVar } from '@kubernetes/client-node';
import * as yaml from 'js-yaml';
import { Agent, request } from 'undici';
import { Annotations } from '../contract';
import { configFromEnv, DEFAULT_AGENT_IMAGE } from '../hooks/src/config';
import { TokenReviewer } from '../hooks/src/kube/token-review';
import { buildServer } from '../hooks/src/server';
import { RESTRICTED_CONTAINER_SECURITY } from '../hooks/src/workspace/pod';
import { stackJob, stackWorkspacePod } from '../hooks/test/controllers';
import { makeHookCredentials } from '../hooks/test/credentials';
import type { JsonSchema, Stack } from '../schemas';
import { INSTALL_FILE, renderInstall } from './build-install';
import { numericUser, parseDockerfile, stageNamed } from './lib/dockerfile';
import { postJson } from '../hooks/test/answers';
import { kustomizationDocuments } from './lib/kustomize';
import {
  findObject,
  isKind,
  isRecord,
  loadObjects,
  objectKey,
  podSpecOf,
  readRepoFile,
  repoPath,
  required,
} from './lib/repo';

const install = loadObjects(readRepoFile(INSTALL_FILE), INSTALL_FILE);
const pkg = JSON.parse(readRepoFile('package.json')) as { version: string };
const hooksUser = numericUser(stageNamed(parseDockerfile(readRepoFile('Dockerfile')), 'hooks').user)!;

const deployment = findObject(install, 'Deployment', 'pulumi-mc-hooks');
const service = findObject(install, 'Service', 'pulumi-mc-hooks');
const podSpec = required(deployment.spec?.template.spec, 'the Deployment has a pod spec');
const container = required(podSpec.containers[0], 'the Deployment has a container');

/** The real hook server on a loopback port, for the duration of fn. */
async function withHookServer(fn: (base: string) => Promise<void>): Promise<void> {
  const { app } = buildServer(configFromEnv({}), { logger: false });
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    await fn(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}`);
  } finally {
    await app.close();
  }
}

/** A container's environment as a map (literal values only). */
const envOf = (env: V1EnvVar[] | undefined): Record<string, string> =>
  Object.fromEntries(required(env, 'the container has env').map((e) => [e.name, e.value ?? '']));

function matches(selector: Record<string, string>, labels: Record<string, string> | undefined): boolean {
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

describe('manifests/install.yaml', () => {
  test('is up to date with manifests/kustomization.yaml (npm run generate)', () => {
    const fresh = renderInstall();
    if (fresh !== readRepoFile(INSTALL_FILE)) throw new Error(`${INSTALL_FILE} is stale: run npm run generate`);
  });

  test('holds exactly the objects of the kustomization (what kubectl kustomize manifests/ outputs)', () => {
    const fromKustomization = kustomizationDocuments(repoPath('manifests')).map((d) => d.object);
    expect(install.map(objectKey).sort()).toEqual(fromKustomization.map(objectKey).sort());
    for (const o of fromKustomization) expect(install.some((x) => isDeepStrictEqual(x, o))).toBe(true);
  });

  test('has the namespace, the CRDs, the hook server, its PodDisruptionBudget, NetworkPolicy, RBAC and the four controllers, in apply order', () => {
    expect(install.map(objectKey)).toEqual([
      'Namespace/pulumi-system',
      'CustomResourceDefinition/updates.auto.pulumi.com',
      'CustomResourceDefinition/workspaces.auto.pulumi.com',
      'CustomResourceDefinition/programs.pulumi.com',
      'CustomResourceDefinition/stacks.pulumi.com',
      'ServiceAccount/pulumi-system/pulumi-mc-hooks',
      'ClusterRole/pulumi-operator:hooks',
      'ClusterRole/pulumi-operator:stacks-editor',
      'ClusterRole/pulumi-operator:stacks-viewer',
      'ClusterRole/pulumi-operator:metrics-reader',
      'ClusterRoleBinding/pulumi-operator:hooks',
      'Service/pulumi-system/pulumi-mc-hooks',
      'Deployment/pulumi-system/pulumi-mc-hooks',
      'PodDisruptionBudget/pulumi-system/pulumi-mc-hooks',
      'NetworkPolicy/pulumi-system/pulumi-mc-hooks',
      'CompositeController/pulumi-stacks',
      'DecoratorController/pulumi-programs',
      'CompositeController/pulumi-workspaces',
      'CompositeController/pulumi-updates',
    ]);
  });

  test('carries the generated CRDs unchanged', () => {
    const crds = ['pulumi.com_stacks', 'pulumi.com_programs', 'auto.pulumi.com_workspaces', 'auto.pulumi.com_updates'];
    for (const file of crds.map((name) => `manifests/crds/${name}.yaml`)) {
      const [crd] = loadObjects(readRepoFile(file), file);
      expect(install).toContainEqual(crd);
    }
  });

  test("the Stack CRD fits in kubectl apply's last-applied annotation (256 KiB), though --server-side is advised", () => {
    const crd = findObject(install, 'CustomResourceDefinition', 'stacks.pulumi.com');
    expect(JSON.stringify(crd).length).toBeLessThan(256 * 1024);
  });
});

describe('the hook server Deployment', () => {
  const CA_PEM = '-----BEGIN CERTIFICATE-----\nthe Secret ca.crt\n-----END CERTIFICATE-----\n';
  /** The files the deployed configuration read (the CA only: the others are read when serving). */
  const files: string[] = [];
  /** The hook server's configuration from the Deployment's env, its CA file a stand-in. */
  const deployedConfig = (env: NodeJS.ProcessEnv) =>
    configFromEnv(env, undefined, (file) => {
      files.push(file);
      return CA_PEM;
    });
  test('runs 2 replicas in the restricted Pod Security namespace pulumi-system', () => {
    expect(deployment.spec?.replicas).toBe(2);
    expect(deployment.metadata.namespace).toBe('pulumi-system');
    expect(findObject(install, 'Namespace', 'pulumi-system').metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'restricted',
    });
  });

  test("has a restricted security context, a read-only root filesystem, and the hooks image's user", () => {
    expect(podSpec.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: hooksUser.uid,
      runAsGroup: hooksUser.gid,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      runAsNonRoot: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(podSpec.volumes?.[0]).toEqual({ name: 'tmp', emptyDir: { sizeLimit: '16Mi' } });
    expect(container.volumeMounts?.[0]).toEqual({ name: 'tmp', mountPath: '/tmp' });
  });

  test("mounts the hook server's certificate and key, and the token files, from the two Secrets, read-only", () => {
    expect(podSpec.volumes?.slice(1)).toEqual([
      {
        name: 'tls',
        secret: {
          secretName: 'pulumi-mc-hooks-tls',
          items: [
            { key: 'tls.crt', path: 'tls.crt' },
            { key: 'tls.key', path: 'tls.key' },
            { key: 'ca.crt', path: 'ca.crt' },
          ],
        },
      },
      { name: 'auth', secret: { secretName: 'pulumi-mc-hooks-auth' } },
    ]);
    expect(container.volumeMounts?.slice(1)).toEqual([
      { name: 'tls', mountPath: '/etc/pulumi-operator/tls', readOnly: true },
      { name: 'auth', mountPath: '/etc/pulumi-operator/auth', readOnly: true },
    ]);
    const config = deployedConfig(envOf(container.env));
    expect(config.tls).toEqual({
      certFile: '/etc/pulumi-operator/tls/tls.crt',
      keyFile: '/etc/pulumi-operator/tls/tls.key',
    });
    // The Secret's key `token`, and `previous-token` while a rotation is under way.
    expect(config.authTokenFiles).toEqual([
      '/etc/pulumi-operator/auth/token',
      '/etc/pulumi-operator/auth/previous-token',
    ]);
    // The Secret's ca.crt: what workspace pods check the program server against, at its Service.
    expect(config.programServer).toEqual({ url: 'https://pulumi-mc-hooks.pulumi-system.svc:9443', ca: CA_PEM });
    expect(files).toEqual(['/etc/pulumi-operator/tls/ca.crt']);
  });

  test('serves what manifests/hooks-credentials.sh makes: HTTPS for the Service, the token required', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pko-install-'));
    try {
      const creds = makeHookCredentials(dir);
      expect(creds.secrets.map((s) => `${s.metadata.namespace}/${s.metadata.name}`)).toEqual([
        'pulumi-system/pulumi-mc-hooks-tls',
        'pulumi-system/pulumi-mc-hooks-auth',
      ]);
      expect(Object.keys(creds.secrets[0].data).sort()).toEqual(['ca.crt', 'tls.crt', 'tls.key']);
      expect(Object.keys(creds.secrets[1].data)).toEqual(['token']);
      // The deployment's files, where the Secret volumes put them.
      const volume = (name: string) => join(dir, name);
      mkdirSync(volume('tls'));
      mkdirSync(volume('auth'));
      writeFileSync(join(volume('tls'), 'tls.crt'), creds.cert);
      writeFileSync(join(volume('tls'), 'tls.key'), creds.key);
      writeFileSync(join(volume('tls'), 'ca.crt'), creds.ca);
      writeFileSync(join(volume('auth'), 'token'), creds.token);
      const env = Object.fromEntries(
        Object.entries(envOf(container.env)).map(([k, v]) => [k, v.replaceAll('/etc/pulumi-operator', dir)]),
      );
      // An API server that authenticates no token: /metrics answers no one.
      const reviewer = new TokenReviewer({
        tokenReview: () => Promise.resolve({ authenticated: false }),
        subjectAccessReview: () => Promise.resolve({ allowed: false }),
      });
      const { app, programs } = buildServer({ ...configFromEnv(env), logLevel: 'silent' }, { logger: false, reviewer });
      await app.listen({ port: 0, host: '127.0.0.1' });
      await programs.listen({ port: 0, host: '127.0.0.1' });
      const agent = new Agent({
        connect: { ca: creds.ca, servername: `${service.metadata.name}.${service.metadata.namespace}` },
      });
      try {
        const base = `https://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
        const status = async (path: string, headers: Record<string, string> = {}) =>
          (await request(`${base}${path}`, { dispatcher: agent, method: 'POST', headers, body: '{}' })).statusCode;
        expect(await status('/stack/sync')).toBe(401);
        expect(
          await status('/stack/sync', { authorization: `Bearer ${creds.token}`, 'content-type': 'application/json' }),
        ).toBe(400);
        expect((await request(`${base}/readyz`, { dispatcher: agent })).statusCode).toBe(200);
        const scrape = (authorization?: string) =>
          request(`${base}/metrics`, { dispatcher: agent, headers: authorization ? { authorization } : {} });
        expect((await scrape()).statusCode).toBe(401);
        expect((await scrape(`Bearer ${creds.token}`)).statusCode).toBe(401);
        // The program server: the same certificate, its own port, no hook route (no API access here: 503).
        const programsBase = `https://127.0.0.1:${(programs.server.address() as AddressInfo).port}`;
        const download = await request(`${programsBase}/programs/team-a/app`, { dispatcher: agent });
        await download.body.dump();
        expect(download.statusCode).toBe(503);
        const hook = await request(`${programsBase}/stack/sync`, { dispatcher: agent, method: 'POST', body: '{}' });
        await hook.body.dump();
        expect(hook.statusCode).toBe(404);
      } finally {
        await agent.close();
        await app.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('may create Events, list and watch Stacks and Programs, get Programs and review tokens, nothing else: one binding, the token mounted by this pod only', () => {
    expect(podSpec.automountServiceAccountToken).toBe(true);
    const serviceAccount = required(podSpec.serviceAccountName, 'the pod names its ServiceAccount');
    expect(findObject(install, 'ServiceAccount', serviceAccount).automountServiceAccountToken).toBe(false);
    const bindings = install.filter((o) => o.kind === 'RoleBinding' || o.kind === 'ClusterRoleBinding');
    expect(bindings.map((b) => ({ kind: b.kind, roleRef: b.roleRef, subjects: b.subjects }))).toEqual([
      {
        kind: 'ClusterRoleBinding',
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pulumi-operator:hooks' },
        subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace: 'pulumi-system' }],
      },
    ]);
    expect(findObject(install, 'ClusterRole', 'pulumi-operator:hooks').rules).toEqual([
      { apiGroups: [''], resources: ['events'], verbs: ['create'] },
      { apiGroups: ['pulumi.com'], resources: ['stacks'], verbs: ['list', 'watch'] },
      // The program server gets the Program it serves.
      { apiGroups: ['pulumi.com'], resources: ['programs'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: ['auto.pulumi.com'], resources: ['workspaces', 'updates'], verbs: ['list', 'watch'] },
      // Whose token a workspace or a scraper sent; whether a scraper may get /metrics.
      { apiGroups: ['authentication.k8s.io'], resources: ['tokenreviews'], verbs: ['create'] },
      { apiGroups: ['authorization.k8s.io'], resources: ['subjectaccessreviews'], verbs: ['create'] },
    ]);
  });

  test('/metrics is for scrapers allowed to get it: METRICS_AUTH on, and a metrics-reader role to bind', () => {
    expect(envOf(container.env).METRICS_AUTH).toBe('on');
    expect(findObject(install, 'ClusterRole', 'pulumi-operator:metrics-reader').rules).toEqual([
      { nonResourceURLs: ['/metrics'], verbs: ['get'] },
    ]);
  });

  test('user roles aggregate to edit and admin, never to view (Stacks may hold literal secrets)', () => {
    const roles = install.filter((o) => o.kind === 'ClusterRole');
    for (const r of roles) expect(r.metadata.labels?.['rbac.authorization.k8s.io/aggregate-to-view']).toBeUndefined();
    expect(findObject(install, 'ClusterRole', 'pulumi-operator:stacks-editor').metadata.labels).toMatchObject({
      'rbac.authorization.k8s.io/aggregate-to-edit': 'true',
      'rbac.authorization.k8s.io/aggregate-to-admin': 'true',
    });
  });

  test('listens where the hook server listens, on every interface, with only the settings it reads', () => {
    const defaults = configFromEnv({});
    expect(container.ports).toEqual([
      { name: 'https', containerPort: defaults.port, protocol: 'TCP' },
      { name: 'programs', containerPort: defaults.programPort, protocol: 'TCP' },
    ]);
    const env = envOf(container.env);
    const { tls, authTokenFiles, programServer, metricsAuth, ...rest } = deployedConfig(env);
    expect(tls).toBeDefined();
    expect(authTokenFiles).toBeDefined();
    expect(programServer).toBeDefined();
    expect(metricsAuth).toBe(true);
    // With a token to ask for, the server listens on every interface (127.0.0.1 without).
    expect(rest).toEqual({ ...defaults, host: '0.0.0.0', logLevel: 'info', metricsAuth: undefined });
    expect(env.AGENT_IMAGE).toBe(DEFAULT_AGENT_IMAGE);
    expect(container.image).toBe(`ghcr.io/pulumi-mc-operator/hooks:v${pkg.version}`);
  });

  test("its probes are the hook server's /healthz and /readyz, over HTTPS", async () => {
    expect(container.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'https', scheme: 'HTTPS' });
    expect(container.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'https', scheme: 'HTTPS' });
    await withHookServer(async (base) => {
      for (const p of ['/healthz', '/readyz', '/metrics'])
        expect((await request(`${base}${p}`).then(async (r) => (await r.body.dump(), r))).statusCode).toBe(200);
    });
  });

  test('requests resources and limits memory', () => {
    expect(container.resources).toEqual({ requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '512Mi' } });
  });

  test('the Service and the PodDisruptionBudget select its pods; one pod may be disrupted at a time', () => {
    const podLabels = deployment.spec?.template.metadata?.labels;
    const serviceSelector = required(service.spec?.selector, 'the Service has a selector');
    expect(matches(serviceSelector, podLabels)).toBe(true);
    expect(deployment.spec?.selector.matchLabels).toEqual(serviceSelector);
    const pdb = findObject(install, 'PodDisruptionBudget', 'pulumi-mc-hooks');
    expect(matches(required(pdb.spec?.selector?.matchLabels, 'the PDB selects by labels'), podLabels)).toBe(true);
    expect(pdb.spec?.minAvailable).toBe(1);
    expect(service.spec?.ports).toEqual([
      { name: 'https', port: 443, targetPort: 'https', protocol: 'TCP' },
      // PROGRAM_SERVER_URL's port.
      { name: 'programs', port: 9443, targetPort: 'programs', protocol: 'TCP' },
    ]);
  });

  test("the NetworkPolicy admits Metacontroller's and Prometheus' namespaces to the hook port, workspace pods only to the Programs port", () => {
    const policy = findObject(install, 'NetworkPolicy', 'pulumi-mc-hooks');
    expect(policy.metadata.namespace).toBe('pulumi-system');
    expect(policy.spec?.podSelector?.matchLabels).toEqual(deployment.spec?.selector.matchLabels);
    expect(policy.spec?.policyTypes).toEqual(['Ingress']);
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
        // Workspace pods of any namespace (anyone who creates pods can set the label), for their
        // Program (with their own token): the program server's port only.
        from: [{ namespaceSelector: {}, podSelector: { matchLabels: { 'auto.pulumi.com/component': 'workspace' } } }],
        ports: [{ port: 'programs', protocol: 'TCP' }],
      },
    ]);
  });
});

describe('the Metacontroller controllers', () => {
  const hooks = install.flatMap((o) =>
    isKind(o, 'CompositeController') || isKind(o, 'DecoratorController')
      ? Object.entries(o.spec?.hooks ?? {}).map(([name, h]) => ({
          controller: o.metadata.name,
          name,
          webhook: required(h.webhook, `${o.metadata.name} ${name} is a webhook`),
        }))
      : [],
  );

  test('call the hook Service over HTTPS: https://pulumi-mc-hooks.pulumi-system:443', () => {
    // Stack: customize, sync, finalize; Program: sync; Workspace: sync; Update: customize, sync.
    expect(hooks.length).toBe(7);
    for (const h of hooks)
      expect(h.webhook.service).toEqual({
        name: service.metadata.name,
        namespace: service.metadata.namespace,
        port: 443,
        protocol: 'https',
      });
  });

  test("check the server against the CA of the TLS Secret and send the auth Secret's token, on every hook", () => {
    for (const h of hooks) {
      const { caBundle, authorization } = h.webhook as typeof h.webhook & {
        caBundle?: unknown;
        authorization?: unknown;
      };
      expect({ hook: `${h.controller} ${h.name}`, caBundle, authorization }).toEqual({
        hook: `${h.controller} ${h.name}`,
        caBundle: { secretRef: { name: 'pulumi-mc-hooks-tls', namespace: 'pulumi-system', key: 'ca.crt' } },
        authorization: {
          type: 'Bearer',
          secretRef: { name: 'pulumi-mc-hooks-auth', namespace: 'pulumi-system', key: 'token' },
        },
      });
    }
  });

  test('call paths the hook server serves', async () => {
    await withHookServer(async (base) => {
      for (const h of hooks) {
        const res = await postJson(`${base}${h.webhook.path ?? ''}`, '{}');
        // A route that exists rejects the empty body; an unknown one is a 404.
        expect({ path: h.webhook.path, status: res.status }).toEqual({ path: h.webhook.path, status: 400 });
      }
    });
  });
});

describe('manifests/stack-rbac.yaml', () => {
  const objects = loadObjects(readRepoFile('manifests/stack-rbac.yaml'), 'manifests/stack-rbac.yaml');
  const sa = objects.find((o) => o.kind === 'ServiceAccount')!;
  const subject = { kind: 'ServiceAccount', name: sa.metadata.name, namespace: sa.metadata.namespace };

  test("grants the Stack's account system:auth-delegator and nothing else (the rest comes per Stack from the hooks)", () => {
    expect(objects.map((o) => o.kind)).toEqual(['ServiceAccount', 'ClusterRoleBinding']);
    const crb = objects.find((o) => o.kind === 'ClusterRoleBinding')!;
    expect(crb.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'ClusterRole',
      name: 'system:auth-delegator',
    });
    expect(crb.subjects).toEqual([subject]);
  });

  test("the workspace runs as the Stack's account, every Job as its Update's own account", () => {
    const stack = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'app', namespace: 'default', uid: 'u', generation: 1 },
      spec: { stack: 'dev', serviceAccountName: sa.metadata.name },
    } as Stack;
    const config = configFromEnv({});
    const ws = stackWorkspacePod(stack, { kind: 'none' }, config);
    const job = stackJob(stack, 'up', 'm', { generation: 1, reconcileRequest: '', commit: '', previous: '' }, config);
    const jobPod = podSpecOf(job.spec);
    expect(podSpecOf(ws.statefulSet.spec).serviceAccountName).toBe(sa.metadata.name);
    expect(jobPod.serviceAccountName).toBe(job.metadata.name);
    // The Job presents a projected token for the workspace's audience; nothing else is mounted from the API.
    expect(jobPod.volumes?.[0]?.projected?.sources?.[0]?.serviceAccountToken?.audience).toBe('app.default');
    expect(jobPod.containers[0]?.securityContext).toEqual(RESTRICTED_CONTAINER_SECURITY);
    expect(Annotations.workspaceStatus).toBe('pulumi.com/workspace-status');
  });
});

/** A path into an object, as kube-state-metrics' custom resource state config writes it. */
type KsmPath = string[];

/** The body of a gauge, stateSet or info metric. */
interface KsmBody {
  path?: KsmPath;
  valueFrom?: KsmPath;
  labelsFromPath?: Record<string, KsmPath>;
  [key: string]: unknown;
}

interface KsmMetric {
  name: string;
  help: string;
  labelsFromPath?: Record<string, KsmPath>;
  each: { type: string; gauge?: KsmBody; stateSet?: KsmBody; info?: KsmBody };
}

interface KsmResource {
  groupVersionKind: { group: string; version: string; kind: string };
  metricNamePrefix: string;
  labelsFromPath?: Record<string, KsmPath>;
  metrics: KsmMetric[];
}

/** kube-state-metrics' CustomResourceStateMetrics config (the tests below check its keys). */
interface KsmConfig {
  kind: string;
  spec: { resources: KsmResource[] };
}

/** A JSON Schema node, as parsed. */
type SchemaNode = { [key: string]: unknown };

describe('manifests/kube-state-metrics.yaml', () => {
  const objects = loadObjects(readRepoFile('manifests/kube-state-metrics.yaml'), 'manifests/kube-state-metrics.yaml');
  const cm = findObject(objects, 'ConfigMap', 'pulumi-operator-ksm-config');
  const config = yaml.load(required(cm.data?.['stacks.yaml'], 'the ConfigMap has stacks.yaml')) as KsmConfig;
  const schemas: Record<string, JsonSchema> = {
    Stack: JSON.parse(readRepoFile('schemas/stack.schema.json')) as JsonSchema,
    Program: JSON.parse(readRepoFile('schemas/program.schema.json')) as JsonSchema,
  };

  /** Follows a kube-state-metrics path through a JSON Schema; returns the schema reached or an error. */
  function walk(root: JsonSchema, start: unknown, segments: string[]): { schema?: SchemaNode; error?: string } {
    const defs = isRecord(root.$defs) ? root.$defs : {};
    const deref = (s: unknown): SchemaNode | undefined =>
      !isRecord(s) ? undefined : typeof s.$ref === 'string' ? deref(defs[s.$ref.replace('#/$defs/', '')]) : s;
    const propertiesOf = (s: SchemaNode | undefined): SchemaNode =>
      s !== undefined && isRecord(s.properties) ? s.properties : {};
    let cur = deref(start);
    for (const seg of segments) {
      const filter = /^\[(\w+)=(\w+)\]$/.exec(seg);
      if (filter) {
        const items = deref(cur?.items);
        if (!propertiesOf(items)[filter[1]!]) return { error: `"${seg}": not a list of objects with ${filter[1]}` };
        cur = items;
        continue;
      }
      const next = propertiesOf(cur)[seg];
      if (!next) return { error: `"${seg}" is not a field here` };
      cur = deref(next);
    }
    return { schema: cur };
  }

  const KEYS = {
    resource: ['groupVersionKind', 'metricNamePrefix', 'labelsFromPath', 'metrics', 'commonLabels', 'errorLogV'],
    metric: ['name', 'help', 'each', 'labelsFromPath', 'commonLabels', 'errorLogV'],
    each: ['type', 'gauge', 'stateSet', 'info'],
    gauge: ['path', 'valueFrom', 'labelsFromPath', 'labelFromKey', 'nilIsZero'],
    stateSet: ['path', 'labelName', 'list', 'valueFrom', 'labelsFromPath'],
    info: ['path', 'labelsFromPath', 'labelFromKey'],
  };
  const bodyKey = (type: string): 'gauge' | 'stateSet' | 'info' =>
    type === 'Gauge' ? 'gauge' : type === 'StateSet' ? 'stateSet' : 'info';

  test('is a CustomResourceStateMetrics config for Stack and Program with known keys only', () => {
    expect(Object.keys(config)).toEqual(['kind', 'spec']);
    expect(config.kind).toBe('CustomResourceStateMetrics');
    expect(config.spec.resources.map((r) => r.groupVersionKind)).toEqual([
      { group: 'pulumi.com', version: 'v1', kind: 'Stack' },
      { group: 'pulumi.com', version: 'v1', kind: 'Program' },
    ]);
    for (const r of config.spec.resources) {
      for (const k of Object.keys(r)) expect(KEYS.resource).toContain(k);
      for (const m of r.metrics) {
        for (const k of Object.keys(m)) expect(KEYS.metric).toContain(k);
        for (const k of Object.keys(m.each)) expect(KEYS.each).toContain(k);
        const body = m.each[bodyKey(m.each.type)];
        expect(body).toBeDefined();
        for (const k of Object.keys(body ?? {})) expect(KEYS[bodyKey(m.each.type)]).toContain(k);
        expect(`${r.metricNamePrefix}_${m.name}`).toMatch(/^[a-zA-Z_:][a-zA-Z0-9_:]*$/);
        expect(m.help.length).toBeGreaterThan(10);
      }
    }
  });

  test("covers readiness, reconciling, stalled with reason, the last update's state, failures and time", () => {
    const names = config.spec.resources[0]?.metrics.map((m) => m.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'ready',
        'reconciling',
        'stalled',
        'condition',
        'last_update_state',
        'last_update_failures',
        'last_resync_timestamp_seconds',
      ]),
    );
  });

  test("every path names a field of the kind's schema", () => {
    const problems: string[] = [];
    for (const r of config.spec.resources) {
      const kind = r.groupVersionKind.kind;
      const root = required(schemas[kind], `a schema for ${kind}`);
      const check = (where: string, base: unknown, p: KsmPath) => {
        const res = walk(root, base, p);
        if (res.error) problems.push(`${kind} ${where} [${p.join(', ')}]: ${res.error}`);
        return res.schema;
      };
      for (const [label, p] of Object.entries(r.labelsFromPath ?? {})) check(`label ${label}`, root, p);
      for (const m of r.metrics) {
        for (const [label, p] of Object.entries(m.labelsFromPath ?? {})) check(`${m.name} label ${label}`, root, p);
        const body = required(m.each.gauge ?? m.each.stateSet ?? m.each.info, `${m.name} has a body`);
        const base = body.path ? check(`${m.name} path`, root, body.path) : root;
        if (!base) continue;
        // Relative to each list item when the path is a list (walk follows the item's $ref).
        for (const [label, p] of Object.entries(body.labelsFromPath ?? {})) {
          const item = base.type === 'array' || base.items ? base.items : base;
          check(`${m.name} label ${label}`, item, p);
        }
        if (body.valueFrom) check(`${m.name} valueFrom`, base.items ? base.items : base, body.valueFrom);
      }
    }
    expect(problems).toEqual([]);
  });

  test('lets kube-state-metrics list and watch Stacks and Programs', () => {
    const role = findObject(objects, 'ClusterRole', 'pulumi-operator:kube-state-metrics');
    expect(role.rules).toContainEqual({
      apiGroups: ['pulumi.com'],
      resources: ['stacks', 'programs'],
      verbs: ['list', 'watch'],
    });
    const binding = findObject(objects, 'ClusterRoleBinding', 'pulumi-operator:kube-state-metrics');
    expect(binding.roleRef).toMatchObject({ kind: 'ClusterRole', name: role.metadata.name });
  });
});
