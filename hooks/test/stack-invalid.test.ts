import fc from 'fast-check';
import { buildServer } from '../src/server';
import { syncStack } from './controllers';
import { customizeStack } from '../src/stack/customize';
import { validateStackObject } from '../src/stack/validate';
import { postJson, stackSyncAnswer, listenOnLoopback } from './answers';
import { condition, find, makeProgram, makeStack, syncRequest, testConfig, withStatus } from './builders';
import { withChildren, ctx } from './stories';
import { childOf } from './children';

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
  // One program source only (upstream silently takes git, then Flux, then Program: docs/migration.md).
  [
    'a git source beside a programRef',
    { projectRepo: 'https://g.test/r.git', branch: 'main' },
    /^spec\.projectRepo, spec\.programRef: a Stack deploys one program, so set exactly one of .*keep the one you mean and remove the others/,
  ],
  [
    'a fluxSource beside a programRef',
    { fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'x' } } },
    /^spec\.fluxSource, spec\.programRef: a Stack deploys one program/,
  ],
  [
    'all three sources',
    {
      projectRepo: 'https://g.test/r.git',
      commit: 'a'.repeat(40),
      fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'x' } },
    },
    /^spec\.projectRepo, spec\.fluxSource, spec\.programRef: a Stack deploys one program/,
  ],
  [
    'a git field left beside a fluxSource',
    {
      programRef: undefined,
      gitAuthSecret: 'creds',
      fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'x' } },
    },
    /^spec\.gitAuthSecret, spec\.fluxSource: a Stack deploys one program/,
  ],
  // Names that cannot be empty.
  ['an empty stack name', { stack: '' }, /spec\.stack must NOT have fewer than 1 characters/],
  ['an empty programRef name', { programRef: { name: '' } }, /spec\.programRef\.name must NOT have fewer than 1/],
  [
    'an empty prerequisite name',
    { prerequisites: [{ name: '' }] },
    /spec\.prerequisites\[0\]\.name must NOT have fewer than 1/,
  ],
  [
    'an empty workspace image',
    { workspaceTemplate: { spec: { image: '' } } },
    /spec\.workspaceTemplate\.spec\.image: must not be empty; name one, or leave the field out/,
  ],
  ['an empty service account', { serviceAccountName: '' }, /^spec\.serviceAccountName: must not be empty/],
  [
    'an empty workspace service account',
    { workspaceTemplate: { spec: { serviceAccountName: '' } } },
    /^spec\.workspaceTemplate\.spec\.serviceAccountName: must not be empty/,
  ],
  [
    'an unknown image pull policy',
    { workspaceTemplate: { spec: { imagePullPolicy: 'Sometimes' } } },
    /spec\.workspaceTemplate\.spec\.imagePullPolicy must be one of "Always", "IfNotPresent", "Never"/,
  ],
  // Names of Object.prototype's members are no Flux kinds.
  ...['toString', 'constructor', '__proto__', 'hasOwnProperty'].map(
    (kind): [string, Record<string, unknown>, RegExp] => [
      `a Flux kind named ${kind}`,
      {
        programRef: undefined,
        fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind, name: 'x' } },
      },
      new RegExp(`unknown Flux source kind "${kind}"; use one of GitRepository`),
    ],
  ),
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
    const res = syncStack(syncRequest(makeStack(spec)), ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'SpecInvalid' });
    expect(condition(res.status, 'Stalled')?.message).toMatch(message);
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'NotReadyStalled' });
    expect(condition(res.status, 'Reconciling')).toBeUndefined();
  });

  it.each(cases)('with %s keeps every child exactly as the hooks last answered it', (_name, spec) => {
    const { stack, cluster, res: last } = withChildren();
    const broken = {
      ...stack,
      metadata: { ...stack.metadata, generation: 2 },
      spec: { ...stack.spec, ...spec },
    };
    const res = syncStack(syncRequest(broken, cluster), ctx());
    expect(res.children.map((c) => `${c.kind}/${c.metadata.name}`).sort()).toEqual(
      cluster.map((c) => `${c.kind}/${c.metadata.name}`).sort(),
    );
    for (const child of res.children) {
      if (child.kind === 'Update') {
        // OnDelete: never updated, so only its identity is returned, written by the hooks.
        expect(child).toEqual({
          apiVersion: 'auto.pulumi.com/v1alpha1',
          kind: 'Update',
          metadata: { name: child.metadata.name, namespace: 'team-a' },
        });
      } else {
        expect(child).toEqual(childOf(last, child.kind as 'Workspace', child.metadata.name));
      }
    }
    // Results already absorbed stay, and so do the digests the kept children are verified by.
    expect(res.status.lastUpdate?.state).toBe('succeeded');
    expect(res.status.childDigests).toEqual(last.status.childDigests);
  });

  it('may nest 100 levels deep (the limit), and answers in full', () => {
    const res = syncStack(syncRequest(makeStack({ config: { deep: nested(98) } })), ctx());
    expect(condition(res.status, 'Stalled')).toBeUndefined();
    expect(res.children.map((c) => c.kind)).toContain('Workspace');
    expect(res.children.map((c) => c.kind)).toContain('StatefulSet');
  });

  it('without a spec at all is Stalled and keeps its children', async () => {
    const { stack, cluster } = withChildren();
    // Only JSON can lack the spec a Stack's type requires: sent over HTTP, as Metacontroller would.
    const noSpec: Record<string, unknown> = { ...stack };
    delete noSpec.spec;
    const { app } = buildServer(testConfig, { logger: false });
    try {
      const sent = await postJson(`${await listenOnLoopback(app)}/stack/sync`, {
        controller: {},
        ...syncRequest(stack, cluster),
        parent: noSpec,
      });
      expect(sent.status).toBe(200);
      const res = stackSyncAnswer(sent.json);
      expect(condition(res.status, 'Stalled')?.message).toMatch(/spec is required/);
      // The server's own clock is a day past the finished Update's end: its TTL has passed
      // (stack-retention.test.ts). The Workspace stays.
      const workspaces = (children: { kind: string }[]) => children.filter((c) => c.kind === 'Workspace').length;
      expect(workspaces(res.children)).toBe(1);
      expect(workspaces(res.children)).toBe(workspaces(cluster));
    } finally {
      await app.close();
    }
  });

  it('recovers once fixed', () => {
    const broken = makeStack({ projectRepo: 'https://g.test/r.git', programRef: undefined });
    expect(condition(syncStack(syncRequest(broken), ctx()).status, 'Stalled')).toBeDefined();
    const fixed = makeStack();
    const res = syncStack(syncRequest(withStatus(fixed, syncStack(syncRequest(broken), ctx()))), ctx());
    expect(condition(res.status, 'Stalled')).toBeUndefined();
    expect(find(res, 'StatefulSet')).toBeDefined();
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
      fc.property(fc.dictionary(specField, json, { maxKeys: 6 }), fc.boolean(), (fields, finalizing) => {
        // Any JSON in any field: the hooks validate the spec themselves.
        const spec: Record<string, unknown> = fields;
        const stack = { ...makeStack(), spec: { stack: 'dev', ...spec } };
        const res = syncStack(syncRequest(stack, [], [makeProgram()], finalizing), ctx());
        expect(condition(res.status, 'Ready')).toBeDefined();
        customizeStack(stack);
        // Deterministic for any input.
        expect(JSON.stringify(syncStack(syncRequest(stack, [], [makeProgram()], finalizing), ctx()))).toBe(
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

describe('validation', () => {
  it('looks at the spec, not at the status the hooks wrote (an odd status never stalls a Stack)', () => {
    // Not a StackStatus (failures is a string): what a newer hook version might have written.
    const oddStatus: Record<string, unknown> = { lastUpdate: { state: 'from-a-future-version', failures: 'many' } };
    const stack = makeStack({}, {}, oddStatus);
    expect(validateStackObject(stack)).toEqual([]);
    const res = syncStack(syncRequest(stack), ctx());
    expect(condition(res.status, 'Stalled')).toBeUndefined();
  });
});
