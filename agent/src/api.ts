/**
 * The workspace server's HTTP API (agent-internal: `pko-agent update` is its only client; both
 * ship in the same image). Documented in docs/agent.md.
 */
import {
  isOperationType,
  OPERATION_TYPES,
  PLAN_ID,
  type OperationRequest,
  type OperationType,
  type ProjectInfo,
  type WorkspaceStatus,
} from '../../contract';

export const API_PREFIX = '/v1';
export const NDJSON = 'application/x-ndjson';

/** One output of the stack: its JSON value and whether Pulumi holds it as a secret. */
export interface OutputValue {
  value: unknown;
  secret: boolean;
}

/** What a finished operation reports (last line of the stream). */
export interface OperationResult {
  id: string;
  type: OperationType;
  state: 'succeeded' | 'failed';
  /** A summary on success, the cause on failure. Secret values are redacted. */
  message: string;
  /** On failure: UpdateFailed, UpdateConflict, Aborted, InvalidAccessToken, … */
  reason?: string;
  permalink?: string;
  startTime: string;
  endTime: string;
  projectInfo?: ProjectInfo;
  /** Resource changes by operation (create, update, same, …) from Pulumi's summary event. */
  resourceChanges?: Record<string, number>;
  /** `refresh`: how many resources differ from the state, and the first of their URNs (drift.ts). */
  changedResources?: number;
  changedUrns?: string[];
  /** `up` only: every stack output with its secret flag (plaintext values: only the runner gets them). */
  outputs?: Record<string, OutputValue>;
}

export type StreamLine =
  | { kind: 'started'; id: string; type: OperationType; stack: string; startTime: string }
  | { kind: 'event'; event: Record<string, unknown> }
  | { kind: 'output'; stream: 'stdout' | 'stderr'; line: string }
  | { kind: 'heartbeat'; time: string }
  | { kind: 'result'; result: OperationResult };

/** GET /v1/workspace */
export interface WorkspaceInfo extends WorkspaceStatus {
  stack: string;
  busy: boolean;
  operation?: { id: string; type: OperationType; startTime: string };
  installs: number;
}

/** Error bodies: `{ code, reason, message }`. */
export interface ApiError {
  code: number;
  reason: string;
  message: string;
}

const BOOL_FIELDS = [
  'targetDependents',
  'refresh',
  'expectNoChanges',
  'continueOnError',
  'remove',
  'runProgram',
  'previewOnly',
  'selfHealing',
] as const;
const LIST_FIELDS = ['target', 'replace'] as const;

/** Validates an OperationRequest (the runner's PULUMI_OPERATION, the server's request body). */
export function parseOperationRequest(v: unknown): OperationRequest {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('the operation must be a JSON object');
  const o = v as Record<string, unknown>;
  if (!isOperationType(o.type)) throw new Error(`"type" must be one of ${OPERATION_TYPES.join(', ')}`);
  if (typeof o.stack !== 'string' || o.stack === '') throw new Error('"stack" must be a non-empty string');
  const req: OperationRequest = { type: o.type, stack: o.stack };
  if (o.message !== undefined) {
    if (typeof o.message !== 'string') throw new Error('"message" must be a string');
    req.message = o.message;
  }
  if (o.parallel !== undefined) {
    if (typeof o.parallel !== 'number' || !Number.isInteger(o.parallel))
      throw new Error('"parallel" must be an integer');
    req.parallel = o.parallel;
  }
  for (const f of BOOL_FIELDS) {
    const value = o[f];
    if (value === undefined) continue;
    if (typeof value !== 'boolean') throw new Error(`"${f}" must be a boolean`);
    req[f] = value;
  }
  for (const f of LIST_FIELDS) {
    const value = o[f];
    if (value === undefined) continue;
    if (!Array.isArray(value) || !value.every((x): x is string => typeof x === 'string'))
      throw new Error(`"${f}" must be a list of strings`);
    req[f] = [...value];
  }
  for (const [f, only] of [
    ['savePlan', 'preview'],
    ['plan', 'up'],
  ] as const) {
    const value = o[f];
    if (value === undefined) continue;
    if (typeof value !== 'string' || !PLAN_ID.test(value))
      throw new Error(`"${f}" must be a plan id (a lowercase DNS label of at most 63 characters)`);
    if (req.type !== only) throw new Error(`"${f}" is for ${only} operations only`);
    req[f] = value;
  }
  return req;
}
