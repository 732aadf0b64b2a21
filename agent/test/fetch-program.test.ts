/**
 * `pko-agent fetch program` (fetch/index.ts): the Program downloaded from the hook server over
 * HTTPS checked against its CA, with the pod's projected token, and written to the workspace only
 * when its digest is the one the Stack handed over. The server is a local HTTPS server with the
 * certificate manifests/hooks-credentials.sh makes; what it answers is up to each test.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as path from 'node:path';
import { MAX_PROGRAM_BYTES, Paths } from '../../contract';
import { makeHookCredentials, type HookCredentials } from '../../hooks/test/credentials';
import { fetchProgram } from '../src/fetch/index';
import { AgentError } from '../src/lib/errors';
import { tmpDir } from './helpers';

const PROJECT = 'name: hello\nruntime: yaml\noutputs:\n  greeting: hello\n';
const digestOf = (text: string | Buffer) => `sha256:${crypto.createHash('sha256').update(text).digest('hex')}`;

let credentials: HookCredentials;
let server: https.Server;
let base: string;
/** What the server answers (the first of `answers` first, then `answer`), and the Authorization headers it was sent. */
let answer: { status: number; body: string | Buffer } = { status: 200, body: PROJECT };
let answers: { status: number; body: string }[] = [];
/** Whether the answer's body repeats `answer.body` without end. */
let endless = false;
const seen: (string | undefined)[] = [];
let root: string;

beforeAll(async () => {
  const dir = tmpDir('program-credentials');
  credentials = makeHookCredentials(dir, { EXTRA_SANS: 'IP:127.0.0.1' });
  server = https.createServer({ cert: credentials.cert, key: credentials.key }, (req, res) => {
    seen.push(req.headers.authorization);
    const next = answers.shift() ?? answer;
    res.writeHead(next.status, { 'content-type': 'application/yaml' });
    if (!endless) return res.end(next.body);
    // The body never ends: a chunk whenever the last one is taken, until the client goes.
    const more = () => {
      while (!res.destroyed && res.write(next.body));
    };
    res.on('drain', more);
    more();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
});
beforeEach(() => {
  root = tmpDir('fetch-program');
  const token = path.join(root, Paths.programToken);
  fs.mkdirSync(path.dirname(token), { recursive: true });
  fs.writeFileSync(token, 'projected-token\n');
  answer = { status: 200, body: PROJECT };
  answers = [];
  endless = false;
  seen.length = 0;
});
afterEach(() => fs.rmSync(root, { recursive: true, force: true }));

function env(overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PKO_AGENT_ROOT: root,
    PROGRAM_URL: `${base}/programs/team-a/hello`,
    PROGRAM_DIGEST: digestOf(PROJECT),
    PROGRAM_CA: credentials.ca,
    ...overrides,
  };
}

const written = () => path.join(root, Paths.workspace, 'Pulumi.yaml');

async function refusal(e: NodeJS.ProcessEnv): Promise<AgentError> {
  try {
    await fetchProgram(e);
  } catch (err) {
    if (err instanceof AgentError) return err;
    throw err;
  }
  throw new Error('the fetch was not refused');
}

describe('fetch program', () => {
  it("downloads the Program with the pod's token and writes it when the digest matches", async () => {
    await fetchProgram(env());
    expect(fs.readFileSync(written(), 'utf8')).toBe(PROJECT);
    expect(seen).toEqual(['Bearer projected-token']);
  });

  it('refuses a tampered answer: another digest, nothing written, reported as DigestMismatch', async () => {
    answer = { status: 200, body: PROJECT.replace('hello\n', 'pwned\n') };
    const err = await refusal(env());
    expect(err.reason).toBe('DigestMismatch');
    expect(err.message).toContain(`want ${digestOf(PROJECT)}`);
    expect(err.message).toContain('tampered with');
    expect(fs.existsSync(written())).toBe(false);
  });

  it('refuses a server whose certificate the CA did not sign', async () => {
    const other = makeHookCredentials(tmpDir('other-ca'), { EXTRA_SANS: 'IP:127.0.0.1' });
    const err = await refusal(env({ PROGRAM_CA: other.ca }));
    expect(err.reason).toBe('SourceUnavailable');
    expect(seen).toEqual([]);
    expect(fs.existsSync(written())).toBe(false);
  });

  it("reports the server's refusal with its status, after three attempts when it may change by itself", async () => {
    answer = { status: 403, body: '{"error":"Forbidden","message":"no Workspace of namespace team-a …"}' };
    const err = await refusal(env());
    expect(err.message).toMatch(/HTTP 403: \{"error":"Forbidden"/);
    expect(err.reason).toBe('SourceUnavailable');
    expect(seen).toHaveLength(3);
    // A 401 or 404 does not change by itself: one attempt.
    seen.length = 0;
    answer = { status: 404, body: '{"error":"Not Found"}' };
    expect((await refusal(env())).message).toContain('HTTP 404');
    expect(seen).toHaveLength(1);
  });

  it('gets the Program once the server can answer (503, then 200)', async () => {
    answers = [{ status: 503, body: '{"error":"Service Unavailable"}' }];
    await fetchProgram(env());
    expect(fs.readFileSync(written(), 'utf8')).toBe(PROJECT);
    expect(seen).toHaveLength(2);
  });

  it(`reads at most ${MAX_PROGRAM_BYTES} bytes`, async () => {
    answer = { status: 200, body: Buffer.alloc(MAX_PROGRAM_BYTES + 1, 'a') };
    const err = await refusal(env({ PROGRAM_DIGEST: digestOf(answer.body) }));
    expect(err.message).toContain(`the answer is larger than ${MAX_PROGRAM_BYTES} bytes`);
    expect(seen).toHaveLength(1);
    expect(fs.existsSync(written())).toBe(false);
  });

  it("reads no more of a refusal's body than its message shows", async () => {
    answer = { status: 401, body: '{"error":"Unauthorized","message":"the token is not valid"}' };
    endless = true;
    const err = await refusal(env());
    expect(err.message).toMatch(/HTTP 401: \{"error":"Unauthorized","message":"the token is not valid"\}/);
    expect(err.message.length).toBeLessThan(1000);
    expect(seen).toHaveLength(1);
  });

  it('names a missing setting or token', async () => {
    expect((await refusal(env({ PROGRAM_CA: '' }))).message).toContain('PROGRAM_CA is not set');
    expect((await refusal(env({ PROGRAM_DIGEST: 'md5:00' }))).reason).toBe('SpecInvalid');
    fs.rmSync(path.join(root, Paths.programToken));
    expect((await refusal(env())).message).toContain('cannot read the ServiceAccount token (ENOENT)');
  });
});
