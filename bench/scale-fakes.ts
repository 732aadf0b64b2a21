/**
 * Stand-ins for what the hook replicas of ./scale-resync.ts talk to, on loopback, each counting
 * the requests it is sent:
 * - a git host answering smart-HTTP ref advertisements (`/<repo>.git/info/refs?service=git-upload-pack`)
 *   with one branch, `main`, at a commit derived from the repository's name;
 * - a Kubernetes API server for the hooks' own calls (Events; the list and watch of Stacks,
 *   Programs, Workspaces and Updates that the gauges, the events and the operations budget mirror):
 *   lists hold the objects the bench gives it (every Stack, Workspace and Update of the replay, so
 *   the replicas' mirrors hold what they would in a cluster of that many Stacks), in pages as the
 *   client asks (`limit`, `continue`); watches stay open and silent; writes are accepted as sent.
 * Neither is the real thing: they stand in so that the replicas' own requests can be counted
 * without a cluster or the network.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface CountingServer {
  url: string;
  /** Requests received so far, by `METHOD /path` (query left out, names of objects kept). */
  counts(): Map<string, number>;
  close(): Promise<void>;
}

/** The commit the fake git host gives `main` of a repository. */
export function commitOf(repo: string): string {
  return createHash('sha1').update(repo).digest('hex');
}

function pktLine(text: string): string {
  return `${(text.length + 4).toString(16).padStart(4, '0')}${text}`;
}

function listen(
  handle: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void,
  countKey: (req: IncomingMessage) => string,
): Promise<CountingServer> {
  const counts = new Map<string, number>();
  const open = new Set<ServerResponse>();
  const server: Server = createServer((req, res) => {
    const key = countKey(req);
    counts.set(key, (counts.get(key) ?? 0) + 1);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      open.add(res);
      res.on('close', () => open.delete(res));
      handle(req, res, Buffer.concat(chunks));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        counts: () => new Map(counts),
        close: () =>
          new Promise((done) => {
            for (const res of open) res.destroy();
            server.close(() => done());
          }),
      }),
    ),
  );
}

export function fakeGitHost(): Promise<CountingServer> {
  return listen(
    (req, res) => {
      const url = new URL(req.url ?? '/', 'http://git.invalid');
      const repo = /^\/(.+)\.git\/info\/refs$/.exec(url.pathname)?.[1];
      if (req.method !== 'GET' || !repo || url.searchParams.get('service') !== 'git-upload-pack') {
        res.writeHead(404).end();
        return;
      }
      const sha = commitOf(repo);
      const body =
        pktLine('# service=git-upload-pack\n') +
        '0000' +
        pktLine(`${sha} HEAD\0multi_ack side-band-64k symref=HEAD:refs/heads/main\n`) +
        pktLine(`${sha} refs/heads/main\n`) +
        '0000';
      res.writeHead(200, { 'content-type': 'application/x-git-upload-pack-advertisement' }).end(body);
    },
    (req) => `${req.method} /<repo>.git/info/refs`,
  );
}

/**
 * The objects a list returns, by the list's path (`/apis/<group>/<version>/<plural>`): a count and
 * the i-th object, built when a page asks for it (so that 10,000 Stacks are not held twice).
 */
export type Listed = Record<string, { count: number; item(i: number): unknown }>;

export function fakeApiServer(listed: Listed = {}): Promise<CountingServer> {
  return listen(
    (req, res, body) => {
      const url = new URL(req.url ?? '/', 'http://api.invalid');
      if (req.method === 'GET' && url.searchParams.get('watch') === 'true') {
        // Open and silent: nothing changes at rest. Closed when the replica or the bench goes.
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('');
        return;
      }
      if (req.method === 'GET') {
        const objects = listed[url.pathname] ?? { count: 0, item: () => undefined };
        const from = Number(url.searchParams.get('continue') ?? 0) || 0;
        const limit = Number(url.searchParams.get('limit') ?? 0) || objects.count;
        const to = Math.min(objects.count, from + limit);
        const items = Array.from({ length: Math.max(0, to - from) }, (_, k) => objects.item(from + k));
        const metadata = { resourceVersion: '1', ...(to < objects.count ? { continue: String(to) } : {}) };
        res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ apiVersion: 'v1', kind: 'List', metadata, items }));
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json' }).end(body.length ? body : '{}');
    },
    (req) => {
      const url = new URL(req.url ?? '/', 'http://api.invalid');
      const watch = url.searchParams.get('watch') === 'true' ? ' (watch)' : '';
      return `${req.method} ${url.pathname}${watch}`;
    },
  );
}

/** A kubeconfig for the fake API server (plain HTTP on loopback, which the client allows only with TLS checks off; a dummy token). */
export function kubeconfigFor(apiUrl: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'fake', cluster: { server: apiUrl, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'bench', user: { token: 'bench-not-a-secret' } }],
    contexts: [{ name: 'fake', context: { cluster: 'fake', user: 'bench' } }],
    'current-context': 'fake',
  });
}
