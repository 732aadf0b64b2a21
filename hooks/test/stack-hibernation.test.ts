/**
 * Hibernation (issue 36, item 2): a Stack that reclaims its workspace after each success holds no
 * pod at rest, keeps its cache volume `<stack>-cache`, and makes its workspace again for whatever
 * needs an operation. Played with the builders' stand-in for Metacontroller and the cluster.
 */
import type { Stack, StackSpec } from '../../schemas/generated/types';
import { configFromEnv, type HookConfig } from '../src/config';
import { becameReady, workspaceProjection } from '../src/objects/gauges';
import { stackEvents } from '../src/stack/events';
import { CACHE_DIR } from '../src/stack/hibernation';
import type { KObject } from '../src/lib/k8s';
import type { SyncContext } from '../src/stack/sync';
import {
  applyChildren,
  childrenMap,
  condition,
  find,
  jobFinishes,
  makeStack,
  noLookups,
  NOW,
  syncRequest,
  testConfig,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { childOf, containerOf, envValue, podSpecOf } from './children';
import { syncStack } from './controllers';
import { step } from './stories';

const CACHE = { size: '2Gi', storageClassName: 'fast', retained: false };
const hibernating: HookConfig = { ...testConfig, workspaceReclaimDefault: 'Delete', workspaceCache: CACHE };
const at = (config: HookConfig, now = NOW): SyncContext => ({ config, now, lookups: noLookups });

/** A file backend on a PersistentVolumeClaim the Stack mounts, as upstream's own examples keep it. */
const onClaim: Partial<StackSpec> = {
  backend: 'file:///state',
  workspaceTemplate: {
    spec: {
      podTemplate: {
        spec: {
          volumes: [{ name: 'state', persistentVolumeClaim: { claimName: 'pulumi-state' } }],
          containers: [{ name: 'pulumi', volumeMounts: [{ name: 'state', mountPath: '/state' }] }],
        },
      },
    },
  },
};

/** From creation through the first operation's success, under `config`; returns the state after it is absorbed. */
function toFirstSuccess(stack: Stack, config: HookConfig) {
  const ctx = at(config);
  let s = step(stack, [], undefined, ctx);
  // The workspace (once its cache is the Stack's) becomes ready and the operation starts.
  for (let i = 0; i < 3 && !s.cluster.some((c) => c.kind === 'Update'); i++)
    s = step(s.stack, workspaceBecomesReady(s.cluster), undefined, ctx);
  const update = s.cluster.find((c) => c.kind === 'Update');
  if (!update) throw new Error(`no operation started: ${JSON.stringify(s.res.status.conditions)}`);
  const done = jobFinishes(s.cluster, update.metadata.name, { state: 'succeeded' });
  const res = syncStack(syncRequest(s.stack, done), ctx);
  return { stack: withStatus(s.stack, res), cluster: applyChildren(done, res.children), res, before: s.stack, done };
}

describe('WORKSPACE_RECLAIM_DEFAULT and the cache settings', () => {
  it('default to upstream: Retain, no cache volumes', () => {
    const config = configFromEnv({}, () => '');
    expect([config.workspaceReclaimDefault, config.workspaceCache]).toEqual([undefined, undefined]);
  });

  it('read Delete, the size, the class and whether retained workspaces get one', () => {
    const config = configFromEnv(
      {
        WORKSPACE_RECLAIM_DEFAULT: 'Delete',
        WORKSPACE_CACHE_SIZE: '2Gi',
        WORKSPACE_CACHE_STORAGE_CLASS: 'fast',
        WORKSPACE_CACHE_RETAINED: 'on',
      },
      () => '',
    );
    expect(config.workspaceReclaimDefault).toBe('Delete');
    expect(config.workspaceCache).toEqual({ size: '2Gi', storageClassName: 'fast', retained: true });
  });

  it.each([
    [{ WORKSPACE_RECLAIM_DEFAULT: 'Sometimes' }, /WORKSPACE_RECLAIM_DEFAULT/],
    [{ WORKSPACE_CACHE_SIZE: 'two gigs' }, /WORKSPACE_CACHE_SIZE/],
    [{ WORKSPACE_CACHE_SIZE: '1Gi', WORKSPACE_CACHE_STORAGE_CLASS: 'Not_A_Name' }, /WORKSPACE_CACHE_STORAGE_CLASS/],
    [{ WORKSPACE_CACHE_STORAGE_CLASS: 'fast' }, /needs WORKSPACE_CACHE_SIZE/],
  ])('refuse %j, naming the variable', (env, message) => {
    expect(() => configFromEnv(env, () => '')).toThrow(message);
  });
});

describe('a hibernating Stack', () => {
  it('makes its cache claim from the settings, and no workspace until Metacontroller reports the claim as its own', () => {
    const res = syncStack(syncRequest(makeStack(onClaim)), at(hibernating));
    const claim = childOf(res, 'PersistentVolumeClaim', 'my-stack-cache');
    expect(claim.spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '2Gi' } },
      storageClassName: 'fast',
    });
    expect(find(res, 'Workspace')).toBeUndefined();
    const reconciling = condition(res.status, 'Reconciling');
    // Waiting for the claim holds no slot of the operations budget (a reason of its own).
    expect(reconciling?.reason).toBe('CacheVolumePending');
    expect(reconciling?.message).toMatch(/PersistentVolumeClaim my-stack-cache is not \(yet\)/);
    // A claim someone else made first is no event of the Stack's: it looks again.
    expect(res.resyncAfterSeconds).toBe(30);
  });

  it('runs its workspace on the cache: PULUMI_HOME and the download caches on the claim', () => {
    const first = step(makeStack(onClaim), [], undefined, at(hibernating));
    const next = step(first.stack, first.cluster, undefined, at(hibernating));
    const pod = podSpecOf(childOf(next.res, 'StatefulSet', 'my-stack-workspace'));
    expect(pod.volumes).toContainEqual({
      name: 'pulumi-cache',
      persistentVolumeClaim: { claimName: 'my-stack-cache' },
    });
    const pulumi = containerOf(pod, 'pulumi');
    expect(pulumi.volumeMounts).toContainEqual({ name: 'pulumi-cache', mountPath: CACHE_DIR });
    expect(envValue(pulumi, 'PULUMI_HOME')).toBe(`${CACHE_DIR}/pulumi`);
    expect(envValue(pulumi, 'npm_config_cache')).toBe(`${CACHE_DIR}/npm`);
  });

  it('after a success holds no workspace, keeps its cache claim, and says WorkspaceDeleted', () => {
    const { res, stack, cluster, before, done } = toFirstSuccess(makeStack(onClaim), hibernating);
    expect(condition(res.status, 'Ready')?.status).toBe('True');
    expect(find(res, 'PersistentVolumeClaim', 'my-stack-cache')).toBeDefined();
    // At rest it stays so: another sync makes nothing.
    const rest = syncStack(syncRequest(stack, cluster), at(hibernating));
    for (const answer of [res, rest])
      expect(answer.children.filter((c) => ['Workspace', 'StatefulSet', 'Service'].includes(c.kind))).toEqual([]);
    const events = stackEvents({
      stack: before,
      observed: childrenMap(...done),
      status: res.status,
      children: res.children,
      finalizing: false,
      now: NOW,
      workspaceReclaimDefault: 'Delete',
    });
    expect(events.map((e) => e.reason)).toContain('WorkspaceDeleted');
  });

  it.each<[string, (stack: Stack) => Stack]>([
    ['a spec or Program change (a new generation)', (s) => ({ ...s, metadata: { ...s.metadata, generation: 2 } })],
    [
      'a reconciliation request',
      (s) => ({ ...s, metadata: { ...s.metadata, annotations: { 'pulumi.com/reconciliation-request': 'now' } } }),
    ],
  ])('wakes for %s: its workspace again, on the same cache claim', (_, change) => {
    const { stack, cluster } = toFirstSuccess(makeStack(onClaim), hibernating);
    const woken = syncStack(syncRequest(change(stack), cluster), at(hibernating));
    const pod = podSpecOf(childOf(woken, 'StatefulSet', 'my-stack-workspace'));
    expect(pod.volumes).toContainEqual({
      name: 'pulumi-cache',
      persistentVolumeClaim: { claimName: 'my-stack-cache' },
    });
    expect(find(woken, 'PersistentVolumeClaim', 'my-stack-cache')).toBeDefined();
  });

  it('wakes for a due drift check: its workspace again until the check has run', () => {
    const spec: Partial<StackSpec> = { ...onClaim, driftDetection: { schedule: '1h' } };
    const { stack, cluster } = toFirstSuccess(makeStack(spec), hibernating);
    const later = new Date(NOW.getTime() + 2 * 3600_000);
    const woken = syncStack(syncRequest(stack, cluster), at(hibernating, later));
    expect(find(woken, 'Workspace', 'my-stack')).toBeDefined();
  });

  it('never mounts a claim of its name that is not its own (Metacontroller ignores the create as AlreadyExists)', () => {
    const first = step(makeStack(onClaim), [], undefined, at(hibernating));
    // The claim someone else made first is not among the Stack's children, whatever it says.
    const without = first.cluster.filter((c) => c.kind !== 'PersistentVolumeClaim');
    const res = syncStack(syncRequest(first.stack, without), at(hibernating));
    expect(find(res, 'Workspace')).toBeUndefined();
    expect(condition(res.status, 'Reconciling')?.message).toMatch(
      /made by anyone else is never used: rename or delete it/,
    );
  });

  it('answers its claim from the settings, never from what is observed of it', () => {
    const first = step(makeStack(onClaim), [], undefined, at(hibernating));
    const forged = first.cluster.map((c): KObject =>
      c.kind === 'PersistentVolumeClaim'
        ? { ...c, spec: { resources: { requests: { storage: '1Ti' } }, volumeName: 'someone-elses' } }
        : c,
    );
    const res = syncStack(syncRequest(first.stack, forged), at(hibernating));
    expect(childOf(res, 'PersistentVolumeClaim', 'my-stack-cache').spec).toEqual({
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '2Gi' } },
      storageClassName: 'fast',
    });
  });

  it('mounts its own claim whatever its workspaceTemplate names the cache volume', () => {
    const template = onClaim.workspaceTemplate?.spec?.podTemplate?.spec;
    const spec: Partial<StackSpec> = {
      ...onClaim,
      workspaceTemplate: {
        spec: {
          podTemplate: {
            spec: {
              containers: template?.containers ?? [],
              volumes: [
                ...(template?.volumes ?? []),
                { name: 'pulumi-cache', persistentVolumeClaim: { claimName: 'other-stack-cache' } },
              ],
            },
          },
        },
      },
    };
    const first = step(makeStack(spec), [], undefined, at(hibernating));
    const next = step(first.stack, first.cluster, undefined, at(hibernating));
    const volumes = podSpecOf(childOf(next.res, 'StatefulSet', 'my-stack-workspace')).volumes ?? [];
    expect(volumes.filter((v) => v.name === 'pulumi-cache')).toEqual([
      { name: 'pulumi-cache', persistentVolumeClaim: { claimName: 'my-stack-cache' } },
    ]);
  });
});

describe('which Stacks hibernate', () => {
  it("a Stack's own Retain wins over the default Delete: its workspace stays, without a cache", () => {
    const { res } = toFirstSuccess(makeStack({ ...onClaim, workspaceReclaimPolicy: 'Retain' }), hibernating);
    expect(find(res, 'Workspace', 'my-stack')).toBeDefined();
    expect(find(res, 'PersistentVolumeClaim')).toBeUndefined();
  });

  it('with WORKSPACE_CACHE_RETAINED a retained workspace runs on a cache claim too (upstream#858)', () => {
    const config: HookConfig = { ...testConfig, workspaceCache: { ...CACHE, retained: true } };
    const { res } = toFirstSuccess(makeStack(onClaim), config);
    expect(find(res, 'Workspace', 'my-stack')).toBeDefined();
    expect(find(res, 'PersistentVolumeClaim', 'my-stack-cache')).toBeDefined();
  });

  it('without cache settings a hibernating Stack just reclaims its workspace', () => {
    const { res } = toFirstSuccess(makeStack(onClaim), { ...testConfig, workspaceReclaimDefault: 'Delete' });
    expect(find(res, 'Workspace')).toBeUndefined();
    expect(find(res, 'PersistentVolumeClaim')).toBeUndefined();
  });
});

describe('file backends', () => {
  const refusal = (spec: Partial<StackSpec>, config: HookConfig = hibernating) =>
    condition(syncStack(syncRequest(makeStack(spec)), at(config)).status, 'Stalled');

  it('refuse hibernation for a file backend on the pod’s own disk: Stalled SpecInvalid, saying what to do', () => {
    const stalled = refusal({ backend: 'file:///tmp/state' });
    expect([stalled?.status, stalled?.reason]).toEqual(['True', 'SpecInvalid']);
    expect(stalled?.message).toMatch(/file:\/\/\/tmp\/state is not on a volume .* mount a PersistentVolumeClaim/);
    // A literal PULUMI_BACKEND_URL counts, and so does a path that climbs out of the volume.
    expect(
      refusal({ envRefs: { PULUMI_BACKEND_URL: { type: 'Literal', literal: { value: 'file://~' } } } })?.reason,
    ).toBe('SpecInvalid');
    expect(refusal({ ...onClaim, backend: 'file:///state/../tmp' })?.reason).toBe('SpecInvalid');
  });

  it('refuse it on a volume that lives with the pod (emptyDir)', () => {
    const spec = structuredClone(onClaim);
    const volumes = spec.workspaceTemplate?.spec?.podTemplate?.spec?.volumes;
    if (volumes) volumes[0] = { name: 'state', emptyDir: {} };
    expect(refusal(spec)?.reason).toBe('SpecInvalid');
  });

  it('allow it on a claim the Stack mounts, and allow any file backend for a retained workspace', () => {
    expect(refusal({ ...onClaim, backend: 'file:///state/sub' })).toBeUndefined();
    expect(refusal({ backend: 'file:///tmp/state' }, testConfig)).toBeUndefined();
    expect(refusal({ backend: 'file:///tmp/state', workspaceReclaimPolicy: 'Retain' })).toBeUndefined();
  });
});

describe('pulumi_workspace_wake_seconds', () => {
  const workspace = (uid: string, ready?: string) => ({
    metadata: { namespace: 'team-a', name: 'my-stack', uid, creationTimestamp: '2026-11-22T10:00:00Z' },
    status: ready ? { conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: ready }] } : {},
  });
  const facts = (uid: string, ready?: string) => workspaceProjection(workspace(uid, ready))?.value;

  it('measures from the Workspace’s creation to its Ready, once per Workspace', () => {
    expect(facts('w-1', '2026-11-22T10:00:12Z')?.readySeconds).toBe(12);
    expect(facts('w-1')?.readySeconds).toBeUndefined();
    const ready = facts('w-1', '2026-11-22T10:00:12Z');
    if (!ready) throw new Error('no projection');
    expect(becameReady(facts('w-1'), ready)).toBe(true);
    expect(becameReady(undefined, ready)).toBe(true);
    expect(becameReady(ready, ready)).toBe(false);
    // A woken Stack's new Workspace (another uid) counts again.
    expect(becameReady(ready, { ...ready, uid: 'w-2', readySeconds: 9 })).toBe(true);
  });

  it('ignores times it cannot read and a Ready before the creation', () => {
    expect(facts('w-1', 'not a time')?.readySeconds).toBeUndefined();
    expect(facts('w-1', '2026-11-22T09:59:00Z')?.readySeconds).toBeUndefined();
  });
});
