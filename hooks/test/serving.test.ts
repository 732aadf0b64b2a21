/**
 * Who may call the hook server and what a call may hold (issue 34): HTTPS with the certificate of
 * manifests/hooks-credentials.sh, the bearer token on every hook route (probes and /metrics
 * without it), files re-read after a rotation, the timeouts that cut off slow clients, and the cap
 * on request bodies held at once.
 */
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import * as tls from 'node:tls';
import { Agent, request } from 'undici';
import { configFromEnv, DEFAULT_LIMITS, type HookConfig, type ServerLimits } from '../src/config';
import { MIN_TOKEN_LENGTH } from '../src/http/credentials';
import { buildServer, type HookServer } from '../src/server';
import { errorAnswer, postJson, stackSyncAnswer, listenOnLoopback } from './answers';
import { makeHookCredentials, type HookCredentials } from './credentials';
import { makeStack, syncRequest, testConfig } from './builders';
import { parseObject } from './json';

/** The host Metacontroller calls (webhook `service`), which the certificate names. */
const SERVICE_HOST = 'pulumi-mc-hooks.pulumi-system';

let dir: string;
let creds: HookCredentials;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'pko-serving-'));
  creds = makeHookCredentials(join(dir, 'a'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Polls until check() holds (a bound, not a timing assertion). */
async function until(what: string, check: () => boolean, limitMs = 20_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`gave up waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

interface Running extends HookServer {
  port: number;
  logs: string[];
  close(): Promise<void>;
}

const running: Running[] = [];
/** Raw client sockets of a test, destroyed after it (a server closes once its requests are done). */
const sockets: net.Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(running.splice(0).map((r) => r.close()));
});

async function serve(config: Partial<HookConfig>): Promise<Running> {
  const logs: string[] = [];
  const server = buildServer(
    { ...testConfig, logLevel: 'info', ...config },
    {
      logStream: new Writable({
        write(chunk, _enc, cb) {
          logs.push(String(chunk));
          cb();
        },
      }),
    },
  );
  const port = Number(new URL(await listenOnLoopback(server.app)).port);
  const r: Running = { ...server, port, logs, close: () => server.app.close() };
  running.push(r);
  return r;
}

/** An HTTPS client that trusts `ca` and checks the certificate for the Service's name, as Metacontroller does. */
function client(ca: string): Agent {
  return new Agent({ connect: { ca, servername: SERVICE_HOST } });
}

async function call(
  agent: Agent,
  port: number,
  path: string,
  opts: { authorization?: string; body?: unknown } = {},
): Promise<{ status: number; headers: Record<string, unknown>; json: unknown }> {
  const res = await request(`https://127.0.0.1:${port}${path}`, {
    dispatcher: agent,
    method: opts.body === undefined ? 'GET' : 'POST',
    headers: {
      ...(opts.body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(opts.authorization ? { authorization: opts.authorization } : {}),
    },
    ...(opts.body === undefined ? {} : { body: typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body) }),
  });
  const text = await res.body.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.statusCode, headers: res.headers, json };
}

const syncBody = () => ({ controller: {}, ...syncRequest(makeStack()) });

describe('HTTPS with a bearer token', () => {
  it('serves the certificate of hooks-credentials.sh, which checks out against its CA for the Service name', async () => {
    const r = await serve(creds.serving);
    const peer = await new Promise<tls.PeerCertificate>((resolve, reject) => {
      const socket = tls.connect({ port: r.port, host: '127.0.0.1', ca: creds.ca, servername: SERVICE_HOST }, () => {
        resolve(socket.getPeerCertificate());
        socket.end();
      });
      socket.on('error', reject);
    });
    expect(peer.subjectaltname).toContain(`DNS:${SERVICE_HOST}`);
    expect(peer.subjectaltname).toContain(`DNS:${SERVICE_HOST}.svc`);
    // Not trusted without the CA, nor under a name the certificate does not hold.
    for (const opts of [{ servername: SERVICE_HOST }, { ca: creds.ca, servername: 'elsewhere.example' }]) {
      const err = await new Promise<Error>((resolve) => {
        const socket = tls.connect({ port: r.port, host: '127.0.0.1', ...opts }, () => {
          socket.end();
          resolve(new Error('the handshake succeeded'));
        });
        socket.on('error', resolve);
      });
      expect(err.message).toMatch(/self-signed|unable to verify|altnames/i);
    }
  });

  it('answers the hook routes only with the token: 401 without it, with a wrong one or another scheme', async () => {
    const r = await serve(creds.serving);
    const agent = client(creds.ca);
    const ok = await call(agent, r.port, '/stack/sync', { authorization: `Bearer ${creds.token}`, body: syncBody() });
    expect(ok.status).toBe(200);
    expect(stackSyncAnswer(ok.json).children.map((c) => c.kind)).toEqual(['Workspace']);
    for (const authorization of [
      undefined,
      `Bearer ${creds.token.slice(0, -1)}x`,
      `Bearer ${creds.token}x`,
      'Bearer',
      `Basic ${Buffer.from(`user:${creds.token}`).toString('base64')}`,
      creds.token,
    ]) {
      for (const path of [
        '/stack/sync',
        '/stack/finalize',
        '/stack/customize',
        '/program/sync',
        '/workspace/sync',
        '/update/customize',
        '/update/sync',
      ]) {
        const res = await call(agent, r.port, path, { ...(authorization ? { authorization } : {}), body: syncBody() });
        expect({ path, authorization, status: res.status }).toEqual({ path, authorization, status: 401 });
        expect(res.headers['www-authenticate']).toBe('Bearer realm="pulumi-mc-hooks"');
        expect(errorAnswer(res.json).error).toBe('Unauthorized');
      }
    }
    // Refused before the body is read: a malformed body is a 401, not a 400.
    expect((await call(agent, r.port, '/stack/sync', { body: '{"parent": ' })).status).toBe(401);
    // The scheme is case-insensitive (RFC 7235), the token is not.
    expect(
      (await call(agent, r.port, '/stack/sync', { authorization: `bearer ${creds.token}`, body: syncBody() })).status,
    ).toBe(200);
    expect(
      (
        await call(agent, r.port, '/stack/sync', {
          authorization: `Bearer ${creds.token.toUpperCase()}`,
          body: syncBody(),
        })
      ).status,
    ).toBe(401);
    const scrape = await call(agent, r.port, '/metrics');
    expect(String(scrape.json)).toMatch(/pulumi_hook_errors_total\{hook="stack_sync",reason="unauthorized"\} \d+/);
    await agent.close();
  });

  it('answers probes and /metrics without the token', async () => {
    const r = await serve(creds.serving);
    const agent = client(creds.ca);
    for (const path of ['/healthz', '/readyz', '/metrics'])
      expect({ path, status: (await call(agent, r.port, path)).status }).toEqual({ path, status: 200 });
    await agent.close();
  });

  it('logs first how it serves, and never the token', async () => {
    const r = await serve(creds.serving);
    const agent = client(creds.ca);
    await call(agent, r.port, '/stack/sync', { authorization: `Bearer ${creds.token}`, body: syncBody() });
    await call(agent, r.port, '/stack/sync', { authorization: `Bearer wrong-${creds.token}`, body: syncBody() });
    await agent.close();
    expect(parseObject(r.logs[0]!)).toMatchObject({
      level: 30,
      msg: "hook server: HTTPS, the hook routes require Metacontroller's bearer token",
    });
    expect(r.logs.join('')).toContain('refused a hook request without the credential');
    expect(r.logs.join('')).not.toContain(creds.token);
  });

  it('takes a rotated token and certificate from the files, accepting the previous token while it is there', async () => {
    const files = makeHookCredentials(join(dir, 'rotate'));
    const previous = join(dir, 'rotate', 'previous-token');
    const r = await serve({ ...files.serving, authTokenFiles: [files.files.tokenFile, previous] });
    // The program server, on its own port, serves the same certificate.
    const programPort = Number(new URL(await listenOnLoopback(r.programs)).port);
    const agent = client(files.ca);
    const status = async (token: string) =>
      (
        await call(agent, r.port, '/stack/customize', {
          authorization: `Bearer ${token}`,
          body: { controller: {}, parent: makeStack() },
        })
      ).status;
    expect(await status(files.token)).toBe(200);

    // Step 1: the new token in `token`, the old one in `previous-token`: both accepted.
    const next = makeHookCredentials(join(dir, 'rotate-next'));
    writeFileSync(previous, files.token);
    writeFileSync(files.files.tokenFile, next.token);
    r.reloadCredentials();
    expect([await status(files.token), await status(next.token)]).toEqual([200, 200]);
    // Step 2: the previous token removed: only the new one.
    unlinkSync(previous);
    r.reloadCredentials();
    expect([await status(files.token), await status(next.token)]).toEqual([401, 200]);

    // A certificate that does not match its key is not taken: the old one stays.
    writeFileSync(files.files.certFile, next.cert);
    r.reloadCredentials();
    expect(r.logs.join('')).toContain('TLS certificate not reloaded');
    expect(r.credentials.tls?.cert).toBe(files.cert);
    // Both files renewed: new connections get the new certificate, trusted by the new CA only.
    writeFileSync(files.files.keyFile, next.key);
    r.reloadCredentials();
    expect(r.credentials.tls?.cert).toBe(next.cert);
    const nextAgent = client(next.ca);
    expect((await call(nextAgent, r.port, '/healthz')).status).toBe(200);
    const staleAgent = client(files.ca);
    await expect(call(staleAgent, r.port, '/healthz')).rejects.toThrow(/self-signed|unable to verify|certificate/i);
    // The program server too (503: these tests give it no API access).
    expect((await call(nextAgent, programPort, '/programs/team-a/app')).status).toBe(503);
    await expect(call(staleAgent, programPort, '/programs/team-a/app')).rejects.toThrow(
      /self-signed|unable to verify|certificate/i,
    );
    await Promise.all([agent.close(), nextAgent.close(), staleAgent.close()]);

    // No token left at all: the ones in force are kept, and the server is not opened.
    writeFileSync(files.files.tokenFile, '');
    r.reloadCredentials();
    expect(r.credentials.accepts(`Bearer ${next.token}`)).toBe(true);
    expect(r.credentials.accepts(undefined)).toBe(false);
  });

  it('refuses to start on files that hold nothing usable', () => {
    const bad = join(dir, 'bad');
    const short = join(dir, 'short-token');
    writeFileSync(short, 'x'.repeat(MIN_TOKEN_LENGTH - 1));
    expect(() => buildServer({ ...testConfig, authTokenFiles: [join(bad, 'none')] }, { logger: false })).toThrow(
      /AUTH_TOKEN_FILES: none of .* holds a token/,
    );
    expect(() => buildServer({ ...testConfig, authTokenFiles: [short] }, { logger: false })).toThrow(
      /shorter than 16 characters/,
    );
    expect(() =>
      buildServer(
        { ...testConfig, tls: { certFile: creds.files.caFile, keyFile: creds.files.keyFile } },
        { logger: false },
      ),
    ).toThrow(/not a certificate and its key/);
  });
});

describe('a plain hook server (npm start)', () => {
  it('is unauthenticated HTTP on 127.0.0.1 by default, and says so first', async () => {
    const config = configFromEnv({}, () => '');
    expect(config.host).toBe('127.0.0.1');
    expect(config.tls).toBeUndefined();
    expect(config.authTokenFiles).toBeUndefined();
    const r = await serve({ ...config, port: 0 });
    expect(parseObject(r.logs[0]!).msg).toMatch(
      /^hook server: unauthenticated HTTP on 127\.0\.0\.1:0: for local use \(curl\)/,
    );
    const res = await postJson(`http://127.0.0.1:${r.port}/stack/sync`, syncBody());
    expect(res.status).toBe(200);
  });

  it('warns first when it listens beyond this machine without a credential', async () => {
    const r = await serve({ host: '0.0.0.0' });
    expect(parseObject(r.logs[0]!)).toMatchObject({ level: 40 });
    expect(parseObject(r.logs[0]!).msg).toContain('anyone who reaches this port may call the hooks');
  });
});

describe('the settings of the hook server', () => {
  const env = (extra: NodeJS.ProcessEnv) => configFromEnv(extra, () => '');

  it('reads TLS, the token files and the limits; with a token it listens on every interface', () => {
    const config = env({
      TLS_CERT_FILE: '/etc/tls/tls.crt',
      TLS_KEY_FILE: '/etc/tls/tls.key',
      AUTH_TOKEN_FILES: '/etc/auth/token:/etc/auth/previous-token',
      HEADERS_TIMEOUT_MS: '5000',
      REQUEST_TIMEOUT_MS: '20000',
      KEEP_ALIVE_TIMEOUT_MS: '30000',
      CONNECTION_TIMEOUT_MS: '40000',
      BODY_BYTES_IN_FLIGHT: '16777216',
    });
    expect(config).toMatchObject({
      host: '0.0.0.0',
      tls: { certFile: '/etc/tls/tls.crt', keyFile: '/etc/tls/tls.key' },
      authTokenFiles: ['/etc/auth/token', '/etc/auth/previous-token'],
      limits: {
        headersTimeoutMs: 5000,
        requestTimeoutMs: 20000,
        keepAliveTimeoutMs: 30000,
        connectionTimeoutMs: 40000,
        bodyBytesInFlight: 16777216,
      },
    });
    expect(env({}).limits).toEqual(DEFAULT_LIMITS);
    expect(env({ HOST: '10.0.0.1' }).host).toBe('10.0.0.1');
  });

  it.each([
    [{ TLS_CERT_FILE: '/x' }, 'TLS_CERT_FILE and TLS_KEY_FILE go together'],
    [{ TLS_KEY_FILE: '/x' }, 'TLS_CERT_FILE and TLS_KEY_FILE go together'],
    [{ HEADERS_TIMEOUT_MS: '60000' }, 'HEADERS_TIMEOUT_MS (60000) must not exceed REQUEST_TIMEOUT_MS (30000)'],
    [{ BODY_BYTES_IN_FLIGHT: '1048576' }, 'BODY_BYTES_IN_FLIGHT (1048576) must be at least BODY_LIMIT_BYTES (8388608)'],
    [{ REQUEST_TIMEOUT_MS: '0' }, 'REQUEST_TIMEOUT_MS must be a positive integer'],
  ])('refuses %j', (extra, message) => {
    expect(() => env(extra)).toThrow(message);
  });
});

/** A raw connection to the server: what it writes, whether it closed. */
interface RawConnection {
  socket: net.Socket;
  received(): string;
  closed: Promise<void>;
}

function rawConnection(port: number, secure?: { ca: string }): RawConnection {
  let text = '';
  const socket = secure
    ? tls.connect({ port, host: '127.0.0.1', ca: secure.ca, servername: SERVICE_HOST })
    : net.connect({ port, host: '127.0.0.1' });
  socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
  socket.on('error', () => undefined); // a write after the server closed: EPIPE, ECONNRESET
  sockets.push(socket);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, received: () => text, closed };
}

const head = (path: string, headers: Record<string, string>) =>
  `POST ${path} HTTP/1.1\r\nHost: ${SERVICE_HOST}\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;

const quick: ServerLimits = {
  headersTimeoutMs: 300,
  requestTimeoutMs: 600,
  keepAliveTimeoutMs: 300,
  connectionTimeoutMs: 60_000,
  bodyBytesInFlight: DEFAULT_LIMITS.bodyBytesInFlight,
};

describe('timeouts', () => {
  it('cut off a slow body with 408 and give its bytes back', async () => {
    const r = await serve({ limits: quick });
    const c = rawConnection(r.port);
    c.socket.write(head('/stack/sync', { 'content-type': 'application/json', 'content-length': '1000' }));
    c.socket.write('{"controller":');
    await until('the body to be held', () => r.budget.inFlight === 1000);
    await c.closed;
    expect(c.received()).toMatch(/^HTTP\/1\.1 408 /);
    await until('the bytes to be given back', () => r.budget.inFlight === 0);
  });

  it('close a connection that sends its headers too slowly, or nothing at all', async () => {
    const r = await serve({ limits: quick });
    const slow = rawConnection(r.port);
    slow.socket.write('POST /stack/sync HTTP/1.1\r\nHost: x\r\n');
    const silent = rawConnection(r.port);
    await Promise.all([slow.closed, silent.closed]);
    expect(slow.received()).toMatch(/^HTTP\/1\.1 408 |^$/);
  });

  it('close a TLS connection that never finishes its handshake', async () => {
    const r = await serve({ ...creds.serving, limits: quick });
    const socket = net.connect({ port: r.port, host: '127.0.0.1' });
    socket.on('error', () => undefined);
    socket.write(Buffer.from([0x16, 0x03, 0x01])); // the start of a ClientHello, and nothing more
    await new Promise<void>((resolve) => socket.once('close', () => resolve()));
  });

  it('close an idle kept-alive connection', async () => {
    const r = await serve({ limits: quick });
    const c = rawConnection(r.port);
    c.socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n`);
    await c.closed;
    expect(c.received()).toMatch(/^HTTP\/1\.1 200 /);
    expect(c.received()).toMatch(/keep-alive/i);
  });
});

describe('the cap on request bodies in flight', () => {
  const EIGHT_MIB = 8 * 1024 * 1024;

  /** A valid JSON body of exactly `bytes` bytes, for /stack/sync (which answers it 400: no parent). */
  function paddedBody(bytes: number): Buffer {
    const prefix = '{"controller":{},"pad":"';
    const suffix = '"}';
    return Buffer.from(prefix + 'x'.repeat(bytes - prefix.length - suffix.length) + suffix);
  }

  it('holds at most BODY_BYTES_IN_FLIGHT of 60 slow 8 MiB bodies: the others get 429 before they are read', async () => {
    const r = await serve({ authTokenFiles: creds.serving.authTokenFiles, bodyLimit: EIGHT_MIB });
    const capacity = DEFAULT_LIMITS.bodyBytesInFlight;
    const admitted = Math.floor(capacity / EIGHT_MIB);
    const body = paddedBody(EIGHT_MIB);
    const before = process.memoryUsage();
    // Each sends all of its body but the last byte, then waits: the slow client of issue 34.
    const clients = Array.from({ length: 60 }, () => {
      const c = rawConnection(r.port);
      c.socket.write(
        head('/stack/sync', {
          authorization: `Bearer ${creds.token}`,
          'content-type': 'application/json',
          'content-length': String(EIGHT_MIB),
        }),
      );
      c.socket.write(body.subarray(0, EIGHT_MIB - 1));
      return c;
    });
    const refused = () => clients.filter((c) => /^HTTP\/1\.1 429 /.test(c.received()));
    await until('every body beyond the cap to be refused', () => refused().length === 60 - admitted, 60_000);
    await Promise.all(refused().map((c) => c.closed));
    expect(r.budget.inFlight).toBe(admitted * EIGHT_MIB);
    expect(r.budget.inFlight).toBeLessThanOrEqual(capacity);
    for (const c of refused()) {
      expect(c.received()).toMatch(/\r\nretry-after: 1\r\n/i);
      expect(c.received()).toMatch(/\r\nconnection: close\r\n/i);
    }
    // What the server buffered is what it admitted, not 60 bodies: well below the 480 MiB they make.
    const now = process.memoryUsage();
    expect(now.arrayBuffers + now.heapUsed - (before.arrayBuffers + before.heapUsed)).toBeLessThan(160 * 1024 * 1024);
    const scrape = await request(`http://127.0.0.1:${r.port}/metrics`).then((res) => res.body.text());
    expect(scrape).toContain(`pulumi_hook_request_body_bytes_in_flight ${admitted * EIGHT_MIB}`);
    expect(scrape).toMatch(
      new RegExp(`pulumi_hook_errors_total\\{hook="stack_sync",reason="overloaded"\\} ${60 - admitted}`),
    );

    // The admitted ones finish (a 400: the padded body has no parent); their room is given back.
    const waiting = clients.filter((c) => c.received() === '');
    expect(waiting.length).toBe(admitted);
    for (const c of waiting) c.socket.write(body.subarray(EIGHT_MIB - 1));
    await until(
      'the admitted bodies to be answered',
      () => waiting.every((c) => /^HTTP\/1\.1 400 /.test(c.received())),
      60_000,
    );
    for (const c of clients) c.socket.destroy();
    await until('every byte to be given back', () => r.budget.inFlight === 0);
    const after = await postJson(`http://127.0.0.1:${r.port}/stack/sync`, syncBody(), {
      authorization: `Bearer ${creds.token}`,
    });
    expect(after.status).toBe(200);
  }, 120_000);

  it('counts a chunked body as it arrives and refuses it with 429 when it no longer fits', async () => {
    const r = await serve({ bodyLimit: EIGHT_MIB });
    const capacity = DEFAULT_LIMITS.bodyBytesInFlight;
    // Hold most of the budget with declared bodies, then send a chunked one past the rest.
    const holders = Array.from({ length: Math.floor(capacity / EIGHT_MIB) }, () => {
      const c = rawConnection(r.port);
      c.socket.write(head('/stack/sync', { 'content-type': 'application/json', 'content-length': String(EIGHT_MIB) }));
      return c;
    });
    await until('the budget to be held', () => r.budget.inFlight === capacity);
    const chunked = rawConnection(r.port);
    chunked.socket.write(head('/stack/sync', { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }));
    chunked.socket.write('11\r\n{"controller":{}}\r\n');
    await chunked.closed;
    expect(chunked.received()).toMatch(/^HTTP\/1\.1 429 [\s\S]*retry-after: 1/i);
    for (const c of holders) c.socket.destroy();
    await until('every byte to be given back', () => r.budget.inFlight === 0);
    // With room, a chunked body is read, answered and given back.
    const ok = rawConnection(r.port);
    const json = JSON.stringify(syncBody());
    ok.socket.write(head('/stack/sync', { 'content-type': 'application/json', 'transfer-encoding': 'chunked' }));
    ok.socket.write(`${Buffer.byteLength(json).toString(16)}\r\n${json}\r\n0\r\n\r\n`);
    await until('the chunked body to be answered', () => /^HTTP\/1\.1 200 /.test(ok.received()));
    ok.socket.destroy();
    await until('every byte to be given back', () => r.budget.inFlight === 0);
  }, 60_000);

  it('leaves a body over BODY_LIMIT_BYTES to the 413, reserving nothing', async () => {
    const r = await serve({});
    const res = await postJson(`http://127.0.0.1:${r.port}/stack/sync`, {
      controller: {},
      pad: 'x'.repeat(2 * 1024 * 1024),
    });
    expect(res.status).toBe(413);
    expect(r.budget.inFlight).toBe(0);
  });
});
