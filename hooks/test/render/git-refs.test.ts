import dns from 'node:dns';
import net from 'node:net';
import { jest } from '@jest/globals';
import { GitResolver } from '../../src/git/ls-remote';
import { syncStack } from '../../src/stack/sync';
import { makeStack, NOW, testConfig } from '../builders';
import { conditionIn, GIT_STACK, parseOutput, runRender, SHA, SSH_STACK } from './run';
import { refLookupKey } from '../../src/git/ref-lookup';

afterEach(() => jest.restoreAllMocks());

describe('render and git branches', () => {
  it('renders an unresolved branch as the sync hook answers before its lookup succeeds, and says so', () => {
    const run = runRender(['-o', 'json'], GIT_STACK);
    expect(run.code).toBe(0);
    const [stack] = parseOutput(run.stdout).stacks;
    // What syncStack itself answers for a branch whose lookup has no answer yet.
    const hook = syncStack(
      {
        parent: makeStack({ programRef: undefined, projectRepo: 'https://git.example.test/infra.git', branch: 'main' }),
      },
      { config: testConfig, now: NOW, lookups: new Map() },
    );
    const expected = hook.status.conditions!.find((c) => c.type === 'Stalled')!;
    expect(conditionIn(stack!, 'Stalled')).toMatchObject({ reason: expected.reason, message: expected.message });
    expect(stack!.response.resyncAfterSeconds).toBe(hook.resyncAfterSeconds);
    expect(run.stderr).toContain(
      `note: Stack default/infra: "main" of https://git.example.test/infra.git is not resolved (no --ref ${refLookupKey('https://git.example.test/infra.git', 'main')}=<sha>)`,
    );
  });

  it("takes a branch's commit from --ref, and notes a --ref no Stack uses", () => {
    const run = runRender(
      [
        '-o',
        'json',
        '--ref',
        `https://git.example.test/infra.git#main=${SHA}`,
        '--ref',
        `https://other.test/x.git#dev=${SHA}`,
      ],
      GIT_STACK,
    );
    expect(run.code).toBe(0);
    const [stack] = parseOutput(run.stdout).stacks;
    expect(conditionIn(stack!, 'Stalled')).toBeUndefined();
    expect(run.stdout).toContain(SHA);
    expect(run.stderr).toBe(
      'note: --ref https://other.test/x.git#dev=… matches no branch a Stack of the input resolves\n',
    );
  });

  it('never prints a Secret it read', () => {
    const run = runRender(['--ref', `https://git.example.test/infra.git#main=${SHA}`], GIT_STACK);
    expect(run.stdout + run.stderr).not.toContain('not-a-real-token');
    expect(run.stdout + run.stderr).not.toContain(Buffer.from('not-a-real-token').toString('base64'));
  });

  it('opens no socket and resolves no name, resolved or not, HTTPS or SSH', () => {
    const connect = jest.spyOn(net.Socket.prototype, 'connect');
    const lookup = jest.spyOn(dns, 'lookup');
    const lookupPromise = jest.spyOn(dns.promises, 'lookup');
    const runs = [
      runRender([], GIT_STACK),
      runRender([], SSH_STACK),
      runRender(['--ref', `https://git.example.test/infra.git#main=${SHA}`], GIT_STACK),
      runRender(['--ref', `git@git.example.test:org/infra.git#release=${SHA}`], SSH_STACK),
    ];
    expect(runs.map((r) => r.code)).toEqual([0, 0, 0, 0]);
    expect(runs[3]!.stdout).toContain(SHA);
    expect(connect).not.toHaveBeenCalled();
    expect(lookup).not.toHaveBeenCalled();
    expect(lookupPromise).not.toHaveBeenCalled();
  });

  it("would see a connection: the hook server's resolver trips the same watch (control)", async () => {
    const connect = jest.spyOn(net.Socket.prototype, 'connect');
    const git = new GitResolver({ timeoutMs: 500, cacheTtlMs: 1 });
    try {
      expect(await git.resolve({ url: 'http://127.0.0.1:9/infra.git', ref: 'main' })).toHaveProperty('error');
    } finally {
      await git.close();
    }
    expect(connect).toHaveBeenCalled();
  });
});
