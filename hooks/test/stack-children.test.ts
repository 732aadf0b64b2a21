import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as yaml from 'js-yaml';
import type { KObject } from '../src/lib/k8s';
import { syncStack } from './controllers';
import {
  applyChildren,
  condition,
  jobsOf,
  makeProgram,
  makeStack,
  noLookups,
  NOW,
  syncRequest,
  testConfig,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { childOf, podSpecOf } from './children';
import { isRecord } from './json';

const ctx = { config: testConfig, now: NOW, lookups: noLookups };

/** `<apiVersion>/<resource>` of every child resource a Metacontroller controller manifest declares. */
function declaredChildren(file: string): string[] {
  const controller: unknown = yaml.load(readFileSync(file, 'utf8'));
  const spec = isRecord(controller) ? controller.spec : undefined;
  const resources = isRecord(spec) ? spec.childResources : undefined;
  if (!Array.isArray(resources)) throw new Error(`${file} declares no childResources`);
  return resources.map((r: unknown) => {
    if (!isRecord(r) || typeof r.apiVersion !== 'string' || typeof r.resource !== 'string')
      throw new Error(`${file}: not a child resource: ${JSON.stringify(r)}`);
    return `${r.apiVersion}/${r.resource}`;
  });
}

describe('the first sync of a Stack with many kinds of child', () => {
  it('returns only the kinds the controller declares', () => {
    const declared = declaredChildren(
      join(__dirname, '..', '..', 'manifests', 'metacontroller', 'stack-controller.yaml'),
    );
    const plural: Record<string, string> = {
      StatefulSet: 'statefulsets',
      Service: 'services',
      Job: 'jobs',
      ConfigMap: 'configmaps',
      ServiceAccount: 'serviceaccounts',
      Role: 'roles',
      RoleBinding: 'rolebindings',
    };
    const res = syncStack(syncRequest(makeStack(), [], [makeProgram()]), ctx);
    for (const c of res.children) expect(declared).toContain(`${c.apiVersion}/${plural[c.kind]}`);
    expect(jobsOf(res)).toHaveLength(0);
  });
});

describe("the Stack's identities", () => {
  const kinds = (children: KObject[]) =>
    children.filter((c) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(c.kind));
  const rulesOf = (res: { children: KObject[] }, name: string) => childOf(res, 'Role', name).rules;

  it("give the workspace's account its own StatefulSet only, and the Jobs an account of their own", () => {
    const res = syncStack(syncRequest(makeStack({ serviceAccountName: 'deployer' })), ctx);
    expect(kinds(res.children).map((c) => `${c.kind}/${c.metadata.name}`)).toEqual([
      'ServiceAccount/my-stack-update',
      'Role/my-stack-workspace',
      'RoleBinding/my-stack-workspace',
      'Role/my-stack-update',
      'RoleBinding/my-stack-update',
    ]);
    expect(rulesOf(res, 'my-stack-workspace')).toEqual([
      { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['patch'], resourceNames: ['my-stack-workspace'] },
    ]);
    const wsBinding = childOf(res, 'RoleBinding', 'my-stack-workspace');
    expect(wsBinding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'deployer', namespace: 'team-a' }]);
    expect(wsBinding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'my-stack-workspace',
    });
    // No Job yet: the update account may call this workspace and create Secrets, and patch no Job at all.
    expect(rulesOf(res, 'my-stack-update')).toEqual([
      { apiGroups: ['auto.pulumi.com'], resources: ['workspaces/rpc'], verbs: ['use'], resourceNames: ['my-stack'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
    ]);
  });

  it('follow the Jobs: a new Job is named in the update Role in the same answer, and runs as the update account', () => {
    const stack = makeStack();
    const r1 = syncStack(syncRequest(stack), ctx);
    const cluster = workspaceBecomesReady(applyChildren([], r1.children));
    const r2 = syncStack(syncRequest(withStatus(stack, r1), cluster), ctx);
    const job = jobsOf(r2)[0]!;
    expect(podSpecOf(job).serviceAccountName).toBe('my-stack-update');
    expect(rulesOf(r2, 'my-stack-update')?.[1]).toEqual({
      apiGroups: ['batch'],
      resources: ['jobs'],
      verbs: ['patch'],
      resourceNames: [job.metadata.name],
    });
    // The workspace still runs as the Stack's account.
    expect(podSpecOf(childOf(r2, 'StatefulSet')).serviceAccountName).toBe('default');
  });

  it('are kept exactly as they were when the spec turns invalid', () => {
    const stack = makeStack({ serviceAccountName: 'deployer' });
    const r1 = syncStack(syncRequest(stack), ctx);
    const cluster = applyChildren([], r1.children);
    const broken = makeStack({
      serviceAccountName: 'deployer',
      commit: 'abc',
      branch: 'main',
      projectRepo: 'https://g.test/r.git',
      programRef: undefined,
    });
    const res = syncStack(syncRequest(broken, cluster), ctx);
    const byName = (cs: KObject[]) =>
      [...kinds(cs)].sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));
    expect(byName(res.children)).toEqual(byName(r1.children));
    expect(condition(res.status, 'Stalled')).toMatchObject({ reason: 'SpecInvalid' });
  });
});
