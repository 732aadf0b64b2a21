/**
 * Hostile and malformed hook requests through the real server: values nested thousands of levels
 * deep wherever a request can carry them, and keys named after Object.prototype's members. Each
 * gets a clean answer (a 400 naming the field, a failed update, a Stalled condition), never a 500,
 * and the server answers the next healthy request as a fresh one would.
 */
import fc from 'fast-check';
import { Writable } from 'node:stream';
import type { Stack } from '../../schemas/generated/types';
import { Annotations, WORKSPACE_STATUS_KEY } from '../../contract';
import { buildServer } from '../src/server';
import { LAST_APPLIED_ANNOTATION, type KObject } from '../src/lib/k8s';
import {
  errorAnswer,
  postJson,
  programSyncAnswer,
  stackSyncAnswer,
  updateSyncAnswer,
  workspaceSyncAnswer,
  listenOnLoopback,
} from './answers';
import { condition, jobFinishes, makeProgram, makeStack, NOW, objectMap, syncRequest, testConfig } from './builders';
import { toFirstJob, withChildren } from './stories';

const DEPTHS = [10_000, 100_000];

/** JSON text nested `depth` levels deep: arrays in arrays, or objects in objects. */
function deepText(depth: number, shape: 'array' | 'object'): string {
  return shape === 'array'
    ? `${'['.repeat(depth)}${']'.repeat(depth)}`
    : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

/** A placeholder a request is built with, replaced by deep JSON text in the request's text. */
const HOLE = '__deep_value_here__';

/** The request's JSON with the (one) placeholder replaced by `deep`. */
function withDeep(request: unknown, deep: string): string {
  const text = JSON.stringify(request);
  const at = text.indexOf(JSON.stringify(HOLE));
  if (at < 0 || text.indexOf(JSON.stringify(HOLE), at + 1) >= 0) throw new Error('one placeholder expected');
  return text.slice(0, at) + deep + text.slice(at + JSON.stringify(HOLE).length);
}

function annotate(objects: KObject[], kind: string, key: string, value: string): KObject[] {
  return objects.map((o) =>
    o.kind === kind
      ? { ...o, metadata: { ...o.metadata, annotations: { ...o.metadata.annotations, [key]: value } } }
      : o,
  );
}

let base: string;
let close: () => Promise<void>;
const errors: string[] = [];

beforeAll(async () => {
  const { app } = buildServer(
    { ...testConfig, logLevel: 'error', bodyLimit: 16 * 1024 * 1024 },
    {
      clock: () => NOW,
      logStream: new Writable({
        write(chunk, _enc, cb) {
          errors.push(String(chunk));
          cb();
        },
      }),
    },
  );
  base = await listenOnLoopback(app);
  close = () => app.close();
});
afterAll(() => close());

const post = (path: string, body: unknown) => postJson(`${base}${path}`, body);
const controller = {};

/** What a healthy Stack's sync answers: compared before and after the hostile requests. */
const healthy = () => post('/stack/sync', { controller, ...syncRequest(makeStack()) });

describe('values nested thousands of levels deep', () => {
  let before: string;
  beforeAll(async () => {
    before = (await healthy()).text;
  });

  describe.each(DEPTHS.flatMap((depth) => (['array', 'object'] as const).map((shape) => [depth, shape] as const)))(
    '%i levels of %ss',
    (depth, shape) => {
      const deep = deepText(depth, shape);

      it("in the Stack's spec: Stalled/SpecInvalid naming the field (sync and customize)", async () => {
        const request = { controller, ...syncRequest(makeStack({ config: { x: HOLE } })) };
        const res = await post('/stack/sync', withDeep(request, deep));
        expect(res.status).toBe(200);
        expect(condition(stackSyncAnswer(res.json).status, 'Stalled')).toMatchObject({ reason: 'SpecInvalid' });
        expect(condition(stackSyncAnswer(res.json).status, 'Stalled')?.message).toMatch(
          /^spec\.config\.x.* is nested more than 100 levels deep/,
        );
        const customize = await post('/stack/customize', withDeep({ controller, parent: request.parent }, deep));
        expect(customize.status).toBe(200);
      });

      it("in a Job's update result: a failed update whose message names the output", async () => {
        const { stack, cluster, job } = toFirstJob();
        const done = annotate(
          jobFinishes(cluster, job.metadata.name, { state: 'succeeded' }),
          'Job',
          Annotations.updateResult,
          `{"state":"succeeded","type":"up","message":"ok","outputs":{"url":"u","x":${deep}}}`,
        );
        const res = await post('/stack/sync', { controller, ...syncRequest(stack, done) });
        expect(res.status).toBe(200);
        const last = stackSyncAnswer(res.json).status.lastUpdate;
        expect(last).toMatchObject({ state: 'failed', name: job.metadata.name });
        expect(last?.message).toMatch(
          /^the up finished \(succeeded\), but its outputs cannot be recorded in the Stack's status: outputs\.x.* is nested more than 100 levels deep/,
        );
        expect(stackSyncAnswer(res.json).status.outputs).toBeUndefined();
      });

      it('as a whole update result: the Job reported no result', async () => {
        const { stack, cluster, job } = toFirstJob();
        const done = annotate(
          jobFinishes(cluster, job.metadata.name, { state: 'succeeded' }),
          'Job',
          Annotations.updateResult,
          deep,
        );
        const res = await post('/stack/sync', { controller, ...syncRequest(stack, done) });
        expect(res.status).toBe(200);
        expect(stackSyncAnswer(res.json).status.lastUpdate?.message).toMatch(/completed without reporting a result/);
      });

      it("in the workspace's status ConfigMap: not a report, so the Workspace is not ready yet", async () => {
        const { cluster } = toFirstJob();
        const workspace = cluster.find((c) => c.kind === 'Workspace');
        const own = cluster.filter(
          (c) =>
            c.kind === 'StatefulSet' || (c.kind === 'ConfigMap' && c.metadata.name === 'my-stack-workspace-status'),
        );
        const ready = await post('/workspace/sync', { controller, parent: workspace, children: objectMap(...own) });
        expect(condition(workspaceSyncAnswer(ready.json).status, 'Ready')).toMatchObject({ status: 'True' });
        const broken = own.map((c) => (c.kind === 'ConfigMap' ? { ...c, data: { [WORKSPACE_STATUS_KEY]: deep } } : c));
        const res = await post('/workspace/sync', { controller, parent: workspace, children: objectMap(...broken) });
        expect(res.status).toBe(200);
        expect(condition(workspaceSyncAnswer(res.json).status, 'Ready')).toMatchObject({ status: 'False' });
      });

      it("in a Job's result, as the Update controller reads it: a failed update naming the output", async () => {
        const { cluster, job } = toFirstJob();
        const done = annotate(
          jobFinishes(cluster, job.metadata.name, { state: 'succeeded' }),
          'Job',
          Annotations.updateResult,
          `{"state":"succeeded","type":"up","message":"ok","outputs":{"url":"u","x":${deep}}}`,
        );
        const update = done.find((c) => c.kind === 'Update');
        const own = done.filter((c) => c.metadata.name === job.metadata.name && c.kind !== 'Update');
        const res = await post('/update/sync', {
          controller,
          parent: update,
          children: objectMap(...own),
          related: {},
        });
        expect(res.status).toBe(200);
        const status = updateSyncAnswer(res.json).status;
        expect(condition(status, 'Failed')).toMatchObject({ status: 'True', reason: 'InvalidResult' });
        expect(status.outputValues).toBeUndefined();
      });

      it("in a child's last-applied annotation: a 409 naming the child, which is not what the hooks answered", async () => {
        const { stack, cluster } = withChildren();
        const name = stack.metadata.name;
        const corrupt = annotate(
          cluster,
          'Workspace',
          LAST_APPLIED_ANNOTATION,
          `{"metadata":{"name":"${name}"},"x":${deep}}`,
        );
        const invalid = { ...stack, spec: { ...stack.spec, stack: '' } };
        const res = await post('/stack/sync', { controller, ...syncRequest(invalid, corrupt) });
        expect(res.status).toBe(409);
        const error = errorAnswer(res.json);
        expect(error.field).toBe('/children/Workspace.auto.pulumi.com~1v1alpha1/team-a~1my-stack');
        expect(error.message).toMatch(/annotation is not an object the operator writes/);
      });

      it('in an observed child itself: a 409 naming the child (an observed child is never copied)', async () => {
        const { stack, cluster } = withChildren();
        const withoutLastApplied = cluster.map((c) =>
          c.kind === 'Workspace' ? { ...c, metadata: { ...c.metadata, annotations: {} }, spec: { x: HOLE } } : c,
        );
        const invalid = { ...stack, spec: { ...stack.spec, stack: '' } };
        const res = await post(
          '/stack/sync',
          withDeep({ controller, ...syncRequest(invalid, withoutLastApplied) }, deep),
        );
        expect(res.status).toBe(409);
        const error = errorAnswer(res.json);
        expect(error.field).toBe('/children/Workspace.auto.pulumi.com~1v1alpha1/team-a~1my-stack');
        expect(error.message).toMatch(/has no metacontroller\.k8s\.io\/last-applied-configuration annotation/);
      });

      it.each([
        ['outputs', { outputs: { x: HOLE } }],
        ['lastUpdate', { lastUpdate: { name: HOLE, state: 'succeeded' } }],
        ['currentUpdate', { currentUpdate: { name: HOLE } }],
        ['projectInfo', { projectInfo: { name: HOLE } }],
        ['conditions', { conditions: [{ type: 'Custom', status: 'True', lastTransitionTime: 'x', extra: HOLE }] }],
        ['conditions (the list)', { conditions: HOLE }],
      ])("in the Stack's status.%s: left out of the answer", async (_field, status) => {
        const stack: Stack = { ...makeStack(), status: status as Stack['status'] };
        const res = await post('/stack/sync', withDeep({ controller, ...syncRequest(stack) }, deep));
        expect(res.status).toBe(200);
        expect(res.text.length).toBeLessThan(64 * 1024);
      });

      it.each([
        ['a Program', { ...makeProgram(), program: { outputs: { x: HOLE } } }],
        ['a Program status', { ...makeProgram(), status: { ...(makeProgram().status as object), extra: HOLE } }],
        [
          'a Secret',
          { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's', namespace: 'team-a' }, data: { k: HOLE } },
        ],
        [
          'a Flux source',
          {
            apiVersion: 'source.toolkit.fluxcd.io/v1',
            kind: 'GitRepository',
            metadata: { name: 'src', namespace: 'team-a' },
            status: { artifact: { url: 'http://a', revision: 'r', digest: 'sha256:0' }, extra: HOLE },
          },
        ],
      ])('in a related object (%s): the Stack is answered as usual', async (_name, related) => {
        const request = { controller, ...syncRequest(makeStack(), [], [makeProgram(), related]) };
        const res = await post('/stack/sync', withDeep(request, deep));
        expect(res.status).toBe(200);
        expect(condition(stackSyncAnswer(res.json).status, 'Reconciling')).toBeDefined();
      });

      it('in labels: a 400 naming the label', async () => {
        const stack = makeStack({}, { labels: { team: HOLE } });
        const res = await post('/stack/sync', withDeep({ controller, ...syncRequest(stack) }, deep));
        expect(res.status).toBe(400);
        expect(errorAnswer(res.json)).toMatchObject({
          field: '/parent/metadata/labels/team',
          message: '/parent/metadata/labels/team must be string',
        });
      });

      it('in a Program (its program, its conditions): Stalled/SpecInvalid, or answered as usual', async () => {
        const program = await post(
          '/program/sync',
          withDeep(
            { controller, object: { ...makeProgram(), program: { outputs: { x: HOLE } } }, attachments: {} },
            deep,
          ),
        );
        expect(program.status).toBe(200);
        expect(condition(programSyncAnswer(program.json).status, 'Stalled')?.message).toMatch(
          /^program\.outputs\.x.* is nested more than 100 levels deep/,
        );
        const conditions = [{ type: 'Custom', status: 'True', lastTransitionTime: 'x', extra: HOLE }];
        const object = { ...makeProgram(), program: { outputs: { a: 'b' } } };
        const res = await post(
          '/program/sync',
          withDeep({ controller, object: { ...object, status: { conditions } }, attachments: {} }, deep),
        );
        expect(res.status).toBe(200);
        expect(res.text.length).toBeLessThan(64 * 1024);
      });
    },
  );

  it('leave the server answering a healthy Stack exactly as before, with no error logged', async () => {
    expect((await healthy()).text).toBe(before);
    expect(errors.filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});

describe("keys named after Object.prototype's members", () => {
  it('in a request (a config key or envRefs name __proto__): a 400 naming the key', async () => {
    const stack = makeStack({ envRefs: { SAFE: { type: 'Literal', literal: { value: 'x' } } } });
    const text = JSON.stringify({ controller, ...syncRequest(stack) }).replace('"SAFE"', '"__proto__"');
    const res = await post('/stack/sync', text);
    expect(res.status).toBe(400);
    const error = errorAnswer(res.json);
    expect(error.field).toBe('/parent/spec/envRefs/__proto__');
    expect(error.message).toMatch(
      /^\/parent\/spec\/envRefs\/__proto__ is refused: no key in a request to the hooks may be named __proto__/,
    );
    const constructor = JSON.stringify({
      controller,
      ...syncRequest(makeStack({ config: { SAFE: { prototype: 1 } } })),
    });
    const viaConstructor = await post('/stack/sync', constructor.replace('"SAFE"', '"constructor"'));
    expect(errorAnswer(viaConstructor.json).field).toBe('/parent/spec/config/constructor');
  });

  it('as output names: __proto__ fails the update with a message naming it; constructor is an output like any', async () => {
    for (const [outputs, expected] of [
      [
        '{"__proto__":{"polluted":true}}',
        /outputs\.__proto__: no key in a request to the hooks may be named __proto__/,
      ],
      ['{"url":{"constructor":{"prototype":{"polluted":true}}}}', /outputs\.url\.constructor: no key/],
    ] as const) {
      const { stack, cluster, job } = toFirstJob();
      const done = annotate(
        jobFinishes(cluster, job.metadata.name, { state: 'succeeded' }),
        'Job',
        Annotations.updateResult,
        `{"state":"succeeded","type":"up","message":"ok","outputs":${outputs}}`,
      );
      const res = await post('/stack/sync', { controller, ...syncRequest(stack, done) });
      expect(res.status).toBe(200);
      expect(stackSyncAnswer(res.json).status.lastUpdate).toMatchObject({ state: 'failed' });
      expect(stackSyncAnswer(res.json).status.lastUpdate?.message).toMatch(expected);
    }
    const { stack, cluster, job } = toFirstJob();
    const done = jobFinishes(cluster, job.metadata.name, {
      state: 'succeeded',
      outputs: { constructor: 'c', toString: { valueOf: 1 } },
    });
    const res = await post('/stack/sync', { controller, ...syncRequest(stack, done) });
    expect(stackSyncAnswer(res.json).status.outputs).toEqual({ constructor: 'c', toString: { valueOf: 1 } });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('as a Secret key holding git credentials: treated as missing, with a message', async () => {
    const stack = makeStack({
      programRef: undefined,
      projectRepo: 'ssh://git@git.test/org/repo.git',
      branch: 'main',
      gitAuth: { sshAuth: { sshPrivateKey: { type: 'Secret', secret: { name: 'git', key: 'constructor' } } } },
    });
    const secret: KObject = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'git', namespace: 'team-a' },
      data: { other: Buffer.from('key').toString('base64') },
    };
    const res = await post('/stack/sync', { controller, ...syncRequest(stack, [], [secret]) });
    expect(res.status).toBe(200);
    expect(condition(stackSyncAnswer(res.json).status, 'Stalled')).toMatchObject({ reason: 'SourceUnavailable' });
    expect(condition(stackSyncAnswer(res.json).status, 'Stalled')?.message).toMatch(
      /needs the SSH key of gitAuth\.sshAuth\.sshPrivateKey: Secret team-a\/git or its key "constructor" is missing/,
    );
  });

  it.each(['toString', 'constructor', 'hasOwnProperty'])(
    'as a Flux kind (%s): customize asks for no such source, sync says the kind is unknown',
    async (kind) => {
      const stack = makeStack({
        programRef: undefined,
        fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind, name: 'src' } },
      });
      const customize = await post('/stack/customize', { controller, parent: stack });
      expect(customize.status).toBe(200);
      expect(JSON.stringify(customize.json)).not.toMatch(/source\.toolkit/);
      const sync = await post('/stack/sync', { controller, ...syncRequest(stack, [], []) });
      expect(condition(stackSyncAnswer(sync.json).status, 'Stalled')?.message).toMatch(
        new RegExp(`unknown Flux source kind "${kind}"`),
      );
    },
  );
});

describe('any part of a request replaced', () => {
  /** Requests with something everywhere: a finished Job with outputs, the workspace, a Program. */
  const { stack, cluster, job } = toFirstJob();
  const requests: [string, unknown][] = [
    [
      '/stack/sync',
      {
        controller,
        ...syncRequest(stack, jobFinishes(cluster, job.metadata.name, { state: 'succeeded', outputs: { url: 'u' } })),
      },
    ],
    ['/stack/customize', { controller, parent: stack }],
    ['/program/sync', { controller, object: makeProgram(), attachments: {}, finalizing: false }],
  ];
  /** Every place in them: the hook, the request and the path of each value, containers and leaves. */
  const places: [string, unknown, (string | number)[]][] = [];
  for (const [hook, request] of requests) {
    const pending: { value: unknown; path: (string | number)[] }[] = [{ value: request, path: [] }];
    while (pending.length > 0) {
      const { value, path } = pending.pop()!;
      places.push([hook, request, path]);
      if (value !== null && typeof value === 'object')
        for (const [key, child] of Object.entries(value))
          pending.push({ value: child, path: [...path, Array.isArray(value) ? Number(key) : key] });
    }
  }
  const replaced = (request: unknown, path: (string | number)[], by: unknown): unknown => {
    if (path.length === 0) return by;
    const copy = structuredClone(request);
    let parent = copy as Record<string | number, unknown>;
    for (const step of path.slice(0, -1)) parent = parent[step] as Record<string | number, unknown>;
    parent[path[path.length - 1]!] = by;
    return copy;
  };
  // 409: a child the hooks would keep, or an Update whose result they would take, is not theirs.
  const answered = (status: number) => expect([200, 400, 409]).toContain(status);

  it('by JSON 10,000 levels deep: answered (200, 400 or 409), never a 500', async () => {
    const deep = deepText(10_000, 'array');
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...places), async ([hook, request, path]) => {
        answered((await post(hook, withDeep(replaced(request, path, HOLE), deep))).status);
      }),
      { numRuns: 200 },
    );
  });

  it("by a name of Object.prototype's members: answered (200, 400 or 409), never a 500", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...places),
        fc.constantFrom('toString', 'constructor', 'hasOwnProperty', '__proto__', 'valueOf'),
        async ([hook, request, path], name) => {
          answered((await post(hook, JSON.stringify(replaced(request, path, name)))).status);
        },
      ),
      { numRuns: 200 },
    );
    expect(errors.filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});

describe('a malformed request', () => {
  it.each([
    [{ controller }, '/parent', '/parent is required'],
    [{ controller, parent: { ...makeStack(), kind: 7 } }, '/parent/kind', '/parent/kind must be string'],
    [
      {
        controller,
        parent: makeStack(),
        children: { 'Job.batch/v1': { 'team-a/j': { kind: 'Job', metadata: { name: 'j' } } } },
      },
      '/children/Job.batch~1v1/team-a~1j/apiVersion',
      '/children/Job.batch~1v1/team-a~1j/apiVersion is required',
    ],
    ['[]', '', 'the body must be object'],
  ])('gets a 400 naming the field as a JSON Pointer, in plain words', async (body, field, message) => {
    const res = await post('/stack/sync', body);
    expect(res.status).toBe(400);
    expect(errorAnswer(res.json)).toEqual({ error: 'Bad Request', field, message });
  });
});
