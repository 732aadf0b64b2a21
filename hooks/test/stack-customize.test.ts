import { customizeStack } from '../src/stack/customize';
import { makeStack } from './builders';

describe('customize', () => {
  it('asks for the Program, prerequisites and refresh requests', () => {
    const stack = makeStack({ prerequisites: [{ name: 'b' }, { name: 'a' }, { name: 'b' }] });
    expect(customizeStack(stack)).toEqual({
      relatedResources: [
        { apiVersion: 'pulumi.com/v1', resource: 'programs', namespace: 'team-a', names: ['my-program'] },
        { apiVersion: 'pulumi.com/v1', resource: 'stacks', namespace: 'team-a', names: ['a', 'b'] },
        {
          apiVersion: 'v1',
          resource: 'configmaps',
          namespace: 'team-a',
          labelSelector: { matchLabels: { 'pulumi.com/refresh-requested-for': 'my-stack' } },
        },
      ],
    });
  });

  it('asks for the Flux source by kind', () => {
    const stack = makeStack({
      programRef: undefined,
      fluxSource: { sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1beta2', kind: 'Bucket', name: 'b' } },
    });
    expect(customizeStack(stack).relatedResources[0]).toEqual({
      apiVersion: 'source.toolkit.fluxcd.io/v1beta2',
      resource: 'buckets',
      namespace: 'team-a',
      names: ['b'],
    });
  });

  it('asks for git credentials only to resolve a branch', () => {
    const auth = {
      gitAuth: {
        basicAuth: {
          userName: { type: 'Secret', secret: { name: 'u', key: 'user' } },
          password: { type: 'Secret', secret: { name: 'p', key: 'pw' } },
        },
      },
    };
    const branch = makeStack({
      programRef: undefined,
      projectRepo: 'https://g.test/r.git',
      branch: 'main',
      ...auth,
    });
    const pinned = makeStack({
      programRef: undefined,
      projectRepo: 'https://g.test/r.git',
      commit: 'a'.repeat(40),
      ...auth,
    });
    expect(customizeStack(branch).relatedResources).toContainEqual({
      apiVersion: 'v1',
      resource: 'secrets',
      namespace: 'team-a',
      names: ['p', 'u'],
    });
    expect(customizeStack(pinned).relatedResources.some((r) => r.resource === 'secrets')).toBe(false);
  });

  it('asks for nothing it cannot use when the spec is broken', () => {
    const stack = makeStack({
      programRef: undefined,
      fluxSource: { sourceRef: { apiVersion: 'v1', kind: 'Nope', name: 'x' } },
    });
    expect(customizeStack(stack).relatedResources.map((r) => r.resource)).toEqual(['configmaps']);
  });
});
