import type { KObject } from '../../src/lib/k8s';
import { appliedOver, ownedBy, selectRelated } from '../../src/cli/objects';
import { customizeStack } from '../../src/stack/customize';
import type { Stack } from '../../../schemas/generated/types';

const obj = (
  apiVersion: string,
  kind: string,
  name: string,
  extra: Partial<KObject> = {},
  namespace = 'team-a',
): KObject => ({
  apiVersion,
  kind,
  ...extra,
  metadata: { name, namespace, ...(extra.metadata ?? {}) },
});

describe('the related objects of a Stack', () => {
  it('are those its customize hook asks for, and no others', () => {
    const stack = obj('pulumi.com/v1', 'Stack', 'app', {
      spec: { stack: 'dev', programRef: { name: 'prog' }, prerequisites: [{ name: 'base' }] },
    });
    const pool = [
      obj('pulumi.com/v1', 'Program', 'prog'),
      obj('pulumi.com/v1', 'Program', 'other'),
      obj('pulumi.com/v1', 'Program', 'prog', {}, 'team-b'),
      obj('pulumi.com/v1', 'Stack', 'base'),
      obj('v1', 'ConfigMap', 'app-refresh', {
        metadata: { name: 'app-refresh', labels: { 'pulumi.com/refresh-requested-for': 'app' } },
      }),
      obj('v1', 'ConfigMap', 'unrelated'),
      obj('v1', 'Secret', 'unrelated'),
    ];
    const related = selectRelated(customizeStack(stack as unknown as Stack).relatedResources, pool);
    expect(Object.fromEntries(Object.entries(related).map(([type, byKey]) => [type, Object.keys(byKey)]))).toEqual({
      'Program.pulumi.com/v1': ['team-a/prog'],
      'Stack.pulumi.com/v1': ['team-a/base'],
      'ConfigMap.v1': ['team-a/app-refresh'],
    });
  });
});

describe('the children of a parent', () => {
  it('are the observed objects it controls, by kind, name, namespace and uid', () => {
    const parent = obj('pulumi.com/v1', 'Stack', 'app', { metadata: { name: 'app', uid: 'u1' } });
    const ref = { apiVersion: 'pulumi.com/v1', kind: 'Stack', name: 'app', uid: 'u1', controller: true };
    const observed = [
      obj('v1', 'Service', 'mine', { metadata: { name: 'mine', ownerReferences: [ref] } }),
      obj('v1', 'Service', 'not-controller', {
        metadata: { name: 'not-controller', ownerReferences: [{ ...ref, controller: false }] },
      }),
      obj('v1', 'Service', 'old-uid', { metadata: { name: 'old-uid', ownerReferences: [{ ...ref, uid: 'u0' }] } }),
      obj('v1', 'Service', 'other-ns', { metadata: { name: 'other-ns', ownerReferences: [ref] } }, 'team-b'),
      obj('v1', 'Service', 'orphan'),
    ];
    expect(ownedBy(parent, observed).map((o) => o.metadata.name)).toEqual(['mine']);
  });
});

describe('a document applied over the observed object', () => {
  const desired = obj('pulumi.com/v1', 'Stack', 'app', { spec: { stack: 'dev' } });

  it('is generation 1 when new', () => {
    expect(appliedOver(desired, undefined).metadata.generation).toBe(1);
  });

  it('takes the observed uid and status, and a new generation only when its content changed', () => {
    const observed = obj('pulumi.com/v1', 'Stack', 'app', {
      metadata: { name: 'app', uid: 'u1', generation: 4 },
      spec: { stack: 'dev' },
      status: { observedGeneration: 4 },
    });
    expect(appliedOver(desired, observed)).toMatchObject({
      metadata: { uid: 'u1', generation: 4 },
      status: { observedGeneration: 4 },
    });
    const changed = { ...desired, spec: { stack: 'prod' } };
    expect(appliedOver(changed, observed).metadata.generation).toBe(5);
  });
});
