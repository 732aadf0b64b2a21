/**
 * The workspace runs in the user's choice of Pulumi image: the agent image only supplies the
 * `bootstrap` init container, which copies the self-contained agent into /share.
 */
import { describe, expect, it } from '@jest/globals';
import { configFromEnv, DEFAULT_WORKSPACE_IMAGE, PULUMI_VERSION } from '../src/config';
import { stackWorkspacePod } from './controllers';
import { makeStack, testConfig } from './builders';
import { asChild, containerOf, templateOf, type PodTemplate } from './children';

const programSource = {
  kind: 'program' as const,
  name: 'my-program',
  digest: 'sha256:' + 'a'.repeat(64),
};

function podOf(spec: Parameters<typeof makeStack>[0], config = testConfig): PodTemplate {
  return templateOf(asChild(stackWorkspacePod(makeStack(spec), programSource, config).statefulSet, 'StatefulSet'));
}

describe('the workspace image', () => {
  it("is upstream's official image of the supported Pulumi release by default, non-root for restricted", () => {
    expect(DEFAULT_WORKSPACE_IMAGE).toEqual({
      restricted: `pulumi/pulumi:${PULUMI_VERSION}-nonroot`,
      baseline: `pulumi/pulumi:${PULUMI_VERSION}`,
    });
    expect(configFromEnv({}).workspaceImage).toEqual(DEFAULT_WORKSPACE_IMAGE);
    expect(containerOf(podOf({}).spec, 'pulumi').image).toBe(testConfig.workspaceImage.restricted);
    const baseline = podOf({ workspaceTemplate: { spec: { securityProfile: 'baseline' } } });
    expect(containerOf(baseline.spec, 'pulumi').image).toBe(testConfig.workspaceImage.baseline);
  });

  it('is a setting of the hooks (WORKSPACE_IMAGE, WORKSPACE_IMAGE_BASELINE)', () => {
    const config = configFromEnv({
      WORKSPACE_IMAGE: 'registry.example/pulumi:custom',
      WORKSPACE_IMAGE_BASELINE: 'b:1',
    });
    expect(config.workspaceImage).toEqual({ restricted: 'registry.example/pulumi:custom', baseline: 'b:1' });
  });

  it("is the Stack's workspaceTemplate.spec.image when set, with its pull policy and never the agent's", () => {
    const config = { ...testConfig, agentImagePullPolicy: 'Never' as const };
    const custom = podOf({ workspaceTemplate: { spec: { image: 'example.test/mine:1' } } }, config);
    expect(containerOf(custom.spec, 'pulumi').image).toBe('example.test/mine:1');
    expect(containerOf(custom.spec, 'pulumi').imagePullPolicy).toBeUndefined();
    const pinned = podOf({ workspaceTemplate: { spec: { image: 'example.test/mine:1', imagePullPolicy: 'Always' } } });
    expect(containerOf(pinned.spec, 'pulumi').imagePullPolicy).toBe('Always');
  });
});

describe('the injected agent', () => {
  it('is copied into /share by the first init container, bootstrap, from the agent image', () => {
    const config = { ...testConfig, agentImagePullPolicy: 'IfNotPresent' as const };
    const pod = podOf({}, config);
    const [bootstrap, fetch] = pod.spec.initContainers ?? [];
    expect(bootstrap).toMatchObject({
      name: 'bootstrap',
      image: testConfig.agentImage,
      imagePullPolicy: 'IfNotPresent',
      command: ['cp', '-R', '/opt/pko-agent/.', '/share/'],
      volumeMounts: [{ name: 'share', mountPath: '/share' }],
    });
    expect(fetch?.name).toBe('fetch');
  });

  it('runs as the workspace container under tini, with nothing of the image but its Pulumi CLI', () => {
    const pulumi = containerOf(podOf({ workspaceTemplate: { spec: { image: 'example.test/mine:1' } } }).spec, 'pulumi');
    expect(pulumi.command).toEqual(['/share/tini', '--', '/share/agent/node', '/share/agent/agent.js', 'serve']);
    expect(pulumi.args).toBeUndefined();
    expect(pulumi.workingDir).toBe('/share/workspace');
    // The image's PATH (where its pulumi is) and HOME are left alone.
    expect(pulumi.env?.map((e) => e.name)).not.toEqual(expect.arrayContaining(['PATH']));
    expect(pulumi.env?.map((e) => e.name)).not.toEqual(expect.arrayContaining(['HOME']));
  });

  it("keeps bootstrap first when the user's pod template adds init containers", () => {
    const pod = podOf({
      workspaceTemplate: {
        spec: {
          podTemplate: {
            spec: { initContainers: [{ name: 'extra', image: 'busybox', command: ['sh', '-c', 'true'] }] },
          },
        },
      },
    } as Parameters<typeof makeStack>[0]);
    expect(pod.spec.initContainers?.map((c) => c.name)).toEqual(['bootstrap', 'fetch', 'extra']);
  });
});
