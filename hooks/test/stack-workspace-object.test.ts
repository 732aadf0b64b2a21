/** What a Stack makes of its Workspace's state: when it may start an Update, and what it says while one waits. */
import { syncStack } from './controllers';
import {
  applyChildren,
  condition,
  find,
  makeStack,
  syncRequest,
  withStatus,
  workspaceBecomesReady,
  workspaceFails,
} from './builders';
import { ctx, withChildren } from './stories';

describe("a Stack's Workspace", () => {
  it('relabelled (the labels reach the pod) is waited for before an Update starts', () => {
    const { stack, cluster } = withChildren();
    const relabelled = {
      ...stack,
      metadata: { ...stack.metadata, generation: 2 },
      spec: { ...stack.spec, workspaceTemplate: { metadata: { labels: { team: 'x' } } } },
    };
    const res = syncStack(syncRequest(relabelled, cluster), ctx());
    expect(find(res, 'Workspace')?.metadata.labels).toMatchObject({ team: 'x' });
    expect(
      res.children.filter((c) => c.kind === 'Update' && !cluster.some((o) => o.metadata.name === c.metadata.name)),
    ).toEqual([]);
    expect(condition(res.status, 'Reconciling')?.message).toBe('waiting for workspace readiness');
  });

  it('that fails while an Update waits for it stalls the Stack with its failure', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx());
    const ready = workspaceBecomesReady(applyChildren([], r1.children));
    const recorded = syncStack(syncRequest(withStatus(stack, r1), ready), ctx());
    const s2 = withStatus(stack, recorded);
    const r2 = syncStack(syncRequest(s2, applyChildren(ready, recorded.children)), ctx());
    // The Update was created, but before its Job the workspace failed: no Job, the Update waits.
    const own = r2.children.filter((c) => c.kind === 'Workspace' || c.kind === 'Update');
    const created = [...ready.filter((o) => o.kind !== 'Workspace'), ...applyChildren(ready, own)];
    const failed = workspaceFails(created, 'InstallationFailed', 'npm install failed');
    const res = syncStack(syncRequest(withStatus(s2, r2), failed), ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({
      reason: 'WorkspaceFailed',
      message: 'InstallationFailed: npm install failed',
    });
    // The Update stays (it runs once the workspace is fixed), and so does the Workspace.
    expect(res.children.filter((c) => c.kind === 'Update').map((c) => c.metadata.name)).toEqual([
      r2.status.currentUpdate?.name,
    ]);
  });
});
