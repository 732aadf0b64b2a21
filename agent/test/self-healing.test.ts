import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { OperationResult, StreamLine } from '../src/api';
import type { RunResult } from '../src/serve/pulumi';
import {
  parseStackLocks,
  pendingOperations,
  pulumiProcessRunning,
  runWithSelfHealing,
  whyNotStale,
  type LockOwnerProbe,
} from '../src/serve/self-healing';

// What `pulumi up` 3.274.1 prints (to stderr) when a killed operation's lock is left in a file backend.
const LOCKED =
  'error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end or delete the lock file with `pulumi cancel`.\n' +
  '  file:///state/.pulumi/locks/organization/killed/dev/a94b9e7e-de65-4b89-b239-2cc125a45259.json?no_tmp_dir=true: created by pulumi@killed-workspace-0 (pid 57) at 2026-11-26T15:07:13Z';

const here: LockOwnerProbe = { hostname: 'killed-workspace-0', pulumiRunning: () => false };

describe('stale locks', () => {
  it('reads the locks the CLI lists', () => {
    expect(parseStackLocks(LOCKED)).toEqual([
      {
        file: 'file:///state/.pulumi/locks/organization/killed/dev/a94b9e7e-de65-4b89-b239-2cc125a45259.json?no_tmp_dir=true',
        user: 'pulumi',
        host: 'killed-workspace-0',
        pid: 57,
        time: '2026-11-26T15:07:13Z',
      },
    ]);
    expect(parseStackLocks('error: Conflict: Another update is currently in progress.')).toBeUndefined();
    // Counted two, listed one: nothing is known about the other, so nothing is stale.
    expect(parseStackLocks(LOCKED.replace('by 1 lock(s)', 'by 2 lock(s)'))).toBeUndefined();
  });

  it('is stale only when taken on this host by a pulumi that no longer runs here', () => {
    const locks = parseStackLocks(LOCKED)!;
    expect(whyNotStale(locks, here)).toBeUndefined();
    expect(whyNotStale(locks, { ...here, hostname: 'laptop' })).toMatch(
      /taken on host killed-workspace-0, not on this workspace \(laptop\)/,
    );
    expect(whyNotStale(locks, { ...here, pulumiRunning: (pid) => pid === 57 })).toMatch(/still running here/);
    expect(whyNotStale([], here)).toBe('no lock is listed');
  });

  it('recognises a running pulumi CLI by its program name in /proc', () => {
    const proc = fs.mkdtempSync(path.join(os.tmpdir(), 'proc-'));
    fs.mkdirSync(path.join(proc, '57'));
    fs.writeFileSync(path.join(proc, '57', 'cmdline'), '/pulumi/bin/pulumi\0up\0--yes\0');
    fs.mkdirSync(path.join(proc, '58'));
    fs.writeFileSync(path.join(proc, '58', 'cmdline'), '/pulumi/bin/pulumi-language-yaml\0');
    expect(pulumiProcessRunning(57, proc)).toBe(true);
    expect(pulumiProcessRunning(58, proc)).toBe(false);
    expect(pulumiProcessRunning(59, proc)).toBe(false);
    fs.rmSync(proc, { recursive: true });
  });
});

describe('pending operations', () => {
  it('reads them from pulumi stack export', () => {
    const exported = JSON.stringify({
      version: 3,
      deployment: {
        resources: [],
        pending_operations: [
          { resource: { urn: 'urn:pulumi:dev::p::pulumi:index:Stash::a' }, type: 'creating' },
          { resource: { urn: 'urn:pulumi:dev::p::pulumi:index:Stash::b' }, type: 'updating' },
        ],
      },
    });
    expect(pendingOperations(exported)).toEqual([
      { urn: 'urn:pulumi:dev::p::pulumi:index:Stash::a', type: 'creating' },
      { urn: 'urn:pulumi:dev::p::pulumi:index:Stash::b', type: 'updating' },
    ]);
    expect(pendingOperations(JSON.stringify({ version: 3, deployment: { resources: [] } }))).toEqual([]);
    expect(pendingOperations('not json')).toBeUndefined();
  });
});

describe('runWithSelfHealing', () => {
  const ok = (stdout = ''): RunResult => ({ code: 0, signal: null, stdout, stderr: '', interrupted: false });
  const result = (state: 'succeeded' | 'failed', reason?: string): OperationResult => ({
    id: 'op-1',
    type: 'up',
    state,
    message: state === 'succeeded' ? 'up succeeded' : `up failed: ${LOCKED.split('\n')[0]}`,
    ...(reason ? { reason } : {}),
    startTime: '2026-11-26T15:00:00Z',
    endTime: '2026-11-26T15:00:01Z',
  });
  const noPending = ok(JSON.stringify({ deployment: { resources: [] } }));

  function fixture(probe: LockOwnerProbe, exports: RunResult[] = [noPending]) {
    const calls: string[] = [];
    const lines: string[] = [];
    let runs = 0;
    const cli = (args: string[]): Promise<RunResult> => {
      calls.push(args.join(' '));
      if (args[0] === 'stack') return Promise.resolve(exports.shift() ?? noPending);
      return Promise.resolve(ok());
    };
    const run = (emit: (line: StreamLine) => void): Promise<OperationResult> => {
      runs++;
      if (runs === 1) {
        for (const line of LOCKED.split('\n')) emit({ kind: 'output', stream: 'stderr', line });
        return Promise.resolve(result('failed', 'UpdateConflict'));
      }
      return Promise.resolve(result('succeeded'));
    };
    const heal = () =>
      runWithSelfHealing(
        {
          stack: 'dev',
          cli,
          emit: (l) => l.kind === 'output' && lines.push(l.line),
          probe,
          signal: new AbortController().signal,
        },
        'up',
        run,
      );
    return { calls, lines, heal, runs: () => runs };
  }

  it('removes a stale lock with pulumi cancel and runs the operation again', async () => {
    const f = fixture(here);
    const r = await f.heal();
    expect(r.state).toBe('succeeded');
    expect(r.message).toBe(
      'up succeeded (self-healing: removed the stale lock of an interrupted operation (pid 57 on killed-workspace-0 since 2026-11-26T15:07:13Z) with pulumi cancel)',
    );
    expect(f.calls).toEqual(['stack export --stack dev', 'cancel --yes --stack dev', 'stack export --stack dev']);
    expect(f.runs()).toBe(2);
    expect(f.lines).toContain('[pko-agent] self-healing: running the up again');
  });

  it('keeps a lock of another host, and the operation fails as it did', async () => {
    const f = fixture({ ...here, hostname: 'other-workspace-0' });
    const r = await f.heal();
    expect(r).toMatchObject({ state: 'failed', reason: 'UpdateConflict' });
    expect(r.message).toMatch(/\(self-healing: the lock was kept: .* was taken on host killed-workspace-0/);
    expect(f.calls).toEqual(['stack export --stack dev']);
    expect(f.runs()).toBe(1);
  });

  it('resolves pending operations with a refresh first, naming the dropped creates', async () => {
    const pending = ok(
      JSON.stringify({
        deployment: {
          pending_operations: [{ resource: { urn: 'urn:pulumi:dev::p::pulumi:index:Stash::a' }, type: 'creating' }],
        },
      }),
    );
    const f = fixture(here, [pending]);
    const r = await f.heal();
    expect(f.calls.slice(0, 2)).toEqual([
      'stack export --stack dev',
      'refresh --yes --skip-preview --clear-pending-creates --stack dev',
    ]);
    expect(r.message).toMatch(
      /resolved the pending operations of an interrupted operation: 1 pending create\(s\) dropped from the state .*urn:pulumi:dev::p::pulumi:index:Stash::a/,
    );
  });
});
