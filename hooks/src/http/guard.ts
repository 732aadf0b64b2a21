/**
 * What stands before the hook routes: the caller's credential, then the room for its body. Both
 * run as onRequest hooks, before a byte of the body is read, so a caller without the token, or one
 * more body than the server may hold, costs nothing but its headers. The probes and /metrics are
 * outside (server.ts): the kubelet and Prometheus do not hold the token, and the NetworkPolicy
 * decides who reaches them.
 */
import { Transform, type TransformCallback } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Credentials } from './credentials';

/**
 * The bytes of request bodies held at once, over all requests. A request with a Content-Length
 * (Metacontroller always sends one) reserves it before its body is read; one without reserves each
 * chunk as it arrives. What a request reserved is returned when its answer is done or its
 * connection closes, whatever happened in between.
 */
export class BodyBudget {
  private held = 0;

  constructor(readonly capacity: number) {}

  /** Bytes reserved now. */
  get inFlight(): number {
    return this.held;
  }

  /** Reserves `bytes` if they fit; false (nothing reserved) if not. */
  tryReserve(bytes: number): boolean {
    if (bytes > this.capacity - this.held) return false;
    this.held += bytes;
    return true;
  }

  release(bytes: number): void {
    this.held = Math.max(0, this.held - bytes);
  }
}

/** Seconds Metacontroller waits before it calls again after a 429 (it requeues the object then, without an error event). */
export const RETRY_AFTER_SECONDS = 1;

/** The Content-Length of a request, if it has a well-formed one. */
function declaredLength(request: FastifyRequest): number | undefined {
  const v = request.headers['content-length'];
  if (typeof v !== 'string' || !/^\d{1,15}$/.test(v)) return undefined;
  return Number(v);
}

/** Refuses a request for want of room: 429, retry after a second, and the connection closed (its body unread). */
export function overloaded(reply: FastifyReply): FastifyReply {
  return reply
    .code(429)
    .header('retry-after', String(RETRY_AFTER_SECONDS))
    .header('connection', 'close')
    .send({ error: 'Too Many Requests', message: new NoRoomForBody().message });
}

/**
 * Installs the guard on an encapsulated context: register the hook routes in the same context,
 * after this call. `bodyLimit` is the server's limit on one body: a request declaring more is left
 * to Fastify's 413, reserving nothing.
 */
export function installGuard(
  app: FastifyInstance,
  opts: { credentials: Credentials; budget: BodyBudget; bodyLimit: number },
): void {
  const { credentials, budget, bodyLimit } = opts;

  app.addHook('onRequest', (request, reply, done) => {
    if (credentials.accepts(request.headers.authorization)) return done();
    request.hookLog = { message: 'refused a hook request without the credential', fields: {} };
    // The body is never read: closing the connection drops it.
    void reply
      .code(401)
      .header('www-authenticate', 'Bearer realm="pulumi-mc-hooks"')
      .header('connection', 'close')
      .send({ error: 'Unauthorized', message: 'the hooks answer Metacontroller only: send its bearer token' });
  });

  app.addHook('onRequest', (request, reply, done) => {
    const declared = declaredLength(request);
    if (declared === undefined || declared === 0 || declared > bodyLimit) return done();
    if (!budget.tryReserve(declared)) {
      request.hookLog = { message: 'refused a hook request: no room for its body', fields: { bytes: declared } };
      void overloaded(reply);
      return;
    }
    reply.raw.once('close', () => budget.release(declared));
    done();
  });

  // A body without a Content-Length (chunked) reserves as it arrives; running out is an error
  // of the body stream, which Fastify hands to the error handler (http/errors.ts: the same 429).
  app.addHook('preParsing', (request, reply, payload, done) => {
    if (declaredLength(request) !== undefined) return done(null, payload);
    let reserved = 0;
    reply.raw.once('close', () => budget.release(reserved));
    const counted = new CountingStream((bytes) => {
      if (!budget.tryReserve(bytes)) return false;
      reserved += bytes;
      return true;
    });
    payload.on('error', (err) => counted.destroy(err));
    done(null, payload.pipe(counted));
  });
}

/** The error a body stream fails with when the budget has no room for its next chunk. */
export class NoRoomForBody extends Error {
  readonly statusCode = 429;
  constructor() {
    super('the hook server holds as many request bodies as it may: retry shortly');
  }
}

/**
 * Passes a body through, asking `reserve` for each chunk's bytes first; when refused, it fails
 * with NoRoomForBody. `receivedEncodedLength` is what Fastify reads of a replaced payload stream.
 */
class CountingStream extends Transform {
  receivedEncodedLength = 0;

  constructor(private readonly reserve: (bytes: number) => boolean) {
    super();
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, callback: TransformCallback): void {
    if (!this.reserve(chunk.length)) return callback(new NoRoomForBody());
    this.receivedEncodedLength += chunk.length;
    callback(null, chunk);
  }
}
