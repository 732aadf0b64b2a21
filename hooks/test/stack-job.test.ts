import type { OperationType } from '../../contract';
import { buildUpdate, type UpdateIdentity } from '../src/stack/update';
import { stackJob } from './controllers';
import { makeStack, testConfig } from './builders';
import { asChild, at, operationOf, podSpecOf, type Child } from './children';

/** The Job the Update controller makes of the Stack's Update, seen as a Job. */
function job(
  stack: ReturnType<typeof makeStack>,
  type: OperationType,
  message: string,
  id: UpdateIdentity,
): Child<'Job'> {
  return asChild(stackJob(stack, type, message, id, testConfig), 'Job');
}

describe("the operation's Update and Job", () => {
  const id = { generation: 3, reconcileRequest: 'r1', commit: 'abc', previous: 'my-stack-up-00000000' };

  it('runs the agent with the operation, the workspace URL and an audience-scoped token', () => {
    const j = job(
      makeStack({ targets: ['urn:a'], targetDependents: true, refresh: true }),
      'up',
      'New stack generation: 3',
      id,
    );
    expect(j.metadata.name).toMatch(/^my-stack-up-[0-9a-f]{8}$/);
    expect(j.spec?.backoffLimit).toBe(0);
    // The hooks delete a finished Job themselves, once its result is absorbed (retention.ts).
    expect(j.spec?.ttlSecondsAfterFinished).toBeUndefined();
    const pod = podSpecOf(j);
    expect(pod.restartPolicy).toBe('Never');
    const c = at(pod.containers, 0, 'container');
    expect(c.command).toEqual(['pko-agent', 'update']);
    expect(operationOf(j)).toEqual({
      type: 'up',
      stack: 'dev',
      message: 'New stack generation: 3',
      target: ['urn:a'],
      targetDependents: true,
      refresh: true,
    });
    expect(c.env?.[1]).toEqual({ name: 'PULUMI_WORKSPACE_URL', value: 'http://my-stack-workspace.team-a.svc:50051' });
    expect(at(pod.volumes, 0, 'volume').projected?.sources?.[0]?.serviceAccountToken).toEqual({
      audience: 'my-stack.team-a',
      expirationSeconds: 3600,
      path: 'token',
    });
    const update = buildUpdate(makeStack({ targets: ['urn:a'] }), 'up', 'm', id);
    expect(update.metadata.name).toBe(j.metadata.name);
    expect(update.metadata.annotations).toEqual({
      'pulumi.com/update-generation': '3',
      'pulumi.com/update-reconcile-request': 'r1',
      'pulumi.com/update-commit': 'abc',
      'pulumi.com/update-previous': 'my-stack-up-00000000',
    });
    expect(update.spec).toMatchObject({
      workspaceName: 'my-stack',
      stackName: 'dev',
      type: 'up',
      ttlAfterCompleted: '24h',
    });
  });

  it('applies updateTemplate: TTL, operation options and metadata', () => {
    const j = job(
      makeStack({
        updateTemplate: {
          metadata: { labels: { team: 'a' } },
          spec: { ttlAfterCompleted: '1h', parallel: 4, expectNoChanges: true, message: 'custom' },
        },
      }),
      'up',
      'Initial stack update',
      id,
    );
    const update = buildUpdate(
      makeStack({ updateTemplate: { metadata: { labels: { team: 'a' } }, spec: { ttlAfterCompleted: '1h' } } }),
      'up',
      'm',
      id,
    );
    expect(update.spec).toMatchObject({ ttlAfterCompleted: '1h' });
    expect(update.metadata.labels?.team).toBe('a');
    expect(j.metadata.labels?.team).toBe('a');
    expect(operationOf(j)).toEqual({
      type: 'up',
      stack: 'dev',
      message: 'custom',
      parallel: 4,
      expectNoChanges: true,
    });
  });

  it('gets a new name for every attempt and the same name for the same attempt', () => {
    const stack = makeStack();
    const a = buildUpdate(stack, 'up', 'm', id).metadata.name;
    expect(buildUpdate(stack, 'up', 'other message', id).metadata.name).toBe(a);
    expect(buildUpdate(stack, 'up', 'm', { ...id, previous: a }).metadata.name).not.toBe(a);
    expect(buildUpdate(stack, 'up', 'm', { ...id, commit: 'def' }).metadata.name).not.toBe(a);
  });

  it('stays within the 63-character label limit for a 42-character Stack', () => {
    const stack = makeStack({}, { name: 'a'.repeat(42) });
    expect(buildUpdate(stack, 'destroy', 'm', id).metadata.name.length).toBeLessThanOrEqual(63);
  });

  it('carries destroy options only on destroy', () => {
    const stack = makeStack({ runProgram: true, targets: ['urn:x'] });
    expect(operationOf(job(stack, 'destroy', 'm', id))).toEqual({
      type: 'destroy',
      stack: 'dev',
      message: 'm',
      runProgram: true,
    });
  });
});
