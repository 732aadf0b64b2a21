import fc from 'fast-check';
import { syncStack } from '../src/stack/sync';
import { customizeStack } from '../src/stack/customize';
import { validateStackObject } from '../src/stack/validate';
import type { KObject } from '../src/lib/k8s';
import {
  applyChildren,
  condition,
  find,
  jobsOf,
  makeProgram,
  makeStack,
  noLookups,
  NOW,
  syncRequest,
  testConfig,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { containerOf } from './children';

const ctx = { config: testConfig, now: NOW, lookups: noLookups };

/** A Stack that has a workspace and a running Job, then gets an invalid spec. */
function withChildren() {
  const stack = makeStack();
  const r1 = syncStack(syncRequest(stack), ctx);
  const cluster1 = workspaceBecomesReady(applyChildren([], r1.children));
  const r2 = syncStack(syncRequest(withStatus(stack, r1), cluster1), ctx);
  const cluster2 = applyChildren(cluster1, r2.children);
  const done = cluster2.map((c) =>
    c.kind === 'Job'
      ? {
          ...c,
          metadata: {
            ...c.metadata,
            annotations: {
              ...c.metadata.annotations,
              'pulumi.com/update-result': JSON.stringify({
                state: 'succeeded',
                type: 'up',
                message: 'ok',
                endTime: '2026-11-22T10:01:00Z',
              }),
            },
          },
          status: {
            succeeded: 1,
            completionTime: '2026-11-22T10:01:00Z',
            conditions: [{ type: 'Complete', status: 'True' }],
          },
        }
      : c,
  );
  const r3 = syncStack(syncRequest(withStatus(stack, r2), done), ctx);
  return { stack: withStatus(stack, r3), cluster: applyChildren(done, r3.children) };
}

/** An array in an array … `depth` levels deep, as a free-form field the API server accepts may hold. */
function nested(depth: number): unknown {
  let value: unknown = 'x';
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

const cases: [string, Record<string, unknown>, RegExp][] = [
  [
    'commit and branch both set',
    { programRef: undefined, projectRepo: 'https://g.test/r.git', commit: 'a'.repeat(40), branch: 'main' },
    /only one of "commit" or "branch"/,
  ],
  [
    'neither commit nor branch',
    { programRef: undefined, projectRepo: 'https://g.test/r.git' },
    /missing "commit" or "branch"/,
  ],
  ['git without projectRepo', { programRef: undefined, branch: 'main' }, /spec\.projectRepo: missing "projectRepo"/],
  [
    'a cross-namespace Secret',
    { envRefs: { X: { type: 'Secret', secret: { namespace: 'other', name: 's', key: 'k' } } } },
    /spec\.envRefs\.X: cross-namespace refs are not allowed/,
  ],
  [
    'an Env ref',
    { secretsRef: { k: { type: 'Env', env: { name: 'HOME' } } } },
    /spec\.secretsRef\.k: ref type "Env" is deprecated/,
  ],
  ['an FS ref', { envRefs: { K: { type: 'FS', filesystem: { path: '/x' } } } }, /ref type "FS" is deprecated/],
  [
    'a Literal git credential',
    {
      programRef: undefined,
      projectRepo: 'https://g.test/r.git',
      branch: 'main',
      gitAuth: { accessToken: { type: 'Literal', literal: { value: 't' } } },
    },
    /spec\.gitAuth\.accessToken: "Literal" selectors are no longer supported/,
  ],
  [
    'an empty gitAuth',
    { programRef: undefined, projectRepo: 'https://g.test/r.git', branch: 'main', gitAuth: {} },
    /gitAuth config must specify exactly one of/,
  ],
  [
    'an unknown Flux kind',
    {
      programRef: undefined,
      fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'HelmRelease', name: 'x' } },
    },
    /unknown Flux source kind "HelmRelease"/,
  ],
  [
    'a non-Flux apiVersion',
    { programRef: undefined, fluxSource: { sourceRef: { apiVersion: 'apps/v1', kind: 'GitRepository', name: 'x' } } },
    /is not a Flux source API version/,
  ],
  [
    'a bad duration',
    { prerequisites: [{ name: 'a', requirement: { succeededWithinDuration: 'soon' } }] },
    /succeededWithinDuration: "soon" is not a duration/,
  ],
  [
    'a bad env var name',
    { envRefs: { 'BAD NAME': { type: 'Literal', literal: { value: 'x' } } } },
    /"BAD NAME" is not a valid environment variable name/,
  ],
  ['a wrong type', { refresh: 'yes' }, /spec\.refresh/],
  ['a bad reclaim policy', { workspaceReclaimPolicy: 'Sometimes' }, /spec\.workspaceReclaimPolicy must be one of/],
  ['a bad security profile', { workspaceTemplate: { spec: { securityProfile: 'privileged' } } }, /securityProfile/],
  // Deep enough to overflow any recursive walk of the spec, and far past what the API server allows.
  [
    'a config value nested 10,000 levels deep',
    { config: { deep: nested(10_000) } },
    /^spec\.config\.deep\[0\]\[0\]\[0\]\[0\]\[0\]… is nested more than 100 levels deep/,
  ],
  [
    'a workspaceTemplate nested 101 levels deep',
    { workspaceTemplate: { metadata: { annotations: {} }, spec: { podTemplate: { x: nested(97) } } } },
    /^spec\.workspaceTemplate\.spec\.podTemplate\.x\[0\]\[0\]\[0\]… is nested more than 100 levels deep/,
  ],
];

describe('an invalid Stack', () => {
  it.each(cases)('with %s is Stalled/SpecInvalid with a message saying what to fix', (_name, spec, message) => {
    const res = syncStack(syncRequest(makeStack(spec as any)), ctx);
    expect(condition(res.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'SpecInvalid' });
    expect(condition(res.status, 'Stalled')?.message).toMatch(message);
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'NotReadyStalled' });
    expect(condition(res.status, 'Reconciling')).toBeUndefined();
  });

  it.each(cases)('with %s keeps every child exactly as last applied', (_name, spec) => {
    const { stack, cluster } = withChildren();
    const broken = {
      ...stack,
      metadata: { ...stack.metadata!, generation: 2 },
      spec: { ...stack.spec, ...(spec as any) },
    };
    const res = syncStack(syncRequest(broken, cluster), ctx);
    expect(res.children.map((c) => `${c.kind}/${c.metadata.name}`).sort()).toEqual(
      cluster.map((c) => `${c.kind}/${c.metadata.name}`).sort(),
    );
    for (const child of res.children) {
      const observed = cluster.find((c) => c.kind === child.kind && c.metadata.name === child.metadata.name)!;
      const lastApplied = observed.metadata.annotations?.['metacontroller.k8s.io/last-applied-configuration'];
      if (child.kind === 'Job') {
        // OnDelete: never updated, so only its identity and labels (what Metacontroller checks) are returned.
        expect(child).toEqual({
          apiVersion: 'batch/v1',
          kind: 'Job',
          metadata: {
            name: observed.metadata.name,
            namespace: observed.metadata.namespace,
            labels: observed.metadata.labels,
          },
        });
      } else {
        expect(lastApplied).toBeDefined();
        expect(child).toEqual(JSON.parse(lastApplied!));
      }
    }
    // Results already absorbed stay.
    expect(res.status.lastUpdate?.state).toBe('succeeded');
  });

  it('may nest 100 levels deep (the limit), and answers in full', () => {
    const res = syncStack(syncRequest(makeStack({ config: { deep: nested(98) } } as any)), ctx);
    expect(condition(res.status, 'Stalled')).toBeUndefined();
    expect(res.children.map((c) => c.kind)).toContain('StatefulSet');
  });

  it('without a spec at all is Stalled and keeps its children', () => {
    const { stack, cluster } = withChildren();
    const { spec: _spec, ...noSpec } = stack;
    const res = syncStack(syncRequest(noSpec as any, cluster), ctx);
    expect(condition(res.status, 'Stalled')?.message).toMatch(/spec is required/);
    expect(res.children).toHaveLength(cluster.length);
  });

  it('recovers once fixed', () => {
    const broken = makeStack({ projectRepo: 'https://g.test/r.git', programRef: undefined } as any);
    expect(condition(syncStack(syncRequest(broken), ctx).status, 'Stalled')).toBeDefined();
    const fixed = makeStack();
    const res = syncStack(syncRequest(withStatus(fixed, syncStack(syncRequest(broken), ctx))), ctx);
    expect(condition(res.status, 'Stalled')).toBeUndefined();
    expect(find(res, 'StatefulSet')).toBeDefined();
  });
});

describe('an unavailable source', () => {
  it('a missing Program is Stalled/SourceUnavailable, retried in 30 s, children kept', () => {
    const { stack, cluster } = withChildren();
    const res = syncStack(syncRequest(stack, cluster, []), ctx);
    expect(condition(res.status, 'Stalled')).toMatchObject({
      reason: 'SourceUnavailable',
      message: 'unable to retrieve program for stack: Program team-a/my-program not found',
    });
    expect(res.resyncAfterSeconds).toBe(30);
    expect(res.children).toHaveLength(cluster.length);
  });

  it('a Program without an artifact is Stalled/SourceUnavailable', () => {
    const program = { ...makeProgram(), status: {} };
    const res = syncStack(syncRequest(makeStack(), [], [program]), ctx);
    expect(condition(res.status, 'Stalled')).toMatchObject({
      reason: 'SourceUnavailable',
      message: 'Program team-a/my-program has no artifact',
    });
  });

  it('a Flux source without an artifact is Stalled/SourceUnavailable', () => {
    const stack = makeStack({
      programRef: undefined,
      fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'OCIRepository', name: 'oci' } },
    } as any);
    const oci = {
      apiVersion: 'source.toolkit.fluxcd.io/v1',
      kind: 'OCIRepository',
      metadata: { name: 'oci', namespace: 'team-a' },
      status: {},
    };
    expect(condition(syncStack(syncRequest(stack, [], [oci]), ctx).status, 'Stalled')?.message).toBe(
      'Flux source OCIRepository team-a/oci has no artifact',
    );
    expect(condition(syncStack(syncRequest(stack, [], []), ctx).status, 'Stalled')?.message).toMatch(
      /unable to retrieve Flux source OCIRepository team-a\/oci/,
    );
  });

  it('a branch that cannot be resolved is Stalled/SourceUnavailable with the lookup error', () => {
    const stack = makeStack({ programRef: undefined, projectRepo: 'https://g.test/r.git', branch: 'main' } as any);
    const lookups = new Map([
      ['https://g.test/r.git#main', { error: 'timed out after 2000 ms resolving "main" in https://g.test/r.git' }],
    ]);
    const res = syncStack(syncRequest(stack, [], []), { ...ctx, lookups });
    expect(condition(res.status, 'Stalled')).toMatchObject({
      reason: 'SourceUnavailable',
      message: 'timed out after 2000 ms resolving "main" in https://g.test/r.git',
    });
    expect(res.resyncAfterSeconds).toBe(30);
  });
});

describe('branch tracking', () => {
  it('runs at the resolved commit and polls every resync period', () => {
    const stack = makeStack({
      programRef: undefined,
      projectRepo: 'https://g.test/r.git',
      branch: 'main',
      resyncFrequencySeconds: 90,
    } as any);
    const sha1 = '1'.repeat(40);
    const sha2 = '2'.repeat(40);
    const look = (sha: string) => ({ ...ctx, lookups: new Map([['https://g.test/r.git#main', { sha }]]) });
    const r1 = syncStack(syncRequest(stack, [], []), look(sha1));
    const c1 = workspaceBecomesReady(applyChildren([], r1.children));
    const r2 = syncStack(syncRequest(withStatus(stack, r1), c1), look(sha1));
    const job = jobsOf(r2)[0]!;
    expect(r2.status.currentUpdate?.commit).toBe(sha1);
    const c2 = applyChildren(c1, r2.children).map((c) =>
      c.kind === 'Job'
        ? {
            ...c,
            metadata: {
              ...c.metadata,
              annotations: {
                ...c.metadata.annotations,
                'pulumi.com/update-result': JSON.stringify({
                  state: 'succeeded',
                  type: 'up',
                  message: 'ok',
                  endTime: '2026-11-22T10:01:00Z',
                }),
              },
            },
          }
        : c,
    );
    const r3 = syncStack(syncRequest(withStatus(stack, r2), c2), look(sha1));
    expect(r3.status.lastUpdate).toMatchObject({ lastSuccessfulCommit: sha1, name: job.metadata.name });
    expect(r3.resyncAfterSeconds).toBe(90);
    // A push: the next poll sees a new commit and rolls the workspace to it.
    const r4 = syncStack(syncRequest(withStatus(stack, r3), applyChildren(c2, r3.children)), look(sha2));
    expect(containerOf(find(r4, 'StatefulSet'), 0, true).env).toContainEqual({
      name: 'GIT_REVISION',
      value: sha2,
    });
    expect(condition(r4.status, 'Reconciling')?.message).toBe('waiting for workspace readiness');
  });
});

describe('customize', () => {
  it('asks for the Program, prerequisites and refresh requests', () => {
    const stack = makeStack({ prerequisites: [{ name: 'b' }, { name: 'a' }, { name: 'b' }] } as any);
    expect(customizeStack(stack)).toEqual({
      relatedResources: [
        { apiVersion: 'pulumi.com/v1', resource: 'programs', namespace: 'team-a', names: ['my-program'] },
        { apiVersion: 'pulumi.com/v1', resource: 'stacks', namespace: 'team-a', names: ['a', 'b'] },
        {
          apiVersion: 'v1',
          resource: 'configmaps',
          namespace: 'team-a',
          labelSelector: { matchLabels: { 'pulumi.com/refresh-requested-for': 'my-stack' } },
        },
      ],
    });
  });

  it('asks for the Flux source by kind', () => {
    const stack = makeStack({
      programRef: undefined,
      fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1beta2', kind: 'Bucket', name: 'b' } },
    } as any);
    expect(customizeStack(stack).relatedResources[0]).toEqual({
      apiVersion: 'source.toolkit.fluxcd.io/v1beta2',
      resource: 'buckets',
      namespace: 'team-a',
      names: ['b'],
    });
  });

  it('asks for git credentials only to resolve a branch', () => {
    const auth = {
      gitAuth: {
        basicAuth: {
          userName: { type: 'Secret', secret: { name: 'u', key: 'user' } },
          password: { type: 'Secret', secret: { name: 'p', key: 'pw' } },
        },
      },
    };
    const branch = makeStack({
      programRef: undefined,
      projectRepo: 'https://g.test/r.git',
      branch: 'main',
      ...auth,
    } as any);
    const pinned = makeStack({
      programRef: undefined,
      projectRepo: 'https://g.test/r.git',
      commit: 'a'.repeat(40),
      ...auth,
    } as any);
    expect(customizeStack(branch).relatedResources).toContainEqual({
      apiVersion: 'v1',
      resource: 'secrets',
      namespace: 'team-a',
      names: ['p', 'u'],
    });
    expect(customizeStack(pinned).relatedResources.some((r) => r.resource === 'secrets')).toBe(false);
  });

  it('asks for nothing it cannot use when the spec is broken', () => {
    const stack = makeStack({
      programRef: undefined,
      fluxSource: { sourceRef: { apiVersion: 'v1', kind: 'Nope', name: 'x' } },
    } as any);
    expect(customizeStack(stack).relatedResources.map((r) => r.resource)).toEqual(['configmaps']);
  });
});

describe('any Stack', () => {
  const json = fc.letrec((tie) => ({
    value: fc.oneof(
      { depthSize: 'small' },
      fc.string(),
      fc.integer(),
      fc.boolean(),
      fc.constant(null),
      fc.array(tie('value'), { maxLength: 3 }),
      fc.dictionary(fc.string(), tie('value'), { maxKeys: 3 }),
    ),
  })).value;
  const specField = fc.constantFrom(
    'stack',
    'projectRepo',
    'branch',
    'commit',
    'repoDir',
    'gitAuth',
    'gitAuthSecret',
    'fluxSource',
    'programRef',
    'envRefs',
    'secretsRef',
    'config',
    'configRef',
    'secrets',
    'envs',
    'envSecrets',
    'prerequisites',
    'workspaceTemplate',
    'updateTemplate',
    'destroyOnFinalize',
    'preview',
    'workspaceReclaimPolicy',
    'resyncFrequencySeconds',
    'retryMaxBackoffDurationSeconds',
    'targets',
    'environment',
  );

  it('never makes the hooks throw, and always reports a Ready condition', () => {
    fc.assert(
      fc.property(fc.dictionary(specField, json, { maxKeys: 6 }), fc.boolean(), (spec, finalizing) => {
        const stack = makeStack({}, {});
        (stack as any).spec = { stack: 'dev', ...spec };
        const res = syncStack(syncRequest(stack, [], [makeProgram()], finalizing), ctx);
        expect(condition(res.status, 'Ready')).toBeDefined();
        customizeStack(stack);
        // Deterministic for any input.
        expect(JSON.stringify(syncStack(syncRequest(stack, [], [makeProgram()], finalizing), ctx))).toBe(
          JSON.stringify(res),
        );
      }),
      { numRuns: 300 },
    );
  });

  it('validateStackObject accepts the full upstream-style example', () => {
    expect(validateStackObject(makeStack())).toEqual([]);
  });
});

export type { KObject };
