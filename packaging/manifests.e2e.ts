/**
 * Everything we ship, applied to a real kube-apiserver (e2e/testbed/control-plane.ts) with
 * server-side apply as a dry run, strict field validation and Pod Security warnings checked:
 * manifests/install.yaml, the chart rendered by the real helm (default and non-default values,
 * upstream's values file), manifests/stack-rbac.yaml, manifests/kube-state-metrics.yaml, every file
 * in examples/stacks/ and the Kubernetes objects shown in docs/. Then the RBAC is applied for real
 * and checked with SubjectAccessReviews: the Stack ServiceAccount may do what the agent does and
 * nothing more, the hook server's ServiceAccount may create Events and nothing else, and the edit
 * role (not view) covers Stacks.
 *
 * Metacontroller's, Flux's and the Prometheus Operator's CRDs are stand-ins (packaging/testdata/).
 */
import * as fs from 'node:fs';
import { type ControlPlane, startControlPlane, DEFAULT_CONTROLLERS } from '../e2e/testbed/control-plane';
import { updateRbac } from '../hooks/src/update/rbac';
import { workspaceRbac } from '../hooks/src/workspace/rbac';
import { ApiClient, type ApiResult, describeFailure, statusMessage } from './lib/apply';
import { helmTemplate, removeHelmHome } from './lib/helm';
import { UPSTREAM_VALUES } from './lib/upstream-values';
import {
  findObject,
  isKind,
  type KObject,
  loadAll,
  loadObjects,
  objectKey,
  readRepoFile,
  repoPath,
  required,
} from './lib/repo';

let cp: ControlPlane;
let api: ApiClient;

const install = loadObjects(readRepoFile('manifests/install.yaml'), 'manifests/install.yaml');
const CLUSTER_KINDS = new Set([
  'Namespace',
  'CustomResourceDefinition',
  'ClusterRole',
  'ClusterRoleBinding',
  'CompositeController',
  'DecoratorController',
]);

async function applyAll(
  objects: KObject[],
  opts: { dryRun: boolean; namespace?: string },
): Promise<{ failures: string[]; warnings: string[] }> {
  const failures: string[] = [];
  const warnings: string[] = [];
  for (const o of objects) {
    const r: ApiResult = await api.apply(o, opts);
    if (r.status !== 200 && r.status !== 201) failures.push(describeFailure(o, r));
    for (const w of r.warnings) warnings.push(`${objectKey(o)}: ${w}`);
  }
  return { failures, warnings };
}

async function applyForReal(objects: KObject[], namespace?: string): Promise<void> {
  const { failures } = await applyAll(objects, { dryRun: false, ...(namespace ? { namespace } : {}) });
  expect(failures).toEqual([]);
  for (const crd of objects.filter((o) => isKind(o, 'CustomResourceDefinition'))) await api.waitForCrd(crd);
}

function namespaceObject(name: string, restricted: boolean): KObject {
  const labels: Record<string, string> = restricted
    ? { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/warn': 'restricted' }
    : {};
  return { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } };
}

beforeAll(async () => {
  cp = await startControlPlane({
    // The aggregation controller fills the built-in edit/admin/view roles from labelled ClusterRoles.
    controllers: [...DEFAULT_CONTROLLERS, 'clusterrole-aggregation-controller'],
  });
  api = new ApiClient(cp.kubeConfig);
  const standIns = ['metacontroller-crds.yaml', 'flux-gitrepository-crd.yaml', 'servicemonitor-crd.yaml'].flatMap((f) =>
    loadObjects(fs.readFileSync(repoPath('packaging', 'testdata', f), 'utf8'), f),
  );
  await applyForReal(standIns);
  // Our CRDs, for every test that dry-runs Stacks and Programs (examples, docs).
  await applyForReal(install.filter((o) => o.kind === 'CustomResourceDefinition'));
}, 120_000);

afterAll(async () => {
  removeHelmHome();
  await api?.close();
  await cp?.stop();
});

describe('manifests/install.yaml', () => {
  test('its cluster-scoped objects pass a server-side dry run', async () => {
    const r = await applyAll(
      install.filter((o) => CLUSTER_KINDS.has(o.kind)),
      { dryRun: true },
    );
    expect(r).toEqual({ failures: [], warnings: [] });
  });
});

describe('manifests/install.yaml, in its namespace', () => {
  beforeAll(async () => {
    // Namespaced objects need their namespace, and pods their ServiceAccount.
    await applyForReal(install.filter((o) => o.kind === 'Namespace' || o.kind === 'ServiceAccount'));
  });

  test('every namespaced object passes a dry run without a Pod Security warning', async () => {
    const r = await applyAll(
      install.filter((o) => !CLUSTER_KINDS.has(o.kind)),
      { dryRun: true },
    );
    expect(r).toEqual({ failures: [], warnings: [] });
  });

  test('a hook server pod is admitted under Pod Security "restricted" (enforced in pulumi-system)', async () => {
    const d = findObject(install, 'Deployment', 'pulumi-mc-hooks');
    const pod: KObject = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name: 'pulumi-mc-hooks-probe',
        namespace: 'pulumi-system',
        labels: d.spec?.template.metadata?.labels,
      },
      spec: d.spec?.template.spec,
    };
    const r = await api.apply(pod, { dryRun: true });
    expect({ status: r.status, warnings: r.warnings }).toEqual({ status: 201, warnings: [] });
  });

  test('(control) a pod without the security context is refused there, so the checks above can fail', async () => {
    const d = findObject(install, 'Deployment', 'pulumi-mc-hooks');
    const spec = structuredClone(required(d.spec?.template.spec, 'the Deployment has a pod spec'));
    delete spec.securityContext;
    delete required(spec.containers[0], 'the pod has a container').securityContext;
    const r = await api.apply(
      { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'unrestricted', namespace: 'pulumi-system' }, spec },
      { dryRun: true },
    );
    expect(r.status).toBe(403);
    expect(statusMessage(r.body)).toContain('violates PodSecurity "restricted');
    const dep = structuredClone(d);
    delete required(dep.spec?.template.spec, 'the Deployment has a pod spec').securityContext;
    const w = await api.apply(dep, { dryRun: true });
    expect(w.warnings.join(' ')).toMatch(/would violate PodSecurity .*restricted/);
  });
});

describe('the Helm chart, rendered by the real helm', () => {
  beforeAll(async () => {
    await applyForReal([
      ...install.filter((o) => o.kind === 'Namespace'),
      namespaceObject('infra', true),
      namespaceObject('team-a', false),
      namespaceObject('team-b', false),
      namespaceObject('monitoring', false),
    ]);
  });

  test('with the default values, every object passes a dry run without warnings', async () => {
    const { objects } = await helmTemplate('pulumi-operator', 'pulumi-system');
    expect(await applyAll(objects, { dryRun: true })).toEqual({ failures: [], warnings: [] });
  }, 60_000);

  test('with every value changed (ServiceMonitor, Stack ServiceAccounts, extra rules, …), every object passes a dry run', async () => {
    const { objects } = await helmTemplate('platform', 'infra', [
      '-f',
      repoPath('packaging', 'testdata', 'chart-values.yaml'),
    ]);
    expect(objects.map((o) => o.kind)).toContain('ServiceMonitor');
    expect(await applyAll(objects, { dryRun: true })).toEqual({ failures: [], warnings: [] });
  }, 60_000);

  test("with upstream's values.yaml, and with every upstream value changed over it, every object passes a dry run", async () => {
    const changed = repoPath('packaging', 'testdata', 'upstream-values-changed.yaml');
    for (const files of [[UPSTREAM_VALUES], [UPSTREAM_VALUES, changed]]) {
      const { objects } = await helmTemplate(
        'upstream',
        'infra',
        files.flatMap((f) => ['-f', f]),
      );
      expect({ files, result: await applyAll(objects, { dryRun: true }) }).toEqual({
        files,
        result: { failures: [], warnings: [] },
      });
    }
  }, 60_000);
});

describe('manifests/stack-rbac.yaml', () => {
  const objects = loadObjects(readRepoFile('manifests/stack-rbac.yaml'));
  const sa = 'system:serviceaccount:default:pulumi';
  const saGroups = ['system:serviceaccounts', 'system:serviceaccounts:default', 'system:authenticated'];

  test('passes a dry run', async () => {
    expect(await applyAll(objects, { dryRun: true })).toEqual({ failures: [], warnings: [] });
  });

  describe('applied', () => {
    beforeAll(async () => {
      await applyForReal(objects);
    });

    test('lets the Stack ServiceAccount review tokens and access, as upstream', async () => {
      const allowed: Record<string, string>[] = [
        { group: 'authentication.k8s.io', resource: 'tokenreviews', verb: 'create' },
        { group: 'authorization.k8s.io', resource: 'subjectaccessreviews', verb: 'create' },
      ];
      for (const attrs of allowed) {
        const ok = await api.eventually(
          `${JSON.stringify(attrs)} allowed`,
          async () => ((await api.can(sa, saGroups, attrs)) ? true : undefined),
          10_000,
        );
        expect(ok).toBe(true);
      }
    });

    test('and nothing more: the rest is granted per Stack by the hooks', async () => {
      const denied: Record<string, string>[] = [
        { group: '', resource: 'secrets', verb: 'get', namespace: 'default', name: 'git-credentials' },
        { group: '', resource: 'secrets', verb: 'create', namespace: 'default' },
        { group: 'apps', resource: 'statefulsets', verb: 'patch', namespace: 'default', name: 'app-workspace' },
        { group: 'batch', resource: 'jobs', verb: 'patch', namespace: 'default', name: 'app-up-0123abcd' },
        { group: 'pulumi.com', resource: 'stacks', verb: 'update', namespace: 'default' },
        {
          group: 'auto.pulumi.com',
          version: 'v1alpha1',
          resource: 'workspaces',
          subresource: 'rpc',
          verb: 'use',
          namespace: 'default',
          name: 'app',
        },
      ];
      for (const attrs of denied)
        expect({ attrs, allowed: await api.can(sa, saGroups, attrs) }).toEqual({ attrs, allowed: false });
    });
  });
});

describe("a Workspace's and an Update's identities, as the hooks make them (hooks/src/workspace/rbac.ts, hooks/src/update/rbac.ts), applied", () => {
  const updateSa = 'system:serviceaccount:default:app-up-0123abcd';
  const updateGroups = ['system:serviceaccounts', 'system:serviceaccounts:default', 'system:authenticated'];
  const workspaceSa = 'system:serviceaccount:default:pulumi';
  const workspaceGroups = updateGroups;
  const rpc = (name: string, namespace = 'default') => ({
    group: 'auto.pulumi.com',
    version: 'v1alpha1',
    resource: 'workspaces',
    subresource: 'rpc',
    verb: 'use',
    namespace,
    name,
  });

  beforeAll(async () => {
    await applyForReal([
      ...workspaceRbac({ metadata: { name: 'app', namespace: 'default' }, spec: { serviceAccountName: 'pulumi' } }),
      ...updateRbac(
        { metadata: { name: 'app-up-0123abcd', namespace: 'default' }, spec: { workspaceName: 'app', type: 'up' } },
        {},
      ),
    ]);
  });

  test("the workspace's account may patch its own status ConfigMap and nothing else", async () => {
    const own = {
      group: '',
      resource: 'configmaps',
      verb: 'patch',
      namespace: 'default',
      name: 'app-workspace-status',
    };
    expect(
      await api.eventually(
        'own status ConfigMap',
        async () => ((await api.can(workspaceSa, workspaceGroups, own)) ? true : undefined),
        10_000,
      ),
    ).toBe(true);
    const denied: Record<string, string>[] = [
      { ...own, name: 'other-workspace-status' },
      { ...own, verb: 'get' },
      { group: 'apps', resource: 'statefulsets', verb: 'patch', namespace: 'default', name: 'app-workspace' },
      { group: 'batch', resource: 'jobs', verb: 'patch', namespace: 'default', name: 'app-up-0123abcd' },
      { group: '', resource: 'secrets', verb: 'create', namespace: 'default' },
      rpc('app'),
    ];
    for (const attrs of denied)
      expect({ attrs, allowed: await api.can(workspaceSa, workspaceGroups, attrs) }).toEqual({ attrs, allowed: false });
  });

  test("the update's account may call its workspace, patch its own Job and create Secrets; nothing else", async () => {
    expect(
      await api.eventually(
        'call the workspace',
        async () => ((await api.can(updateSa, updateGroups, rpc('app'))) ? true : undefined),
        10_000,
      ),
    ).toBe(true);
    const allowed: Record<string, string>[] = [
      { group: 'batch', resource: 'jobs', verb: 'patch', namespace: 'default', name: 'app-up-0123abcd' },
      { group: '', resource: 'secrets', verb: 'create', namespace: 'default' },
    ];
    for (const attrs of allowed)
      expect({ attrs, allowed: await api.can(updateSa, updateGroups, attrs) }).toEqual({ attrs, allowed: true });
    const denied: Record<string, string>[] = [
      rpc('other'),
      rpc('app', 'kube-system'),
      { group: 'batch', resource: 'jobs', verb: 'patch', namespace: 'default', name: 'other-up-0123abcd' },
      { group: 'batch', resource: 'jobs', verb: 'patch', namespace: 'default', name: 'app-up-4567cdef' },
      { group: 'batch', resource: 'jobs', verb: 'create', namespace: 'default' },
      { group: '', resource: 'secrets', verb: 'get', namespace: 'default', name: 'git-credentials' },
      { group: 'apps', resource: 'statefulsets', verb: 'patch', namespace: 'default', name: 'app-workspace' },
    ];
    for (const attrs of denied)
      expect({ attrs, allowed: await api.can(updateSa, updateGroups, attrs) }).toEqual({ attrs, allowed: false });
  });
});

describe('install.yaml RBAC, applied', () => {
  beforeAll(async () => {
    await applyForReal(
      install.filter((o) => ['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding'].includes(o.kind)),
    );
    await applyForReal([
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'alice-edit', namespace: 'default' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'alice' }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: 'bob-view', namespace: 'default' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'bob' }],
      },
    ]);
  });

  test("the hook server's ServiceAccount may create Events in any namespace, list and watch Stacks, Programs, Workspaces and Updates, and nothing else", async () => {
    const user = 'system:serviceaccount:pulumi-system:pulumi-mc-hooks';
    const groups = ['system:serviceaccounts', 'system:serviceaccounts:pulumi-system', 'system:authenticated'];
    for (const namespace of ['default', 'team-a']) {
      const attrs = { group: '', resource: 'events', verb: 'create', namespace };
      // The authorizer sees a new binding shortly after it is created.
      expect(
        await api.eventually(
          `the hooks may create events in ${namespace}`,
          async () => ((await api.can(user, groups, attrs)) ? true : undefined),
          20_000,
        ),
      ).toBe(true);
    }
    const denied: Record<string, string>[] = [
      { group: '', resource: 'events', verb: 'list', namespace: 'default' },
      { group: '', resource: 'events', verb: 'patch', namespace: 'default' },
      { group: 'events.k8s.io', resource: 'events', verb: 'create', namespace: 'default' },
      { group: 'pulumi.com', resource: 'stacks', verb: 'get', namespace: 'default' },
      { group: 'pulumi.com', resource: 'stacks', verb: 'update', namespace: 'default' },
      { group: 'auto.pulumi.com', resource: 'workspaces', verb: 'get', namespace: 'default' },
      { group: 'auto.pulumi.com', resource: 'updates', verb: 'update', namespace: 'default' },
      { group: '', resource: 'secrets', verb: 'get', namespace: 'pulumi-system' },
      { group: '', resource: 'secrets', verb: 'list' },
      { group: 'apps', resource: 'statefulsets', verb: 'create', namespace: 'default' },
    ];
    for (const attrs of denied) {
      expect({ attrs, allowed: await api.can(user, groups, attrs) }).toEqual({ attrs, allowed: false });
    }
    // The gauges of Stacks and Programs are read from the objects (docs/observability.md), and the
    // events go only to Stacks, Workspaces and Updates the hooks watch (docs/security.md).
    for (const attrs of [
      { group: 'pulumi.com', resource: 'stacks', verb: 'list' },
      { group: 'pulumi.com', resource: 'stacks', verb: 'watch' },
      { group: 'pulumi.com', resource: 'programs', verb: 'list' },
      { group: 'auto.pulumi.com', resource: 'workspaces', verb: 'watch' },
      { group: 'auto.pulumi.com', resource: 'updates', verb: 'list' },
    ])
      expect({ attrs, allowed: await api.can(user, groups, attrs) }).toEqual({ attrs, allowed: true });
  }, 30_000);

  test('the built-in edit role manages Stacks and Programs; view does not read them', async () => {
    for (const resource of ['stacks', 'programs']) {
      const attrs = { group: 'pulumi.com', resource, verb: 'create', namespace: 'default' };
      expect(
        await api.eventually(
          `edit aggregates ${resource}`,
          async () => ((await api.can('alice', ['system:authenticated'], attrs)) ? true : undefined),
          20_000,
        ),
      ).toBe(true);
      expect(await api.can('bob', ['system:authenticated'], { ...attrs, verb: 'get' })).toBe(false);
    }
  }, 30_000);
});

describe('other manifests, examples and docs', () => {
  test('manifests/kube-state-metrics.yaml passes a dry run', async () => {
    expect(await applyAll(loadObjects(readRepoFile('manifests/kube-state-metrics.yaml')), { dryRun: true })).toEqual({
      failures: [],
      warnings: [],
    });
  });

  const exampleFiles = fs
    .readdirSync(repoPath('examples', 'stacks'))
    .filter((f) => f.endsWith('.yaml'))
    .sort();

  test.each(exampleFiles)(
    'examples/stacks/%s passes a dry run (namespace default) against the real CRDs',
    async (file) => {
      const objects = loadObjects(readRepoFile(`examples/stacks/${file}`), file);
      expect(objects.length).toBeGreaterThan(0);
      expect(await applyAll(objects, { dryRun: true, namespace: 'default' })).toEqual({ failures: [], warnings: [] });
    },
  );

  /** Kinds shown in docs that this API server does not serve (Flux's and Argo CD's own): parsed only. */
  const EXTERNAL = new Set([
    'kustomize.toolkit.fluxcd.io/v1/Kustomization',
    'helm.toolkit.fluxcd.io/v2/HelmRelease',
    'argoproj.io/v1alpha1/Application',
  ]);
  // The documents that show Kubernetes objects (the others show commands only).
  const docs = ['quickstart.md', 'gitops.md', 'security.md', 'observability.md'];

  test.each(docs)('the Kubernetes objects in docs/%s pass a dry run', async (doc) => {
    const text = readRepoFile(`docs/${doc}`);
    const blocks = [...text.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);
    const objects = blocks
      .flatMap((b) => loadAll(b))
      .filter(
        (o): o is KObject =>
          typeof o === 'object' &&
          o !== null &&
          'apiVersion' in o &&
          'kind' in o &&
          typeof (o as KObject).metadata?.name === 'string',
      );
    const served = objects.filter((o) => !EXTERNAL.has(`${o.apiVersion}/${o.kind}`));
    for (const ns of new Set(served.map((o) => o.metadata.namespace).filter((n): n is string => !!n))) {
      // Create missing namespaces only: re-applying one (pulumi-system) would drop its labels.
      if ((await api.request('GET', `/api/v1/namespaces/${ns}`)).status === 404)
        await applyForReal([namespaceObject(ns, false)]);
    }
    expect(served.length).toBeGreaterThan(0);
    expect(await applyAll(served, { dryRun: true, namespace: 'default' })).toEqual({ failures: [], warnings: [] });
  });
});
