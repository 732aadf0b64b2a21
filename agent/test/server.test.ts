/** The workspace server's routes and refusals, with a stand-in workspace (no Pulumi). */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import type { OperationRequest, WorkspaceStatus } from '../../contract';
import type { ApiError, OperationResult, StreamLine, WorkspaceInfo } from '../src/api';
import { allowAll, type AuthDecision, type Authorizer } from '../src/serve/auth';
import { createWorkspaceServer, type ServedWorkspace, type WorkspaceServer } from '../src/serve/server';
import type { RunningOperation } from '../src/serve/workspace';

class StandInWorkspace implements ServedWorkspace {
  readonly stackName = 'dev';
  installs = 1;
  busy: RunningOperation | undefined;
  state: WorkspaceStatus = { hash: 'h1', state: 'Ready' };
  readonly cancelled: { id: string | undefined; reason: string }[] = [];
  /** Ends the running operation with this result. */
  finish: (result: OperationResult) => void = () => undefined;

  status(): WorkspaceStatus {
    return this.state;
  }

  start(req: OperationRequest, emit: (line: StreamLine) => void): RunningOperation {
    const startTime = '2026-01-01T00:00:00Z';
    emit({ kind: 'started', id: 'op-1', type: req.type, stack: req.stack, startTime });
    emit({ kind: 'output', stream: 'stdout', line: 'working' });
    const done = new Promise<OperationResult>((resolve) => (this.finish = resolve));
    const running: RunningOperation = { id: 'op-1', type: req.type, startTime, abort: new AbortController(), done };
    this.busy = running;
    void done.then(() => (this.busy = undefined));
    return running;
  }

  cancel(id: string | undefined, reason: string): boolean {
    if (!this.busy || this.busy.id !== id) return false;
    this.cancelled.push({ id, reason });
    return true;
  }
}

const refuseAll: Authorizer = {
  check: (): Promise<AuthDecision> =>
    Promise.resolve({ ok: false, status: 401, reason: 'Unauthenticated', message: 'unauthenticated: no token' }),
};

let workspace: StandInWorkspace;
let served: WorkspaceServer;
let base: string;

async function serve(authorizer: Authorizer): Promise<void> {
  workspace = new StandInWorkspace();
  served = createWorkspaceServer({ workspace, authorizer });
  await new Promise<void>((resolve) => served.server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(served.server.address() as AddressInfo).port}`;
}

afterEach(async () => {
  await new Promise<void>((resolve) => served.server.close(() => resolve()));
});

async function call(method: 'GET' | 'POST', path: string, body?: string): Promise<{ status: number; body: unknown }> {
  const res = await request(`${base}${path}`, { method, ...(body !== undefined ? { body } : {}) });
  return { status: res.statusCode, body: await res.body.json() };
}

const operation = (op: Partial<OperationRequest> = {}): string => JSON.stringify({ type: 'up', stack: 'dev', ...op });

const refusedWith = (code: number, reason: string): { status: number; body: Partial<ApiError> } => ({
  status: code,
  body: expect.objectContaining({ code, reason }) as Partial<ApiError>,
});

describe('workspace server without a token', () => {
  beforeEach(() => serve(refuseAll));

  it('answers health and readiness, and nothing else, without authentication', async () => {
    expect(await call('GET', '/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
    expect(await call('GET', '/readyz')).toEqual({ status: 200, body: { hash: 'h1', state: 'Ready' } });
    workspace.state = { hash: 'h1', state: 'Installing', reason: 'Installing' };
    expect(await call('GET', '/readyz')).toEqual({
      status: 503,
      body: { hash: 'h1', state: 'Installing', reason: 'Installing' },
    });
    expect(await call('POST', '/healthz')).toEqual(refusedWith(404, 'NotFound'));
    expect(await call('GET', '/elsewhere')).toEqual(refusedWith(404, 'NotFound'));
  });

  it('authenticates every path under /v1 before telling whether it exists', async () => {
    expect(await call('GET', '/v1/workspace')).toEqual({
      status: 401,
      body: { code: 401, reason: 'Unauthenticated', message: 'unauthenticated: no token' },
    });
    expect(await call('GET', '/v1/no-such-route')).toEqual(refusedWith(401, 'Unauthenticated'));
    expect(await call('POST', '/v1/operations', operation())).toEqual(refusedWith(401, 'Unauthenticated'));
  });
});

describe('workspace server', () => {
  beforeEach(() => serve(allowAll));

  it('describes the workspace', async () => {
    const info: WorkspaceInfo = { hash: 'h1', state: 'Ready', stack: 'dev', busy: false, installs: 1 };
    expect(await call('GET', '/v1/workspace')).toEqual({ status: 200, body: info });
    expect(await call('POST', '/v1/workspace')).toEqual(refusedWith(404, 'NotFound'));
  });

  it('refuses operations it cannot run, each with its status and reason', async () => {
    expect(await call('POST', '/v1/operations', '{not json')).toEqual(refusedWith(400, 'InvalidRequest'));
    expect(await call('POST', '/v1/operations', operation({ type: 'apply' as never }))).toEqual(
      refusedWith(400, 'InvalidRequest'),
    );
    expect(await call('POST', '/v1/operations', operation({ stack: 'prod' }))).toEqual({
      status: 422,
      body: { code: 422, reason: 'StackMismatch', message: 'this workspace serves stack "dev", not "prod"' },
    });
    workspace.state = { hash: 'h1', state: 'Failed', reason: 'InstallationFailed', message: 'no npm' };
    expect(await call('POST', '/v1/operations', operation())).toEqual({
      status: 503,
      body: {
        code: 503,
        reason: 'WorkspaceNotReady',
        message: 'the workspace is not ready: Failed (InstallationFailed): no npm',
      },
    });
    expect(await call('POST', '/v1/operations/op-9/cancel')).toEqual(refusedWith(404, 'NotFound'));
  });

  it('streams an operation, refuses a second one while it runs, and cancels it', async () => {
    const res = await request(`${base}/v1/operations`, { method: 'POST', body: operation() });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    expect(res.headers['x-operation-id']).toBe('op-1');

    expect(await call('POST', '/v1/operations', operation())).toEqual({
      status: 409,
      body: {
        code: 409,
        reason: 'UpdateConflict',
        message: 'another operation is running (up op-1, since 2026-01-01T00:00:00Z)',
      },
    });
    expect((await call('GET', '/v1/workspace')).body).toMatchObject({
      busy: true,
      operation: { id: 'op-1', type: 'up', startTime: '2026-01-01T00:00:00Z' },
    });
    expect(await call('POST', '/v1/operations/op-1/cancel')).toEqual({
      status: 202,
      body: { id: 'op-1', cancelling: true },
    });
    expect(workspace.cancelled).toEqual([{ id: 'op-1', reason: 'cancelled by anonymous' }]);

    const result: OperationResult = {
      id: 'op-1',
      type: 'up',
      state: 'failed',
      reason: 'Aborted',
      message: 'up was interrupted',
      startTime: '2026-01-01T00:00:00Z',
      endTime: '2026-01-01T00:00:05Z',
    };
    workspace.finish(result);
    const lines = (await res.body.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as StreamLine);
    expect(lines).toEqual([
      { kind: 'started', id: 'op-1', type: 'up', stack: 'dev', startTime: '2026-01-01T00:00:00Z' },
      { kind: 'output', stream: 'stdout', line: 'working' },
      { kind: 'result', result },
    ]);
  });

  it('answers malformed percent-encoding and request targets with 400, naming the problem', async () => {
    for (const id of ['%zz', '%E2%82', '%']) {
      expect(await call('POST', `/v1/operations/${id}/cancel`)).toEqual({
        status: 400,
        body: {
          code: 400,
          reason: 'InvalidRequest',
          message: `the path segment ${JSON.stringify(id)} is not valid percent-encoding`,
        },
      });
    }
    // A target no URL parser reads (undici would refuse to send it): sent as is.
    const raw = await new Promise<{ status: number; body: unknown }>((resolve, reject) => {
      const req = http.request(`${base}/`, { method: 'GET', path: '//[' }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown }));
      });
      req.on('error', reject);
      req.end();
    });
    expect(raw).toEqual(refusedWith(400, 'InvalidRequest'));
    expect(workspace.cancelled).toEqual([]);
  });

  it('refuses operations and readiness once draining', async () => {
    served.drain();
    expect((await call('GET', '/readyz')).status).toBe(503);
    expect(await call('POST', '/v1/operations', operation())).toEqual({
      status: 503,
      body: { code: 503, reason: 'ShuttingDown', message: 'the workspace is shutting down' },
    });
  });

  it('answers 500 when a handler fails unexpectedly', async () => {
    workspace.status = () => {
      throw new Error('status exploded');
    };
    expect(await call('GET', '/v1/workspace')).toEqual({
      status: 500,
      body: { code: 500, reason: 'InternalError', message: 'status exploded' },
    });
  });
});
