/**
 * render prints what the hook server answers: the same input as HTTP requests to the server (built
 * by hand, as Metacontroller would send them) gives the same JSON.
 */
import { configFromEnv } from '../../src/config';
import type { GitResolver } from '../../src/git/ls-remote';
import { buildServer } from '../../src/server';
import { postJson, listenOnLoopback } from '../answers';
import { GIT_STACK, parseOutput, PROGRAM_STACK, RENDER_ENV, runRender, SHA } from './run';
import type { RefLookupRequest } from '../../src/git/ref-lookup';

const NOW = '2026-11-22T10:00:00Z';

/** A stand-in for the server's git resolver: answers the branch the test names, nothing else. */
const resolver = {
  resolve: (plan: RefLookupRequest) =>
    Promise.resolve(
      plan.url === 'https://git.example.test/infra.git' && plan.ref === 'main' ? { sha: SHA } : { error: 'unknown' },
    ),
  close: () => Promise.resolve(),
} as unknown as GitResolver;

const { app } = buildServer(
  configFromEnv(RENDER_ENV, () => ''),
  {
    clock: () => new Date(NOW),
    git: resolver,
    logger: false,
  },
);
let base = '';
beforeAll(async () => {
  base = await listenOnLoopback(app);
});
afterAll(() => app.close());

async function post(path: string, payload: unknown): Promise<unknown> {
  const res = await postJson(`${base}${path}`, payload);
  expect(res.status).toBe(200);
  return res.json;
}

const stackMeta = (name: string) => ({ name, namespace: 'default', generation: 1 });

describe('render answers as the hook server does', () => {
  it('for a Program and the Stack that deploys it (the Program hook first)', async () => {
    const run = runRender(['-o', 'json', '--now', NOW], PROGRAM_STACK);
    expect(run.code).toBe(0);
    const rendered = parseOutput(run.stdout);

    const program = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: 'hello-program', namespace: 'default', generation: 1 },
      program: { outputs: { greeting: 'hello' } },
    };
    const programAnswer = (await post('/program/sync', { object: program, attachments: {} })) as { status: unknown };
    expect(rendered.programs[0]!.response).toEqual(programAnswer);

    const stackAnswer = await post('/stack/sync', {
      parent: {
        apiVersion: 'pulumi.com/v1',
        kind: 'Stack',
        metadata: stackMeta('hello'),
        spec: { stack: 'dev', programRef: { name: 'hello-program' }, backend: 'file:///tmp' },
      },
      children: {},
      related: { 'Program.pulumi.com/v1': { 'default/hello-program': { ...program, status: programAnswer.status } } },
    });
    expect(rendered.stacks[0]!.response).toEqual(stackAnswer);
  });

  it('for a Stack on a git branch, its commit given with --ref', async () => {
    const run = runRender(
      ['-o', 'json', '--now', NOW, '--ref', `https://git.example.test/infra.git#main=${SHA}`],
      GIT_STACK,
    );
    expect(run.code).toBe(0);
    expect(run.stderr).toBe('');
    const secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'git-credentials', namespace: 'default' },
      data: { accessToken: Buffer.from('not-a-real-token').toString('base64') },
    };
    const answer = await post('/stack/sync', {
      parent: {
        apiVersion: 'pulumi.com/v1',
        kind: 'Stack',
        metadata: stackMeta('infra'),
        spec: {
          stack: 'dev',
          projectRepo: 'https://git.example.test/infra.git',
          branch: 'main',
          gitAuth: { accessToken: { type: 'Secret', secret: { name: 'git-credentials', key: 'accessToken' } } },
          backend: 'file:///tmp',
        },
      },
      children: {},
      related: { 'Secret.v1': { 'default/git-credentials': secret } },
    });
    expect(parseOutput(run.stdout).stacks[0]!.response).toEqual(answer);
    expect(JSON.stringify(answer)).toContain(SHA);
  });
});
