import * as http from 'node:http';
import { rfc3339, type OperationRequest } from '../../../contract';
import { API_PREFIX, NDJSON, parseOperationRequest, type ApiError, type StreamLine, type WorkspaceInfo } from '../api';
import { AgentError, errorMessage } from '../lib/errors';
import { logger } from '../lib/log';
import type { Authorizer } from './auth';
import type { Workspace } from './workspace';

const MAX_BODY_BYTES = 1024 * 1024;
const HEARTBEAT_MS = 15_000;

/** What the server uses of the workspace. */
export type ServedWorkspace = Pick<Workspace, 'stackName' | 'busy' | 'installs' | 'status' | 'start' | 'cancel'>;

export interface ServerOptions {
  workspace: ServedWorkspace;
  authorizer: Authorizer;
}

export interface WorkspaceServer {
  server: http.Server;
  /** New operations are refused from now on (503), and /readyz answers 503. */
  drain: () => void;
}

/** One request to a route: the path's captured parts and the caller the authorizer let in. */
interface RouteCall {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  params: string[];
  user: string;
}

interface Route {
  method: 'GET' | 'POST';
  path: RegExp;
  /** Answered without a bearer token (health and readiness); everything under /v1 needs one. */
  public?: boolean;
  handle: (call: RouteCall) => void | Promise<void>;
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendError(res: http.ServerResponse, error: ApiError): void {
  send(res, error.code, error);
}

/** A refusal the dispatcher answers with `status` and `{ code, reason, message }`. */
function refusal(status: number, reason: string, message: string): AgentError {
  return new AgentError(message, { reason, status });
}

const notFound = (method: string, path: string): AgentError => refusal(404, 'NotFound', `no route ${method} ${path}`);

/** The request's path; a target that is not a URL path is the caller's mistake (400), not ours. */
function requestPath(target: string | undefined): string {
  try {
    return new URL(target ?? '/', 'http://workspace').pathname;
  } catch {
    throw refusal(400, 'InvalidRequest', 'the request target is not a valid URL path');
  }
}

/** A path segment, percent-decoded; malformed percent-encoding (`%zz`, a lone `%e2`) is a 400. */
function decodedSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw refusal(400, 'InvalidRequest', `the path segment ${JSON.stringify(segment)} is not valid percent-encoding`);
  }
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Error(`the request body is larger than ${MAX_BODY_BYTES} bytes`));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function readOperationRequest(req: http.IncomingMessage): Promise<OperationRequest> {
  try {
    const body: unknown = JSON.parse(await readBody(req));
    return parseOperationRequest(body);
  } catch (e) {
    throw refusal(400, 'InvalidRequest', `invalid operation: ${errorMessage(e)}`);
  }
}

/**
 * Runs the operation and streams it as NDJSON: the 200 goes out with the `started` line, then
 * events, output lines and heartbeats, and the result last. A caller that disconnects interrupts it.
 */
async function streamOperation(
  workspace: ServedWorkspace,
  op: OperationRequest,
  res: http.ServerResponse,
  user: string,
): Promise<void> {
  let finished = false;
  const write = (line: StreamLine): void => {
    if (!res.writableEnded && !res.destroyed) res.write(JSON.stringify(line) + '\n');
  };
  const running = workspace.start(op, (line) => {
    if (line.kind === 'started') {
      res.writeHead(200, { 'content-type': NDJSON, 'cache-control': 'no-store', 'x-operation-id': line.id });
    }
    write(line);
  });
  logger.info('operation accepted', { id: running.id, type: op.type, user });
  const heartbeat = setInterval(() => write({ kind: 'heartbeat', time: rfc3339() }), HEARTBEAT_MS);
  res.on('close', () => {
    if (!finished) workspace.cancel(running.id, 'the caller disconnected');
  });
  try {
    const result = await running.done;
    finished = true;
    write({ kind: 'result', result });
    res.end();
  } finally {
    clearInterval(heartbeat);
  }
}

/** The HTTP API's routes (docs/agent.md#http-api-of-the-workspace-server) and what each answers. */
class WorkspaceApi {
  private draining = false;

  readonly routes: Route[] = [
    { method: 'GET', path: /^\/healthz$/, public: true, handle: ({ res }) => send(res, 200, { status: 'ok' }) },
    { method: 'GET', path: /^\/readyz$/, public: true, handle: (call) => this.readiness(call) },
    { method: 'GET', path: new RegExp(`^${API_PREFIX}/workspace$`), handle: (call) => this.describe(call) },
    { method: 'POST', path: new RegExp(`^${API_PREFIX}/operations$`), handle: (call) => this.operate(call) },
    {
      method: 'POST',
      path: new RegExp(`^${API_PREFIX}/operations/([^/]+)/cancel$`),
      handle: (call) => this.cancel(call),
    },
  ];

  constructor(
    private readonly workspace: ServedWorkspace,
    private readonly authorizer: Authorizer,
  ) {}

  drain(): void {
    this.draining = true;
  }

  /**
   * Finds the route; a path under /v1 is authenticated before it is known to exist, so that
   * callers without a token learn nothing about the API. Refusals are thrown (refusal()).
   */
  async dispatch(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = requestPath(req.url);
    const method = req.method ?? 'GET';
    let found: { route: Route; params: string[] } | undefined;
    for (const route of this.routes) {
      const m = route.method === method ? route.path.exec(path) : null;
      if (m) {
        found = { route, params: m.slice(1) };
        break;
      }
    }
    if (found?.route.public) return found.route.handle({ req, res, params: found.params, user: 'anonymous' });
    if (!path.startsWith(`${API_PREFIX}/`)) throw notFound(method, path);
    const decision = await this.authorizer.check(req.headers.authorization);
    if (!decision.ok) {
      logger.warn('request refused', { method, path, status: decision.status, reason: decision.reason });
      throw refusal(decision.status, decision.reason, decision.message);
    }
    if (!found) throw notFound(method, path);
    return found.route.handle({ req, res, params: found.params, user: decision.user });
  }

  private readiness({ res }: RouteCall): void {
    const status = this.workspace.status();
    send(res, status.state === 'Ready' && !this.draining ? 200 : 503, status);
  }

  private describe({ res }: RouteCall): void {
    const running = this.workspace.busy;
    const info: WorkspaceInfo = {
      ...this.workspace.status(),
      stack: this.workspace.stackName,
      busy: running !== undefined,
      installs: this.workspace.installs,
    };
    if (running) info.operation = { id: running.id, type: running.type, startTime: running.startTime };
    send(res, 200, info);
  }

  private async operate({ req, res, user }: RouteCall): Promise<void> {
    const op = await readOperationRequest(req);
    this.checkAccepts(op);
    await streamOperation(this.workspace, op, res, user);
  }

  /** Throws the refusal when this workspace cannot run `op` now. */
  private checkAccepts(op: OperationRequest): void {
    const stack = this.workspace.stackName;
    if (op.stack !== stack)
      throw refusal(422, 'StackMismatch', `this workspace serves stack "${stack}", not "${op.stack}"`);
    if (this.draining) throw refusal(503, 'ShuttingDown', 'the workspace is shutting down');
    const status = this.workspace.status();
    if (status.state !== 'Ready') {
      const why = `${status.state}${status.reason ? ` (${status.reason})` : ''}${status.message ? `: ${status.message}` : ''}`;
      throw refusal(503, 'WorkspaceNotReady', `the workspace is not ready: ${why}`);
    }
    const running = this.workspace.busy;
    if (running)
      throw refusal(
        409,
        'UpdateConflict',
        `another operation is running (${running.type} ${running.id}, since ${running.startTime})`,
      );
  }

  private cancel({ res, params, user }: RouteCall): void {
    const id = decodedSegment(params[0] ?? '');
    if (!this.workspace.cancel(id, `cancelled by ${user}`))
      throw refusal(404, 'NotFound', `operation ${id} is not running`);
    send(res, 202, { id, cancelling: true });
  }
}

/**
 * The workspace's HTTP API (docs/agent.md): health and readiness without authentication;
 * everything under /v1 with a bearer token checked by the authorizer.
 */
export function createWorkspaceServer(options: ServerOptions): WorkspaceServer {
  const api = new WorkspaceApi(options.workspace, options.authorizer);
  const server = http.createServer((req, res) => {
    api.dispatch(req, res).catch((e: unknown) => {
      if (e instanceof AgentError && e.status !== undefined && !res.headersSent) {
        sendError(res, { code: e.status, reason: e.reason ?? 'Error', message: e.message });
        return;
      }
      logger.error('request failed', { error: errorMessage(e) });
      if (!res.headersSent) sendError(res, { code: 500, reason: 'InternalError', message: errorMessage(e) });
      else res.end();
    });
  });
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  return { server, drain: () => api.drain() };
}
