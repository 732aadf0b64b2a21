/**
 * The hooks' answers as a test reads them over HTTP: the body is checked against the schema of
 * what Metacontroller accepts (schemas/metacontroller.schema.json, and the Stack's and Program's
 * status schemas) before the test reads it through the matching generated type.
 */
import type { ValidateFunction } from 'ajv';
import type { FastifyInstance } from 'fastify';
import { request } from 'undici';
import {
  createAjv,
  fieldErrors,
  formatErrors,
  metacontrollerSchema,
  programSchema,
  stackSchema,
  updateSchema,
  workspaceSchema,
  type JsonSchema,
} from '../../schemas';
import type {
  CompositeSyncResponse,
  CustomizeResponse,
  DecoratorSyncResponse,
  ProgramStatus,
  StackStatus,
  UpdateStatus,
  WorkspaceStatus,
} from '../../schemas/generated/types';
import { isRecord } from './json';

const ajv = createAjv();

/** The validator of one schema definition, compiled on first use. */
function validatorOf<T>(schema: JsonSchema, definition: string): (value: unknown, what: string) => T {
  const ref = `${String(schema.$id)}#/$defs/${definition}`;
  let validate: ValidateFunction<T> | undefined;
  return (value, what) => {
    validate ??= ajv.getSchema<T>(ref);
    if (!validate) throw new Error(`no schema ${ref}`);
    if (!validate(value))
      throw new Error(`${what} is not a ${definition}: ${formatErrors(fieldErrors(validate.errors ?? []))}`);
    return value;
  };
}

const compositeSync = validatorOf<CompositeSyncResponse>(metacontrollerSchema, 'CompositeSyncResponse');
const customize = validatorOf<CustomizeResponse>(metacontrollerSchema, 'CustomizeResponse');
const decoratorSync = validatorOf<DecoratorSyncResponse>(metacontrollerSchema, 'DecoratorSyncResponse');
const stackStatus = validatorOf<StackStatus>(stackSchema, 'StackStatus');
const programStatus = validatorOf<ProgramStatus>(programSchema, 'ProgramStatus');
const workspaceStatus = validatorOf<WorkspaceStatus>(workspaceSchema, 'WorkspaceStatus');
const updateStatus = validatorOf<UpdateStatus>(updateSchema, 'UpdateStatus');

/** A Stack sync or finalize answer: a CompositeSyncResponse whose status is a StackStatus. */
export type StackSyncAnswer = Omit<CompositeSyncResponse, 'status'> & { status: StackStatus };

/** A Program sync answer: a DecoratorSyncResponse whose status is a ProgramStatus. */
export type ProgramSyncAnswer = Omit<DecoratorSyncResponse, 'status'> & { status: ProgramStatus };

/** What the server answers a request it refuses (Fastify's error shape, plus the failing field). */
export interface ErrorAnswer {
  error: string;
  message?: string;
  field?: string;
}

export function stackSyncAnswer(body: unknown): StackSyncAnswer {
  const answer = compositeSync(body, 'the answer');
  return { ...answer, status: stackStatus(answer.status, 'its status') };
}

/** A Workspace sync answer: a CompositeSyncResponse whose status is a WorkspaceStatus. */
export function workspaceSyncAnswer(
  body: unknown,
): Omit<CompositeSyncResponse, 'status'> & { status: WorkspaceStatus } {
  const answer = compositeSync(body, 'the answer');
  return { ...answer, status: workspaceStatus(answer.status, 'its status') };
}

/** An Update sync answer: a CompositeSyncResponse whose status is an UpdateStatus. */
export function updateSyncAnswer(body: unknown): Omit<CompositeSyncResponse, 'status'> & { status: UpdateStatus } {
  const answer = compositeSync(body, 'the answer');
  return { ...answer, status: updateStatus(answer.status, 'its status') };
}

export function programSyncAnswer(body: unknown): ProgramSyncAnswer {
  const answer = decoratorSync(body, 'the answer');
  return { ...answer, status: programStatus(answer.status, 'its status') };
}

export function customizeAnswer(body: unknown): CustomizeResponse {
  return customize(body, 'the answer');
}

export function errorAnswer(body: unknown): ErrorAnswer {
  if (
    !isRecord(body) ||
    typeof body.error !== 'string' ||
    !['string', 'undefined'].includes(typeof body.message) ||
    !['string', 'undefined'].includes(typeof body.field)
  )
    throw new Error(`not an error answer: ${JSON.stringify(body)}`);
  const answer: ErrorAnswer = { error: body.error };
  if (typeof body.message === 'string') answer.message = body.message;
  if (typeof body.field === 'string') answer.field = body.field;
  return answer;
}

/**
 * Serves a hook server built by buildServer (hooks/src/server.ts) on a free loopback port, as the
 * tests that talk to it over HTTP do: its base URL (http://127.0.0.1:<port>).
 */
export function listenOnLoopback(app: Pick<FastifyInstance, 'listen'>): Promise<string> {
  return app.listen({ port: 0, host: '127.0.0.1' });
}

/** The status, bytes and parsed body of a POST with a JSON body (a string is sent as it is). */
export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string; json: unknown }> {
  const res = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.body.text();
  const json: unknown = text ? JSON.parse(text) : undefined;
  return { status: res.statusCode, text, json };
}

/** Whether `text` holds a control character (C0, DEL or C1), by code point: what no condition or Event may carry raw. */
export function hasControlCharacter(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c <= 0x1f || (c >= 0x7f && c <= 0x9f)) return true;
  }
  return false;
}
