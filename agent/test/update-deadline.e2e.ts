/**
 * The Job runner's deadline (docs/bounded-operations.md): `pko-agent update` with
 * PULUMI_OPERATION_DEADLINE_SECONDS cancels the operation through the workspace when the deadline
 * passes and writes a DeadlineExceeded result on its Job. The workspace and the API server are
 * stand-ins (one local HTTP server): the workspace holds the operation until it is cancelled, then
 * answers as the real one does for an interrupted operation. In the e2e configuration because it
 * loads @kubernetes/client-node (ES modules only), but it needs no test bed:
 * `npx jest --config e2e/jest.config.js agent/test/update-deadline.e2e.ts`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Annotations, Env, parseUpdateResult } from '../../contract';
import { API_PREFIX } from '../src/api';
import { updateCommand } from '../src/update/main';

interface Seen {
  cancels: string[];
  patches: { path: string; body: unknown }[];
}

/** The workspace (readyz, operations, cancel) and the Job endpoint of the API server, in one. */
function standIns(seen: Seen): Server {
  let held: ServerResponse | undefined;
  const body = async (req: IncomingMessage): Promise<string> => {
    let text = '';
    for await (const chunk of req) text += (chunk as Buffer).toString('utf8');
    return text;
  };
  return createServer((req, res) => {
    void (async () => {
      const url = req.url ?? '';
      if (req.method === 'GET' && url === '/readyz') return res.writeHead(200).end('{}');
      if (req.method === 'POST' && url === `${API_PREFIX}/operations`) {
        await body(req);
        res.writeHead(200, { 'content-type': 'application/x-ndjson' });
        const started = { kind: 'started', id: 'op-1', type: 'up', stack: 'dev', startTime: '2026-11-26T10:00:00Z' };
        res.write(`${JSON.stringify(started)}\n`);
        held = res;
        return;
      }
      if (req.method === 'POST' && url === `${API_PREFIX}/operations/op-1/cancel`) {
        seen.cancels.push(url);
        res.writeHead(202).end('{"id":"op-1","cancelling":true}');
        const result = {
          id: 'op-1',
          type: 'up',
          state: 'failed',
          reason: 'Aborted',
          message: 'up was interrupted (cancelled by the runner): Pulumi stopped after the steps in flight',
          startTime: '2026-11-26T10:00:00Z',
          endTime: '2026-11-26T10:00:02Z',
        };
        held?.end(`${JSON.stringify({ kind: 'result', result })}\n`);
        return;
      }
      if (req.method === 'PATCH' && url.startsWith('/apis/batch/v1/namespaces/team-a/jobs/')) {
        seen.patches.push({ path: url, body: JSON.parse(await body(req)) as unknown });
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ apiVersion: 'batch/v1', kind: 'Job', metadata: { name: 'u1', uid: 'x' } }));
      }
      res.writeHead(404).end();
    })();
  });
}

describe('pko-agent update with a deadline', () => {
  let server: Server;
  let dir: string;
  const seen: Seen = { cancels: [], patches: [] };
  const saved = { ...process.env };
  const signalListeners = { SIGTERM: process.listeners('SIGTERM'), SIGINT: process.listeners('SIGINT') };

  beforeAll(async () => {
    server = standIns(seen);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    dir = mkdtempSync(join(tmpdir(), 'pko-deadline-'));
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
    Object.assign(process.env, {
      [Env.operation]: JSON.stringify({ type: 'up', stack: 'dev' }),
      [Env.workspaceUrl]: url,
      [Env.jobName]: 'u1',
      [Env.podNamespace]: 'team-a',
      [Env.operationDeadline]: '1',
      KUBECONFIG: kubeconfig,
    });
  });

  afterAll(async () => {
    process.env = saved;
    for (const sig of ['SIGTERM', 'SIGINT'] as const)
      for (const l of process.listeners(sig)) if (!signalListeners[sig].includes(l)) process.off(sig, l);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('cancels the operation at the deadline and reports DeadlineExceeded on its Job', async () => {
    const code = await updateCommand();
    expect(code).toBe(1);
    expect(seen.cancels).toEqual([`${API_PREFIX}/operations/op-1/cancel`]);
    const written = seen.patches.find((p) => p.path === '/apis/batch/v1/namespaces/team-a/jobs/u1');
    const annotations = (written?.body as { metadata?: { annotations?: Record<string, string> } }).metadata
      ?.annotations;
    const result = parseUpdateResult(annotations?.[Annotations.updateResult] ?? '');
    expect(result).toMatchObject({ state: 'failed', type: 'up', reason: 'DeadlineExceeded' });
    expect(result?.message).toBe(
      'the up exceeded its deadline of 1s and was cancelled: ' +
        'up was interrupted (cancelled by the runner): Pulumi stopped after the steps in flight',
    );
  });
});
