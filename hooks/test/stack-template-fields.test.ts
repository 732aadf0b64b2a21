/**
 * The fields of workspaceTemplate and updateTemplate that upstream derives from the Stack itself:
 * each either does what upstream does (`local`; `stackName` and `workspaceName` equal to what the
 * operator sets) or stalls the Stack naming the field. None is silently ignored.
 */
import type { StackSpec } from '../../schemas/generated/types';
import { syncStack } from './controllers';
import { applyChildren, condition, jobFinishes, jobsOf, makeStack, syncRequest, withStatus } from './builders';
import { childOf, fetchContainerOf, envValue, operationOf, podSpecOf } from './children';
import { ctx, toFirstJob, withChildren } from './stories';

const git = { programRef: undefined, projectRepo: 'https://g.test/r.git', commit: 'a'.repeat(40) };
const flux = {
  programRef: undefined,
  fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'repo' } },
};
const noSource = { programRef: undefined };

const rejected: [string, Partial<StackSpec>, string][] = [
  [
    'workspaceTemplate.spec.git',
    { workspaceTemplate: { spec: { git: { url: 'https://g.test/other.git', ref: 'main', dir: 'infra' } } } },
    "spec.workspaceTemplate.spec.git: the workspace's git source is the Stack's: set spec.projectRepo, spec.commit or spec.branch, spec.repoDir, spec.gitAuth and spec.shallow instead, and remove git",
  ],
  [
    'workspaceTemplate.spec.flux',
    { workspaceTemplate: { spec: { flux: { url: 'http://source/a.tar.gz', digest: 'sha256:00', dir: 'infra' } } } },
    "spec.workspaceTemplate.spec.flux: the workspace's artifact is the Stack's: set spec.fluxSource (its dir for the project directory) or spec.programRef instead, and remove flux",
  ],
  [
    'workspaceTemplate.spec.projectInfo',
    { ...noSource, workspaceTemplate: { spec: { projectInfo: { name: 'p', runtime: 'yaml' } } } },
    'spec.workspaceTemplate.spec.projectInfo: the operator sets it itself, from status.projectInfo, to destroy a deleted Stack whose source is gone; for a project inside the workspace image use spec.workspaceTemplate.spec.local, and remove projectInfo',
  ],
  [
    'workspaceTemplate.spec.stacks[].config',
    {
      workspaceTemplate: {
        spec: { stacks: [{ name: 'dev', config: [{ key: 'aws:tags.env', path: true, value: 'prod' }] }] },
      },
    },
    "spec.workspaceTemplate.spec.stacks: the workspace's one stack is the Stack's own: name it with spec.stack, set its config with spec.config, spec.configRef and spec.secretsRef (not stacks[].config), its secrets provider, ESC environments and creation with spec.secretsProvider, spec.environment and spec.useLocalStackOnly, and remove stacks",
  ],
  [
    'workspaceTemplate.spec.stacks naming another stack',
    { workspaceTemplate: { spec: { stacks: [{ name: 'other', create: true }] } } },
    'spec.workspaceTemplate.spec.stacks: ',
  ],
  [
    'workspaceTemplate.spec.local with a Program',
    { workspaceTemplate: { spec: { local: { dir: '/home/pulumi/project' } } } },
    'spec.workspaceTemplate.spec.local: a Stack has one source and this one also sets spec.programRef; remove local, or remove that',
  ],
  [
    'workspaceTemplate.spec.local with a git source',
    { ...git, workspaceTemplate: { spec: { local: { dir: '/home/pulumi/project' } } } },
    'spec.workspaceTemplate.spec.local: a Stack has one source and this one also sets spec.projectRepo; remove local, or remove that',
  ],
  [
    'workspaceTemplate.spec.local with a Flux source',
    { ...flux, workspaceTemplate: { spec: { local: { dir: '/home/pulumi/project' } } } },
    'spec.workspaceTemplate.spec.local: a Stack has one source and this one also sets spec.fluxSource; remove local, or remove that',
  ],
  [
    'workspaceTemplate.spec.local without a dir',
    { ...noSource, workspaceTemplate: { spec: { local: {} } } },
    'spec.workspaceTemplate.spec.local.dir: missing; set the path of the project directory (holding Pulumi.yaml) in the image',
  ],
  [
    'workspaceTemplate.spec.local inside /share/workspace',
    { ...noSource, workspaceTemplate: { spec: { local: { dir: 'workspace/project' } } } },
    'spec.workspaceTemplate.spec.local.dir: "workspace/project" is /share/workspace itself or inside it, where the project is linked to; use the project\'s own directory',
  ],
  [
    'updateTemplate.spec.type',
    { updateTemplate: { spec: { type: 'up' } } },
    'spec.updateTemplate.spec.type: the Stack chooses each operation (up; preview with spec.preview; destroy on deletion with spec.destroyOnFinalize), so a fixed type would replace the destroy on deletion too; remove type',
  ],
  [
    'updateTemplate.spec.stackName naming another stack',
    { updateTemplate: { spec: { stackName: 'prod' } } },
    'spec.updateTemplate.spec.stackName: "prod" is not spec.stack ("dev"), the only stack the workspace selects and configures; set spec.stack instead, and remove stackName',
  ],
  [
    'updateTemplate.spec.workspaceName naming another workspace',
    { updateTemplate: { spec: { workspaceName: 'shared' } } },
    'spec.updateTemplate.spec.workspaceName: "shared" is not this Stack\'s workspace ("my-stack"); each Stack runs its operations in its own workspace, so remove workspaceName',
  ],
];

describe('a template field the Stack derives itself', () => {
  it.each(rejected)('%s stalls the Stack as SpecInvalid, naming the field', (_name, spec, message) => {
    const res = syncStack(syncRequest(makeStack(spec)), ctx());
    const stalled = condition(res.status, 'Stalled');
    expect(stalled).toMatchObject({ status: 'True', reason: 'SpecInvalid' });
    expect(stalled?.message).toContain(message);
    // Nothing is started for a Stack whose spec says something the operator would not do.
    expect(res.children).toEqual([]);
  });

  it.each(rejected)('%s keeps the children of a running Stack as they are', (_name, spec) => {
    const { stack, cluster } = withChildren();
    const changed = { ...stack, metadata: { ...stack.metadata, generation: 2 }, spec: { ...stack.spec, ...spec } };
    const res = syncStack(syncRequest(changed, cluster), ctx());
    expect(condition(res.status, 'Stalled')?.reason).toBe('SpecInvalid');
    expect(res.children.map((c) => `${c.kind}/${c.metadata.name}`).sort()).toEqual(
      cluster.map((c) => `${c.kind}/${c.metadata.name}`).sort(),
    );
  });

  it('names every such field at once', () => {
    const stack = makeStack({
      workspaceTemplate: { spec: { git: {}, projectInfo: { name: 'p', runtime: 'yaml' } } },
      updateTemplate: { spec: { type: 'preview', stackName: 'prod' } },
    });
    const message = condition(syncStack(syncRequest(stack), ctx()).status, 'Stalled')?.message ?? '';
    for (const field of [
      'spec.workspaceTemplate.spec.git:',
      'spec.workspaceTemplate.spec.projectInfo:',
      'spec.updateTemplate.spec.type:',
      'spec.updateTemplate.spec.stackName:',
    ])
      expect(message).toContain(field);
  });

  it('an empty stacks list is no stack at all, as upstream', () => {
    const res = syncStack(syncRequest(makeStack({ workspaceTemplate: { spec: { stacks: [] } } })), ctx());
    expect(condition(res.status, 'Stalled')).toBeUndefined();
  });
});

describe('updateTemplate.spec.stackName and workspaceName', () => {
  it('equal to what the operator sets, change nothing (a copied Update is usable)', () => {
    const plain = toFirstJob(makeStack());
    const copied = toFirstJob(
      makeStack({ updateTemplate: { spec: { stackName: 'dev', workspaceName: 'my-stack', parallel: 2 } } }),
    );
    expect(condition(copied.r2.status, 'Stalled')).toBeUndefined();
    expect(operationOf(copied.job)).toEqual({ ...operationOf(plain.job), parallel: 2 });
    expect(operationOf(copied.job).stack).toBe('dev');
  });
});

describe('workspaceTemplate.spec.local', () => {
  const localStack = (dir: string) => makeStack({ ...noSource, workspaceTemplate: { spec: { local: { dir } } } });

  it('links the workspace to a directory of the image, with no other source', () => {
    const res = syncStack(syncRequest(localStack('/home/pulumi/project'), [], []), ctx());
    expect(condition(res.status, 'Stalled')).toBeUndefined();
    const fetch = fetchContainerOf(childOf(res, 'StatefulSet'));
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'local']);
    expect(envValue(fetch, 'LOCAL_DIR')).toBe('/home/pulumi/project');
    // Ours only: the agent's bootstrap, then the fetch that links the directory.
    expect(podSpecOf(childOf(res, 'StatefulSet')).initContainers?.map((c) => c.name)).toEqual(['bootstrap', 'fetch']);
  });

  it.each([
    ['project', '/share/project'],
    ['./src/app', '/share/src/app'],
    ['../home/pulumi/project', '/home/pulumi/project'],
  ])("takes a relative dir %s relative to /share, as upstream's symbolic link does (%s)", (dir, linked) => {
    const res = syncStack(syncRequest(localStack(dir), [], []), ctx());
    expect(envValue(fetchContainerOf(childOf(res, 'StatefulSet')), 'LOCAL_DIR')).toBe(linked);
  });

  it('runs its first update from the image once the workspace is ready', () => {
    const { r2, job } = toFirstJob(localStack('/home/pulumi/project'), []);
    expect(condition(r2.status, 'Stalled')).toBeUndefined();
    expect(jobsOf(r2)).toHaveLength(1);
    expect(operationOf(job)).toMatchObject({ type: 'up', stack: 'dev' });
    // No source, so no commit: upstream's empty currentCommit.
    expect(r2.status.currentUpdate?.commit).toBe('');
  });

  it('is destroyed on deletion from status.projectInfo, or from the image with runProgram', () => {
    const deleted = (runProgram: boolean) => {
      const { stack, cluster, job } = toFirstJob(
        makeStack({
          ...noSource,
          destroyOnFinalize: true,
          runProgram,
          workspaceTemplate: { spec: { local: { dir: '/p' } } },
        }),
        [],
      );
      const done = jobFinishes(cluster, job.metadata.name, {
        state: 'succeeded',
        projectInfo: { name: 'in-image', runtime: 'yaml' },
      });
      const r = syncStack(syncRequest(stack, done, []), ctx());
      const del = withStatus(stack, r);
      del.metadata = { ...del.metadata, deletionTimestamp: '2026-11-22T10:05:00Z' };
      const res = syncStack(syncRequest(del, applyChildren(done, r.children), [], true), ctx());
      return fetchContainerOf(childOf(res, 'StatefulSet'));
    };
    expect(deleted(false).command).toEqual(['pko-agent', 'fetch', 'project-info']);
    expect(deleted(true).command).toEqual(['pko-agent', 'fetch', 'local']);
  });
});
