/**
 * Issue 36, items 2 and 5: idle Stacks hold no pod, on the real node. The hook server runs with
 * WORKSPACE_RECLAIM_DEFAULT=Delete and a cache volume per Stack (WORKSPACE_CACHE_SIZE, and
 * WORKSPACE_CACHE_RETAINED for a Stack that keeps its workspace). Each cache claim binds to a
 * volume of the node's disk made for it in advance (the test bed has no provisioner:
 * docs/testbed.md), so the test sees what the pods wrote there.
 * - a Program Stack that names no reclaim policy hibernates: 0 workspace pods after its operation,
 *   its claim `<stack>-cache` the Stack's child and kept, and it wakes (a new workspace on the same
 *   claim) for a Program edit, a reconciliation request and a drift check, each time back to Ready
 *   and to 0 pods; /metrics counts the wakes in pulumi_workspace_wake_seconds;
 * - a retained workspace on a cache claim (upstream#858): a file in the cache is seen by its pod and
 *   by the pod that replaces it;
 * - a claim of the cache's name made by someone else first is never adopted nor mounted;
 * - a file backend on the pod's own disk is refused (Stalled SpecInvalid).
 *
 * Run: npm run test:e2e -- e2e/hibernation.e2e.ts
 */
import { writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import * as k8s from '@kubernetes/client-node';
import type { Stack, StackSpec } from '../schemas/generated/types';
import { CACHE_DIR } from '../hooks/src/stack/hibernation';
import { condition, eventually, exists, kubectl, type Operator, programStack, stashProgram } from './harness';
import { e2eSuite } from './suite';
import { sleep } from './testbed/helpers';

let op: Operator;
const ns = 'hibernation';
const PROGRAMS = { group: 'pulumi.com', version: 'v1', plural: 'programs' } as const;

const { recordTiming, getStack, readyStack } = e2eSuite(
  'hibernation',
  ns,
  (started) => (op = started),
  () => ({
    // /metrics open to the test (METRICS_AUTH off): the scrape reads the wake histogram.
    hookConfig: {
      workspaceReclaimDefault: 'Delete',
      workspaceCache: { size: '1Gi', retained: true },
      metricsAuth: false,
    },
  }),
);

/** A program whose output is `value` itself (a Stash's output keeps its first value). */
const program = (name: string, value: string) => stashProgram(name, ns, value, { outputs: { value } });
const stack = (name: string, spec: Partial<StackSpec> = {}) => programStack(name, ns, spec);

const podExists = (name: string) =>
  exists(() => op.core.readNamespacedPod({ namespace: ns, name: `${name}-workspace-0` }));
const readClaim = (name: string) => op.core.readNamespacedPersistentVolumeClaim({ namespace: ns, name });

/** Waits until the Stack holds no workspace: no Workspace, StatefulSet or pod. */
async function hibernated(name: string): Promise<void> {
  await eventually(
    `${name}'s workspace pod to be gone`,
    async () =>
      !(await exists(() => op.apps.readNamespacedStatefulSet({ namespace: ns, name: `${name}-workspace` }))) &&
      !(await podExists(name)),
    120_000,
  );
}

/** Watches for the Stack's workspace StatefulSet in the background: the claims its pods mounted. */
function workspaceClaims(name: string): { stop(): Promise<string[]> } {
  const claims = new Set<string>();
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      try {
        const sts = await op.apps.readNamespacedStatefulSet({ namespace: ns, name: `${name}-workspace` });
        for (const v of sts.spec?.template.spec?.volumes ?? [])
          if (v.persistentVolumeClaim) claims.add(`${v.name}=${v.persistentVolumeClaim.claimName}`);
      } catch {
        /* not there (yet, or any more) */
      }
      await sleep(200);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return [...claims].sort();
    },
  };
}

/** A wake: `poke` makes the hibernated Stack need an operation; returns the Stack Ready after it, asleep again. */
async function wake(name: string, what: string, poke: () => Promise<void>, before: Stack): Promise<Stack> {
  const started = Date.now();
  const seen = workspaceClaims(name);
  await poke();
  const after = await readyStack(
    name,
    (s) =>
      s.status?.lastUpdate?.name !== before.status?.lastUpdate?.name && s.status?.lastUpdate?.state === 'succeeded',
    240_000,
  );
  await hibernated(name);
  expect(await seen.stop()).toEqual([`pulumi-cache=${name}-cache`, 'state=pulumi-state']);
  recordTiming(`wake for ${what}: Ready and asleep again`, started);
  return after;
}

async function scrape(): Promise<string> {
  const res = await op.hookRequest('/metrics');
  expect(res.status).toBe(200);
  return res.text;
}

const wakeCount = (text: string): number =>
  Number(/^pulumi_workspace_wake_seconds_count (\d+)/m.exec(text)?.[1] ?? Number.NaN);

describe('a hibernating Program Stack', () => {
  const name = 'sleepy';
  let cacheDir: string;
  let claimUid: string | undefined;
  let last: Stack;

  it('runs its operation, then holds no pod; its cache claim stays, with what the pod put there', async () => {
    const started = Date.now();
    cacheDir = await op.volumeForClaim(ns, `${name}-cache`);
    await op.objects.create(program(name, 'first'));
    await op.objects.create(stack(name));
    last = await readyStack(name, undefined, 240_000);
    expect(last.status?.outputs).toEqual({ value: 'first' });
    await hibernated(name);
    const claim = await readClaim(`${name}-cache`);
    claimUid = claim.metadata?.uid;
    expect(claim.status?.phase).toBe('Bound');
    expect(claim.metadata?.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Stack', name, uid: last.metadata.uid, controller: true }),
    ]);
    // The CLI's home was on the claim: it is there with the pod gone.
    expect(existsSync(join(cacheDir, 'pulumi'))).toBe(true);
    recordTiming('first operation and hibernation', started);
  });

  it('wakes for a Program edit, on the same cache claim', async () => {
    writeFileSync(join(cacheDir, 'marker'), 'left by the test\n');
    last = await wake(
      name,
      'a Program edit',
      async () => {
        await op.custom.patchNamespacedCustomObject(
          { ...PROGRAMS, namespace: ns, name, body: { program: program(name, 'second').program } },
          k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
        );
      },
      last,
    );
    expect(last.status?.outputs).toEqual({ value: 'second' });
    expect((await readClaim(`${name}-cache`)).metadata?.uid).toBe(claimUid);
    expect(existsSync(join(cacheDir, 'marker'))).toBe(true);
  });

  it('wakes for a reconciliation request', async () => {
    last = await wake(
      name,
      'a reconciliation request',
      () => op.patchStack(ns, name, { metadata: { annotations: { 'pulumi.com/reconciliation-request': 'wake-up' } } }),
      last,
    );
    expect(last.status?.lastUpdate?.reconcileRequest).toBe('wake-up');
  });

  it('wakes for a drift check, and sleeps again between checks', async () => {
    const started = Date.now();
    // Turning drift detection on is a spec change (an `up`), then a check every 30 s.
    last = await wake(
      name,
      'a spec change',
      () => op.patchStack(ns, name, { spec: { driftDetection: { schedule: '30s' } } }),
      last,
    );
    const rested = new Date().toISOString();
    const seen = workspaceClaims(name);
    const checked = await eventually(
      'a drift check after the Stack went to sleep',
      async () => {
        const s = await getStack(name);
        const time = s.status?.lastDriftCheck?.time;
        return time !== undefined && time > rested ? s : undefined;
      },
      240_000,
      1000,
    );
    expect(checked.status?.lastDriftCheck?.drifted).toBe(false);
    expect(await seen.stop()).toContain(`pulumi-cache=${name}-cache`);
    expect(condition(checked, 'Ready')?.status).toBe('True');
    // Off again: the next operation, and then no pod.
    last = await wake(
      name,
      'drift detection turned off',
      () => op.patchStack(ns, name, { spec: { driftDetection: null } }),
      checked,
    );
    recordTiming('wake for a drift check', started);
  });

  it('/metrics counts the wakes in pulumi_workspace_wake_seconds', async () => {
    // The first workspace and at least five wakes (edit, request, two spec changes, a check).
    expect(wakeCount(await scrape())).toBeGreaterThanOrEqual(6);
  });
});

describe('a retained workspace with a cache volume (upstream#858)', () => {
  it('sees a file of its cache, and so does the pod that replaces it', async () => {
    const started = Date.now();
    const name = 'kept';
    const dir = await op.volumeForClaim(ns, `${name}-cache`);
    await op.objects.create(program(name, 'kept'));
    await op.objects.create(stack(name, { workspaceReclaimPolicy: 'Retain' }));
    await readyStack(name, undefined, 240_000);
    expect(await podExists(name)).toBe(true);
    writeFileSync(join(dir, 'marker'), 'seen by every pod\n');
    const cat = () =>
      kubectl(op, ns, 'exec', `${name}-workspace-0`, '-c', 'pulumi', '--', 'cat', `${CACHE_DIR}/marker`);
    expect(await cat()).toBe('seen by every pod\n');
    const first = (await op.core.readNamespacedPod({ namespace: ns, name: `${name}-workspace-0` })).metadata?.uid;
    await op.core.deleteNamespacedPod({ namespace: ns, name: `${name}-workspace-0` });
    await eventually(
      'the replacement pod to run',
      async () => {
        const pod = await op.core
          .readNamespacedPod({ namespace: ns, name: `${name}-workspace-0` })
          .catch(() => undefined);
        return (
          pod?.metadata?.uid !== first && pod?.status?.containerStatuses?.some((c) => c.name === 'pulumi' && c.ready)
        );
      },
      180_000,
    );
    expect(await cat()).toBe('seen by every pod\n');
    recordTiming('retained workspace: the cache across a pod replacement', started);
  });
});

describe('what a hibernating Stack refuses', () => {
  it('never adopts nor mounts a claim of its cache name that someone else made', async () => {
    const name = 'taken';
    await op.objects.create({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: `${name}-cache`, namespace: ns },
      spec: { accessModes: ['ReadWriteOnce'], storageClassName: '', resources: { requests: { storage: '1Gi' } } },
    } as k8s.KubernetesObject);
    await op.objects.create(program(name, 'taken'));
    await op.objects.create(stack(name));
    const waiting = await eventually(
      'the Stack to say why it waits',
      async () => {
        const s = await getStack(name);
        return condition(s, 'Reconciling')?.message?.includes('rename or delete it') ? s : undefined;
      },
      120_000,
    );
    expect(condition(waiting, 'Ready')?.status).toBe('False');
    // Some seconds later still: no workspace, and the claim is still nobody's.
    await sleep(5000);
    expect(await exists(() => op.apps.readNamespacedStatefulSet({ namespace: ns, name: `${name}-workspace` }))).toBe(
      false,
    );
    expect((await readClaim(`${name}-cache`)).metadata?.ownerReferences ?? []).toEqual([]);
  });

  it('refuses hibernation for a file backend on the pod’s own disk', async () => {
    const name = 'ondisk';
    await op.objects.create(program(name, 'ondisk'));
    await op.objects.create(stack(name, { backend: 'file:///tmp/state' }));
    const stalled = await eventually(
      'the Stack to stall',
      async () => {
        const s = await getStack(name);
        return condition(s, 'Stalled')?.status === 'True' ? s : undefined;
      },
      120_000,
    );
    expect(condition(stalled, 'Stalled')).toMatchObject({ reason: 'SpecInvalid' });
    expect(condition(stalled, 'Stalled')?.message).toContain('file:///tmp/state is not on a volume');
    expect(await podExists(name)).toBe(false);
  });
});
