/**
 * Issue 22, item 8: upstream's gauges survive restarts and replicas. Two hook servers against one
 * real API server (the test bed's control plane; no node is needed), each listing and watching
 * Stacks and Programs with a token of the ServiceAccount pulumi-mc-hooks, bound by the ClusterRole
 * of manifests/install.yaml: both report the same stacks_active, stacks_failing and
 * programs_active for a failing and a succeeded Stack, follow a recovery and a deletion, and a
 * restarted one reports the same at once. The statuses are written through the status subresource
 * as Metacontroller writes the hooks' answers; which hook server answered plays no part here.
 * Run: npm run test:e2e -- e2e/object-metrics.e2e.ts
 */
import type { AddressInfo } from 'node:net';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import * as k8s from '@kubernetes/client-node';
import { request } from 'undici';
import { configFromEnv } from '../hooks/src/config';
import { startHookServer, type RunningServer } from '../hooks/src/main';
import { kubeObjectsApi } from '../hooks/src/objects/kubernetes';
import { hooksKubeConfig } from './harness';
import { type ControlPlane, startControlPlane } from './testbed/control-plane';
import { eventually } from './testbed/helpers';
import { REPO_ROOT, requireToolchain } from './testbed/toolchain';

const GROUP = { group: 'pulumi.com', version: 'v1' } as const;
const ns = 'metrics';

let cp: ControlPlane;
let custom: k8s.CustomObjectsApi;
let hooksKc: k8s.KubeConfig;
const servers: RunningServer[] = [];

beforeAll(async () => {
  requireToolchain(['etcd', 'kubernetes']);
  cp = await startControlPlane();
  const objects = k8s.KubernetesObjectApi.makeApiClient(cp.kubeConfig);
  for (const file of readdirSync(join(REPO_ROOT, 'manifests', 'crds')))
    for (const doc of loadAll(readFileSync(join(REPO_ROOT, 'manifests', 'crds', file), 'utf8')))
      await objects.create(doc as k8s.KubernetesObject);
  custom = cp.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
  await eventually('the CRDs to be served', async () => {
    await custom.listClusterCustomObject({ ...GROUP, plural: 'stacks' });
    await custom.listClusterCustomObject({ ...GROUP, plural: 'programs' });
    return true;
  });
  await cp.kubeConfig.makeApiClient(k8s.CoreV1Api).createNamespace({ body: { metadata: { name: ns } } });
  hooksKc = await hooksKubeConfig(cp.kubeConfig);
}, 180_000);

afterAll(async () => {
  for (const s of servers) await s.shutdown('test').catch(() => undefined);
  await cp?.stop();
});

async function startHooks(): Promise<RunningServer & { base: string }> {
  const server = await startHookServer(
    { ...configFromEnv({}), port: 0, host: '127.0.0.1', logLevel: 'warn' },
    { objects: { api: kubeObjectsApi(hooksKc), via: 'pulumi-mc-hooks' } },
  );
  servers.push(server);
  return { ...server, base: `http://127.0.0.1:${(server.app.server.address() as AddressInfo).port}` };
}

/** Upstream's three gauges and the mirror's health in one scrape, sorted. */
async function gauges(base: string): Promise<string[]> {
  const res = await request(`${base}/metrics`);
  expect(res.statusCode).toBe(200);
  return (await res.body.text())
    .split('\n')
    .filter((l) => /^(stacks_active|stacks_failing|programs_active|pulumi_hook_objects_synced)[ {]/.test(l))
    .sort();
}

async function createStack(name: string): Promise<void> {
  await custom.createNamespacedCustomObject({
    ...GROUP,
    namespace: ns,
    plural: 'stacks',
    body: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name },
      spec: { stack: 'dev', projectRepo: 'https://git.example/project.git', branch: 'main' },
    },
  });
}

/** Writes the status a finished operation leaves, through the status subresource. */
async function finishOperation(name: string, state: 'failed' | 'succeeded'): Promise<void> {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  await custom.patchNamespacedCustomObjectStatus(
    {
      ...GROUP,
      namespace: ns,
      plural: 'stacks',
      name,
      body: {
        status: {
          observedGeneration: 1,
          lastUpdate: {
            generation: 1,
            name: `${name}-up`,
            type: 'up',
            state,
            lastResyncTime: now,
            ...(state === 'failed' ? { failures: 1, message: 'the update failed' } : {}),
          },
          conditions: [
            {
              type: 'Ready',
              status: state === 'succeeded' ? 'True' : 'False',
              reason: state === 'succeeded' ? 'ProcessingCompleted' : 'NotReadyInProgress',
              message: '',
              lastTransitionTime: now,
              observedGeneration: 1,
            },
          ],
        },
      },
    },
    k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
  );
}

async function sameOnBoth(a: string, b: string, expected: string[], what: string): Promise<void> {
  await eventually(
    what,
    async () => {
      const [one, two] = await Promise.all([gauges(a), gauges(b)]);
      return one.join('\n') === expected.join('\n') && two.join('\n') === expected.join('\n') ? true : undefined;
    },
    30_000,
    200,
  );
}

test('two hook servers and a restarted one report the same gauges for a failing and a succeeded Stack', async () => {
  await createStack('ready');
  await createStack('failing');
  await createStack('fresh');
  await custom.createNamespacedCustomObject({
    ...GROUP,
    namespace: ns,
    plural: 'programs',
    body: {
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: 'prog' },
      program: { resources: { cm: { type: 'kubernetes:core/v1:ConfigMap' } } },
    },
  });
  await finishOperation('ready', 'succeeded');
  await finishOperation('failing', 'failed');

  let one = await startHooks();
  const two = await startHooks();
  // Every mirror: the gauges' Stacks and Programs, the events' Workspaces and Updates.
  const synced = [
    'pulumi_hook_objects_synced{resource="programs"} 1',
    'pulumi_hook_objects_synced{resource="stacks"} 1',
    'pulumi_hook_objects_synced{resource="updates"} 1',
    'pulumi_hook_objects_synced{resource="workspaces"} 1',
  ];
  const initial = [
    'programs_active 1',
    ...synced,
    'stacks_active 3',
    `stacks_failing{namespace="${ns}",name="failing"} 1`,
    `stacks_failing{namespace="${ns}",name="ready"} 0`,
  ];
  await sameOnBoth(one.base, two.base, initial, 'both hook servers to list the Stacks');

  // The failing Stack recovers, the other fails: both watches carry it.
  await finishOperation('failing', 'succeeded');
  await finishOperation('ready', 'failed');
  const swapped = [
    'programs_active 1',
    ...synced,
    'stacks_active 3',
    `stacks_failing{namespace="${ns}",name="failing"} 0`,
    `stacks_failing{namespace="${ns}",name="ready"} 1`,
  ];
  await sameOnBoth(one.base, two.base, swapped, 'both hook servers to see the new states');

  // A restart: the new instance lists the same at once, no hook call needed.
  await one.shutdown('test');
  one = await startHooks();
  await sameOnBoth(one.base, two.base, swapped, 'the restarted hook server to agree');

  // A deleted Stack leaves the gauges of both.
  await custom.deleteNamespacedCustomObject({ ...GROUP, namespace: ns, plural: 'stacks', name: 'ready' });
  const afterDelete = [
    'programs_active 1',
    ...synced,
    'stacks_active 2',
    `stacks_failing{namespace="${ns}",name="failing"} 0`,
  ];
  await sameOnBoth(one.base, two.base, afterDelete, 'both hook servers to drop the deleted Stack');
}, 180_000);

test("the hooks' token may list and watch Stacks, Workspaces and Updates, not read a single one or a Secret", async () => {
  const asHooks = hooksKc.makeApiClient(k8s.CustomObjectsApi);
  await expect(asHooks.listClusterCustomObject({ ...GROUP, plural: 'stacks' })).resolves.toBeDefined();
  for (const plural of ['workspaces', 'updates'])
    await expect(
      asHooks.listClusterCustomObject({ group: 'auto.pulumi.com', version: 'v1alpha1', plural }),
    ).resolves.toBeDefined();
  await expect(
    asHooks.getNamespacedCustomObject({ ...GROUP, namespace: ns, plural: 'stacks', name: 'failing' }),
  ).rejects.toMatchObject({ code: 403 });
  await expect(hooksKc.makeApiClient(k8s.CoreV1Api).listSecretForAllNamespaces()).rejects.toMatchObject({ code: 403 });
});
