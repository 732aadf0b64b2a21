import { Writable } from 'node:stream';
import { request } from 'undici';
import { buildServer } from '../src/server';
import { GitResolver } from '../src/git/ls-remote';
import {
  customizeAnswer,
  errorAnswer,
  postJson,
  programSyncAnswer,
  stackSyncAnswer,
  listenOnLoopback,
} from './answers';
import { condition, makeStack, makeProgram, NOW, syncRequest, testConfig } from './builders';
import { parseObject } from './json';
import { withChildren } from './stories';
import { LAST_APPLIED_ANNOTATION } from '../src/lib/k8s';

let base: string;
let close: () => Promise<void>;
const logs: string[] = [];

beforeAll(async () => {
  const { app } = buildServer(
    { ...testConfig, logLevel: 'debug', bodyLimit: 256 * 1024 },
    {
      clock: () => NOW,
      git: new GitResolver({ timeoutMs: 500, cacheTtlMs: 1000 }),
      logStream: new Writable({
        write(chunk, _enc, cb) {
          logs.push(String(chunk));
          cb();
        },
      }),
    },
  );
  base = await listenOnLoopback(app);
  close = () => app.close();
});
afterAll(() => close());

/** POSTs a body (a string is sent as it is) to the server. */
const post = (path: string, body: unknown) => postJson(`${base}${path}`, body);

describe('the hook server', () => {
  it('answers health and readiness probes', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const res = await request(`${base}${path}`);
      expect(res.statusCode).toBe(200);
      expect(await res.body.json()).toEqual({ status: 'ok' });
    }
  });

  it('serves the Stack sync hook', async () => {
    const res = await post('/stack/sync', { controller: {}, ...syncRequest(makeStack()) });
    expect(res.status).toBe(200);
    const answer = stackSyncAnswer(res.json);
    expect(answer.children.map((c) => c.kind)).toEqual(['Workspace']);
    expect(answer.status.conditions?.[0]).toMatchObject({ type: 'Ready', status: 'False' });
  });

  it('answers the same request with the same bytes', async () => {
    const body = { controller: {}, ...syncRequest(makeStack()) };
    const a = await post('/stack/sync', body);
    const b = await post('/stack/sync', body);
    expect(a.text).toBe(b.text);
  });

  it('serves finalize as a sync with finalizing set', async () => {
    const stack = makeStack({}, { deletionTimestamp: '2026-11-22T09:00:00Z' });
    const res = await post('/stack/finalize', { controller: {}, ...syncRequest(stack, [], [makeProgram()], true) });
    expect(res.status).toBe(200);
    expect(stackSyncAnswer(res.json).finalized).toBe(true);
  });

  it('serves customize and the Program hook', async () => {
    const c = await post('/stack/customize', { controller: {}, parent: makeStack() });
    expect(c.status).toBe(200);
    expect(customizeAnswer(c.json).relatedResources[0]).toMatchObject({ resource: 'programs' });
    const p = await post('/program/sync', {
      controller: {},
      object: { ...makeProgram(), status: {} },
      attachments: {},
      related: {},
      finalizing: false,
    });
    expect(p.status).toBe(200);
    expect(programSyncAnswer(p.json).attachments).toEqual([]);
    expect(programSyncAnswer(p.json).status.artifact?.url).toBe(
      'https://pulumi-mc-hooks.pulumi-system.svc/programs/team-a/my-program',
    );
  });

  it.each([
    ['/stack/sync', { controller: {} }, '/parent'],
    ['/stack/sync', { controller: {}, parent: { apiVersion: 'pulumi.com/v1', kind: 'Stack' } }, '/parent/metadata'],
    [
      '/stack/sync',
      { controller: {}, parent: { apiVersion: 'pulumi.com/v1', kind: 'Stack', metadata: { namespace: 'a' } } },
      '/parent/metadata/name',
    ],
    ['/stack/sync', { controller: {}, parent: makeStack(), children: [] }, '/children'],
    ['/stack/sync', { controller: {}, parent: makeStack(), finalizing: 'yes' }, '/finalizing'],
    ['/stack/customize', { controller: {} }, '/parent'],
    ['/program/sync', { controller: {}, parent: makeProgram() }, '/object'],
  ])('rejects a malformed request to %s with a 400 naming the field', async (path, body, field) => {
    const res = await post(path, body);
    expect(res.status).toBe(400);
    const error = errorAnswer(res.json);
    expect(error.field).toBe(field);
    expect(error.message).toContain(field);
  });

  it('rejects a body that is not JSON with a 400', async () => {
    const res = await post('/stack/sync', '{"parent": ');
    expect(res.status).toBe(400);
    expect(errorAnswer(res.json).error).toBeDefined();
  });

  it('rejects an oversized body with a 413', async () => {
    const res = await post('/stack/sync', { controller: {}, parent: makeStack(), pad: 'x'.repeat(300 * 1024) });
    expect(res.status).toBe(413);
    expect(errorAnswer(res.json).error).toBe('Payload Too Large');
  });

  it('answers unknown paths with a JSON 404', async () => {
    const res = await post('/nope', {});
    expect(res.status).toBe(404);
    expect(errorAnswer(res.json).error).toBe('Not Found');
  });

  it('never logs Secret values it reads', async () => {
    const stack = makeStack({
      programRef: undefined,
      projectRepo: 'http://127.0.0.1:1/r.git',
      branch: 'main',
      gitAuth: { accessToken: { type: 'Secret', secret: { name: 'git', key: 'token' } } },
    });
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'git', namespace: 'team-a' },
      data: { token: Buffer.from('tok-very-secret').toString('base64') },
    };
    const res = await post('/stack/sync', { controller: {}, ...syncRequest(stack, [], [secret]) });
    expect(res.status).toBe(200);
    expect(condition(stackSyncAnswer(res.json).status, 'Stalled')?.reason).toBe('SourceUnavailable');
    const all = logs.join('');
    expect(all).toContain('stack sync');
    expect(all).not.toContain('tok-very-secret');
    expect(all).not.toContain(Buffer.from('tok-very-secret').toString('base64'));
    expect(res.text).not.toContain('tok-very-secret');
  });

  it('logs with request ids, taking one given by the caller', async () => {
    await request(`${base}/stack/customize`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'req-42' },
      body: JSON.stringify({ controller: {}, parent: makeStack() }),
    }).then((r) => r.body.dump());
    expect(logs.some((l) => l.includes('"requestId":"req-42"'))).toBe(true);
  });

  describe('one log line per request', () => {
    /** The lines logged for one request id, parsed; the line is written once the answer is out. */
    async function linesOf(requestId: string, path: string, body: unknown) {
      const res = await postJson(`${base}${path}`, body, { 'x-request-id': requestId });
      const mine = () =>
        logs.flatMap((chunk) => chunk.split('\n')).filter((l) => l.includes(`"requestId":"${requestId}"`));
      for (let i = 0; i < 100 && mine().length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 20)); // a second line, if any, would be there by now
      return { status: res.status, lines: mine().map(parseObject) };
    }

    it('logs a sync as one line with the Stack, its condition and the answer', async () => {
      const { status, lines } = await linesOf('line-sync', '/stack/sync', {
        controller: {},
        ...syncRequest(makeStack()),
      });
      expect(status).toBe(200);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        msg: 'stack sync',
        method: 'POST',
        url: '/stack/sync',
        statusCode: 200,
        stack: 'team-a/my-stack',
        generation: 1,
        children: 1,
      });
      expect(lines[0]?.condition).toMatch(/^Reconciling\//);
      expect(typeof lines[0]?.responseTime).toBe('number');
      expect(lines[0]?.req).toBeUndefined(); // no headers in the log
    });

    it('logs a finalize, a Program sync and a customize as one line each', async () => {
      const finalize = await linesOf('line-finalize', '/stack/finalize', {
        controller: {},
        ...syncRequest(makeStack({}, { deletionTimestamp: '2026-11-22T09:00:00Z' }), [], [makeProgram()], true),
      });
      expect(finalize.lines).toHaveLength(1);
      expect(finalize.lines[0]).toMatchObject({ msg: 'stack finalize', statusCode: 200, finalized: true });
      const program = await linesOf('line-program', '/program/sync', {
        controller: {},
        object: { ...makeProgram(), status: {} },
        attachments: {},
        related: {},
        finalizing: false,
      });
      expect(program.lines).toHaveLength(1);
      expect(program.lines[0]).toMatchObject({
        msg: 'program sync',
        url: '/program/sync',
        statusCode: 200,
        program: 'team-a/my-program',
      });
      const customize = await linesOf('line-customize', '/stack/customize', { controller: {}, parent: makeStack() });
      expect(customize.lines).toHaveLength(1);
      expect(customize.lines[0]).toMatchObject({ msg: 'request completed', url: '/stack/customize', statusCode: 200 });
    });

    it('logs a rejected request as one line naming the field', async () => {
      const invalid = await linesOf('line-400', '/stack/sync', {
        controller: {},
        parent: { apiVersion: 'pulumi.com/v1', kind: 'Stack', metadata: { namespace: 'a' } },
      });
      expect(invalid.status).toBe(400);
      expect(invalid.lines).toHaveLength(1);
      expect(invalid.lines[0]).toMatchObject({
        msg: 'rejected malformed hook request',
        statusCode: 400,
        field: '/parent/metadata/name',
      });
      const notJson = await linesOf('line-not-json', '/stack/sync', '{"parent": ');
      expect(notJson.status).toBe(400);
      expect(notJson.lines).toHaveLength(1);
      expect(notJson.lines[0]).toMatchObject({ msg: 'request completed', statusCode: 400 });
    });

    it('logs a 409 as one warning naming the child, and nothing the child holds', async () => {
      const { stack, cluster } = withChildren();
      const forged = cluster.map((o) =>
        o.kind === 'Workspace'
          ? {
              ...o,
              metadata: {
                ...o.metadata,
                annotations: { [LAST_APPLIED_ANNOTATION]: JSON.stringify({ ...o, spec: { token: 'hunter2' } }) },
              },
            }
          : o,
      );
      const invalid = { ...stack, spec: { ...stack.spec, stack: '' } };
      const res = await linesOf('line-409', '/stack/sync', { controller: {}, ...syncRequest(invalid, forged) });
      expect(res.status).toBe(409);
      expect(res.lines).toHaveLength(1);
      expect(res.lines[0]).toMatchObject({
        level: 40,
        msg: 'refused to keep a child it cannot verify',
        statusCode: 409,
        field: '/children/Workspace.auto.pulumi.com~1v1alpha1/team-a~1my-stack',
      });
      expect(JSON.stringify(res.lines[0])).not.toContain('hunter2');
    });

    it('does not log probes and metrics scrapes', async () => {
      const before = logs.length;
      for (const path of ['/healthz', '/readyz', '/metrics'])
        await request(`${base}${path}`, { headers: { 'x-request-id': 'line-probe' } }).then((r) => r.body.dump());
      await new Promise((r) => setTimeout(r, 50));
      expect(logs.slice(before).filter((l) => l.includes('line-probe'))).toEqual([]);
    });
  });
});
