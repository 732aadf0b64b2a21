import * as http from 'node:http';
import { API_PREFIX, NDJSON, parseOperationRequest, type ApiError, type StreamLine, type WorkspaceInfo } from '../api';
import { errorMessage } from '../lib/errors';
import { logger } from '../lib/log';
import type { Authorizer } from './auth';
import type { Workspace } from './workspace';

const MAX_BODY = 1024 * 1024;
const HEARTBEAT_MS = 15_000;

export interface ServerOptions {
  workspace: Workspace;
  authorizer: Authorizer;
}

export interface WorkspaceServer {
  server: http.Server;
  /** New operations are refused from now on (503). */
  drain(): void;
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function fail(res: http.ServerResponse, code: number, reason: string, message: string): void {
  const body: ApiError = { code, reason, message };
  send(res, code, body);
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error(`the request body is larger than ${MAX_BODY} bytes`));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/**
 * The workspace's HTTP API (docs/agent.md): health and readiness without authentication;
 * everything under /v1 with a bearer token checked by the authorizer.
 */
export function createWorkspaceServer(o: ServerOptions): WorkspaceServer {
  const ws = o.workspace;
  let draining = false;

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'http://workspace');
    const p = url.pathname;
    const method = req.method ?? 'GET';
    if (p === '/healthz' && method === 'GET') return send(res, 200, { status: 'ok' });
    if (p === '/readyz' && method === 'GET') {
      const st = ws.status();
      return send(res, st.state === 'Ready' && !draining ? 200 : 503, st);
    }
    if (!p.startsWith(`${API_PREFIX}/`)) return fail(res, 404, 'NotFound', `no route ${method} ${p}`);

    const decision = await o.authorizer.check(req.headers.authorization);
    if (!decision.ok) {
      logger.warn('request refused', { method, path: p, status: decision.status, reason: decision.reason });
      return fail(res, decision.status, decision.reason, decision.message);
    }

    if (p === `${API_PREFIX}/workspace` && method === 'GET') {
      const cur = ws.busy;
      const info: WorkspaceInfo = {
        ...ws.status(),
        stack: ws.stackName,
        busy: cur !== undefined,
        installs: ws.installs,
      };
      if (cur) info.operation = { id: cur.id, type: cur.type, startTime: cur.startTime };
      return send(res, 200, info);
    }

    const cancel = new RegExp(`^${API_PREFIX}/operations/([^/]+)/cancel$`).exec(p);
    if (cancel && method === 'POST') {
      const id = decodeURIComponent(cancel[1]!);
      if (!ws.cancel(id, `cancelled by ${decision.user}`))
        return fail(res, 404, 'NotFound', `operation ${id} is not running`);
      return send(res, 202, { id, cancelling: true });
    }

    if (p === `${API_PREFIX}/operations` && method === 'POST') {
      let op;
      try {
        op = parseOperationRequest(JSON.parse(await readBody(req)));
      } catch (e) {
        return fail(res, 400, 'InvalidRequest', `invalid operation: ${errorMessage(e)}`);
      }
      if (op.stack !== ws.stackName) {
        return fail(res, 422, 'StackMismatch', `this workspace serves stack "${ws.stackName}", not "${op.stack}"`);
      }
      if (draining) return fail(res, 503, 'ShuttingDown', 'the workspace is shutting down');
      const st = ws.status();
      if (st.state !== 'Ready') {
        return fail(
          res,
          503,
          'WorkspaceNotReady',
          `the workspace is not ready: ${st.state}${st.reason ? ` (${st.reason})` : ''}${st.message ? `: ${st.message}` : ''}`,
        );
      }
      const cur = ws.busy;
      if (cur)
        return fail(
          res,
          409,
          'UpdateConflict',
          `another operation is running (${cur.type} ${cur.id}, since ${cur.startTime})`,
        );

      let finished = false;
      const write = (line: StreamLine): void => {
        if (!res.writableEnded && !res.destroyed) res.write(JSON.stringify(line) + '\n');
      };
      const running = ws.start(op, (line) => {
        if (line.kind === 'started') {
          res.writeHead(200, { 'content-type': NDJSON, 'cache-control': 'no-store', 'x-operation-id': line.id });
        }
        write(line);
      });
      logger.info('operation accepted', { id: running.id, type: op.type, user: decision.user });
      const heartbeat = setInterval(() => write({ kind: 'heartbeat', time: new Date().toISOString() }), HEARTBEAT_MS);
      res.on('close', () => {
        if (!finished) ws.cancel(running.id, 'the caller disconnected');
      });
      const result = await running.done;
      finished = true;
      clearInterval(heartbeat);
      write({ kind: 'result', result });
      res.end();
      return;
    }
    return fail(res, 404, 'NotFound', `no route ${method} ${p}`);
  };

  const server = http.createServer((req, res) => {
    handle(req, res).catch((e) => {
      logger.error('request failed', { error: errorMessage(e) });
      if (!res.headersSent) fail(res, 500, 'InternalError', errorMessage(e));
      else res.end();
    });
  });
  server.keepAliveTimeout = 65_000;
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  return {
    server,
    drain: () => {
      draining = true;
    },
  };
}
