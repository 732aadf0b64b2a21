import { Annotations, MAX_OUTPUTS_ANNOTATION_BYTES, SECRET_MASK } from '../../contract';
import { syncStack } from './controllers';
import { stableStringify } from '../src/lib/json';
import type { KObject } from '../src/lib/k8s';
import { applyChildren, condition, jobFinishes, jobsOf, makeStack, syncRequest, withStatus } from './builders';
import { ctx, step, toFirstJob } from './stories';

/** More than the result annotation may carry, on its own. */
const HUGE = 'x'.repeat(MAX_OUTPUTS_ANNOTATION_BYTES + 1);

/** A first up whose Job reported `outputs`, absorbed; the state after. */
function firstUpWith(outputs: Record<string, unknown>, stack = makeStack()) {
  const { stack: s, cluster, job } = toFirstJob(stack);
  const done = jobFinishes(cluster, job.metadata.name, {
    state: 'succeeded',
    outputs,
    outputsSecret: `${job.metadata.name}-stack-outputs`,
  });
  const res = syncStack(syncRequest(s, done), ctx());
  return { res, job, stack: withStatus(s, res), cluster: applyChildren(done, res.children) };
}

describe('outputs larger than a result may carry', () => {
  const outputs = { alpha: 'a', huge: HUGE, password: SECRET_MASK, zeta: { nested: [1, 2] } };

  it('fill status.outputs with those that fit, secrets still masked, and the condition says so', () => {
    const { res, job } = firstUpWith(outputs);
    // "huge" does not fit; the outputs after it in name order still do.
    expect(res.status.outputs).toEqual({ alpha: 'a', password: '[secret]', zeta: { nested: [1, 2] } });
    const truncated = condition(res.status, 'OutputsTruncated');
    expect(truncated).toMatchObject({ status: 'True', reason: 'OutputsTooLarge', observedGeneration: 1 });
    expect(truncated?.message).toContain("status.outputs holds 3 of the stack's 4 outputs");
    expect(truncated?.message).toContain('64 KiB');
    expect(truncated?.message).toContain(`Secret ${job.metadata.name}-stack-outputs`);
    // The update itself succeeded: the Stack is Ready.
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True', reason: 'ProcessingCompleted' });
  });

  it('replace the previous outputs instead of leaving them stale', () => {
    const stack = makeStack({}, {}, { outputs: { alpha: 'old', gone: 'old' } });
    const { res } = firstUpWith(outputs, stack);
    expect(res.status.outputs).toEqual({ alpha: 'a', password: '[secret]', zeta: { nested: [1, 2] } });
  });

  it('give the same status when fed back (the condition keeps its transition time)', () => {
    const { res, stack, cluster } = firstUpWith(outputs);
    const later = syncStack(syncRequest(stack, cluster), ctx(new Date('2026-11-22T11:00:00Z')));
    expect(stableStringify(later.status)).toBe(stableStringify(res.status));
  });

  it('stop being reported once a later up fits', () => {
    const first = firstUpWith(outputs);
    const requested = {
      ...first.stack,
      metadata: { ...first.stack.metadata, annotations: { [Annotations.reconciliationRequest]: 'again' } },
    };
    const { res: r1, stack: s1, cluster: c1 } = step(requested, first.cluster);
    const next = jobsOf(r1).find((j) => j.metadata.name !== first.job.metadata.name);
    expect(next).toBeDefined();
    const done = jobFinishes(c1, next!.metadata.name, {
      state: 'succeeded',
      outputs: { alpha: 'b' },
    });
    const r2 = syncStack(syncRequest(s1, done), ctx());
    expect(r2.status.outputs).toEqual({ alpha: 'b' });
    expect(condition(r2.status, 'OutputsTruncated')).toBeUndefined();
    expect(condition(r2.status, 'Ready')?.status).toBe('True');
  });

  it('are reported from an older agent that left them all out', () => {
    const { stack, cluster, job } = toFirstJob(makeStack({}, {}, { outputs: { stale: 'yes' } }));
    const result = { state: 'succeeded', type: 'up', message: 'ok', outputsOmitted: true };
    const done = cluster.map((c): KObject =>
      c.kind === 'Job'
        ? {
            ...c,
            metadata: {
              ...c.metadata,
              annotations: { ...c.metadata.annotations, [Annotations.updateResult]: JSON.stringify(result) },
            },
            status: { conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: '2026-11-22T10:01:00Z' }] },
          }
        : c,
    );
    const res = syncStack(syncRequest(stack, done), ctx());
    expect(res.status.outputs).toEqual({});
    expect(condition(res.status, 'OutputsTruncated')?.message).toContain(
      `status.outputs holds 0 of the stack's outputs`,
    );
    expect(condition(res.status, 'OutputsTruncated')?.message).toContain(`Secret ${job.metadata.name}-stack-outputs`);
  });
});

describe('outputs that fit', () => {
  it('leave no OutputsTruncated condition', () => {
    const { res } = firstUpWith({ url: 'https://example.test' });
    expect(res.status.outputs).toEqual({ url: 'https://example.test' });
    expect(condition(res.status, 'OutputsTruncated')).toBeUndefined();
  });

  it('are recorded whatever the status held, even conditions that are not objects', () => {
    const { stack, cluster, job } = toFirstJob();
    const broken = { ...stack, status: { ...stack.status, conditions: [null, 'x'] } } as unknown as typeof stack;
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', outputs: { a: HUGE, b: 1 } });
    const res = syncStack(syncRequest(broken, done), ctx());
    expect(res.status.outputs).toEqual({ b: 1 });
    expect(condition(res.status, 'OutputsTruncated')?.status).toBe('True');
  });
});
