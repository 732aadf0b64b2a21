/**
 * A Stack whose children were made by an earlier version, before Workspace and Update objects: its
 * own StatefulSet, Service, Jobs and Roles. A running Job is waited for; a finished one is absorbed
 * as an Update would be; then those children go and the Workspace and Updates take over.
 */
import { Annotations, formatUpdateResult } from '../../contract';
import type { KObject } from '../src/lib/k8s';
import { syncStack } from '../src/stack/sync';
import { childrenMap, condition, makeStack, objectMap, makeProgram } from './builders';
import { ctx } from './stories';

const JOB = 'my-stack-up-0badc0de';

/** A Job of the earlier version: named and annotated as the Update of the same operation. */
function legacyJob(finished: 'running' | 'succeeded'): KObject {
  const job: KObject = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: JOB,
      namespace: 'team-a',
      labels: { 'pulumi.com/stack-name': 'my-stack', 'auto.pulumi.com/update-type': 'up' },
      annotations: {
        'pulumi.com/update-generation': '1',
        'pulumi.com/update-reconcile-request': '',
        'pulumi.com/update-commit': '1',
        'pulumi.com/update-previous': '',
      },
    },
    status: { active: 1 },
  };
  if (finished === 'succeeded') {
    job.metadata.annotations = {
      ...(job.metadata.annotations as Record<string, string>),
      [Annotations.updateResult]: formatUpdateResult({
        state: 'succeeded',
        type: 'up',
        message: 'up succeeded',
        endTime: '2026-11-22T09:59:00Z',
        outputs: { url: 'https://x' },
      }),
    };
    job.status = { conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: '2026-11-22T09:59:00Z' }] };
  }
  return job;
}

const legacySts: KObject = {
  apiVersion: 'apps/v1',
  kind: 'StatefulSet',
  metadata: { name: 'my-stack-workspace', namespace: 'team-a' },
  spec: {},
};

const upgraded = makeStack({}, {}, { currentUpdate: { generation: 1, reconcileRequest: '', name: JOB, commit: '1' } });

describe('a Stack upgraded from the version without Workspace and Update objects', () => {
  it('waits for its running Job, keeping every child as it is', () => {
    const res = syncStack(
      { parent: upgraded, children: childrenMap(legacySts, legacyJob('running')), related: objectMap(makeProgram()) },
      ctx(),
    );
    expect(res.children.map((c) => `${c.kind}/${c.metadata.name}`)).toEqual([
      'StatefulSet/my-stack-workspace',
      `Job/${JOB}`,
    ]);
    expect(condition(res.status, 'Reconciling')).toMatchObject({ reason: 'StackProcessing' });
  });

  it("absorbs its finished Job's result, then drops the old children for a Workspace", () => {
    const res = syncStack(
      { parent: upgraded, children: childrenMap(legacySts, legacyJob('succeeded')), related: objectMap(makeProgram()) },
      ctx(),
    );
    expect(res.status.lastUpdate).toMatchObject({
      name: JOB,
      state: 'succeeded',
      lastResyncTime: '2026-11-22T09:59:00Z',
    });
    expect(res.status.outputs).toEqual({ url: 'https://x' });
    expect(res.status.currentUpdate).toBeUndefined();
    // In sync now (the same generation and commit succeeded): no operation runs again.
    expect(res.children.map((c) => c.kind)).toEqual(['Workspace']);
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True' });
  });
});
