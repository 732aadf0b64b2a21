import fc from 'fast-check';
import Fastify, { type FastifyInstance } from 'fastify';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { installJsonBodyParser, mayHidePrototypeKeys } from '../src/http/body-parser';
import { buildServer } from '../src/server';
import { testConfig } from './builders';
import { deleteAt, parseObject } from './json';
import { listenOnLoopback } from './answers';

/** A route that answers with what the body parsed to, so two servers' parsing can be compared. */
function echoServer(ours: boolean): FastifyInstance {
  const app = Fastify({ logger: false });
  if (ours) installJsonBodyParser(app);
  app.post('/echo', (request, reply) =>
    reply.send({
      body: request.body,
      proto: Object.getPrototypeOf(request.body ?? {}) === Object.prototype,
    }),
  );
  return app;
}

/** Writes a key the way an attacker might: some letters as \u00XX escapes, in either hex case. */
const spelt = (word: string) =>
  fc
    .array(fc.constantFrom('literal', 'lower', 'upper'), { minLength: word.length, maxLength: word.length })
    .map((ways) =>
      [...word]
        .map((ch, i) => {
          const hex = ch.charCodeAt(0).toString(16).padStart(4, '0');
          return ways[i] === 'literal' ? ch : ways[i] === 'lower' ? `\\u${hex}` : `\\u${hex.toUpperCase()}`;
        })
        .join(''),
    );

/** JSON texts: plain values, and values with a (possibly escaped) __proto__ or constructor key inside. */
const bodies = fc.oneof(
  fc.json(),
  fc
    .tuple(
      fc.json(),
      fc.oneof(spelt('__proto__'), spelt('constructor')),
      fc.oneof(
        fc.json(),
        spelt('prototype').map((k) => `{"${k}":{"x":1}}`),
      ),
    )
    .map(([outer, key, inner]) => `{"a":${outer},"nested":[{"${key}":${inner}}]}`),
  fc.constantFrom(
    '',
    ' ',
    '{',
    '\uFEFF{"a":1}',
    '{"a":"\\u003c\\u0026\\u003e"}',
    'null',
    '"constructor"',
    '{"constructor":"text"}',
    '{"x":"__proto__"}',
    '{"__proto__":{"x":1}}',
    '{"a":[{"constructor":{"prototype":{"x":1}}}]}',
    '{"ports":[{"protocol":"TCP"}],"x":"proto"}',
    '{"constructor":{"prototype":1,"__proto__":2}}',
  ),
);

/** Posts a raw text to a listening server, over a real socket. */
async function post(app: FastifyInstance, path: string, text: string): Promise<{ statusCode: number; body: string }> {
  const { port } = app.server.address() as AddressInfo;
  const res = await request(`http://127.0.0.1:${port}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: text,
  });
  return { statusCode: res.statusCode, body: await res.body.text() };
}

describe('JSON bodies: the fast path answers exactly as Fastify does', () => {
  let ours: FastifyInstance;
  let fastifys: FastifyInstance;
  beforeAll(async () => {
    [ours, fastifys] = [echoServer(true), echoServer(false)];
    await Promise.all([ours.listen({ port: 0, host: '127.0.0.1' }), fastifys.listen({ port: 0, host: '127.0.0.1' })]);
  });
  afterAll(async () => {
    await Promise.all([ours.close(), fastifys.close()]);
  });

  it('gives the same status and parsed body for any text, poisoned keys included', async () => {
    await fc.assert(
      fc.asyncProperty(bodies, async (text) => {
        const [a, b] = await Promise.all([post(ours, '/echo', text), post(fastifys, '/echo', text)]);
        expect(a.statusCode).toBe(b.statusCode);
        expect(a.body).toBe(b.body);
      }),
      { numRuns: 500 },
    );
  });

  it('never lets a poisoned key through: an escaped __proto__ key is a 400, as with Fastify', async () => {
    const res = await post(ours, '/echo', '{"a":{"\\u005f_proto__":{"polluted":true}}}');
    expect(res.statusCode).toBe(400);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('clears a Kubernetes body with Go HTML escapes and port protocols, and suspects every spelling of the keys it must', () => {
    expect(mayHidePrototypeKeys('{"url":"https://x.test/?a=1\\u0026b=2","msg":"\\u003cnone\\u003e"}')).toBe(false);
    expect(
      mayHidePrototypeKeys(
        '{"ports":[{"protocol":"TCP"},{"protocol":"UDP"}],"constructor":"a bare constructor key is harmless"}',
      ),
    ).toBe(false);
    for (const literal of ['{"__proto__":1}', '{"prototype":1}', '{"ports":[{"protocol":"TCP"}],"x":{"__proto__":1}}'])
      expect(mayHidePrototypeKeys(literal)).toBe(true);
    fc.assert(
      fc.property(fc.oneof(spelt('__proto__'), spelt('prototype')), fc.string(), (key, before) =>
        mayHidePrototypeKeys(`{"a":${JSON.stringify(before)},"${key}":1}`),
      ),
    );
  });

  it('differs from Fastify only in leaving out the managed fields of the objects in a Metacontroller request', async () => {
    const managedFields = [
      {
        manager: 'kube-controller-manager',
        operation: 'Update',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:status': { 'f:ready': {} } },
      },
    ];
    const pasted = { metadata: { name: 'cm', managedFields } };
    const body = {
      parent: { metadata: { name: 's', managedFields }, spec: { stack: 'dev' } },
      children: { 'Job.batch/v1': { 'ns/j': { metadata: { name: 'j', managedFields }, status: { ready: 1 } } } },
      related: {
        'Program.pulumi.com/v1': {
          'ns/p': { metadata: { name: 'p' }, program: { resources: { cm: { properties: pasted } } } },
        },
      },
    };
    const text = JSON.stringify(body);
    const [a, b] = await Promise.all([post(ours, '/echo', text), post(fastifys, '/echo', text)]);
    expect(parseObject(b.body).body).toEqual(body);
    // The Program's own data holds managed fields too, so this body is parsed whole, as Fastify does.
    expect(a.body).toBe(b.body);
    const withoutProgram = JSON.stringify({ ...body, related: {} });
    const [c, d] = await Promise.all([post(ours, '/echo', withoutProgram), post(fastifys, '/echo', withoutProgram)]);
    const expected = parseObject(d.body);
    deleteAt(expected, ['body', 'parent', 'metadata', 'managedFields']);
    deleteAt(expected, ['body', 'children', 'Job.batch/v1', 'ns/j', 'metadata', 'managedFields']);
    expect(parseObject(c.body)).toEqual(expected);
    expect(c.body).not.toContain('managedFields');
  });

  it('is what the hook server uses: a poisoned sync request is a 400 naming the problem', async () => {
    const { app } = buildServer(testConfig, { logger: false });
    try {
      await listenOnLoopback(app);
      const res = await post(app, '/stack/sync', '{"parent":{"__proto__":{"x":1}}}');
      expect(res.statusCode).toBe(400);
      expect(JSON.parse(res.body)).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    } finally {
      await app.close();
    }
  });
});
