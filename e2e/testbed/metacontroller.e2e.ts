/**
 * Self-tests of the Metacontroller driver (metacontroller.ts) through the harness, against the
 * real control plane, with test CRDs (group test.pko.example) and hooks served by a local HTTPS
 * server that wants a credential (metacontroller-fixture.ts). With METACONTROLLER_BIN (and METACONTROLLER_CRDS) set, the same tests run against a
 * real Metacontroller binary.
 *
 *   npm run test:e2e -- e2e/testbed/metacontroller.e2e.ts
 */
import type * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { expect } from '@jest/globals';
import type { CoreV1Event } from '@kubernetes/client-node';
import { makeHookCredentials } from '../../hooks/test/credentials';
import { type ControlPlane, startControlPlane } from './control-plane';
import { type Controllers, startControllers } from './metacontroller-harness';
import { LAST_APPLIED, merge } from './metacontroller/apply';
import { isNotFound, type KObject, Kube, type Resource } from './metacontroller/kube';
import { eventually, sleep } from './helpers';
import {
  type Call,
  calls,
  CC_NAME,
  CLUSTERROLES,
  CONFIGMAPS,
  controllers,
  crd,
  credentialObjects,
  CRDS,
  DC_NAME,
  finalizeHold,
  FINALIZER,
  GROUP,
  HOOKS_SERVICE,
  type ParentSpec,
  PARENTS,
  refused,
  SECRETS,
  SERVICEACCOUNTS,
  startHooks,
  TARGETS,
} from './metacontroller-fixture';
// ---------------------------------------------------------------------------------------------

let cp: ControlPlane;
let kube: Kube;
let hooks: http.Server;
let mc: Controllers;

const getOrUndefined = (r: Resource, ns: string | undefined, name: string): Promise<KObject | undefined> =>
  kube.get(r, ns, name).catch((e: unknown) => {
    if (isNotFound(e)) return undefined;
    throw e;
  });

const patch = (r: Resource, ns: string, name: string, body: object): Promise<KObject> =>
  kube.request('PATCH', Kube.path(r, ns, name), body, 'application/merge-patch+json');

let nsCounter = 0;
async function namespace(): Promise<string> {
  const name = `mc-${process.pid}-${++nsCounter}`;
  await kube.request('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  return name;
}

async function createParent(ns: string, name: string, spec: ParentSpec): Promise<KObject> {
  return kube.create(PARENTS, {
    apiVersion: PARENTS.apiVersion,
    kind: 'Parent',
    metadata: { name, namespace: ns },
    spec,
  });
}

const syncCalls = (uid: string, path = '/parents/sync'): Call[] =>
  calls.filter((c) => c.path === path && c.body.parent?.metadata.uid === uid);

/** An object's status and data as the test objects have them (free-form maps). */
const statusOf = (o: KObject): Record<string, unknown> | undefined => o.status as Record<string, unknown> | undefined;
const dataOf = (o: KObject): Record<string, string> | undefined => o.data as Record<string, string> | undefined;

beforeAll(async () => {
  cp = await startControlPlane();
  kube = new Kube(cp.kubeConfig);
  for (const [plural, kind] of [
    ['parents', 'Parent'],
    ['targets', 'Target'],
  ] as const) {
    await kube.create(CRDS, crd(plural, kind));
  }
  await eventually('test CRDs served', async () => {
    const list = await kube.request<{ resources: { name: string }[] }>('GET', `/apis/${GROUP}/v1`);
    const names = list.resources.map((r) => r.name);
    return ['parents', 'parents/status', 'targets', 'targets/status'].every((n) => names.includes(n));
  });
  // The credentials as the quickstart makes them, for the fixture's Service and 127.0.0.1 (where
  // the harness's rewrite points the webhooks); the controllers read them when they start.
  const credentials = makeHookCredentials(join(cp.dir, 'fixture-credentials'), {
    SERVICE: HOOKS_SERVICE.name,
    NAMESPACE: HOOKS_SERVICE.namespace,
    EXTRA_SANS: 'IP:127.0.0.1',
  });
  for (const o of credentialObjects(credentials)) await kube.create(o.kind === 'Secret' ? SECRETS : CONFIGMAPS, o);
  hooks = await startHooks(credentials);
  const port = (hooks.address() as AddressInfo).port;
  mc = await startControllers({
    kubeConfig: cp.kubeConfig,
    kubeconfigPath: cp.kubeconfigPath,
    hooksBaseUrl: `https://127.0.0.1:${port}`,
    controllers: controllers(port),
  });
  console.log(`Metacontroller mode: ${mc.mode}${mc.logFile ? ` (log: ${mc.logFile})` : ''}`);
}, 120_000);

afterAll(async () => {
  await mc?.stop();
  await kube?.close();
  await new Promise((r) => (hooks ? hooks.close(r) : r(undefined)));
  await cp?.stop();
});

// ---------------------------------------------------------------------------------------------

describe('CompositeController', () => {
  test('creates a child with the controllerRef, the controller-uid label and last-applied; status gets observedGeneration', async () => {
    const ns = await namespace();
    const parent = await createParent(ns, 'p1', { children: ['a'], value: 'one' });
    const uid = parent.metadata.uid!;

    const cm = await eventually('child ConfigMap', () => getOrUndefined(CONFIGMAPS, ns, 'p1-a'));
    expect(cm.metadata.ownerReferences).toEqual([
      { apiVersion: `${GROUP}/v1`, kind: 'Parent', name: 'p1', uid, controller: true, blockOwnerDeletion: true },
    ]);
    expect(cm.metadata.labels).toEqual({ app: 'pko-test', 'controller-uid': uid });
    expect(cm.data).toEqual({ value: 'one' });
    // The hook's object with the defaulted namespace and the selector label, nothing else.
    expect(JSON.parse(cm.metadata.annotations![LAST_APPLIED]!)).toEqual({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'p1-a', namespace: ns, labels: { app: 'pko-test', 'controller-uid': uid } },
      data: { value: 'one' },
    });

    const live = await eventually('parent status', async () => {
      const p = await kube.get(PARENTS, ns, 'p1');
      return statusOf(p)?.observedGeneration === 1 ? p : undefined;
    });
    expect(live.status).toEqual({ children: 1, value: 'one', observedGeneration: 1 });
    expect(live.metadata.finalizers).toContain(FINALIZER);

    // The request: v2 keys, every child type present, related and finalizing always there.
    const first = syncCalls(uid)[0]!;
    expect(Object.keys(first.body).sort()).toEqual(['children', 'controller', 'finalizing', 'parent', 'related']);
    expect(first.body.finalizing).toBe(false);
    expect(first.body.related).toEqual({});
    expect(first.body.controller?.metadata.name).toBe(CC_NAME);
    expect(Object.keys(first.body.children ?? {}).sort()).toEqual(['ConfigMap.v1', 'Secret.v1']);
    expect(first.body.children?.['Secret.v1']).toEqual({});
    const seen = await eventually('a sync request that shows the child', () =>
      syncCalls(uid).find((c) => c.body.children?.['ConfigMap.v1']?.[`${ns}/p1-a`] !== undefined),
    );
    expect(seen.body.children?.['ConfigMap.v1']?.[`${ns}/p1-a`]?.metadata.uid).toBe(cm.metadata.uid);
  });

  test('InPlace update is a 3-way merge that keeps what another actor wrote; OnDelete never updates', async () => {
    const ns = await namespace();
    await createParent(ns, 'p2', { children: ['a'], value: 'one', secret: 's1' });
    await eventually('child ConfigMap', () => getOrUndefined(CONFIGMAPS, ns, 'p2-a'));
    const secret = await eventually('child Secret', () => getOrUndefined(SECRETS, ns, 'p2-secret'));

    // Another actor adds a data key, a label and an annotation.
    await patch(CONFIGMAPS, ns, 'p2-a', {
      metadata: { labels: { other: 'x' }, annotations: { 'other/note': 'y' } },
      data: { extra: 'kept' },
    });
    await patch(PARENTS, ns, 'p2', { spec: { value: 'two', secret: 's2' } });

    const cm = await eventually('child updated in place', async () => {
      const c = await kube.get(CONFIGMAPS, ns, 'p2-a');
      return dataOf(c)?.value === 'two' ? c : undefined;
    });
    expect(cm.data).toEqual({ value: 'two', extra: 'kept' });
    expect(cm.metadata.labels).toEqual({ app: 'pko-test', 'controller-uid': expect.any(String), other: 'x' });
    expect(cm.metadata.annotations!['other/note']).toBe('y');
    expect((JSON.parse(cm.metadata.annotations![LAST_APPLIED]!) as KObject).data).toEqual({ value: 'two' });

    const p = await eventually('status of generation 2', async () => {
      const x = await kube.get(PARENTS, ns, 'p2');
      return statusOf(x)?.observedGeneration === 2 ? x : undefined;
    });
    expect(p.status).toEqual({ children: 2, value: 'two', observedGeneration: 2 });
    // The Secret (OnDelete) still has its first content.
    const s = await kube.get(SECRETS, ns, 'p2-secret');
    expect(s.metadata.resourceVersion).toBe(secret.metadata.resourceVersion);
    expect(Buffer.from(dataOf(s)?.v ?? '', 'base64').toString()).toBe('s1');
  });

  test('a child the hook no longer returns is deleted', async () => {
    const ns = await namespace();
    await createParent(ns, 'p3', { children: ['a', 'b'] });
    await eventually(
      'both children',
      async () => (await getOrUndefined(CONFIGMAPS, ns, 'p3-a')) && getOrUndefined(CONFIGMAPS, ns, 'p3-b'),
    );
    await patch(PARENTS, ns, 'p3', { spec: { children: ['b'] } });
    await eventually('p3-a deleted', async () => (await getOrUndefined(CONFIGMAPS, ns, 'p3-a')) === undefined);
    expect(await getOrUndefined(CONFIGMAPS, ns, 'p3-b')).toBeDefined();
  });

  test('creates every child the hook answers, of any kind, where it says; observes only declared kinds in its namespace', async () => {
    // What a hook answers is what Metacontroller writes (pkg/controller/common/manage_children.go):
    // any kind discovery knows, in the namespace the child names (the parent's when it names none).
    // It lists children again only of the declared kinds and in the parent's namespace
    // (claimChildren in pkg/controller/composite/controller.go), so only those are deleted when the
    // hook stops answering them.
    const ns = await namespace();
    const other = await namespace();
    // The garbage collector removes a child whose owner reference cannot resolve (a parent in
    // another namespace, or a namespaced parent of a cluster-scoped child) at once: watch for them.
    const created = new Set<string>();
    for (const r of [CONFIGMAPS, CLUSTERROLES]) {
      const { resourceVersion } = await kube.list(r);
      void kube.watch(r, resourceVersion, (e) => {
        if (e.type === 'ADDED')
          created.add(`${e.object.kind} ${e.object.metadata.namespace ?? ''}/${e.object.metadata.name}`);
      });
    }
    const clusterRole = `pko-test-${ns}`;
    const verbatim = [
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'v-here' }, data: { v: '1' } },
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'v-there', namespace: other }, data: { v: '1' } },
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'v-undeclared' } },
      // Cluster-scoped: the parent's namespace, filled in, is ignored.
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: clusterRole }, rules: [] },
    ];
    const parent = await createParent(ns, 'v', { verbatim });
    const uid = parent.metadata.uid!;
    const here = await eventually("the child in the parent's namespace", () =>
      getOrUndefined(CONFIGMAPS, ns, 'v-here'),
    );
    const undeclared = await eventually('the child of an undeclared kind', () =>
      getOrUndefined(SERVICEACCOUNTS, ns, 'v-undeclared'),
    );
    for (const o of [here, undeclared]) {
      expect(o.metadata.ownerReferences).toEqual([
        { apiVersion: `${GROUP}/v1`, kind: 'Parent', name: 'v', uid, controller: true, blockOwnerDeletion: true },
      ]);
      expect(o.metadata.labels).toEqual({ 'controller-uid': uid });
    }
    await eventually('the child in another namespace', () => created.has(`ConfigMap ${other}/v-there`));
    await eventually('the cluster-scoped child', () => created.has(`ClusterRole /${clusterRole}`));
    const seen = await eventually('a sync request that shows the child', () =>
      syncCalls(uid).find((c) => c.body.children?.['ConfigMap.v1']?.[`${ns}/v-here`] !== undefined),
    );
    expect(Object.keys(seen.body.children ?? {}).sort()).toEqual(['ConfigMap.v1', 'Secret.v1']);
    expect(Object.keys(seen.body.children?.['ConfigMap.v1'] ?? {})).toEqual([`${ns}/v-here`]);

    await patch(PARENTS, ns, 'v', { spec: { verbatim: [] } });
    await eventually('status of generation 2', async () =>
      statusOf(await kube.get(PARENTS, ns, 'v'))?.observedGeneration === 2 ? true : undefined,
    );
    expect(await getOrUndefined(CONFIGMAPS, ns, 'v-here')).toBeUndefined();
    expect(await getOrUndefined(SERVICEACCOUNTS, ns, 'v-undeclared')).toBeDefined();
  });

  test('resyncAfterSeconds calls sync again; a steady state writes nothing', async () => {
    const ns = await namespace();
    const r1 = await createParent(ns, 'r1', { children: ['a'], resyncAfterSeconds: 0.3 });
    const r2 = await createParent(ns, 'r2', { children: ['a'] });
    for (const name of ['r1', 'r2']) {
      await eventually(`${name} synced`, async () =>
        statusOf(await kube.get(PARENTS, ns, name))?.observedGeneration === 1 ? true : undefined,
      );
      await eventually(`${name}-a`, () => getOrUndefined(CONFIGMAPS, ns, `${name}-a`));
    }
    await sleep(1000); // let the events of our own writes settle
    const before = { r1: syncCalls(r1.metadata.uid!).length, r2: syncCalls(r2.metadata.uid!).length };
    const rv = async (r: Resource, name: string): Promise<string | undefined> =>
      (await kube.get(r, ns, name)).metadata.resourceVersion;
    const rvs = [await rv(PARENTS, 'r1'), await rv(CONFIGMAPS, 'r1-a'), await rv(PARENTS, 'r2')];
    await sleep(2500);
    expect(syncCalls(r1.metadata.uid!).length - before.r1).toBeGreaterThanOrEqual(4);
    expect(syncCalls(r2.metadata.uid!).length - before.r2).toBe(0);
    // Unchanged status and children: no write at all (DeepEqual before every write).
    expect([await rv(PARENTS, 'r1'), await rv(CONFIGMAPS, 'r1-a'), await rv(PARENTS, 'r2')]).toEqual(rvs);
  });

  test('deleting the parent calls finalize; it goes away only after finalized: true', async () => {
    const ns = await namespace();
    const parent = await createParent(ns, 'f1', { children: ['a'] });
    const uid = parent.metadata.uid!;
    await eventually('child', () => getOrUndefined(CONFIGMAPS, ns, 'f1-a'));
    await eventually('finalizer', async () =>
      (await kube.get(PARENTS, ns, 'f1')).metadata.finalizers?.includes(FINALIZER),
    );
    finalizeHold.add('f1');
    await kube.delete(PARENTS, ns, 'f1');

    const call = await eventually('a finalize call', () => syncCalls(uid, '/parents/finalize')[0]);
    expect(call.body.finalizing).toBe(true);
    expect(call.body.parent?.metadata.deletionTimestamp).toBeDefined();
    expect(Object.keys(call.body.children ?? {}).sort()).toEqual(['ConfigMap.v1', 'Secret.v1']);
    // While finalizing, children are still managed: finalize returned none, so the child goes.
    await eventually(
      'child deleted while finalizing',
      async () => (await getOrUndefined(CONFIGMAPS, ns, 'f1-a')) === undefined,
    );
    await eventually(
      'finalize called again (resyncAfterSeconds)',
      () => syncCalls(uid, '/parents/finalize').length >= 3,
    );
    const held = await kube.get(PARENTS, ns, 'f1');
    expect(held.metadata.deletionTimestamp).toBeDefined();
    expect(held.metadata.finalizers).toEqual([FINALIZER]);

    finalizeHold.delete('f1');
    await eventually('parent gone', async () => (await getOrUndefined(PARENTS, ns, 'f1')) === undefined);
  });

  test('customize: a change to a related ConfigMap triggers a sync that carries it under v2 keys', async () => {
    const ns = await namespace();
    const parent = await createParent(ns, 'c1', { relatedConfigMap: 'cfg' });
    const uid = parent.metadata.uid!;
    const customize = await eventually('customize call', () => syncCalls(uid, '/parents/customize')[0]);
    expect(Object.keys(customize.body).sort()).toEqual(['controller', 'parent']);
    const empty = await eventually('sync without the related object', () => syncCalls(uid)[0]);
    expect(empty.body.related).toEqual({ 'ConfigMap.v1': {} });

    await kube.create(CONFIGMAPS, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'cfg', namespace: ns },
      data: { v: '1' },
    });
    await eventually('status.related = 1', async () => statusOf(await kube.get(PARENTS, ns, 'c1'))?.related === '1');
    await patch(CONFIGMAPS, ns, 'cfg', { data: { v: '2' } });
    const relatedCfg = (c: Call): KObject | undefined => c.body.related?.['ConfigMap.v1']?.[`${ns}/cfg`];
    const call = await eventually('sync with the updated related object', () =>
      syncCalls(uid).find((c) => {
        const cfg = relatedCfg(c);
        return cfg !== undefined && dataOf(cfg)?.v === '2';
      }),
    );
    expect(Object.keys(call.body.related ?? {})).toEqual(['ConfigMap.v1']);
    expect(Object.keys(call.body.related?.['ConfigMap.v1'] ?? {})).toEqual([`${ns}/cfg`]);
    await eventually('status.related = 2', async () => statusOf(await kube.get(PARENTS, ns, 'c1'))?.related === '2');
  });

  test('a malformed hook response (unknown field, strict v2 decoding) produces a SyncError event', async () => {
    const ns = await namespace();
    const parent = await createParent(ns, 'm1', { malformed: true });
    const ev = await eventually('SyncError event', async () => {
      const list = await kube.request<{ items: CoreV1Event[] }>('GET', `/api/v1/namespaces/${ns}/events`);
      return list.items.find((e) => e.involvedObject?.uid === parent.metadata.uid && e.reason === 'SyncError');
    });
    expect(ev.type).toBe('Warning');
    expect(ev.message).toMatch(/^Sync error: /);
    expect(ev.message).toContain('unknown field "unexpected"');
    expect(await getOrUndefined(CONFIGMAPS, ns, 'm1-a')).toBeUndefined();
    // Fixed: the next retry succeeds.
    await patch(PARENTS, ns, 'm1', { spec: { malformed: false, children: ['a'] } });
    await eventually('child after the fix', () => getOrUndefined(CONFIGMAPS, ns, 'm1-a'));
  });
});

describe('DecoratorController', () => {
  test('attaches a child to a matching target, sets its labels, annotations and status', async () => {
    const ns = await namespace();
    const create = (name: string, labels: Record<string, string>): Promise<KObject> =>
      kube.create(TARGETS, {
        apiVersion: TARGETS.apiVersion,
        kind: 'Target',
        metadata: { name, namespace: ns, labels },
        spec: { n: 1 },
      });
    const t1 = await create('t1', { decorate: 'yes' });
    const t2 = await create('t2', { decorate: 'no' });

    const att = await eventually('attachment', () => getOrUndefined(CONFIGMAPS, ns, 't1-attachment'));
    expect(att.metadata.ownerReferences).toEqual([
      {
        apiVersion: `${GROUP}/v1`,
        kind: 'Target',
        name: 't1',
        uid: t1.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(att.metadata.annotations!['metacontroller.k8s.io/decorator-controller']).toBe(DC_NAME);
    expect(att.data).toEqual({ target: 't1' });

    const live = await eventually('target decorated', async () => {
      const t = await kube.get(TARGETS, ns, 't1');
      return t.metadata.labels?.decorated === 'true' && statusOf(t)?.attached ? t : undefined;
    });
    expect(live.metadata.labels).toEqual({ decorate: 'yes', decorated: 'true' });
    expect(live.metadata.annotations!['pko-test/decorated-by']).toBe(DC_NAME);
    expect(live.status).toEqual({ attached: true }); // no observedGeneration for decorators
    expect(live.metadata.finalizers ?? []).toEqual([]); // no finalize hook, no finalizer

    const call = calls.find((c) => c.path === '/targets/sync' && c.body.object?.metadata.uid === t1.metadata.uid);
    expect(Object.keys(call?.body ?? {}).sort()).toEqual([
      'attachments',
      'controller',
      'finalizing',
      'object',
      'related',
    ]);
    expect(Object.keys(call?.body.attachments ?? {})).toEqual(['ConfigMap.v1']);
    const later = await eventually('a sync that shows the attachment', () =>
      calls.find((c) => c.path === '/targets/sync' && c.body.attachments?.['ConfigMap.v1']?.[`${ns}/t1-attachment`]),
    );
    expect(later.body.object?.metadata.name).toBe('t1');

    // The non-matching target is left alone.
    expect(calls.some((c) => c.body.object?.metadata.uid === t2.metadata.uid)).toBe(false);
    expect(await getOrUndefined(CONFIGMAPS, ns, 't2-attachment')).toBeUndefined();
  });
});

describe('webhook TLS and authentication', () => {
  test('every call checked the server against its caBundle and carried the credential of its Secret', () => {
    // The tests above ran: both controllers' hooks were called, none without its credential.
    const paths = new Set(calls.map((c) => c.path));
    for (const p of ['/parents/customize', '/parents/sync', '/parents/finalize', '/targets/sync'])
      expect(paths.has(p)).toBe(true);
    expect(refused).toEqual([]);
    // Per hook: authorization (Bearer, the Secret's token trimmed); from endpointConfigs: basicAuth.
    const byPath = new Map(calls.map((c) => [c.path.split('/')[1], c.authorization]));
    expect(byPath.get('parents')).toMatch(/^Bearer [0-9a-f]{64}$/);
    expect(byPath.get('targets')).toMatch(/^Basic /);
  });
});

// The driver's 3-way merge on Metacontroller's own cases (pkg/dynamic/apply/apply_test.go TestMerge).
describe('dynamic apply merge (driver code)', () => {
  const cases: [string, object, object, object, object][] = [
    ['empty', {}, {}, {}, {}],
    [
      'scalars',
      { keep: 'other', remove: 'other', replace: 'other' },
      { remove: 'old', replace: 'old' },
      { replace: 'new', add: 'new' },
      { replace: 'new', add: 'new', keep: 'other' },
    ],
    [
      'nested object',
      { update: { keep: 'other', remove: 'other' } },
      { update: { remove: 'old', replace: 'old' } },
      { update: { replace: 'new', add: 'new' } },
      { update: { replace: 'new', add: 'new', keep: 'other' } },
    ],
    [
      'replace list',
      { list: [1, 2, 3, { a: true }] },
      { list: [4, 5, 6] },
      { list: [7, 8, 9, { b: false }] },
      { list: [7, 8, 9, { b: false }] },
    ],
    [
      'merge list-map',
      {
        listMap: [
          { name: 'keep', value: 'other' },
          { name: 'remove', value: 'other' },
          { name: 'merge', nested: { keep: 'other' } },
        ],
        ports1: [{ port: 80, keep: 'other' }],
        ports2: [{ containerPort: 80, keep: 'other' }],
      },
      { listMap: [{ name: 'remove', value: 'old' }], ports1: [{ port: 80, remove: 'old' }] },
      {
        listMap: [
          { name: 'add', value: 'new' },
          { name: 'merge', nested: { add: 'new' } },
        ],
        ports1: [{ port: 80, add: 'new' }, { port: 90 }],
        ports2: [{ containerPort: 80 }, { containerPort: 90 }],
      },
      {
        listMap: [
          { name: 'keep', value: 'other' },
          { name: 'merge', nested: { keep: 'other', add: 'new' } },
          { name: 'add', value: 'new' },
        ],
        ports1: [{ port: 80, keep: 'other', add: 'new' }, { port: 90 }],
        ports2: [{ containerPort: 80, keep: 'other' }, { containerPort: 90 }],
      },
    ],
    [
      "replace list of objects that's not a list-map",
      {
        notListMap: [
          { name: 'keep', value: 'other' },
          { notName: 'remove', value: 'other' },
          { name: 'merge', nested: { keep: 'other' } },
        ],
      },
      { notListMap: [{ name: 'remove', value: 'old' }] },
      {
        notListMap: [
          { name: 'add', value: 'new' },
          { name: 'merge', nested: { add: 'new' } },
        ],
      },
      {
        notListMap: [
          { name: 'add', value: 'new' },
          { name: 'merge', nested: { add: 'new' } },
        ],
      },
    ],
  ];
  test.each(cases)('%s', (_name, observed, lastApplied, desired, want) => {
    const result = merge(observed as never, lastApplied as never, desired as never);
    expect(result).toEqual(want);
    // Order matters for lists: existing items first, new desired items appended.
    expect(JSON.stringify(Object.values(result).filter(Array.isArray))).toBe(
      JSON.stringify(Object.values(want).filter(Array.isArray)),
    );
  });
});
