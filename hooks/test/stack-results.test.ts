/**
 * A Stack takes results only from the operations its hooks started (docs/design.md#how-children-are-kept):
 * each is recorded in status.currentUpdate before its Update is made, and only the Update the status
 * names, with the type and plan recorded, counts. Anyone allowed to create a Job (a namespace editor)
 * or an Update can label one as the Stack's child; its result must change nothing.
 */
import { Annotations, formatUpdateResult } from '../../contract';
import type { KObject } from '../src/lib/k8s';
import { DRIFT_CHECK_ANNOTATION } from '../src/stack/drift';
import { stackEvents } from '../src/stack/events';
import { syncStack as stackHook, type StackSyncRequest } from '../src/stack/sync';
import { buildUpdate } from '../src/stack/update';
import { syncStack } from './controllers';
import {
  applyChildren,
  condition,
  jobFinishes,
  makeProgram,
  makeStack,
  NOW,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { childOf, childrenOf } from './children';
import { ctx, step, toFirstJob, withChildren } from './stories';

/** The request with `child` adopted too, as Metacontroller would send it (the stand-in controllers would report on it themselves). */
function adopting(req: StackSyncRequest, child: KObject): StackSyncRequest {
  const key = `${child.kind}.${child.apiVersion}`;
  const children = { ...req.children, [key]: { ...req.children?.[key], [`team-a/${child.metadata.name}`]: child } };
  return { ...req, children };
}

/** A finished result as the Update controller reports it in an Update's status. */
const succeededStatus = (end: string, outputs: Record<string, unknown>) => ({
  endTime: end,
  message: 'up succeeded',
  outputValues: outputs,
  conditions: [{ type: 'Complete', status: 'True', reason: 'Updated', lastTransitionTime: end }],
});

describe('results a Stack takes', () => {
  it('ignores an Update the status does not name, even one annotated as following lastUpdate', () => {
    const { stack, cluster } = withChildren();
    const last = stack.status?.lastUpdate?.name ?? '';
    // What earlier versions adopted: the identity annotations say it follows lastUpdate.
    const forged: KObject = {
      ...buildUpdate(stack, 'up', 'forged', { generation: 1, reconcileRequest: '', commit: '1', previous: last }),
      status: succeededStatus('2026-11-22T10:05:00Z', { stolen: 'yes' }),
    };
    const req = syncRequest(stack, [...cluster, forged]);
    const res = syncStack(req, ctx());
    expect(res.status.lastUpdate).toEqual(stack.status?.lastUpdate);
    expect(res.status.outputs).toEqual(stack.status?.outputs);
    const events = stackEvents({
      stack,
      observed: req.children,
      status: res.status,
      children: res.children,
      finalizing: false,
      now: NOW,
    });
    expect(events).toEqual([]);
  });

  it("ignores an earlier version's Job the status does not name, and does not keep it", () => {
    const { stack, cluster } = withChildren();
    const job: KObject = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: {
        name: 'my-stack-up-0badc0de',
        namespace: 'team-a',
        labels: { 'controller-uid': stack.metadata.uid ?? '', 'auto.pulumi.com/update-type': 'up' },
        annotations: {
          [Annotations.updateResult]: formatUpdateResult({
            state: 'succeeded',
            type: 'up',
            message: 'forged',
            endTime: '2026-11-22T10:05:00Z',
            outputs: { stolen: 'yes' },
          }),
        },
      },
      status: { conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: '2026-11-22T10:05:00Z' }] },
    };
    const res = stackHook(adopting(syncRequest(stack, cluster), job), ctx());
    expect(res.status.lastUpdate).toEqual(stack.status?.lastUpdate);
    expect(res.status.outputs).toEqual(stack.status?.outputs);
    expect(res.children.filter((c) => c.kind === 'Job')).toEqual([]);
  });

  it('ignores a running Job the status does not name: it holds nothing up', () => {
    const { stack, cluster } = withChildren();
    const job: KObject = {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'my-stack-up-0badc0de', namespace: 'team-a' },
      status: { active: 1 },
    };
    const res = stackHook(adopting(syncRequest(stack, cluster), job), ctx());
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True' });
    expect(res.children.map((c) => c.kind).sort()).toEqual(['Update', 'Workspace']);
  });

  it('refuses (409) the Update the status names when its type is not the one recorded', () => {
    const { stack, cluster, job } = toFirstJob();
    const retyped = cluster.map((o) =>
      o.kind === 'Update' ? { ...o, spec: { ...(o.spec as object), type: 'destroy' } } : o,
    );
    expect(() => stackHook(syncRequest(stack, retyped), ctx())).toThrow(
      expect.objectContaining({
        field: ['children', 'Update.auto.pulumi.com/v1alpha1', `team-a/${job.metadata.name}`],
      }) as Error,
    );
  });
});

describe('starting an operation', () => {
  it('records it in one answer and makes its Update in the next, on that status write', () => {
    const stack = makeStack();
    const first = step(stack, []);
    const ready = workspaceBecomesReady(first.cluster);
    // 1. Recorded: status.currentUpdate names it, no Update yet; the Workspace is held for it already.
    const recorded = syncStack(syncRequest(first.stack, ready), ctx());
    const name = recorded.status.currentUpdate?.name ?? '';
    expect(name).toMatch(/^my-stack-up-[0-9a-f]{8}$/);
    expect(childrenOf(recorded, 'Update')).toEqual([]);
    expect(childOf(recorded, 'Workspace').metadata.annotations?.['pulumi.com/operation-in-progress']).toBe(name);
    // A lost status write: the same answer again.
    expect(syncStack(syncRequest(first.stack, ready), ctx())).toEqual(recorded);
    // 2. Made: the status names it, so the answer holds its Update.
    const s2 = withStatus(first.stack, recorded);
    const c2 = applyChildren(ready, recorded.children);
    const made = syncStack(syncRequest(s2, c2), ctx());
    expect(childrenOf(made, 'Update').map((u) => u.metadata.name)).toEqual([name]);
    expect(made.status.currentUpdate).toEqual(recorded.status.currentUpdate);
    expect(childOf(made, 'Workspace')).toEqual(childOf(recorded, 'Workspace'));
    // 3. Running: kept.
    const running = syncStack(syncRequest(withStatus(s2, made), applyChildren(c2, made.children)), ctx());
    expect(running.status.currentUpdate?.name).toBe(name);
    expect(condition(running.status, 'Reconciling')?.message).toBe('stack is being processed');
  });

  it('records another operation, without making the first, when the change moved on in between', () => {
    const first = step(makeStack(), []);
    const ready = workspaceBecomesReady(first.cluster);
    const recorded = syncStack(syncRequest(first.stack, ready), ctx());
    const s2 = withStatus(first.stack, recorded);
    const edited = {
      ...s2,
      metadata: { ...s2.metadata, annotations: { [Annotations.reconciliationRequest]: 'again' } },
    };
    const next = syncStack(syncRequest(edited, applyChildren(ready, recorded.children)), ctx());
    expect(next.status.currentUpdate?.name).not.toBe(recorded.status.currentUpdate?.name);
    expect(next.status.currentUpdate?.reconcileRequest).toBe('again');
    expect(childrenOf(next, 'Update')).toEqual([]);
  });
});

describe('drift check results', () => {
  it('are taken only from the check due per the status and the schedule', () => {
    const { stack, cluster, job } = toFirstJob(makeStack({ driftDetection: { schedule: '5m' } }));
    const ended = '2026-11-22T10:01:00Z';
    const done = jobFinishes(cluster, job.metadata.name, { state: 'succeeded', outputs: {}, endTime: ended });
    const deployed = step(stack, done, [makeProgram()], new Date(ended));
    // A check named for another due time (anyone allowed to create Updates could make one).
    const other: KObject = {
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Update',
      metadata: {
        name: 'my-stack-refresh-0f0f0f0f',
        namespace: 'team-a',
        annotations: { [DRIFT_CHECK_ANNOTATION]: '2026-11-22T10:02:00Z' },
      },
      spec: { workspaceName: 'my-stack', stackName: 'dev', type: 'refresh', previewOnly: true },
      status: {
        endTime: '2026-11-22T10:02:30Z',
        message: 'refresh succeeded',
        changedResources: 3,
        conditions: [
          { type: 'Complete', status: 'True', reason: 'Updated', lastTransitionTime: '2026-11-22T10:02:30Z' },
        ],
      },
    };
    const res = stackHook(
      adopting(syncRequest(deployed.stack, deployed.cluster), other),
      ctx(new Date('2026-11-22T10:03:00Z')),
    );
    expect(res.status.lastDriftCheck).toBeUndefined();
    expect(condition(res.status, 'Drifted')).toBeUndefined();
  });
});
