import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { eventsAccessFromEnv } from '../src/events/kubernetes';
import type { Update, Workspace } from '../../schemas/generated/types';
import type { HookEvent } from '../src/events/event';
import { EventRecorder, microTime, type EventBody, type EventsApi } from '../src/events/recorder';
import type { ObjectMirror } from '../src/objects/gauges';
import { buildServer } from '../src/server';
import { postJson, listenOnLoopback } from './answers';
import { NOW, testConfig } from './builders';
import { FakeCluster } from './fake-cluster';

/** An API failure as client-node reports one: the HTTP status as `code`, the Status as `body`. */
class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly body = JSON.stringify({ kind: 'Status', message: `refused with ${code}` }),
  ) {
    super(`HTTP-Code: ${code}`);
  }
}

/** An Events API that answers with `answer(body, call)`: resolve to accept, throw to refuse. */
function fakeApi(answer: (body: EventBody, call: number) => Promise<void> = () => Promise.resolve()) {
  const sent: EventBody[] = [];
  const api: EventsApi = {
    create: (body) => {
      sent.push(body);
      return answer(body, sent.length);
    },
  };
  return { api, sent };
}

function captureLog() {
  const warnings: Record<string, unknown>[] = [];
  const debug: Record<string, unknown>[] = [];
  return {
    warnings,
    debug,
    log: {
      warn: (obj: object, msg: string) => warnings.push({ ...obj, msg }),
      debug: (obj: object, msg: string) => debug.push({ ...obj, msg }),
    },
  };
}

function event(n: number, extra: Partial<HookEvent> = {}): HookEvent {
  return {
    name: `web.${String(n).padStart(16, '0')}`,
    namespace: 'team-a',
    type: 'Warning',
    reason: 'StackUpdateFailure',
    action: 'Up',
    message: 'Failed to update stack: boom',
    regarding: { apiVersion: 'pulumi.com/v1', kind: 'Stack', name: 'web', namespace: 'team-a', uid: 'u-1' },
    labels: { 'pulumi.com/stack-name': 'web' },
    ...extra,
  };
}

const never = () => new Promise<void>(() => undefined);

describe('the event recorder', () => {
  it('writes core/v1 Events naming this operator as their reporter, each counted once', async () => {
    const { api, sent } = fakeApi();
    const { log } = captureLog();
    const recorder = new EventRecorder(api, { log, clock: () => NOW, reportingInstance: 'pulumi-mc-hooks-7d9f-abcde' });
    const related = { apiVersion: 'batch/v1', kind: 'Job', name: 'web-up-12345678', namespace: 'team-a' };
    recorder.record([event(1, { related })]);
    await recorder.idle();
    expect(sent).toEqual([
      {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: {
          name: 'web.0000000000000001',
          namespace: 'team-a',
          labels: { 'pulumi.com/stack-name': 'web' },
        },
        involvedObject: { apiVersion: 'pulumi.com/v1', kind: 'Stack', name: 'web', namespace: 'team-a', uid: 'u-1' },
        related,
        type: 'Warning',
        reason: 'StackUpdateFailure',
        action: 'Up',
        message: 'Failed to update stack: boom',
        firstTimestamp: '2026-11-22T10:00:00Z',
        lastTimestamp: '2026-11-22T10:00:00Z',
        eventTime: '2026-11-22T10:00:00.000000Z',
        count: 1,
        source: { component: 'pulumi-mc-operator/hooks' },
        reportingComponent: 'pulumi-mc-operator/hooks',
        reportingInstance: 'pulumi-mc-hooks-7d9f-abcde',
      },
    ]);
    expect(recorder.counts).toMatchObject({ written: 1, failed: 0 });
  });

  it('eventTime has the six fractional digits of a MicroTime, and grows with each event', async () => {
    expect(microTime(Date.parse('2026-01-02T03:04:05.678Z') * 1000 + 9)).toBe('2026-01-02T03:04:05.678009Z');
    const { api, sent } = fakeApi();
    const recorder = new EventRecorder(api, { log: captureLog().log, clock: () => NOW });
    recorder.record([event(1), event(2), event(3)]);
    await recorder.idle();
    expect(sent.map((b) => b.eventTime)).toEqual([
      '2026-11-22T10:00:00.000000Z',
      '2026-11-22T10:00:00.000001Z',
      '2026-11-22T10:00:00.000002Z',
    ]);
  });

  it('drops an event that already exists (a repeated sync) without a warning', async () => {
    const { api } = fakeApi(() => Promise.reject(new ApiError(409)));
    const { log, warnings } = captureLog();
    const recorder = new EventRecorder(api, { log });
    recorder.record([event(1), event(1)]);
    await recorder.idle();
    expect(recorder.counts).toMatchObject({ written: 0, duplicate: 2, failed: 0 });
    expect(warnings).toEqual([]);
  });

  it('retries a transient failure (network, 429, 5xx), then gives up with one warning', async () => {
    const flaky = fakeApi((_b, call) => (call === 1 ? Promise.reject(new ApiError(503)) : Promise.resolve()));
    const a = captureLog();
    const r1 = new EventRecorder(flaky.api, { log: a.log, retryDelayMs: 1 });
    r1.record([event(1)]);
    await r1.idle();
    expect(flaky.sent).toHaveLength(2);
    expect(r1.counts).toMatchObject({ written: 1, failed: 0 });

    const down = fakeApi(() => Promise.reject(new Error('connect ECONNREFUSED 10.0.0.1:443')));
    const b = captureLog();
    const r2 = new EventRecorder(down.api, { log: b.log, retryDelayMs: 1, attempts: 3 });
    r2.record([event(1)]);
    await r2.idle();
    expect(down.sent).toHaveLength(3);
    expect(r2.counts).toMatchObject({ failed: 1 });
    expect(b.warnings).toEqual([
      {
        msg: 'event not written',
        event: 'web.0000000000000001',
        regarding: 'Stack team-a/web',
        reason: 'StackUpdateFailure',
        error: 'connect ECONNREFUSED 10.0.0.1:443',
      },
    ]);
  });

  it('does not retry a refusal, and logs refusals at most once a minute, counting the rest', async () => {
    const { api, sent } = fakeApi(() => Promise.reject(new ApiError(403)));
    const { log, warnings } = captureLog();
    const recorder = new EventRecorder(api, { log });
    recorder.record([event(1), event(2), event(3)]);
    await recorder.idle();
    expect(sent).toHaveLength(3);
    expect(recorder.counts).toMatchObject({ failed: 3 });
    expect(warnings).toEqual([expect.objectContaining({ error: 'HTTP 403: refused with 403' })]);
  });

  it('a namespace that is gone (404) is not worth a warning', async () => {
    const { api } = fakeApi(() => Promise.reject(new ApiError(404)));
    const { log, warnings, debug } = captureLog();
    const recorder = new EventRecorder(api, { log });
    recorder.record([event(1)]);
    await recorder.idle();
    expect(warnings).toEqual([]);
    expect(debug).toEqual([expect.objectContaining({ error: 'HTTP 404: refused with 404' })]);
  });

  it('is bounded: writes in flight and queued events are capped, the rest dropped', () => {
    const { api, sent } = fakeApi(never);
    const { log, warnings } = captureLog();
    const recorder = new EventRecorder(api, { log, capacity: 2, concurrency: 1 });
    recorder.record([1, 2, 3, 4, 5].map((n) => event(n)));
    // One write in flight, two queued, two dropped (with one warning).
    expect(sent).toHaveLength(1);
    expect(recorder.counts.dropped).toBe(2);
    expect(warnings).toEqual([expect.objectContaining({ msg: 'event dropped: the event queue is full' })]);
  });

  it('record() returns at once, even when the API never answers or throws', async () => {
    const hanging = new EventRecorder(fakeApi(never).api, { log: captureLog().log });
    hanging.record([event(1)]);
    const throwing: EventsApi = {
      create: () => {
        throw new Error('synchronous bug');
      },
    };
    const c = captureLog();
    const r = new EventRecorder(throwing, { log: c.log, attempts: 1 });
    r.record([event(1)]);
    await r.idle();
    expect(r.counts.failed).toBe(1);
    // close() waits for the queue at most as long as it is told.
    await hanging.close(10);
  });
});

describe('events access from the environment', () => {
  it('is off without KUBECONFIG and outside a pod, or in a pod without a token', () => {
    expect(eventsAccessFromEnv({}, () => false)).toEqual({
      off: 'no Kubernetes API access (not in a pod, KUBECONFIG unset)',
    });
    const inPod = eventsAccessFromEnv({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, () => false);
    expect('off' in inPod ? inPod.off : 'on').toMatch(/^no ServiceAccount token at /);
  });
});

describe('the hook server with events on', () => {
  const example = (name: string): unknown =>
    JSON.parse(readFileSync(join(__dirname, '..', '..', 'examples', 'hooks', name), 'utf8'));

  async function serve(api: EventsApi) {
    const server = buildServer(testConfig, { logger: false, clock: () => NOW, events: { api, via: 'a test' } });
    const base = await listenOnLoopback(server.app);
    return { server, base };
  }

  it('writes the events a sync implies after answering it', async () => {
    const { api, sent } = fakeApi();
    const { server, base } = await serve(api);
    try {
      for (const name of ['stack-sync-new.json', 'stack-sync-start.json', 'stack-sync-invalid.json']) {
        expect((await postJson(`${base}/stack/sync`, example(name))).status).toBe(200);
      }
      await server.events?.idle();
      expect(sent.map((e) => [e.reason, e.type, e.involvedObject.name])).toEqual([
        ['StackUpdateDetected', 'Normal', 'my-stack'],
        // The invalid example also holds a finished Job, whose result the sync absorbs first.
        ['StackCreated', 'Normal', 'my-stack'],
        ['StackConfigInvalid', 'Warning', 'my-stack'],
      ]);
    } finally {
      await server.app.close();
    }
  });

  it('writes the events of Workspace and Update syncs, about those objects', async () => {
    const { api, sent } = fakeApi();
    const { server, base } = await serve(api);
    try {
      const ws = example('workspace-sync.json') as { parent: Workspace };
      const twoStacks = {
        ...ws,
        parent: {
          ...ws.parent,
          metadata: { ...ws.parent.metadata, uid: 'ws-uid' },
          spec: { ...ws.parent.spec, stacks: [{ name: 'dev' }, { name: 'prod' }] },
        },
      };
      expect((await postJson(`${base}/workspace/sync`, twoStacks)).status).toBe(200);
      const up = example('update-sync.json') as { parent: Update };
      const invalid = {
        ...up,
        parent: {
          ...up.parent,
          metadata: { ...up.parent.metadata, uid: 'u-uid' },
          spec: { ...up.parent.spec, type: 'import' },
        },
      };
      expect((await postJson(`${base}/update/sync`, invalid)).status).toBe(200);
      await server.events?.idle();
      expect(
        sent.map((e) => [e.reason, e.type, e.involvedObject.kind, e.involvedObject.uid, e.metadata.labels]),
      ).toEqual([
        ['MultipleStacksUnsupported', 'Warning', 'Workspace', 'ws-uid', { 'pulumi.com/stack-name': 'my-stack' }],
        ['UpdateFailed', 'Warning', 'Update', 'u-uid', { 'pulumi.com/stack-name': 'my-stack' }],
      ]);
    } finally {
      await server.app.close();
    }
  });

  it('answers exactly as with events off, however the API fails', async () => {
    const off = buildServer(testConfig, { logger: false, clock: () => NOW });
    expect(off.events).toBeUndefined();
    const offBase = await listenOnLoopback(off.app);
    const { server, base } = await serve(fakeApi(never).api);
    try {
      for (const [route, name] of [
        ['stack', 'stack-sync-start.json'],
        ['stack', 'stack-sync-succeeded.json'],
        ['stack', 'stack-sync-invalid.json'],
        ['workspace', 'workspace-sync.json'],
        ['update', 'update-sync.json'],
      ] as const) {
        const body = example(name);
        const [withEvents, without] = await Promise.all([
          postJson(`${base}/${route}/sync`, body),
          postJson(`${offBase}/${route}/sync`, body),
        ]);
        expect(withEvents.status).toBe(200);
        expect(withEvents.json).toEqual(without.json);
      }
    } finally {
      await Promise.all([server.app.close(), off.app.close()]);
    }
  });
});

/** A mirror holding the objects put in it (kind namespace/name → uid); put() is a change. */
function fakeMirror() {
  const held = new Map<string, string>();
  let wake: (() => void)[] = [];
  const mirror: ObjectMirror = {
    holds: ({ kind, namespace, name, uid }) => uid !== undefined && held.get(`${kind} ${namespace}/${name}`) === uid,
    changed: (signal) =>
      new Promise((resolve) => {
        wake.push(resolve);
        signal.addEventListener('abort', () => resolve(), { once: true });
      }),
  };
  const put = (namespace: string, name: string, uid: string, kind = 'Stack') => {
    held.set(`${kind} ${namespace}/${name}`, uid);
    const woken = wake;
    wake = [];
    for (const w of woken) w();
  };
  return { mirror, put };
}

describe('events only about the objects the hooks watch', () => {
  it('writes an event about an object the mirror holds with the same kind and uid, and none about another', async () => {
    const { api, sent } = fakeApi();
    const { log, warnings } = captureLog();
    const { mirror, put } = fakeMirror();
    put('team-a', 'web', 'u-1');
    const recorder = new EventRecorder(api, { log, clock: () => NOW, mirror, mirrorWaitMs: 50 });
    const other = (n: number, regarding: Partial<HookEvent['regarding']>) =>
      event(n, { regarding: { ...event(n).regarding, ...regarding } });
    recorder.record([
      event(1),
      other(2, { uid: 'u-forged' }),
      other(3, { name: 'elsewhere' }),
      other(4, { namespace: 'team-b' }),
      other(5, { uid: undefined }),
      // The Stack's uid on its Workspace of the same name: not an object the mirror holds.
      other(6, { kind: 'Workspace', apiVersion: 'auto.pulumi.com/v1alpha1' }),
    ]);
    await recorder.idle();
    expect(sent.map((e) => e.metadata.name)).toEqual(['web.0000000000000001']);
    expect(recorder.counts).toMatchObject({ written: 1, unknownObject: 5 });
    expect(warnings[0]).toMatchObject({
      msg: 'event dropped: what it is about is not an object the hooks watch (a request that named another)',
      regarding: 'Stack team-a/web',
      uid: 'u-forged',
    });
  });

  it('waits for a Stack the watch has not seen yet, and writes its event once it shows', async () => {
    const { api, sent } = fakeApi();
    const { mirror, put } = fakeMirror();
    const recorder = new EventRecorder(api, { log: captureLog().log, clock: () => NOW, mirror, mirrorWaitMs: 60_000 });
    recorder.record([event(1)]);
    put('team-a', 'other', 'u-9');
    put('team-a', 'web', 'u-old'); // the same name, an earlier Stack: not this one
    await new Promise((resolve) => setImmediate(resolve));
    expect(sent).toEqual([]);
    put('team-a', 'web', 'u-1');
    await recorder.idle();
    expect(sent.map((e) => e.metadata.name)).toEqual(['web.0000000000000001']);
  });

  it('writes an event about a Workspace or an Update the mirror holds, by their own kind and uid', async () => {
    const { api, sent } = fakeApi();
    const { mirror, put } = fakeMirror();
    put('team-a', 'web', 'ws-1', 'Workspace');
    put('team-a', 'web-up-12345678', 'up-1', 'Update');
    const recorder = new EventRecorder(api, { log: captureLog().log, clock: () => NOW, mirror, mirrorWaitMs: 50 });
    const about = (n: number, kind: string, name: string, uid: string) =>
      event(n, { regarding: { apiVersion: 'auto.pulumi.com/v1alpha1', kind, name, namespace: 'team-a', uid } });
    recorder.record([
      about(1, 'Workspace', 'web', 'ws-1'),
      about(2, 'Update', 'web-up-12345678', 'up-1'),
      about(3, 'Update', 'web', 'ws-1'),
    ]);
    await recorder.idle();
    expect(sent.map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}`)).toEqual([
      'Workspace/web',
      'Update/web-up-12345678',
    ]);
    expect(recorder.counts).toMatchObject({ written: 2, unknownObject: 1 });
  });

  it('drops what waits for the mirror when closed, without waiting for it', async () => {
    const { api, sent } = fakeApi();
    const { mirror } = fakeMirror();
    const recorder = new EventRecorder(api, { log: captureLog().log, mirror, mirrorWaitMs: 600_000 });
    recorder.record([event(1), event(2)]);
    await recorder.close(600_000);
    expect(sent).toEqual([]);
    expect(recorder.counts).toMatchObject({ dropped: 2, unknownObject: 0 });
  });

  it('counts what waits for the mirror against the capacity', async () => {
    const { api } = fakeApi();
    const { mirror } = fakeMirror();
    const recorder = new EventRecorder(api, { log: captureLog().log, mirror, mirrorWaitMs: 600_000, capacity: 3 });
    recorder.record([1, 2, 3, 4, 5].map((n) => event(n)));
    expect(recorder.counts.dropped).toBe(2);
    await recorder.close(0);
  });
});

describe('the hook server with events on and the objects watched', () => {
  type SyncExample = { parent: { metadata: { namespace: string; name: string; uid: string } }; children?: unknown };
  const text = readFileSync(join(__dirname, '..', '..', 'examples', 'hooks', 'stack-sync-invalid.json'), 'utf8');
  /** A sync that implies an event (the spec is invalid: StackConfigInvalid), its parent changed by `forge`. */
  const example = (forge: (body: SyncExample) => void = () => {}): SyncExample => {
    const body = JSON.parse(text) as SyncExample;
    forge(body);
    return body;
  };

  it('writes no event for a forged /stack/sync naming a Stack the watch does not hold, and writes the real one', async () => {
    const cluster = new FakeCluster();
    const real = example().parent;
    cluster.put('stacks', real);
    const watched = fakeApi();
    const server = buildServer(testConfig, {
      logger: false,
      clock: () => NOW,
      events: { api: watched.api, via: 'a test' },
      objects: { api: cluster.api(), via: 'a test' },
      mirrorWaitMs: 100,
    });
    // The same requests to a server that does not watch Stacks: the events they imply.
    const unwatched = fakeApi();
    const control = buildServer(testConfig, {
      logger: false,
      clock: () => NOW,
      events: { api: unwatched.api, via: 'a test' },
    });
    const urlOf = async (s: typeof server) => `${await listenOnLoopback(s.app)}/stack/sync`;
    const [url, controlUrl] = [await urlOf(server), await urlOf(control)];
    try {
      await server.objects?.whenSynced();
      // Forged: another uid (a Stack of that name deleted long ago, or made up), another name,
      // another namespace (without the children, which the hooks would not keep in another one).
      for (const forged of [
        (b: SyncExample) => (b.parent.metadata.uid = 'e6b1f6a0-0000-4000-8000-000000000000'),
        (b: SyncExample) => (b.parent.metadata.name = 'invented'),
        (b: SyncExample) => {
          b.parent.metadata.namespace = 'kube-system';
          delete b.children;
        },
      ]) {
        expect((await postJson(url, example(forged))).status).toBe(200);
        expect((await postJson(controlUrl, example(forged))).status).toBe(200);
      }
      await Promise.all([server.events?.idle(), control.events?.idle()]);
      expect(unwatched.sent.length).toBeGreaterThan(0);
      expect(watched.sent).toEqual([]);
      expect(server.events?.counts).toMatchObject({ written: 0, unknownObject: unwatched.sent.length });

      // The request for the Stack the watch holds writes its events (its update's result, then the stall).
      expect((await postJson(url, example())).status).toBe(200);
      await server.events?.idle();
      expect(watched.sent.map((e) => [e.reason, e.involvedObject.name, e.involvedObject.uid])).toEqual([
        ['StackCreated', real.metadata.name, real.metadata.uid],
        ['StackConfigInvalid', real.metadata.name, real.metadata.uid],
      ]);
    } finally {
      await Promise.all([server.app.close(), control.app.close()]);
    }
  });

  it('writes the events of a Workspace or an Update the watch holds, and none for forged ones', async () => {
    const cluster = new FakeCluster();
    const ws = JSON.parse(
      readFileSync(join(__dirname, '..', '..', 'examples', 'hooks', 'workspace-sync.json'), 'utf8'),
    ) as { parent: Workspace };
    // Two stacks: Stalled MultipleStacksUnsupported, a Warning event.
    const workspace = {
      ...ws,
      parent: {
        ...ws.parent,
        metadata: { ...ws.parent.metadata, uid: 'ws-uid' },
        spec: { ...ws.parent.spec, stacks: [{ name: 'dev' }, { name: 'prod' }] },
      },
    };
    const up = JSON.parse(
      readFileSync(join(__dirname, '..', '..', 'examples', 'hooks', 'update-sync.json'), 'utf8'),
    ) as { parent: Update };
    // Of no known type: Failed InvalidSpec, a Warning UpdateFailed.
    const update = {
      ...up,
      parent: {
        ...up.parent,
        metadata: { ...up.parent.metadata, uid: 'u-uid' },
        spec: { ...up.parent.spec, type: 'x' },
      },
    };
    cluster.put('workspaces', workspace.parent as unknown as Parameters<FakeCluster['put']>[1]);
    cluster.put('updates', update.parent as unknown as Parameters<FakeCluster['put']>[1]);
    const { api, sent } = fakeApi();
    const server = buildServer(testConfig, {
      logger: false,
      clock: () => NOW,
      events: { api, via: 'a test' },
      objects: { api: cluster.api(), via: 'a test' },
      mirrorWaitMs: 100,
    });
    const base = await listenOnLoopback(server.app);
    try {
      await server.objects?.whenSynced();
      const forged = <T extends { parent: { metadata: object } }>(body: T): T => ({
        ...body,
        parent: { ...body.parent, metadata: { ...body.parent.metadata, uid: 'e6b1f6a0-0000-4000-8000-000000000000' } },
      });
      expect((await postJson(`${base}/workspace/sync`, forged(workspace))).status).toBe(200);
      expect((await postJson(`${base}/update/sync`, forged(update))).status).toBe(200);
      await server.events?.idle();
      expect(sent).toEqual([]);
      expect(server.events?.counts).toMatchObject({ written: 0, unknownObject: 2 });

      expect((await postJson(`${base}/workspace/sync`, workspace)).status).toBe(200);
      expect((await postJson(`${base}/update/sync`, update)).status).toBe(200);
      await server.events?.idle();
      expect(sent.map((e) => [e.reason, e.involvedObject.kind, e.involvedObject.uid])).toEqual([
        ['MultipleStacksUnsupported', 'Workspace', 'ws-uid'],
        ['UpdateFailed', 'Update', 'u-uid'],
      ]);
    } finally {
      await server.app.close();
    }
  });
});
