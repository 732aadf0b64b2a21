/**
 * Issue 34, item 7: the hooks are a trust boundary, shown on the real node. Metacontroller may write
 * every kind our controllers declare, in every namespace, and creates whatever the hooks answer;
 * so nothing that a namespace's users can write may become what it creates. Two attackers, each
 * with only what a namespace gives them:
 * - `mallory`, a user with the built-in `edit` ClusterRole bound in the namespace (the test acts as
 *   her with the admin's credentials and an `Impersonate-User` header, as `kubectl --as=mallory`);
 * - a pod running as the namespace's `default` ServiceAccount, which runs the workspace of a
 *   Stack without `serviceAccountName`. The test uses a token of that account from the TokenRequest
 *   API: the API server authorizes a request by the account its token names, which is the same
 *   for a pod's projected token, and no pod is needed to hold one.
 * Every forgery goes through the API server, and each test then waits for a sync of the parent
 * that saw it (answered and applied, which its status shows, or refused, which a SyncError shows)
 * before it checks that nothing new appeared: no RoleBinding or ClusterRoleBinding for the
 * attacker's account anywhere (a watch sees even one that lives for a moment, such as one in
 * kube-system that the garbage collector removes), no change to `lastUpdate` or the outputs, no
 * change to the workspace's pod template. Last, a hook request forged from inside the cluster
 * writes no Event about another namespace's Stack.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import type { Stack, Workspace } from '../schemas/generated/types';
import { Annotations, Labels } from '../contract';
import {
  AGENT_IMAGE,
  defined,
  e2eStackSpec,
  eventually,
  greetingProgram,
  impersonating,
  type Operator,
  serviceAccountKubeConfig,
  condition,
} from './harness';
import { e2eSuite } from './suite';
import { LAST_APPLIED } from './testbed/metacontroller/apply';
import { gatedProgram, stateGates } from './testbed/state-gate';
import { REPO_ROOT } from './testbed/toolchain';

let op: Operator;
const ns = 'trust';
/** Another team's namespace, for the forged hook request. */
const other = 'trust-other';
const EDITOR = 'mallory';
/** The account the forged bindings would make an admin. */
const ATTACKER = 'attacker';
const OPERATION_MS = 240_000;

// Declared before the suite's own afterAll, so it runs first: no pipe writer or watch outlives the suite.
const gates = stateGates(() => op.stateDir(ns));
afterAll(() => {
  gates.stop();
  bindings?.stop();
});
const { recordTiming, getStack, readyStack } = e2eSuite('trust-boundary', ns, (started) => (op = started));

/** The typed clients of one identity. */
interface Clients {
  objects: k8s.KubernetesObjectApi;
  core: k8s.CoreV1Api;
  apps: k8s.AppsV1Api;
  batch: k8s.BatchV1Api;
  custom: k8s.CustomObjectsApi;
}
const clientsOf = (kc: k8s.KubeConfig): Clients => ({
  objects: k8s.KubernetesObjectApi.makeApiClient(kc),
  core: kc.makeApiClient(k8s.CoreV1Api),
  apps: kc.makeApiClient(k8s.AppsV1Api),
  batch: kc.makeApiClient(k8s.BatchV1Api),
  custom: kc.makeApiClient(k8s.CustomObjectsApi),
});
let editor: Clients;
let defaultAccount: Clients;
let bindings: BindingWatch;

const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

/** The HTTP status of a refused call, or 200 when it went through. */
async function statusOf(call: () => Promise<unknown>): Promise<number> {
  try {
    await call();
    return 200;
  } catch (e) {
    if (e instanceof k8s.ApiException) return e.code;
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------
// What would show an escalation: a binding for the attacker's account, seen by a watch

interface BindingWatch {
  /** How many were seen so far: a mark for `since`. */
  mark(): number;
  /** `Kind namespace/name` of every RoleBinding and ClusterRoleBinding with the attacker as a subject seen after `mark`. */
  since(mark: number): string[];
  stop(): void;
}

/**
 * Watches RoleBindings in every namespace and ClusterRoleBindings from the start of the suite,
 * recording every one that names `subject`. A watch that the server ends is started again (its
 * first events list what exists then).
 */
async function watchBindings(kc: k8s.KubeConfig, subject: string): Promise<BindingWatch> {
  const seen: string[] = [];
  const aborts: AbortController[] = [];
  let stopped = false;
  let restarts = 0;
  const watch = async (kind: string, path: string): Promise<void> => {
    const again = (): void => {
      if (!stopped && ++restarts <= 100) setTimeout(() => void watch(kind, path).catch(again), 1000);
    };
    const abort = await new k8s.Watch(kc).watch(
      path,
      {},
      (_phase: string, b: k8s.V1RoleBinding) => {
        if ((b.subjects ?? []).some((s) => s.name === subject))
          seen.push(`${kind} ${b.metadata?.namespace ?? ''}/${b.metadata?.name ?? ''}`.replace(' /', ' '));
      },
      again,
    );
    aborts.push(abort);
  };
  await watch('RoleBinding', '/apis/rbac.authorization.k8s.io/v1/rolebindings');
  await watch('ClusterRoleBinding', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings');
  return {
    mark: () => seen.length,
    since: (mark) => [...new Set(seen.slice(mark))].sort(),
    stop() {
      stopped = true;
      for (const a of aborts) a.abort();
    },
  };
}

/** A RoleBinding of ClusterRole `admin` to the attacker's account, as a forged last-applied annotation holds it. */
function forgedBinding(name: string, namespace: string): object {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name, namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'admin' },
    subjects: [{ kind: 'ServiceAccount', name: ATTACKER, namespace: ns }],
  };
}

const lastApplied = (forged: object): object => ({
  metadata: { annotations: { [LAST_APPLIED]: JSON.stringify(forged) } },
});

// ---------------------------------------------------------------------------------------------
// Barriers: a sync of the parent after the forgery, answered (and applied) or refused

/** How many SyncError events Metacontroller recorded about an object (repeats counted). */
async function syncErrors(uid: string): Promise<number> {
  const list = await op.core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.uid=${uid}` });
  return list.items.filter((e) => e.reason === 'SyncError').reduce((n, e) => n + (e.count ?? 1), 0);
}

/**
 * Forges (`forge`), then waits for the parent's next sync: one that was answered and applied
 * (`applied`: the parent's status shows something asked for after the forgery, for which
 * Metacontroller writes children before status), or one that the hooks refused (a new SyncError
 * on the parent: nothing was applied), or an escalation already seen. Returns the bindings' mark
 * from before the forgery.
 */
async function forgeAndSync(
  what: string,
  uid: string,
  forge: () => Promise<void>,
  applied: () => Promise<boolean>,
): Promise<number> {
  const mark = bindings.mark();
  const errorsBefore = await syncErrors(uid);
  await forge();
  await eventually(
    `a sync of ${what} after the forgery`,
    async () => bindings.since(mark).length > 0 || (await applied()) || (await syncErrors(uid)) > errorsBefore,
    120_000,
    250,
  );
  return mark;
}

/**
 * The editor asks for a reconciliation of the Stack: true once its status has observed that request.
 */
async function reconciled(name: string): Promise<() => Promise<boolean>> {
  const token = `trust-${Date.now()}`;
  await editor.custom.patchNamespacedCustomObject(
    {
      group: 'pulumi.com',
      version: 'v1',
      namespace: ns,
      plural: 'stacks',
      name,
      body: { metadata: { annotations: { [Annotations.reconciliationRequest]: token } } },
    },
    mergePatch,
  );
  return async () => (await getStack(name)).status?.observedReconcileRequest === token;
}

/** Forges on a child of the Stack `name`, then waits for the Stack's next sync. */
async function forgeOnStack(name: string, forge: () => Promise<void>): Promise<number> {
  const uid = defined((await getStack(name)).metadata.uid, 'the Stack uid');
  let applied: () => Promise<boolean> = () => Promise.resolve(false);
  return forgeAndSync(
    `Stack ${name}`,
    uid,
    async () => {
      await forge();
      applied = await reconciled(name);
    },
    () => applied(),
  );
}

const getWorkspace = async (name: string): Promise<Workspace> =>
  (await op.custom.getNamespacedCustomObject({
    group: 'auto.pulumi.com',
    version: 'v1alpha1',
    namespace: ns,
    plural: 'workspaces',
    name,
  })) as Workspace;

/** Patches a Workspace (as the cluster admin: no namespace user may write Workspaces). */
const patchWorkspace = (name: string, body: object) =>
  op.custom.patchNamespacedCustomObject(
    { group: 'auto.pulumi.com', version: 'v1alpha1', namespace: ns, plural: 'workspaces', name, body },
    mergePatch,
  );

let logLevel = 0;

/**
 * Forges on a child of the Workspace `name`, then waits for its next sync: a new generation (a log
 * level, which changes nothing while its children are kept as they are) observed in its status,
 * or a refused sync, or the StatefulSet gone.
 */
async function forgeOnWorkspace(name: string, forge: () => Promise<void>): Promise<number> {
  const uid = defined((await getWorkspace(name)).metadata.uid, 'the Workspace uid');
  let generation = Infinity;
  return forgeAndSync(
    `Workspace ${name}`,
    uid,
    async () => {
      await forge();
      await patchWorkspace(name, { spec: { pulumiLogLevel: ++logLevel } });
      generation = defined((await getWorkspace(name)).metadata.generation, 'the Workspace generation');
    },
    async () => {
      const ws = await getWorkspace(name);
      const gone = !(await op.apps
        .readNamespacedStatefulSet({ namespace: ns, name: `${name}-workspace` })
        .then(() => true)
        .catch(() => false));
      return (ws.status?.observedGeneration ?? 0) >= generation || gone;
    },
  );
}

// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  // The cluster admin's part: the operator's role for Stack editors (aggregated to `edit`), the
  // editor's binding, another team's namespace, and system:auth-delegator for the `default`
  // account, which runs the workspace of a Stack without serviceAccountName (stack-rbac.yaml).
  const install = loadAll(readFileSync(join(REPO_ROOT, 'manifests', 'install.yaml'), 'utf8')) as k8s.KubernetesObject[];
  await op.objects.create(
    defined(
      install.find((o) => o?.kind === 'ClusterRole' && o.metadata?.name === 'pulumi-operator:stacks-editor'),
      'the stacks-editor ClusterRole in install.yaml',
    ),
  );
  await op.objects.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: `edit:${EDITOR}`, namespace: ns },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
    subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: EDITOR }],
  } as k8s.KubernetesObject);
  await op.objects.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: `pulumi-operator:auth-delegator:${ns}:default` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
    subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: ns }],
  } as k8s.KubernetesObject);
  await op.objects.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: other } });

  const editorKc = impersonating(op.cp.kubeConfig, EDITOR);
  editor = clientsOf(editorKc);
  defaultAccount = clientsOf(await serviceAccountKubeConfig(op.cp.kubeConfig, ns, 'default'));
  // `edit` is filled in by the aggregation controller: wait until it covers Stacks.
  const reviews = editorKc.makeApiClient(k8s.AuthorizationV1Api);
  await eventually('the edit role to cover Stacks', async () => {
    const review = await reviews.createSelfSubjectAccessReview({
      body: { spec: { resourceAttributes: { namespace: ns, verb: 'patch', group: 'pulumi.com', resource: 'stacks' } } },
    });
    return review.status?.allowed === true;
  });
  // The editor's own account, which the forged bindings would make an admin.
  await editor.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: ATTACKER } } });
  bindings = await watchBindings(op.cp.kubeConfig, ATTACKER);
}, 120_000);

/** A Stack spec the hooks refuse (Stalled/SpecInvalid): an environment variable from another namespace's Secret. */
const invalid = {
  spec: {
    envRefs: { STOLEN: { type: 'Secret', secret: { namespace: 'kube-system', name: 'secret', key: 'token' } } },
  },
};

async function stalledInvalid(name: string): Promise<Stack> {
  return eventually(
    `Stack ${name} to be Stalled/SpecInvalid`,
    async () => {
      const s = await getStack(name);
      const stalled = condition(s, 'Stalled');
      return stalled?.status === 'True' && stalled.reason === 'SpecInvalid' ? s : undefined;
    },
    120_000,
    250,
  );
}

const editorStack = (name: string, spec: Parameters<typeof e2eStackSpec>[0]): k8s.KubernetesObject =>
  ({
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: ns },
    spec: e2eStackSpec(spec),
  }) as k8s.KubernetesObject;

describe('a forged refresh request (a ConfigMap child the editor may patch)', () => {
  // Two dependents, one per forgery, so each is seen on its own.
  const dependents = ['dep-local', 'dep-system'];

  beforeAll(async () => {
    const started = Date.now();
    await editor.objects.create(greetingProgram('base', ns, 'base'));
    await editor.objects.create(editorStack('base', { stack: 'dev', programRef: { name: 'base' } }));
    await readyStack('base', undefined, OPERATION_MS);
    // Always out of date (1 ms): each dependent asks the prerequisite to run again, through a
    // ConfigMap child named <dependent>-refresh-base; then the editor makes it invalid, so it
    // keeps that child as it is.
    for (const d of dependents) {
      await editor.objects.create(
        editorStack(d, {
          stack: d,
          programRef: { name: 'base' },
          prerequisites: [{ name: 'base', requirement: { succeededWithinDuration: '1ms' } }],
        }),
      );
    }
    for (const d of dependents) {
      await eventually(
        `the refresh request of ${d}`,
        () => editor.core.readNamespacedConfigMap({ namespace: ns, name: `${d}-refresh-base` }).catch(() => undefined),
        120_000,
        250,
      );
      await editor.custom.patchNamespacedCustomObject(
        { group: 'pulumi.com', version: 'v1', namespace: ns, plural: 'stacks', name: d, body: invalid },
        mergePatch,
      );
      await stalledInvalid(d);
    }
    recordTiming('refresh requests kept by invalid dependents', started);
  }, OPERATION_MS + 240_000);

  it.each([
    ['the same namespace', 'dep-local', ns],
    ['kube-system', 'dep-system', 'kube-system'],
  ])(
    'naming a RoleBinding in %s creates nothing',
    async (_where, dependent, namespace) => {
      const started = Date.now();
      const before = await getStack(dependent);
      const child = `${dependent}-refresh-base`;
      const mark = await forgeOnStack(dependent, async () => {
        await editor.core.patchNamespacedConfigMap(
          { namespace: ns, name: child, body: lastApplied(forgedBinding(child, namespace)) },
          mergePatch,
        );
      });
      recordTiming(`forged refresh request (${namespace})`, started);
      expect(bindings.since(mark)).toEqual([]);
      expect((await getStack(dependent)).status?.lastUpdate).toEqual(before.status?.lastUpdate);
    },
    240_000,
  );

  it('an orphan ConfigMap with the Stack’s label, adopted, creates nothing', async () => {
    const started = Date.now();
    // No prerequisite needed: any ConfigMap labelled with a Stack's controller-uid becomes its child.
    await editor.objects.create(
      editorStack('adopter', { stack: 'adopter', programRef: { name: 'base' }, ...invalid.spec }),
    );
    const stack = await stalledInvalid('adopter');
    const name = 'adopter-orphan';
    const mark = await forgeOnStack('adopter', async () => {
      await editor.core.createNamespacedConfigMap({
        namespace: ns,
        body: {
          metadata: {
            name,
            labels: { 'controller-uid': defined(stack.metadata.uid, 'uid') },
            annotations: { [LAST_APPLIED]: JSON.stringify(forgedBinding(name, ns)) },
          },
        },
      });
    });
    recordTiming('forged adopted ConfigMap', started);
    expect(bindings.since(mark)).toEqual([]);
    expect((await getStack('adopter')).status?.lastUpdate).toBeUndefined();
  }, 240_000);
});

/**
 * A workspace whose pod runs as `default` (a Stack without serviceAccountName): its StatefulSet's
 * pod template, and the forgeries of the editor and of that account on its last-applied annotation.
 */
function forgeriesOnWorkspace(name: string, stack?: string) {
  const statefulSet = `${name}-workspace`;
  const podTemplate = async (): Promise<string> =>
    JSON.stringify((await op.apps.readNamespacedStatefulSet({ namespace: ns, name: statefulSet })).spec?.template);
  const lastUpdate = async (): Promise<unknown> => (stack ? (await getStack(stack)).status?.lastUpdate : undefined);
  return {
    podTemplate,
    /**
     * The editor's two forgeries: a RoleBinding of the StatefulSet's name, and the StatefulSet with
     * another pod account. Each is undone afterwards (the original annotation written back).
     */
    async editor(template: string): Promise<void> {
      const observed = await editor.apps.readNamespacedStatefulSet({ namespace: ns, name: statefulSet });
      const original = defined(observed.metadata?.annotations?.[LAST_APPLIED], 'the last-applied annotation');
      const applied = JSON.parse(original) as k8s.V1StatefulSet;
      const otherAccount = { ...applied, spec: { ...applied.spec!, template: { ...applied.spec!.template } } };
      otherAccount.spec.template.spec = { ...applied.spec!.template.spec!, serviceAccountName: ATTACKER };
      const before = await lastUpdate();
      for (const forged of [forgedBinding(statefulSet, ns), otherAccount]) {
        try {
          const mark = await forgeOnWorkspace(name, async () => {
            // The editor may patch StatefulSets: the annotation is written.
            expect(
              await statusOf(() =>
                editor.apps.patchNamespacedStatefulSet(
                  { namespace: ns, name: statefulSet, body: lastApplied(forged) },
                  mergePatch,
                ),
              ),
            ).toBe(200);
          });
          expect(bindings.since(mark)).toEqual([]);
          expect(await podTemplate()).toBe(template);
          expect(await lastUpdate()).toEqual(before);
        } finally {
          await editor.apps
            .patchNamespacedStatefulSet(
              { namespace: ns, name: statefulSet, body: { metadata: { annotations: { [LAST_APPLIED]: original } } } },
              mergePatch,
            )
            .catch(() => undefined);
        }
      }
    },
    /**
     * The `default` account runs the workspace pod, and may not rewrite the StatefulSet; what it may
     * patch, its report, gets it nothing either.
     */
    async defaultAccount(template: string): Promise<void> {
      let code = 0;
      const mark = await forgeOnWorkspace(name, async () => {
        code = await statusOf(() =>
          defaultAccount.apps.patchNamespacedStatefulSet(
            { namespace: ns, name: statefulSet, body: lastApplied(forgedBinding(statefulSet, ns)) },
            mergePatch,
          ),
        );
      });
      expect(code).toBe(403);
      expect(bindings.since(mark)).toEqual([]);
      expect(await podTemplate()).toBe(template);
      // What it may patch (not read) is the workspace's status ConfigMap (its report), a child of
      // the Workspace too: a forged last-applied there creates nothing either.
      const report = `${statefulSet}-status`;
      const original = defined(
        (await op.core.readNamespacedConfigMap({ namespace: ns, name: report }).catch(() => undefined))?.metadata
          ?.annotations?.[LAST_APPLIED],
        'the status ConfigMap and its last-applied annotation',
      );
      try {
        const forged = await forgeOnWorkspace(name, async () => {
          code = await statusOf(() =>
            defaultAccount.core.patchNamespacedConfigMap(
              { namespace: ns, name: report, body: lastApplied(forgedBinding(report, ns)) },
              mergePatch,
            ),
          );
        });
        expect(code).toBe(200);
        expect(bindings.since(forged)).toEqual([]);
        expect(await podTemplate()).toBe(template);
      } finally {
        await defaultAccount.core
          .patchNamespacedConfigMap(
            { namespace: ns, name: report, body: { metadata: { annotations: { [LAST_APPLIED]: original } } } },
            mergePatch,
          )
          .catch(() => undefined);
      }
    },
  };
}

describe('a forged last-applied on the StatefulSet of a workspace held by a running operation', () => {
  const name = 'held';
  const forgeries = forgeriesOnWorkspace(name, name);
  let template = '';

  beforeAll(async () => {
    const started = Date.now();
    // An `up` that blocks on a pipe holds the workspace (pulumi.com/operation-in-progress) until the
    // suite ends; the workspace pod runs as `default` (no serviceAccountName).
    const gate = gates.gate('gate-held');
    await editor.objects.create(gatedProgram(name, ns, gate.inPod));
    const spec = e2eStackSpec({ stack: 'dev', programRef: { name } });
    delete spec.serviceAccountName;
    await editor.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name, namespace: ns },
      spec,
    } as k8s.KubernetesObject);
    await eventually(
      'the workspace to be held by a running up',
      async () => {
        const s = await getStack(name);
        const ws = await getWorkspace(name).catch(() => undefined);
        const held = ws?.metadata.annotations?.['pulumi.com/operation-in-progress'];
        return s.status?.currentUpdate?.name !== undefined && held === s.status.currentUpdate.name ? s : undefined;
      },
      OPERATION_MS,
      500,
    );
    const pod = await op.core.readNamespacedPod({ namespace: ns, name: `${name}-workspace-0` });
    expect(pod.spec?.serviceAccountName).toBe('default');
    template = await forgeries.podTemplate();
    recordTiming('workspace held by a running up', started);
  }, OPERATION_MS + 60_000);

  it('the editor’s forgeries create nothing and change no pod template', async () => {
    await forgeries.editor(template);
  }, 300_000);

  it('the `default` account may not patch the StatefulSet', async () => {
    await forgeries.defaultAccount(template);
  }, 240_000);
});

describe('a forged last-applied on the StatefulSet of an invalid Workspace', () => {
  // A Workspace made by hand (as docs/security.md allows) with the held one's spec, later given a
  // spec that no pod can be built from (nested deeper than any workspace needs): the cluster
  // admin's doing, as no namespace user may write Workspaces. Its children then stay as they are.
  const name = 'byhand';
  const forgeries = forgeriesOnWorkspace(name);
  let template = '';

  beforeAll(async () => {
    const spec = defined((await getWorkspace('held')).spec, 'the held Workspace spec');
    await op.objects.create({
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Workspace',
      metadata: { name, namespace: ns },
      spec,
    } as k8s.KubernetesObject);
    await eventually(
      'the hand-made workspace StatefulSet',
      () => op.apps.readNamespacedStatefulSet({ namespace: ns, name: `${name}-workspace` }).catch(() => undefined),
      120_000,
      250,
    );
    // A config value, the Workspace's free-form field, nested deeper than any workspace needs.
    let deep: unknown = 'x';
    for (let i = 0; i < 120; i++) deep = [deep];
    const stacks = (spec.stacks ?? []).map((st, i) =>
      i === 0 ? { ...st, config: [...(st.config ?? []), { key: 'deep', value: deep }] } : st,
    );
    expect(stacks).toHaveLength(1);
    await patchWorkspace(name, { spec: { stacks } });
    await eventually(
      'the Workspace to be Stalled/SpecInvalid',
      async () => {
        const stalled = (await getWorkspace(name)).status?.conditions?.find((c) => c.type === 'Stalled');
        return stalled?.status === 'True' && stalled.reason === 'SpecInvalid';
      },
      120_000,
      250,
    );
    template = await forgeries.podTemplate();
  }, 300_000);

  it('the editor’s forgeries create nothing and change no pod template', async () => {
    await forgeries.editor(template);
  }, 300_000);

  it('the `default` account may not patch the StatefulSet', async () => {
    await forgeries.defaultAccount(template);
  }, 240_000);
});

describe('a forged result (a Job the editor makes for the Stack)', () => {
  it(
    'on a Stack awaiting approval: lastUpdate and the outputs stay as they were',
    async () => {
      const name = 'approval';
      await editor.objects.create(greetingProgram(name, ns, 'hello'));
      await editor.objects.create(
        editorStack(name, { stack: 'dev', programRef: { name }, approval: { required: true, expiresAfter: '24h' } }),
      );
      const awaiting = await eventually(
        'the plan to await approval',
        async () => {
          const s = await getStack(name);
          return s.status?.plan?.state === 'AwaitingApproval' ? s : undefined;
        },
        OPERATION_MS,
        500,
      );
      const started = Date.now();
      const uid = defined(awaiting.metadata.uid, 'uid');
      const last = awaiting.status?.lastUpdate;
      // A Job as the Stack's own: owned by it, with its label, the annotations of the operation that
      // would follow lastUpdate, and a successful `up` result with outputs. It runs and completes
      // (what an editor can do; a Job's status is not theirs to write).
      const job: k8s.V1Job = {
        metadata: {
          name: `${name}-forged`,
          labels: { 'controller-uid': uid, [Labels.updateType]: 'up', [Labels.stackName]: name },
          annotations: {
            'pulumi.com/update-generation': String(awaiting.metadata.generation),
            'pulumi.com/update-reconcile-request': '',
            'pulumi.com/update-commit': last?.lastAttemptedCommit ?? '',
            'pulumi.com/update-previous': last?.name ?? '',
            [Annotations.updateResult]: JSON.stringify({
              state: 'succeeded',
              type: 'up',
              message: 'forged',
              outputs: { greeting: 'forged' },
            }),
          },
          ownerReferences: [{ apiVersion: 'pulumi.com/v1', kind: 'Stack', name, uid, controller: true }],
        },
        spec: {
          backoffLimit: 0,
          template: {
            spec: {
              restartPolicy: 'Never',
              securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
              containers: [
                {
                  name: 'forged',
                  image: AGENT_IMAGE,
                  imagePullPolicy: 'Never',
                  command: ['true'],
                  securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
                },
              ],
            },
          },
        },
      };
      const stale = `not-the-plan-${Date.now()}`;
      const mark = await forgeAndSync(
        `Stack ${name}`,
        uid,
        async () => {
          await editor.batch.createNamespacedJob({ namespace: ns, body: job });
          await eventually(
            'the forged Job to complete (or be deleted as no child of the Stack)',
            async () => {
              const j = await op.batch
                .readNamespacedJob({ namespace: ns, name: job.metadata!.name! })
                .catch(() => undefined);
              return j === undefined || (j.status?.succeeded ?? 0) > 0;
            },
            120_000,
            500,
          );
          // Then an approval naming another plan: ignored, and the status says so.
          await editor.custom.patchNamespacedCustomObject(
            {
              group: 'pulumi.com',
              version: 'v1',
              namespace: ns,
              plural: 'stacks',
              name,
              body: { metadata: { annotations: { 'pulumi.com/approve': stale } } },
            },
            mergePatch,
          );
        },
        async () => {
          const s = await getStack(name);
          const noted = (condition(s, 'AwaitingApproval')?.message ?? '').includes(stale);
          return noted || s.status?.lastUpdate?.name !== last?.name;
        },
      );
      const after = await getStack(name);
      recordTiming('forged result', started);
      expect(bindings.since(mark)).toEqual([]);
      expect(after.status?.lastUpdate).toEqual(last);
      expect(after.status?.outputs).toEqual(awaiting.status?.outputs);
      expect(after.status?.plan?.state).toBe('AwaitingApproval');
    },
    OPERATION_MS + 180_000,
  );
});

describe('a forged hook request', () => {
  it('a sync naming a Stack of another namespace writes no Event there', async () => {
    // The hooks listen on the test process's loopback, which no pod on the node can reach: the test
    // process stands in for a pod that can reach the hooks' Service, over the same TLS.
    const victim = (await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'victim', namespace: other },
      spec: { stack: 'dev', programRef: { name: 'nothing' } },
    } as k8s.KubernetesObject)) as Stack;
    const marker = 'FORGED_BY_MALLORY';
    // The real Stack (its uid too), with a spec that makes the hooks answer Stalled and record a
    // Warning Event whose message names the attacker's field.
    const parent = { ...victim, spec: { ...victim.spec, envRefs: { [marker]: invalid.spec.envRefs.STOLEN } } };
    const body = { controller: {}, parent, children: {}, related: {} };
    // A pod has no credential of Metacontroller's.
    const anonymous = await op.hookRequest('/stack/sync', { body, authorization: null });
    expect(anonymous.status).toBe(401);
    // Nor do the hooks write about a Stack their own watch does not hold, whoever asks: the same
    // Stack under another uid, sent with Metacontroller's credential.
    const unknown = await op.hookRequest('/stack/sync', {
      body: { ...body, parent: { ...parent, metadata: { ...parent.metadata, uid: randomUUID() } } },
    });
    expect(unknown.status).toBe(200);
    // Whatever the hooks recorded from them is written (or given up on) by now.
    await op.hookEventsIdle();
    const events = await op.core.listNamespacedEvent({ namespace: other });
    expect(events.items.filter((e) => (e.message ?? '').includes(marker))).toEqual([]);
  });
});
