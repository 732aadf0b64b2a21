/**
 * Issue 23, drift detection on the real node: a Program Stack manages a ConfigMap in its own
 * cluster (with its ServiceAccount, as e2e/in-cluster-deploy.e2e.ts) and checks for drift every
 * 30 s (`spec.driftDetection`). The first check finds none; the test then changes the ConfigMap
 * with the API, outside Pulumi, and the next check reports it: Drifted True naming the ConfigMap's
 * URN, status.lastDriftCheck and a Warning event. Turning `remediate` on runs `up` with refresh,
 * which puts the program's data back, and the check after it finds no drift.
 */
import * as k8s from '@kubernetes/client-node';
import type { Stack } from '../schemas/generated/types';
import { e2eStackSpec, eventually, type Operator } from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const { recordTiming } = e2eSuite('drift-detection', undefined, (started) => (op = started));

const STACKS = 'drift-stacks';
const APPS = 'drift-apps';
const NAME = 'drifty';
const ACCOUNT = 'drift-deployer';
const GREETING = 'hello from a Stack';

const restricted = { 'pod-security.kubernetes.io/enforce': 'restricted' };

function objects(): k8s.KubernetesObject[] {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: STACKS, labels: restricted } },
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: APPS, labels: restricted } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: ACCOUNT, namespace: STACKS } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `pulumi-operator:auth-delegator:${STACKS}:${ACCOUNT}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
      subjects: [{ kind: 'ServiceAccount', name: ACCOUNT, namespace: STACKS }],
    } as k8s.KubernetesObject,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: ACCOUNT, namespace: APPS },
      rules: [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
      ],
    } as k8s.KubernetesObject,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: ACCOUNT, namespace: APPS },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: ACCOUNT },
      subjects: [{ kind: 'ServiceAccount', name: ACCOUNT, namespace: STACKS }],
    } as k8s.KubernetesObject,
    {
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: NAME, namespace: STACKS },
      program: {
        resources: {
          greeting: {
            type: 'kubernetes:core/v1:ConfigMap',
            properties: { metadata: { name: 'greeting', namespace: APPS }, data: { greeting: GREETING } },
          },
        },
        outputs: { configMap: '${greeting.metadata.name}' },
      },
    } as k8s.KubernetesObject,
    {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'pulumi-state', namespace: STACKS },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
    } as k8s.KubernetesObject,
    {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: NAME, namespace: STACKS },
      spec: e2eStackSpec({
        stack: 'dev',
        serviceAccountName: ACCOUNT,
        programRef: { name: NAME },
        driftDetection: { schedule: '30s' },
        destroyOnFinalize: true,
      }),
    } as k8s.KubernetesObject,
  ];
}

const drifted = (stack: Stack) => stack.status?.conditions?.find((c) => c.type === 'Drifted');

/** Waits for a drift check that ended after `since` and satisfies `done`; returns the Stack then. */
async function checkAfter(since: string, done: (stack: Stack) => boolean, what: string): Promise<Stack> {
  let last: Stack | undefined;
  try {
    await eventually(
      what,
      async () => {
        last = await op.getStack(STACKS, NAME);
        const check = last.status?.lastDriftCheck;
        return check?.time !== undefined && check.time > since && done(last);
      },
      240_000,
      1000,
    );
  } catch (e) {
    const log = await op.logs(STACKS, `${NAME}-workspace-0`, 'pulumi').catch(() => '');
    console.log(`Stack status: ${JSON.stringify(last?.status)}\nworkspace log (tail):\n${log.slice(-6000)}`);
    throw e;
  }
  return last!;
}

async function configMapData(): Promise<Record<string, string> | undefined> {
  return (await op.core.readNamespacedConfigMap({ namespace: APPS, name: 'greeting' })).data;
}

const nowIso = () => new Date(Date.now() - 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');

describe('drift detection on a schedule', () => {
  let deployedAt = '';

  it('deploys the ConfigMap, and the first check finds no drift: Drifted False', async () => {
    const started = Date.now();
    await op.volumeForClaim(STACKS, 'pulumi-state');
    for (const obj of objects()) await op.objects.create(obj);
    const stack = await op.readyStack(STACKS, NAME, undefined, 480_000);
    recordTiming('apply to Ready', started);
    expect(await configMapData()).toEqual({ greeting: GREETING });
    deployedAt = stack.status?.lastUpdate?.lastResyncTime ?? '';
    const checked = await checkAfter(deployedAt, (s) => s.status?.lastDriftCheck?.state !== undefined, 'a first check');
    recordTiming('Ready to the first drift check', started);
    expect(checked.status?.lastDriftCheck).toMatchObject({ state: 'succeeded', drifted: false, changedResources: 0 });
    expect(drifted(checked)).toMatchObject({ status: 'False', reason: 'NoDrift' });
    // A check is not an operation of the Stack: it stayed Ready, its last update is still the up.
    expect(checked.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(checked.status?.lastUpdate?.type).toBe('up');
    // The check ran as an Update of type refresh with previewOnly.
    const update = (await op.custom.getNamespacedCustomObject({
      group: 'auto.pulumi.com',
      version: 'v1alpha1',
      namespace: STACKS,
      plural: 'updates',
      name: checked.status!.lastDriftCheck!.name!,
    })) as { spec: Record<string, unknown>; status: Record<string, unknown> };
    expect(update.spec).toMatchObject({ type: 'refresh', previewOnly: true });
    expect(update.status).toMatchObject({ changedResources: 0 });
  }, 720_000);

  it('a ConfigMap changed outside Pulumi is reported: Drifted True with its URN, and a Warning event', async () => {
    await op.core.patchNamespacedConfigMap(
      { namespace: APPS, name: 'greeting', body: { data: { greeting: 'changed by hand' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    const since = nowIso();
    const started = Date.now();
    const stack = await checkAfter(
      since,
      (s) => s.status?.lastDriftCheck?.drifted === true,
      'a check that finds drift',
    );
    recordTiming('change to Drifted', started);
    const check = stack.status!.lastDriftCheck!;
    expect(check.changedResources).toBe(1);
    expect(check.urns).toEqual([expect.stringMatching(/::kubernetes:core\/v1:ConfigMap::greeting$/)]);
    const condition = drifted(stack);
    expect(condition).toMatchObject({ status: 'True', reason: 'DriftDetected' });
    expect(condition?.message).toContain('1 resource changed outside Pulumi: urn:pulumi:dev::');
    // Reported, not undone: remediate is off.
    expect(await configMapData()).toEqual({ greeting: 'changed by hand' });
    await eventually(
      'the DriftDetected event',
      async () => {
        const events = await op.core.listNamespacedEvent({ namespace: STACKS });
        return events.items.some(
          (e) =>
            e.involvedObject.uid === stack.metadata.uid &&
            e.reason === 'DriftDetected' &&
            e.type === 'Warning' &&
            e.related?.name === check.name,
        );
      },
      30_000,
      1000,
    );
  }, 300_000);

  it('with remediate, an up with refresh restores the ConfigMap and the next check finds no drift', async () => {
    const started = Date.now();
    await op.patchStack(STACKS, NAME, { spec: { driftDetection: { schedule: '30s', remediate: true } } });
    await eventually(
      'the program data back in the ConfigMap',
      async () => (await configMapData())?.greeting === GREETING,
      420_000,
      1000,
    );
    recordTiming('remediate on to the ConfigMap restored', started);
    const updates = (await op.custom.listNamespacedCustomObject({
      group: 'auto.pulumi.com',
      version: 'v1alpha1',
      namespace: STACKS,
      plural: 'updates',
    })) as { items: { spec: Record<string, unknown> }[] };
    expect(updates.items.map((u) => u.spec)).toContainEqual(
      expect.objectContaining({
        type: 'up',
        refresh: true,
        message: 'Drift detected: 1 resource changed outside Pulumi',
      }),
    );
    const since = nowIso();
    const stack = await checkAfter(
      since,
      (s) => s.status?.lastDriftCheck?.drifted === false,
      'a check after the remediation',
    );
    expect(drifted(stack)).toMatchObject({ status: 'False', reason: 'NoDrift' });
    expect(stack.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });
  }, 600_000);
});
