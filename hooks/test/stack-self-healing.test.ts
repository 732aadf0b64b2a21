import { syncStack } from './controllers';
import { applyChildren, condition, jobFinishes, jobsOf, makeStack, syncRequest, withStatus } from './builders';
import { operationOf } from './children';
import { ctx, syncStarting, toFirstJob } from './stories';

const END = '2026-11-22T10:01:00Z';
const AFTER_BACKOFF = new Date(Date.parse(END) + 10_000);

/** The first `up` ends with `reason`; the answer absorbing it, and the retry after the 10 s backoff. */
function interruptedOnce(selfHealing: boolean | undefined, reason: string, message: string) {
  const first = toFirstJob(makeStack(selfHealing === undefined ? {} : { selfHealing }));
  const name = first.job.metadata.name;
  const done = jobFinishes(first.cluster, name, { state: 'failed', reason, message, endTime: END });
  const absorbed = syncStack(syncRequest(first.stack, done), ctx(new Date(END)));
  const { res: retry } = syncStarting(
    withStatus(first.stack, absorbed),
    applyChildren(done, absorbed.children),
    undefined,
    AFTER_BACKOFF,
  );
  const next = jobsOf(retry).find((j) => j.metadata.name !== name);
  if (!next) throw new Error('no retry');
  return { name, first: first.job, absorbed, next };
}

describe('self-healing: an interrupted operation of a Stack', () => {
  it('asks the workspace to heal, says Interrupted while it waits, and names the interruption in the retry', () => {
    const { name, first, absorbed, next } = interruptedOnce(
      true,
      'WorkspaceUnavailable',
      'the connection to the workspace failed: other side closed',
    );
    expect(operationOf(first).selfHealing).toBe(true);
    expect(absorbed.status.lastUpdate).toMatchObject({ name, state: 'failed', failures: 0 });
    expect(condition(absorbed.status, 'Reconciling')).toMatchObject({
      status: 'True',
      reason: 'RetryingAfterFailure',
      message: `Interrupted: the up of Update ${name} did not finish (WorkspaceUnavailable); retrying after 10s (0 earlier failure(s))`,
    });
    expect(absorbed.resyncAfterSeconds).toBe(10);
    expect(operationOf(next)).toMatchObject({
      selfHealing: true,
      message: `Interrupted up ${name} (WorkspaceUnavailable): retrying; Backoff time elapsed: 10s`,
    });
  });

  it('treats a deleted Job (Aborted) and a pod that died without a result (JobFailed) the same way', () => {
    for (const reason of ['Aborted', 'JobFailed']) {
      const { name, absorbed } = interruptedOnce(true, reason, 'stopped');
      expect(condition(absorbed.status, 'Reconciling')?.message).toBe(
        `Interrupted: the up of Update ${name} did not finish (${reason}); retrying after 10s (0 earlier failure(s))`,
      );
    }
  });

  it('leaves a failure Pulumi reported, and every Stack without selfHealing, as before', () => {
    const failed = interruptedOnce(true, 'UpdateFailed', 'error: resource creation failed');
    expect(condition(failed.absorbed.status, 'Reconciling')?.message).toBe('0 update failure(s)');
    expect(operationOf(failed.next).message).toBe('Backoff time elapsed: 10s');
    for (const setting of [undefined, false]) {
      const plain = interruptedOnce(setting, 'WorkspaceUnavailable', 'gone');
      expect(operationOf(plain.first).selfHealing).toBeUndefined();
      expect(condition(plain.absorbed.status, 'Reconciling')?.message).toBe('0 update failure(s)');
      expect(operationOf(plain.next).message).toBe('Backoff time elapsed: 10s');
    }
  });

  it('a malformed selfHealing is SpecInvalid naming the field', () => {
    const stack = makeStack({ selfHealing: 'yes' as unknown as boolean });
    const r = syncStack(syncRequest(stack), ctx());
    expect(condition(r.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'SpecInvalid' });
    expect(condition(r.status, 'Stalled')?.message).toMatch(/spec\.selfHealing/);
  });
});
