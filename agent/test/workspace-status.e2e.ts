/**
 * Where the agent in the workspace pod reports its state (docs/agent.md, "What the agent writes"):
 * a JSON merge patch of one key of its status ConfigMap, the only object its account may write,
 * retried until the ConfigMap exists (the hooks make it). `serve` (StatusReporter) and a failed
 * `fetch` (reportFetchFailure) against a stand-in for the API server that records every request.
 * In the e2e configuration because it loads @kubernetes/client-node (ES modules only), but it needs
 * no test bed: `npx jest --config e2e/jest.config.js agent/test/workspace-status.e2e.ts`.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Env, parseWorkspaceStatus, WORKSPACE_STATUS_KEY } from '../../contract';
import { AgentError } from '../src/lib/errors';
import { loadKubeConfig } from '../src/lib/kube';
import { redactor } from '../src/lib/redact';
import { reportFetchFailure } from '../src/fetch/report';
import { StatusReporter } from '../src/serve/status';

const NS = 'team-a';
const CONFIGMAP = 'ws-workspace-status';
const CONFIGMAP_PATH = `/api/v1/namespaces/${NS}/configmaps/${CONFIGMAP}`;

interface Seen {
  method: string;
  path: string;
  contentType: string;
  body: unknown;
}

/** The API server: the ConfigMap answers 404 `missing` times (not made yet), then takes patches. */
function apiServer(seen: Seen[], state: { missing: number }): Server {
  const text = async (req: IncomingMessage): Promise<string> => {
    let s = '';
    for await (const chunk of req) s += (chunk as Buffer).toString('utf8');
    return s;
  };
  return createServer((req, res) => {
    void (async () => {
      const body = await text(req);
      seen.push({
        method: req.method ?? '',
        path: req.url ?? '',
        contentType: req.headers['content-type'] ?? '',
        body: body ? (JSON.parse(body) as unknown) : undefined,
      });
      if (req.method === 'PATCH' && req.url === CONFIGMAP_PATH && state.missing-- <= 0) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: CONFIGMAP } }));
      }
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', status: 'Failure', reason: 'NotFound', code: 404 }));
    })();
  });
}

/** The reports the agent wrote, in order: the value of its key in each patch of the ConfigMap. */
function reports(seen: Seen[]) {
  return seen
    .filter((s) => s.path === CONFIGMAP_PATH)
    .map((s) => parseWorkspaceStatus((s.body as { data?: Record<string, string> }).data?.[WORKSPACE_STATUS_KEY]));
}

describe('the workspace status report', () => {
  let server: Server;
  let dir: string;
  let kubeconfig: string;
  const seen: Seen[] = [];
  const state = { missing: 0 };

  beforeAll(async () => {
    server = apiServer(seen, state);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    dir = mkdtempSync(join(tmpdir(), 'pko-status-'));
    kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [
          {
            name: 'c',
            cluster: {
              server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
              'insecure-skip-tls-verify': true,
            },
          },
        ],
        users: [{ name: 'u', user: { token: 't' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      }),
    );
  });

  beforeEach(() => {
    seen.length = 0;
    state.missing = 0;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('serve: patches one key of its status ConfigMap, once it exists, and touches nothing else', async () => {
    state.missing = 1;
    const reporter = new StatusReporter({
      kubeConfig: loadKubeConfig({ KUBECONFIG: kubeconfig }),
      namespace: NS,
      name: CONFIGMAP,
    });
    reporter.report({ hash: 'h1', state: 'Installing', reason: 'Installing', message: 'installing' });
    await reporter.settled(10_000);
    reporter.report({ hash: 'h1', state: 'Ready', reason: 'Succeeded', pulumiVersion: 'v3.274.1' });
    await reporter.settled(10_000);
    // The first was refused (not made yet) and retried; then the newer state.
    expect(reports(seen)).toEqual([
      { hash: 'h1', state: 'Installing', reason: 'Installing', message: 'installing' },
      { hash: 'h1', state: 'Installing', reason: 'Installing', message: 'installing' },
      { hash: 'h1', state: 'Ready', reason: 'Succeeded', pulumiVersion: 'v3.274.1' },
    ]);
    // Every request was a merge patch of that one key of the ConfigMap: no StatefulSet, no Pod.
    for (const s of seen) {
      expect(`${s.method} ${s.path} ${s.contentType}`).toBe(`PATCH ${CONFIGMAP_PATH} application/merge-patch+json`);
      const body = s.body as { data?: object };
      expect(Object.keys(body)).toEqual(['data']);
      expect(Object.keys(body.data ?? {})).toEqual([WORKSPACE_STATUS_KEY]);
    }
  });

  it('fetch: reports its failure for its pod template in the ConfigMap the hooks name, masked', async () => {
    redactor.add('hunter2-fetch-password');
    const env = {
      KUBECONFIG: kubeconfig,
      [Env.podNamespace]: NS,
      [Env.workspaceStatusConfigMap]: CONFIGMAP,
      [Env.workspaceHash]: 'h2',
    };
    await reportFetchFailure('git', new AgentError('bad credentials: hunter2-fetch-password'), env);
    expect(reports(seen)).toEqual([
      { hash: 'h2', state: 'Failed', reason: 'SourceFetchFailed', message: 'bad credentials: [secret]' },
    ]);
    // Without the ConfigMap's name (a pod template that names none) nothing is sent.
    seen.length = 0;
    await reportFetchFailure('git', new AgentError('bad credentials'), { ...env, [Env.workspaceStatusConfigMap]: '' });
    expect(seen).toEqual([]);
  });
});
