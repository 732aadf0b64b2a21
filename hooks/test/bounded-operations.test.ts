import type { V1Container, V1Job, V1StatefulSet } from '@kubernetes/client-node';
import type { Update } from '../../schemas/generated/types';
import { boundedSettingsFromEnv, withRegistry } from '../src/bounded/settings';
import { configFromEnv, DEFAULT_AGENT_IMAGE, DEFAULT_WORKSPACE_IMAGE, type HookConfig } from '../src/config';
import { buildUpdate } from '../src/stack/update';
import { validateStackObject } from '../src/stack/validate';
import { buildJob, DEADLINE_ALLOWANCE_SECONDS } from '../src/update/job';
import { syncUpdate } from '../src/update/sync';
import { desiredPod } from '../src/workspace/pod';
import type { KObject } from '../src/lib/k8s';
import { condition, makeStack, NOW, testConfig } from './builders';
import { parseOutput, PROGRAM_STACK, RENDER_ENV, runRender } from './render/run';
import { stackJob, stackWorkspacePod } from './controllers';

const noHosts = (): string => '';
const id = { generation: 1, reconcileRequest: '', commit: '', previous: '' };
const program = { kind: 'program', name: 'my-program', digest: 'sha256:' + 'a'.repeat(64) } as const;

function update(spec: Update['spec']): Update {
  return {
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Update',
    metadata: { name: 'u1', namespace: 'team-a', generation: 1 },
    spec: { workspaceName: 'ws', stackName: 'dev', type: 'up', ...spec },
  };
}

const jobSpec = (job: unknown) => (job as V1Job).spec!;
const runner = (job: unknown): V1Container => jobSpec(job).template.spec!.containers[0]!;
const podSpec = (sts: unknown) => (sts as V1StatefulSet).spec!.template.spec!;
const container = (sts: unknown, name: string): V1Container =>
  [...(podSpec(sts).initContainers ?? []), ...podSpec(sts).containers].find((c) => c.name === name)!;

describe('bounded operations: settings', () => {
  it('are all off when unset: the same config as before them', () => {
    expect(boundedSettingsFromEnv({})).toEqual({});
    const config = configFromEnv({}, noHosts);
    expect(config.agentImage).toBe(DEFAULT_AGENT_IMAGE);
    expect(config.workspaceImage).toEqual(DEFAULT_WORKSPACE_IMAGE);
    expect(config).not.toHaveProperty('operationDeadlineSeconds');
    expect(config).not.toHaveProperty('imageRegistry');
  });

  it('read the deadline, the ephemeral storage and the registry', () => {
    expect(
      boundedSettingsFromEnv({
        OPERATION_DEADLINE_SECONDS: '3600',
        WORKSPACE_EPHEMERAL_STORAGE_REQUEST: '1Gi',
        WORKSPACE_EPHEMERAL_STORAGE_LIMIT: '8Gi',
        JOB_EPHEMERAL_STORAGE_LIMIT: '256Mi',
        IMAGE_REGISTRY: 'mirror.example.com:5000/pko/',
      }),
    ).toEqual({
      operationDeadlineSeconds: 3600,
      workspaceEphemeralStorage: { request: '1Gi', limit: '8Gi' },
      jobEphemeralStorage: { limit: '256Mi' },
      imageRegistry: 'mirror.example.com:5000/pko',
    });
  });

  it.each([
    [{ OPERATION_DEADLINE_SECONDS: '0' }, /OPERATION_DEADLINE_SECONDS must be a positive integer, not "0"/],
    [{ OPERATION_DEADLINE_SECONDS: '1.5' }, /OPERATION_DEADLINE_SECONDS/],
    [{ OPERATION_DEADLINE_SECONDS: '10m' }, /OPERATION_DEADLINE_SECONDS/],
    [{ WORKSPACE_EPHEMERAL_STORAGE_LIMIT: 'lots' }, /WORKSPACE_EPHEMERAL_STORAGE_LIMIT must be a Kubernetes quantity/],
    [{ JOB_EPHEMERAL_STORAGE_REQUEST: '-1Gi' }, /JOB_EPHEMERAL_STORAGE_REQUEST/],
    [{ IMAGE_REGISTRY: 'https://mirror.example.com' }, /IMAGE_REGISTRY must be a registry host/],
    [{ IMAGE_REGISTRY: 'mirror example' }, /IMAGE_REGISTRY/],
  ])('refuse a malformed value at start: %j', (env, message) => {
    expect(() => configFromEnv(env, noHosts)).toThrow(message);
  });

  it.each([
    ['pulumi/pulumi:3.274.1-nonroot', 'mirror.example.com/pulumi/pulumi:3.274.1-nonroot'],
    ['busybox', 'mirror.example.com/library/busybox'],
    ['busybox@sha256:' + 'b'.repeat(64), 'mirror.example.com/library/busybox@sha256:' + 'b'.repeat(64)],
    ['ghcr.io/pulumi-mc-operator/agent:v0.1.0', 'mirror.example.com/pulumi-mc-operator/agent:v0.1.0'],
    ['localhost/pko-testbed/agent:dev', 'mirror.example.com/pko-testbed/agent:dev'],
    ['registry.local:5000/team/image', 'mirror.example.com/team/image'],
  ])('rewrite %s to %s', (image, rewritten) => {
    expect(withRegistry(image, 'mirror.example.com')).toBe(rewritten);
    expect(withRegistry(image, undefined)).toBe(image);
  });

  it('IMAGE_REGISTRY applies to the agent image and both default workspace images, given or not', () => {
    const config = configFromEnv({ IMAGE_REGISTRY: 'mirror.example.com' }, noHosts);
    expect(config.agentImage).toBe(withRegistry(DEFAULT_AGENT_IMAGE, 'mirror.example.com'));
    expect(config.workspaceImage).toEqual({
      restricted: `mirror.example.com/${DEFAULT_WORKSPACE_IMAGE.restricted}`,
      baseline: `mirror.example.com/${DEFAULT_WORKSPACE_IMAGE.baseline}`,
    });
    const given = configFromEnv(
      { IMAGE_REGISTRY: 'mirror.example.com', AGENT_IMAGE: 'ghcr.io/acme/agent:1', WORKSPACE_IMAGE: 'acme/pulumi:2' },
      noHosts,
    );
    expect(given.agentImage).toBe('mirror.example.com/acme/agent:1');
    expect(given.workspaceImage.restricted).toBe('mirror.example.com/acme/pulumi:2');
  });
});

describe('bounded operations: deadlines', () => {
  it('none by default: the Job has no activeDeadlineSeconds and the runner no deadline', () => {
    const job = buildJob(update({}), 'up', testConfig);
    expect(jobSpec(job)).not.toHaveProperty('activeDeadlineSeconds');
    expect(runner(job).env?.map((e) => e.name)).not.toContain('PULUMI_OPERATION_DEADLINE_SECONDS');
  });

  it("the hooks' default applies to every Job; an Update's own deadline wins", () => {
    const config: HookConfig = { ...testConfig, operationDeadlineSeconds: 3600 };
    const byDefault = buildJob(update({}), 'up', config);
    expect(jobSpec(byDefault).activeDeadlineSeconds).toBe(3600 + DEADLINE_ALLOWANCE_SECONDS);
    expect(runner(byDefault).env).toContainEqual({ name: 'PULUMI_OPERATION_DEADLINE_SECONDS', value: '3600' });
    const own = buildJob(update({ activeDeadlineSeconds: 30 }), 'up', config);
    expect(jobSpec(own).activeDeadlineSeconds).toBe(30 + DEADLINE_ALLOWANCE_SECONDS);
    expect(runner(own).env).toContainEqual({ name: 'PULUMI_OPERATION_DEADLINE_SECONDS', value: '30' });
  });

  it("a Stack's updateTemplate deadline reaches each Update and its Job, whatever the operation", () => {
    const stack = makeStack({ updateTemplate: { spec: { activeDeadlineSeconds: 45 } } });
    for (const type of ['up', 'preview', 'destroy', 'refresh'] as const) {
      expect(buildUpdate(stack, type, 'm', id).spec).toMatchObject({ activeDeadlineSeconds: 45 });
      expect(jobSpec(stackJob(stack, type, 'm', id, testConfig)).activeDeadlineSeconds).toBe(
        45 + DEADLINE_ALLOWANCE_SECONDS,
      );
    }
    expect(buildUpdate(makeStack(), 'up', 'm', id).spec).not.toHaveProperty('activeDeadlineSeconds');
  });

  it('an Update with a deadline that is not a positive integer fails as InvalidSpec, starting nothing', () => {
    for (const bad of [0, -5, 1.5, '60'] as unknown[]) {
      const res = syncUpdate(
        { parent: update({ activeDeadlineSeconds: bad as number }), related: {} },
        { config: testConfig, now: NOW },
      );
      expect(res.children).toEqual([]);
      expect(condition(res.status, 'Failed')).toMatchObject({
        status: 'True',
        reason: 'InvalidSpec',
        message: `spec.activeDeadlineSeconds must be a positive integer; got ${JSON.stringify(bad)}`,
      });
    }
  });

  it("a Stack's deadline that is not a positive integer is a spec problem naming the field", () => {
    const stack = makeStack({ updateTemplate: { spec: { activeDeadlineSeconds: -1 } } });
    expect(validateStackObject(stack)).toContain('spec.updateTemplate.spec.activeDeadlineSeconds must be >= 1');
    const fraction = makeStack({ updateTemplate: { spec: { activeDeadlineSeconds: 1.5 } } });
    expect(validateStackObject(fraction).join('\n')).toMatch(/spec\.updateTemplate\.spec\.activeDeadlineSeconds/);
  });
});

describe('bounded operations: ephemeral storage', () => {
  const stack = makeStack();

  it('none by default: the workspace pod and its hash are as without the setting', () => {
    const plain = stackWorkspacePod(stack, program, testConfig);
    const pulumi = container(plain.statefulSet, 'pulumi');
    expect(pulumi.resources).toEqual({ requests: { cpu: '100m', memory: '64Mi' } });
    expect(runner(buildJob(update({}), 'up', testConfig)).resources).toEqual({
      requests: { memory: '64Mi' },
    });
  });

  it('the workspace container and the Job runner get the configured request and limit', () => {
    const config: HookConfig = {
      ...testConfig,
      workspaceEphemeralStorage: { request: '1Gi', limit: '8Gi' },
      jobEphemeralStorage: { request: '64Mi', limit: '256Mi' },
    };
    const ws = stackWorkspacePod(stack, program, config);
    expect(container(ws.statefulSet, 'pulumi').resources).toEqual({
      requests: { cpu: '100m', memory: '64Mi', 'ephemeral-storage': '1Gi' },
      limits: { 'ephemeral-storage': '8Gi' },
    });
    // A changed pod template: the workspace restarts onto it (a new hash).
    expect(ws.hash).not.toBe(stackWorkspacePod(stack, program, testConfig).hash);
    expect(runner(buildJob(update({}), 'up', config)).resources).toEqual({
      requests: { memory: '64Mi', 'ephemeral-storage': '64Mi' },
      limits: { 'ephemeral-storage': '256Mi' },
    });
  });

  it("the Workspace's own values win, from spec.resources or the podTemplate", () => {
    const config: HookConfig = { ...testConfig, workspaceEphemeralStorage: { request: '1Gi', limit: '8Gi' } };
    const own = makeStack({
      workspaceTemplate: {
        spec: {
          resources: { requests: { cpu: '1', 'ephemeral-storage': '2Gi' }, limits: { memory: '1Gi' } },
          podTemplate: {
            spec: { containers: [{ name: 'pulumi', resources: { limits: { 'ephemeral-storage': '20Gi' } } }] },
          },
        },
      },
    });
    expect(container(stackWorkspacePod(own, program, config).statefulSet, 'pulumi').resources).toEqual({
      requests: { cpu: '1', 'ephemeral-storage': '2Gi' },
      limits: { memory: '1Gi', 'ephemeral-storage': '20Gi' },
    });
  });
});

describe('bounded operations: one registry for every image', () => {
  const config = configFromEnv(
    { IMAGE_REGISTRY: 'mirror.example.com', AGENT_IMAGE: 'ghcr.io/pulumi-mc-operator/agent:v1' },
    noHosts,
  );

  it('rewrites the bootstrap, fetch and workspace images of the workspace pod, and the Job runner', () => {
    const sts = desiredPod(
      {
        apiVersion: 'auto.pulumi.com/v1alpha1',
        kind: 'Workspace',
        metadata: { name: 'ws', namespace: 'team-a' },
        spec: { local: { dir: '/app' } },
      },
      config,
    ).statefulSet;
    const images = [...podSpec(sts).initContainers!, ...podSpec(sts).containers].map((c) => [c.name, c.image]);
    expect(images).toEqual([
      ['bootstrap', 'mirror.example.com/pulumi-mc-operator/agent:v1'],
      ['fetch', 'mirror.example.com/pulumi-mc-operator/agent:v1'],
      ['pulumi', `mirror.example.com/${DEFAULT_WORKSPACE_IMAGE.restricted}`],
    ]);
    expect(runner(buildJob(update({}), 'up', config)).image).toBe('mirror.example.com/pulumi-mc-operator/agent:v1');
  });

  it("leaves an image the Stack names itself as written (the user's choice of registry)", () => {
    const own = makeStack({ workspaceTemplate: { spec: { image: 'acme.example.com/pulumi:3' } } });
    expect(container(stackWorkspacePod(own, program, config).statefulSet, 'pulumi').image).toBe(
      'acme.example.com/pulumi:3',
    );
  });
});

describe('bounded operations: render', () => {
  it('takes IMAGE_REGISTRY like the hook server: the Workspace gets the default image from the registry', () => {
    const workspaceImage = (env: NodeJS.ProcessEnv): unknown => {
      const run = runRender(['-o', 'json'], PROGRAM_STACK, env);
      expect(run.code).toBe(0);
      const children = (parseOutput(run.stdout).stacks[0]!.response as { children?: KObject[] }).children ?? [];
      return (children.find((c) => c.kind === 'Workspace') as { spec?: { image?: unknown } } | undefined)?.spec?.image;
    };
    expect(workspaceImage(RENDER_ENV)).toBe('example.test/pulumi:3-nonroot');
    expect(workspaceImage({ ...RENDER_ENV, IMAGE_REGISTRY: 'mirror.example.com' })).toBe(
      'mirror.example.com/pulumi:3-nonroot',
    );
  });
});
