import type { KObject } from '../src/lib/k8s';
import { isStackChild, syncStack } from './controllers';
import { applyChildren, condition, jobsOf, makeStack, syncRequest, withStatus } from './builders';
import { childOf, declaredChildren, podSpecOf, resourceOf } from './children';
import { syncWorkspace } from '../src/workspace/sync';
import { toFirstJob, ctx } from './stories';

describe('each controller', () => {
  it('returns only the kinds its manifest declares', () => {
    const { r2 } = toFirstJob();
    const ofStack = r2.children.filter(isStackChild);
    expect(ofStack.map((c) => c.kind).sort()).toEqual(['Update', 'Workspace']);
    for (const c of ofStack) expect(declaredChildren('stack')).toContain(resourceOf(c));
    const ws = syncWorkspace(
      { parent: { ...childOf(r2, 'Workspace'), metadata: { ...childOf(r2, 'Workspace').metadata, generation: 1 } } },
      ctx(),
    );
    expect(ws.children.map((c) => c.kind)).toEqual(['StatefulSet', 'Service', 'Role', 'RoleBinding', 'ConfigMap']);
    for (const c of ws.children) expect(declaredChildren('workspace')).toContain(resourceOf(c));
    const ofUpdate = r2.children.filter(
      (c) => c.kind !== 'Update' && c.metadata.name === childOf(r2, 'Update').metadata.name,
    );
    expect(ofUpdate.map((c) => c.kind)).toEqual(['Job', 'ServiceAccount', 'Role', 'RoleBinding']);
    for (const c of ofUpdate) expect(declaredChildren('update')).toContain(resourceOf(c));
    expect(jobsOf(r2)).toHaveLength(1);
  });
});

describe('the identities', () => {
  const kinds = (children: KObject[]) =>
    children.filter((c) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(c.kind));
  const rulesOf = (res: { children: KObject[] }, name: string) => childOf(res, 'Role', name).rules;

  it("give the workspace's account its own status ConfigMap only (the Workspace's Role)", () => {
    const res = syncStack(syncRequest(makeStack({ serviceAccountName: 'deployer' })), ctx());
    expect(kinds(res.children).map((c) => `${c.kind}/${c.metadata.name}`)).toEqual([
      'Role/my-stack-workspace',
      'RoleBinding/my-stack-workspace',
    ]);
    expect(rulesOf(res, 'my-stack-workspace')).toEqual([
      { apiGroups: [''], resources: ['configmaps'], verbs: ['patch'], resourceNames: ['my-stack-workspace-status'] },
    ]);
    const wsBinding = childOf(res, 'RoleBinding', 'my-stack-workspace');
    expect(wsBinding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'deployer', namespace: 'team-a' }]);
    expect(wsBinding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'my-stack-workspace',
    });
  });

  it("bind the workspace's Role to the account a podTemplate names, which is the one the pod runs as", () => {
    const stack = makeStack({
      serviceAccountName: 'deployer',
      workspaceTemplate: { spec: { podTemplate: { spec: { serviceAccountName: 'other', containers: [] } } } },
    });
    const res = syncStack(syncRequest(stack), ctx());
    expect(podSpecOf(childOf(res, 'StatefulSet')).serviceAccountName).toBe('other');
    expect(childOf(res, 'RoleBinding', 'my-stack-workspace').subjects).toEqual([
      { kind: 'ServiceAccount', name: 'other', namespace: 'team-a' },
    ]);
  });

  it("give each Update's Job an account of its own: call its workspace, patch its own Job, create Secrets", () => {
    const { r2 } = toFirstJob();
    const job = jobsOf(r2)[0]!;
    const name = job.metadata.name;
    expect(podSpecOf(job).serviceAccountName).toBe(name);
    expect(childOf(r2, 'ServiceAccount', name).metadata.name).toBe(name);
    expect(rulesOf(r2, name)).toEqual([
      { apiGroups: ['auto.pulumi.com'], resources: ['workspaces/rpc'], verbs: ['use'], resourceNames: ['my-stack'] },
      { apiGroups: ['batch'], resources: ['jobs'], verbs: ['patch'], resourceNames: [name] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
    ]);
    expect(childOf(r2, 'RoleBinding', name).subjects).toEqual([{ kind: 'ServiceAccount', name, namespace: 'team-a' }]);
    // The workspace still runs as the Stack's account.
    expect(podSpecOf(childOf(r2, 'StatefulSet')).serviceAccountName).toBe('default');
  });

  it('are kept exactly as they were when the spec turns invalid', () => {
    const stack = makeStack({ serviceAccountName: 'deployer' });
    const r1 = syncStack(syncRequest(stack), ctx());
    const cluster = applyChildren([], r1.children);
    // The Stack as stored after the first answer (its status records the children's digests), edited.
    const broken = {
      ...withStatus(stack, r1),
      spec: makeStack({
        serviceAccountName: 'deployer',
        commit: 'abc',
        branch: 'main',
        projectRepo: 'https://g.test/r.git',
        programRef: undefined,
      }).spec,
    };
    const res = syncStack(syncRequest(broken, cluster), ctx());
    const byName = (cs: KObject[]) =>
      [...kinds(cs)].sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));
    expect(byName(res.children)).toEqual(byName(r1.children));
    expect(condition(res.status, 'Stalled')).toMatchObject({ reason: 'SpecInvalid' });
  });
});
