import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PROTOTYPE_KEY_PROBLEM } from '../lib/json';
import { ChildNotVerified, MalformedRequest } from '../lib/k8s';
import { refusedKeyOf } from './body-parser';
import { NoRoomForBody, overloaded } from './guard';

/** What was wrong with a malformed request: the field as a JSON Pointer into the body, and why. */
export interface RequestProblem {
  /** `/parent/metadata/name`; empty for the body itself. */
  field: string;
  /** A sentence that starts with the field, e.g. `/parent/metadata/name is required`. */
  message: string;
}

/**
 * Every error answer is JSON naming what was wrong. A request that fails its route schema is a 400
 * naming the field as a JSON Pointer into the body (`/parent/metadata/name`: unambiguous even when a
 * key holds dots or slashes, as Metacontroller's `Kind.group/version` keys do); a body over the
 * limit is a 413. A child the hooks would have to keep but cannot verify as theirs is a 409 naming
 * it (lib/kept-children.ts): Metacontroller then applies nothing and calls again. Anything else is
 * a bug: 500 with a generic message (details only in the log).
 */
export function installErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof MalformedRequest) {
      const field = jsonPointer(error.field);
      return rejectRequest(request, reply, { field, message: `${field} ${error.reason}` });
    }
    if (error instanceof ChildNotVerified) {
      const field = jsonPointer(error.field);
      // The request's one line names the child (its namespace and name), never anything it holds.
      request.hookLog = { message: 'refused to keep a child it cannot verify', fields: { field }, level: 'warn' };
      return reply.code(409).send({ error: 'Conflict', field, message: `${field} ${error.reason}` });
    }
    const refused = refusedKeyOf(error);
    if (refused !== undefined) {
      const field = jsonPointer(refused);
      return rejectRequest(request, reply, { field, message: `${field} is refused: ${PROTOTYPE_KEY_PROBLEM}` });
    }
    if (error.validation) {
      const first = error.validation[0];
      return rejectRequest(
        request,
        reply,
        validationProblem(first?.instancePath ?? '', first?.keyword, first?.params, first?.message),
      );
    }
    if (error instanceof NoRoomForBody) {
      request.hookLog = { message: 'refused a hook request: no room for its body', fields: {} };
      return overloaded(reply);
    }
    const status = error.statusCode ?? 500;
    if (status === 413) return reply.code(413).send({ error: 'Payload Too Large', message: error.message });
    if (status >= 400 && status < 500)
      return reply.code(status).send({ error: error.code ?? 'Bad Request', message: error.message });
    request.log.error({ err: error }, 'hook failed');
    return reply
      .code(500)
      .send({ error: 'Internal Server Error', message: 'the hook failed; see the hook server log' });
  });
  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send({ error: 'Not Found', message: `no hook at ${request.method} ${request.url}` });
  });
}

/** Answers a malformed request: 400 with the field and the message, logged in the request's one line. */
export function rejectRequest(request: FastifyRequest, reply: FastifyReply, problem: RequestProblem): FastifyReply {
  request.hookLog = { message: 'rejected malformed hook request', fields: { field: problem.field } };
  return reply.code(400).send({ error: 'Bad Request', field: problem.field, message: problem.message });
}

/** A JSON Pointer (RFC 6901) from path segments: `~` and `/` in a segment escaped. */
export function jsonPointer(segments: readonly string[]): string {
  return segments.map((s) => `/${s.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('');
}

/**
 * An ajv error as a field and a sentence, in the words of the API rather than of the validator:
 * a missing or unknown property is named in the field itself.
 */
export function validationProblem(
  instancePath: string,
  keyword: string | undefined,
  params: unknown,
  ajvMessage: string | undefined,
): RequestProblem {
  const p = (params ?? {}) as Record<string, unknown>;
  let field = instancePath;
  let what: string;
  switch (keyword) {
    case 'required':
      field += jsonPointer([String(p.missingProperty)]);
      what = 'is required';
      break;
    case 'additionalProperties':
      field += jsonPointer([String(p.additionalProperty)]);
      what = 'is not a known field';
      break;
    case 'enum':
      what = `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
      break;
    default:
      what = ajvMessage ?? 'is invalid';
  }
  return { field, message: `${field === '' ? 'the body' : field} ${what}` };
}
