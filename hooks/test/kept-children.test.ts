/**
 * Children come from the hooks, never from what a child says (docs/design.md#how-children-are-kept).
 * On every path where a controller keeps its children as they are, each observed child's
 * last-applied copy is forged three ways (a RoleBinding to cluster-admin in kube-system, the same
 * kind with another spec, another name) and an intruder of every kind the controller declares is
 * adopted: the answer holds only the hooks' own children, or is a 409 naming the child that cannot
 * be verified. A genuine keep (the digest in the status verifies) answers each child unchanged.
 */
import type { Stack, Workspace } from '../../schemas/generated/types';
import { ChildNotVerified, LAST_APPLIED_ANNOTATION, type KObject } from '../src/lib/k8s';
import { checkAnswer, childDigest } from '../src/lib/kept-children';
import { syncStack as stackHook, type StackSyncRequest, type StackSyncResponse } from '../src/stack/sync';
import { syncWorkspace, WORKSPACE_HOLD } from '../src/workspace/sync';
import {
  applyChildren,
  childrenMap,
  condition,
  jobFinishes,
  makeProgram,
  makeStack,
  NOW,
  objectMap,
  syncRequest,
  testConfig,
} from './builders';
import { childOf } from './children';
import { ctx, step, toFirstJob, withChildren } from './stories';

const RBAC = 'rbac.authorization.k8s.io';

/** The binding someone who may patch a child would most like the hooks to answer. */
const adminBinding = (name: string): KObject => ({
  apiVersion: `${RBAC}/v1`,
  kind: 'RoleBinding',
  metadata: { name, namespace: 'kube-system' },
  roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'cluster-admin' },
  subjects: [{ apiGroup: RBAC, kind: 'Group', name: 'system:authenticated' }],
});

/** The same object with more power or another target: what "another spec" means for its kind. */
function widened(copy: KObject): KObject {
  switch (copy.kind) {
    case 'Role':
      return { ...copy, rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] };
    case 'RoleBinding':
      return { ...copy, roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'cluster-admin' } };
    case 'ConfigMap':
      return { ...copy, data: { ...(copy.data as object), injected: 'yes' } };
    case 'ServiceAccount':
      return { ...copy, automountServiceAccountToken: true };
    default:
      return { ...copy, spec: { ...(copy.spec as object), serviceAccountName: 'cluster-admin-holder' } };
  }
}

const forgeries: [string, (copy: KObject) => KObject][] = [
  ['a RoleBinding to cluster-admin in kube-system', (copy) => adminBinding(copy.metadata.name)],
  ['the same kind with another spec', widened],
  ['another name', (copy) => ({ ...copy, metadata: { ...copy.metadata, name: `${copy.metadata.name}-x` } })],
];

/** The object with its last-applied copy replaced by `forgery` of it (of the object itself, if it has none). */
function forge(object: KObject, forgery: (copy: KObject) => KObject): KObject {
  const raw = object.metadata.annotations?.[LAST_APPLIED_ANNOTATION];
  const copy = raw === undefined ? object : (JSON.parse(raw) as KObject);
  const annotations = { ...object.metadata.annotations, [LAST_APPLIED_ANNOTATION]: JSON.stringify(forgery(copy)) };
  return { ...object, metadata: { ...object.metadata, annotations } };
}

/** One object of each kind, adopted (its selector label set) under a name its controller never gives. */
const intruders = (kinds: [string, string][]): KObject[] =>
  kinds.map(([kind, apiVersion]) => ({
    apiVersion,
    kind,
    metadata: {
      name: 'intruder',
      namespace: 'team-a',
      labels: { 'controller-uid': 'x' },
      annotations: { [LAST_APPLIED_ANNOTATION]: JSON.stringify(adminBinding('intruder')) },
    },
  }));

const STACK_KINDS: [string, string][] = [
  ['Workspace', 'auto.pulumi.com/v1alpha1'],
  ['Update', 'auto.pulumi.com/v1alpha1'],
  ['ConfigMap', 'v1'],
  ['StatefulSet', 'apps/v1'],
  ['Service', 'v1'],
  ['Job', 'batch/v1'],
  ['ServiceAccount', 'v1'],
  ['Role', `${RBAC}/v1`],
  ['RoleBinding', `${RBAC}/v1`],
];
const WORKSPACE_KINDS = STACK_KINDS.filter(([kind]) =>
  ['StatefulSet', 'Service', 'Role', 'RoleBinding'].includes(kind),
);

/** The request with each of its children changed by `change`, and `extra` children adopted. */
function rewritten(req: StackSyncRequest, change: (o: KObject) => KObject, extra: KObject[] = []): StackSyncRequest {
  const objects = Object.values(req.children ?? {}).flatMap((byKey) => Object.values(byKey)) as KObject[];
  return { ...req, children: childrenMap(...objects.map(change), ...extra) };
}

const names = (children: readonly KObject[]) => children.map((c) => `${c.kind}/${c.metadata.name}`);

/** An Update kept by identity: what the hooks write, nothing observed. */
const identityOf = (name: string) => ({
  apiVersion: 'auto.pulumi.com/v1alpha1',
  kind: 'Update',
  metadata: { name, namespace: 'team-a' },
});

/** A deployed Stack with drift checks whose check due at 10:06 runs; `last` is the answer that started it. */
function driftCheckRunning() {
  const { stack, cluster, job } = toFirstJob(makeStack({ driftDetection: { schedule: '5m' } }));
  const ended = '2026-11-22T10:01:00Z';
  const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', outputs: {}, endTime: ended });
  const deployed = step(stack, done, [makeProgram()], new Date(ended));
  const started = step(deployed.stack, deployed.cluster, [makeProgram()], new Date('2026-11-22T10:06:00Z'));
  return { stack: started.stack, cluster: started.cluster, last: started.res };
}

/** The Stack's keep paths: the request on the path, and the answer that last computed what it keeps. */
const stackPaths: [string, () => { req: StackSyncRequest; last: StackSyncResponse; now: Date }][] = [
  [
    'an invalid spec',
    () => {
      const { stack, cluster, res } = withChildren();
      const broken: Stack = {
        ...stack,
        metadata: { ...stack.metadata, generation: 2 },
        spec: { ...stack.spec, stack: '' },
      };
      return { req: syncRequest(broken, cluster), last: res, now: NOW };
    },
  ],
  [
    'an unavailable source',
    () => {
      const { stack, cluster, res } = withChildren();
      return { req: syncRequest(stack, cluster, []), last: res, now: NOW };
    },
  ],
  [
    'a running operation',
    () => {
      const { stack, cluster, r2 } = toFirstJob();
      return { req: syncRequest(stack, cluster), last: r2, now: NOW };
    },
  ],
  [
    'a running drift check an update waits for',
    () => {
      const { stack, cluster, last } = driftCheckRunning();
      const changed: Stack = {
        ...stack,
        metadata: { ...stack.metadata, generation: 2 },
        spec: { ...stack.spec, targets: ['x'] },
      };
      return { req: syncRequest(changed, cluster), last, now: new Date('2026-11-22T10:06:10Z') };
    },
  ],
  [
    'a running drift check',
    () => {
      const { stack, cluster, last } = driftCheckRunning();
      return { req: syncRequest(stack, cluster), last, now: new Date('2026-11-22T10:06:10Z') };
    },
  ],
];

describe("a Stack's keep paths", () => {
  describe.each(stackPaths)('(%s)', (_path, build) => {
    it('answer each child as the hooks last answered it, an Update by identity only, and nothing else', () => {
      const { req, last, now } = build();
      const res = stackHook(
        rewritten(req, (o) => o, intruders(STACK_KINDS)),
        ctx(now),
      );
      expect(res.children.filter((c) => c.metadata.name === 'intruder')).toEqual([]);
      expect(childOf(res, 'Workspace')).toEqual(childOf(last, 'Workspace'));
      for (const update of res.children.filter((c) => c.kind === 'Update'))
        expect(update).toEqual(identityOf(update.metadata.name));
      expect(names(res.children).sort()).toEqual(
        names(last.children.filter((c) => c.kind === 'Workspace' || c.kind === 'Update')).sort(),
      );
      expect(res.status.childDigests).toEqual(last.status.childDigests);
    });

    it.each(forgeries)('answer 409 naming the Workspace when its copy is %s', (_forgery, forgery) => {
      const { req, now } = build();
      const forged = rewritten(req, (o) => forge(o, forgery), intruders(STACK_KINDS));
      expect(() => stackHook(forged, ctx(now))).toThrow(
        expect.objectContaining({
          field: ['children', 'Workspace.auto.pulumi.com/v1alpha1', 'team-a/my-stack'],
        }) as Error,
      );
    });

    it.each(forgeries)('ignore an Update whose copy is %s: kept by identity', (_forgery, forgery) => {
      const { req, last, now } = build();
      const forged = rewritten(req, (o) => (o.kind === 'Update' ? forge(o, forgery) : o));
      const res = stackHook(forged, ctx(now));
      expect(childOf(res, 'Workspace')).toEqual(childOf(last, 'Workspace'));
      for (const update of res.children.filter((c) => c.kind === 'Update'))
        expect(update).toEqual(identityOf(update.metadata.name));
    });
  });

  it('refuses a status from before digests (no record): 409 until the operation ends or the spec is fixed', () => {
    const { stack, cluster } = toFirstJob();
    const before = { ...stack.status };
    delete before.childDigests;
    expect(() => stackHook(syncRequest({ ...stack, status: before }, cluster), ctx())).toThrow(ChildNotVerified);
  });

  describe('(prerequisites not met: the spec is valid, so the children are computed)', () => {
    const prerequisite: KObject = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'base', namespace: 'team-a', generation: 2 },
      spec: { stack: 'base' },
      status: {
        lastUpdate: {
          generation: 2,
          name: 'base-up-12345678',
          type: 'up',
          state: 'succeeded',
          lastResyncTime: '2026-11-22T08:00:00Z',
        },
      },
    };
    const waiting = () => {
      const { stack, cluster } = withChildren();
      const gated: Stack = {
        ...stack,
        metadata: { ...stack.metadata, generation: 2 },
        spec: { ...stack.spec, prerequisites: [{ name: 'base', requirement: { succeededWithinDuration: '1h' } }] },
      };
      const first = stackHook(syncRequest(gated, cluster, [makeProgram(), prerequisite]), ctx());
      expect(condition(first.status, 'Reconciling')?.reason).toBe('PrerequisiteNotSatisfied');
      // The refresh request it asked for, applied, is observed on the next sync.
      const applied = [
        ...cluster,
        ...applyChildren(
          [],
          first.children.filter((c) => c.kind === 'ConfigMap'),
        ),
      ];
      return { req: syncRequest({ ...gated, status: first.status }, applied, [makeProgram(), prerequisite]), first };
    };

    it.each(forgeries)('answer the same children whatever the copies say (%s)', (_forgery, forgery) => {
      const { req, first } = waiting();
      const genuine = stackHook(req, ctx());
      expect(names(genuine.children)).toEqual(names(first.children));
      expect(names(genuine.children)).toContain('ConfigMap/my-stack-refresh-base');
      const forged = stackHook(
        rewritten(req, (o) => forge(o, forgery), intruders(STACK_KINDS)),
        ctx(),
      );
      expect(forged.children).toEqual(genuine.children);
    });
  });

  describe("(an earlier version's operation running: its children kept by identity only)", () => {
    const job = 'my-stack-up-0badc0de';
    const legacy: KObject[] = [
      ['StatefulSet', 'apps/v1', 'my-stack-workspace', { spec: { replicas: 1 } }],
      ['Service', 'v1', 'my-stack-workspace', { spec: { clusterIP: 'None' } }],
      ['Job', 'batch/v1', job, { spec: { template: {} }, status: { active: 1 } }],
      ['ServiceAccount', 'v1', 'my-stack-update', {}],
      ['Role', `${RBAC}/v1`, 'my-stack-update', { rules: [] }],
      ['Role', `${RBAC}/v1`, 'my-stack-workspace', { rules: [] }],
      [
        'RoleBinding',
        `${RBAC}/v1`,
        'my-stack-update',
        { roleRef: { apiGroup: RBAC, kind: 'Role', name: 'my-stack-update' } },
      ],
      [
        'RoleBinding',
        `${RBAC}/v1`,
        'my-stack-workspace',
        { roleRef: { apiGroup: RBAC, kind: 'Role', name: 'my-stack-workspace' } },
      ],
    ].map(([kind, apiVersion, name, rest]) => ({
      apiVersion: apiVersion as string,
      kind: kind as string,
      metadata: { name: name as string, namespace: 'team-a' },
      ...(rest as object),
    }));
    const upgraded = makeStack(
      {},
      {},
      { currentUpdate: { generation: 1, reconcileRequest: '', name: job, commit: '1' } },
    );
    const request = (children: KObject[]): StackSyncRequest => ({
      parent: upgraded,
      children: childrenMap(...children),
      related: objectMap(makeProgram()),
    });

    it.each([['no forgery', (copy: KObject) => copy] as const, ...forgeries])(
      'answers each of them as its kind, name and namespace, whatever its copy says (%s)',
      (_forgery, forgery) => {
        const res = stackHook(request([...legacy.map((o) => forge(o, forgery)), ...intruders(STACK_KINDS)]), ctx());
        expect(res.children).toEqual(
          legacy.map((o) => ({
            apiVersion: o.apiVersion,
            kind: o.kind,
            metadata: { name: o.metadata.name, namespace: 'team-a' },
          })),
        );
        expect(condition(res.status, 'Reconciling')).toMatchObject({ reason: 'StackProcessing' });
      },
    );

    it('keeps none of them for a Job the status does not name (anyone who may create Jobs can label one)', () => {
      const res = stackHook({ ...request(legacy), parent: makeStack() }, ctx());
      expect(res.children.map((c) => c.kind)).toEqual(['Workspace']);
    });
  });
});

describe("a Workspace's keep paths", () => {
  const hand: Workspace = {
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Workspace',
    metadata: { name: 'ws', namespace: 'team-a', generation: 3 },
    spec: { git: { url: 'https://git.example/repo.git', ref: 'a'.repeat(40) }, stacks: [{ name: 'dev' }] },
  };
  const first = syncWorkspace({ parent: hand }, { config: testConfig, now: NOW });
  const applied = applyChildren([], first.children);
  const paths: [string, Workspace][] = [
    // Nested deeper than any pod spec: nothing is built from it.
    [
      'an invalid spec',
      { ...hand, spec: { ...hand.spec, stacks: [{ name: 'dev', config: [{ key: 'k', value: deep(200) }] }] } },
    ],
    [
      'held for a running operation',
      { ...hand, metadata: { ...hand.metadata, annotations: { [WORKSPACE_HOLD]: 'my-stack-up-12345678' } } },
    ],
  ];

  describe.each(paths)('(%s)', (_path, parent) => {
    const sync = (children: KObject[]) =>
      syncWorkspace(
        { parent: { ...parent, status: first.status }, children: objectMap(...children) },
        { config: testConfig, now: NOW },
      );

    it('answer each child as the hooks last answered it, and nothing else', () => {
      const res = sync([...applied, ...intruders(WORKSPACE_KINDS)]);
      // The same canonical JSON (an empty label map, which Metacontroller's own label fills, aside).
      expect(names(res.children)).toEqual(names(first.children));
      expect(res.children.map((c) => childDigest(c, 'team-a'))).toEqual(
        first.children.map((c) => childDigest(c, 'team-a')),
      );
      expect(res.children.map((c) => c.spec)).toEqual(first.children.map((c) => c.spec));
      expect(res.status.childDigests).toEqual(first.status.childDigests);
    });

    it.each(forgeries)('answer 409 naming the StatefulSet when every copy is %s', (_forgery, forgery) => {
      expect(() => sync([...applied.map((o) => forge(o, forgery)), ...intruders(WORKSPACE_KINDS)])).toThrow(
        expect.objectContaining({ field: ['children', 'StatefulSet.apps/v1', 'team-a/ws-workspace'] }) as Error,
      );
    });

    it.each(forgeries)('answer 409 naming the RoleBinding when its copy alone is %s', (_forgery, forgery) => {
      const one = applied.map((o) => (o.kind === 'RoleBinding' ? forge(o, forgery) : o));
      expect(() => sync(one)).toThrow(
        expect.objectContaining({ field: ['children', `RoleBinding.${RBAC}/v1`, 'team-a/ws-workspace'] }) as Error,
      );
    });
  });
});

describe('the digest of a child', () => {
  it('is the same for the hooks’ answer and for the copy Metacontroller records of it', () => {
    const answer: KObject = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: { a: '1' } };
    const recorded: KObject = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name: 'c',
        namespace: 'team-a',
        labels: { 'controller-uid': 'u' },
        annotations: { 'metacontroller.k8s.io/decorator-controller': 'pulumi-programs' },
      },
      data: { a: '1' },
    };
    expect(childDigest(recorded, 'team-a')).toBe(childDigest(answer, 'team-a'));
    expect(childDigest(answer, 'team-b')).not.toBe(childDigest(answer, 'team-a'));
    expect(childDigest({ ...answer, data: { a: '2' } }, 'team-a')).not.toBe(childDigest(answer, 'team-a'));
  });
});

describe('the last check of every answer', () => {
  const rules = [{ kind: 'ConfigMap', apiVersion: 'v1', name: (n: string) => n === 'mine' }];
  const child = (metadata: Record<string, unknown>, kind = 'ConfigMap'): KObject =>
    ({ apiVersion: kind === 'ConfigMap' ? 'v1' : `${RBAC}/v1`, kind, metadata }) as KObject;

  it.each([
    ['in another namespace', child({ name: 'mine', namespace: 'kube-system' }), /not in the parent's namespace/],
    [
      'of a kind the controller does not make',
      child({ name: 'mine', namespace: 'team-a' }, 'RoleBinding'),
      /kind this controller does not make/,
    ],
    [
      'with a name it does not give',
      child({ name: 'other', namespace: 'team-a' }),
      /name this controller does not give/,
    ],
  ])('throws for a child %s (a bug: 500, never answered)', (_what, bad, message) => {
    expect(() => checkAnswer('Test t', 'team-a', [bad], rules)).toThrow(message);
  });

  it('throws for an identity-only kind that carries more', () => {
    const identityOnly = [{ ...rules[0]!, identityOnly: true as const }];
    expect(() =>
      checkAnswer('Test t', 'team-a', [child({ name: 'mine', namespace: 'team-a' })], identityOnly),
    ).not.toThrow();
    const more = { ...child({ name: 'mine', namespace: 'team-a', labels: {} }) };
    expect(() => checkAnswer('Test t', 'team-a', [more], identityOnly)).toThrow(/identity only/);
  });
});

/** A JSON value nested `levels` deep. */
function deep(levels: number): unknown {
  let value: unknown = 'x';
  for (let i = 0; i < levels; i++) value = [value];
  return value;
}
