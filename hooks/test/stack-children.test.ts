import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as yaml from 'js-yaml';
import type { KObject } from '../src/lib/k8s';
import { syncStack } from '../src/stack/sync';
import { desiredWorkspace } from '../src/stack/workspace';
import { buildJob } from '../src/stack/job';
import {
  applyChildren,
  condition,
  find,
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
import { containerOf, envValue, jobSpec, podOf as podSpecOf, statefulSetSpec, templateOf } from './children';

const ctx = { config: testConfig, now: NOW, lookups: noLookups };
const programSource = {
  kind: 'program' as const,
  program: 'my-program',
  configMap: 'my-program-program',
  digest: 'sha256:' + 'a'.repeat(64),
};

function podOf(spec: Parameters<typeof makeStack>[0]) {
  return templateOf(desiredWorkspace(makeStack(spec), programSource, testConfig).statefulSet);
}
function pulumiContainer(pod: any) {
  return pod.spec.containers.find((c: any) => c.name === 'pulumi');
}
function envOf(container: any, name: string) {
  return container.env.find((e: any) => e.name === name);
}

describe('the workspace StatefulSet and Service', () => {
  it('are named after the Stack, as upstream', () => {
    const res = syncStack(syncRequest(makeStack()), ctx);
    const sts = find(res, 'StatefulSet')!;
    expect(sts.metadata.name).toBe('my-stack-workspace');
    expect(statefulSetSpec(sts).serviceName).toBe('my-stack-workspace');
    expect(statefulSetSpec(sts).replicas).toBe(1);
    expect(sts.metadata.labels).toEqual({ 'pulumi.com/stack-name': 'my-stack', 'pulumi.com/component': 'stack' });
    expect(statefulSetSpec(sts).selector.matchLabels).toEqual({
      'auto.pulumi.com/component': 'workspace',
      'auto.pulumi.com/workspace-name': 'my-stack',
    });
    const svc = find(res, 'Service')!;
    expect(svc.spec).toEqual({
      clusterIP: 'None',
      selector: statefulSetSpec(sts).selector.matchLabels,
      ports: [{ name: 'http', port: 50051, targetPort: 50051, protocol: 'TCP' }],
    });
  });

  it('run as the restricted Pod Security profile by default', () => {
    const pod = podOf({});
    expect(pod.spec!.securityContext).toEqual({
      runAsNonRoot: true,
      runAsUser: 1000,
      runAsGroup: 1000,
      fsGroup: 1000,
      seccompProfile: { type: 'RuntimeDefault' },
    });
    for (const c of [...pod.spec!.initContainers!, ...pod.spec!.containers]) {
      expect(c.securityContext).toEqual({
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] },
      });
    }
    expect(pod.spec!.terminationGracePeriodSeconds).toBe(600);
  });

  it('set no security context with the baseline profile', () => {
    const pod = podOf({ workspaceTemplate: { spec: { securityProfile: 'baseline' } } } as any);
    expect(pod.spec!.securityContext).toBeUndefined();
    expect(pulumiContainer(pod).securityContext).toBeUndefined();
  });

  it('fetch the Program from its ConfigMap, checking the digest', () => {
    const pod = podOf({});
    const fetch = pod.spec!.initContainers![0]!;
    expect(fetch.name).toBe('fetch');
    expect(fetch.image).toBe(testConfig.agentImage);
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'program']);
    expect(fetch.env).toEqual(
      expect.arrayContaining([
        { name: 'PROGRAM_FILE', value: '/var/run/pulumi.com/program/Pulumi.yaml' },
        { name: 'PROGRAM_DIGEST', value: programSource.digest },
      ]),
    );
    expect(pod.spec!.volumes).toContainEqual({ name: 'program', configMap: { name: 'my-program-program' } });
  });

  it('pass the backend, access token and envRefs in upstream order, Secret values only by reference', () => {
    const pod = podOf({
      backend: 'file:///state',
      accessTokenSecret: 'pulumi-token',
      envRefs: {
        ZED: { type: 'Secret', secret: { name: 'creds', key: 'zed' } },
        PULUMI_CONFIG_PASSPHRASE: { type: 'Literal', literal: { value: 'test' } },
        EMPTY: { type: 'Literal', literal: { value: '' } },
      },
    } as any);
    const env = pulumiContainer(pod).env.slice(0, 5);
    expect(env).toEqual([
      { name: 'PULUMI_BACKEND_URL', value: 'file:///state' },
      { name: 'PULUMI_ACCESS_TOKEN', valueFrom: { secretKeyRef: { name: 'pulumi-token', key: 'accessToken' } } },
      // An empty value is left out: the API server drops it, and it would never compare equal.
      { name: 'EMPTY' },
      { name: 'PULUMI_CONFIG_PASSPHRASE', value: 'test' },
      { name: 'ZED', valueFrom: { secretKeyRef: { name: 'creds', key: 'zed' } } },
    ]);
  });

  it('translate config, configRef, secrets and secretsRef as upstream, Secret values as mounted files', () => {
    const pod = podOf({
      config: { 'aws:region': 'us-west-2', nested: { a: [1, 2] } },
      configRef: { settings: { name: 'app-config', key: 'settings.json', json: true } },
      secrets: { legacy: 'inline-secret' },
      secretsRef: {
        password: { type: 'Secret', secret: { name: 'db', key: 'password' } },
        apiKey: { type: 'Literal', literal: { value: 'lit' } },
      },
    } as any);
    const c = pulumiContainer(pod);
    const stack = JSON.parse(envOf(c, 'PULUMI_WORKSPACE_STACK').value);
    expect(stack).toEqual({
      name: 'dev',
      create: true,
      config: [
        { key: 'aws:region', value: 'us-west-2', secret: false },
        { key: 'nested', value: { a: [1, 2] }, secret: false },
        {
          key: 'settings',
          valueFrom: { path: '/var/run/configmaps/stacks.pulumi.com/configmaps/app-config/settings.json', json: true },
          secret: false,
        },
        { key: 'legacy', value: 'inline-secret', secret: true },
        { key: 'apiKey', value: 'lit', secret: true },
        {
          key: 'password',
          valueFrom: { path: '/var/run/secrets/stacks.pulumi.com/secrets/db/password' },
          secret: true,
        },
      ],
    });
    expect(pod.spec!.volumes).toEqual(
      expect.arrayContaining([
        { name: 'configmap-app-config', configMap: { name: 'app-config' } },
        { name: 'secret-db', secret: { secretName: 'db' } },
      ]),
    );
    expect(c.volumeMounts).toEqual(
      expect.arrayContaining([
        { name: 'secret-db', mountPath: '/var/run/secrets/stacks.pulumi.com/secrets/db', readOnly: true },
        {
          name: 'configmap-app-config',
          mountPath: '/var/run/configmaps/stacks.pulumi.com/configmaps/app-config',
          readOnly: true,
        },
      ]),
    );
  });

  it('honour useLocalStackOnly, secretsProvider and environment', () => {
    const stack = JSON.parse(
      envOf(
        pulumiContainer(
          podOf({ useLocalStackOnly: true, secretsProvider: 'passphrase', environment: ['org/env'] } as any),
        ),
        'PULUMI_WORKSPACE_STACK',
      ).value,
    );
    expect(stack).toMatchObject({ create: false, secretsProvider: 'passphrase', environment: ['org/env'] });
  });

  it('add envs and envSecrets as envFrom', () => {
    expect(pulumiContainer(podOf({ envs: ['cm1'], envSecrets: ['s1'] } as any)).envFrom).toEqual([
      { configMapRef: { name: 'cm1' } },
      { secretRef: { name: 's1' } },
    ]);
  });

  it('merge workspaceTemplate like a strategic merge patch', () => {
    const pod = podOf({
      serviceAccountName: 'from-spec',
      workspaceTemplate: {
        metadata: { labels: { team: 'a' } },
        spec: {
          image: 'example.test/custom-agent:1',
          serviceAccountName: 'from-template',
          resources: { requests: { cpu: '1', memory: '1Gi' } },
          pulumiLogLevel: 3,
          env: [{ name: 'EXTRA', value: '1' }],
          podTemplate: {
            metadata: { annotations: { 'example.test/a': 'b' } },
            spec: {
              nodeSelector: { disk: 'ssd' },
              volumes: [{ name: 'cache', emptyDir: {} }],
              initContainers: [{ name: 'setup', image: 'busybox', command: ['sh', '-c', 'echo A=1 >> $PULUMI_ENV'] }],
              containers: [
                { name: 'pulumi', volumeMounts: [{ name: 'cache', mountPath: '/cache' }] },
                { name: 'sidecar', image: 'busybox' },
              ],
            },
          },
        },
      },
    } as any);
    expect(pod.spec!.serviceAccountName).toBe('from-template');
    expect(pod.spec!.nodeSelector).toEqual({ disk: 'ssd' });
    expect(pod.metadata!.annotations!['example.test/a']).toBe('b');
    expect(pod.spec!.initContainers!.map((c: any) => c.name)).toEqual(['fetch', 'setup']);
    expect(pod.spec!.containers!.map((c: any) => c.name)).toEqual(['pulumi', 'sidecar']);
    const c = pulumiContainer(pod);
    expect(c.image).toBe('example.test/custom-agent:1');
    expect(c.resources).toEqual({ requests: { cpu: '1', memory: '1Gi' } });
    expect(c.volumeMounts.map((m: any) => m.name)).toEqual(['share', 'cache']);
    expect(envOf(c, 'EXTRA')).toEqual({ name: 'EXTRA', value: '1' });
    expect(envOf(c, 'PULUMI_LOG_LEVEL')).toEqual({ name: 'PULUMI_LOG_LEVEL', value: '3' });
    expect(pod.spec!.volumes!.map((v: any) => v.name)).toContain('cache');
    // Every container, the user's too, gets upstream's dynamic env file.
    for (const x of [...pod.spec!.initContainers!, ...pod.spec!.containers])
      expect(envOf(x, 'PULUMI_ENV')).toEqual({ name: 'PULUMI_ENV', value: '/share/.env' });
  });

  it('change the template hash whenever the pod would change', () => {
    const a = desiredWorkspace(makeStack(), programSource, testConfig);
    const b = desiredWorkspace(
      makeStack({ envRefs: { X: { type: 'Literal', literal: { value: '1' } } } } as any),
      programSource,
      testConfig,
    );
    const c = desiredWorkspace(makeStack(), programSource, testConfig);
    expect(a.hash).toMatch(/^[0-9a-f]{16}$/);
    expect(a.hash).not.toBe(b.hash);
    expect(a.hash).toBe(c.hash);
    expect(templateOf(a.statefulSet).metadata?.annotations?.['pulumi.com/workspace-hash']).toBe(a.hash);
  });

  it('fetch git sources with credentials only as secretKeyRefs', () => {
    const stack = makeStack({
      programRef: undefined,
      projectRepo: 'https://git.example.test/org/repo.git',
      commit: 'a'.repeat(40),
      repoDir: 'infra',
      shallow: true,
      gitAuth: { accessToken: { type: 'Secret', secret: { name: 'git', key: 'token' } } },
    } as any);
    const res = syncStack(syncRequest(stack, [], []), ctx);
    const fetch = containerOf(find(res, 'StatefulSet'), 0, true);
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'git']);
    expect(fetch.env).toEqual(
      expect.arrayContaining([
        { name: 'GIT_URL', value: 'https://git.example.test/org/repo.git' },
        { name: 'GIT_REVISION', value: 'a'.repeat(40) },
        { name: 'GIT_DIR', value: 'infra' },
        { name: 'GIT_SHALLOW', value: 'true' },
        { name: 'GIT_TOKEN', valueFrom: { secretKeyRef: { name: 'git', key: 'token' } } },
      ]),
    );
  });

  it('map the legacy gitAuthSecret to every key, optional', () => {
    const stack = makeStack({
      programRef: undefined,
      projectRepo: 'https://git.example.test/r.git',
      commit: 'b'.repeat(40),
      gitAuthSecret: 'legacy',
    } as any);
    const fetch = containerOf(find(syncStack(syncRequest(stack, [], []), ctx), 'StatefulSet'), 0, true);
    const refs = fetch
      .env!.filter((e: any) => e.valueFrom?.secretKeyRef)
      .map((e: any) => [e.name, e.valueFrom.secretKeyRef.key, e.valueFrom.secretKeyRef.optional]);
    expect(refs).toEqual([
      ['GIT_SSH_PRIVATE_KEY', 'sshPrivateKey', true],
      ['GIT_PASSWORD', 'password', true],
      ['GIT_USERNAME', 'username', true],
      ['GIT_TOKEN', 'accessToken', true],
    ]);
  });

  it('fetch Flux artifacts by URL and digest', () => {
    const stack = makeStack({
      programRef: undefined,
      fluxSource: {
        sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'repo' },
        dir: 'stacks/dev',
      },
    } as any);
    const repo = {
      apiVersion: 'source.toolkit.fluxcd.io/v1',
      kind: 'GitRepository',
      metadata: { name: 'repo', namespace: 'team-a' },
      status: {
        artifact: {
          url: 'http://source-controller/repo.tar.gz',
          revision: 'main@sha1:' + 'c'.repeat(40),
          digest: 'sha256:' + 'd'.repeat(64),
          path: 'x',
          lastUpdateTime: '2026-11-22T09:00:00Z',
        },
      },
    };
    const fluxCtx = { ...ctx, config: { ...testConfig, fluxMaxUntarSizeBytes: '1000' } };
    const r1 = syncStack(syncRequest(stack, [], [repo]), fluxCtx);
    const fetch = containerOf(find(r1, 'StatefulSet'), 0, true);
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'flux']);
    expect(fetch.env!.filter((e: any) => e.name.startsWith('FLUX_') || e.name === 'PULUMI_ENV')).toEqual([
      { name: 'FLUX_URL', value: 'http://source-controller/repo.tar.gz' },
      { name: 'FLUX_DIGEST', value: 'sha256:' + 'd'.repeat(64) },
      { name: 'FLUX_DIR', value: 'stacks/dev' },
      { name: 'FLUX_MAX_UNTAR_SIZE_BYTES', value: '1000' },
      { name: 'PULUMI_ENV', value: '/share/.env' },
    ]);
    // The fetch container can report a failure on the workspace StatefulSet, for its template.
    expect(fetch.env!.map((e: any) => e.name)).toEqual(
      expect.arrayContaining(['POD_NAMESPACE', 'PULUMI_WORKSPACE_HASH', 'PULUMI_WORKSPACE_NAME']),
    );
    const ready = workspaceBecomesReady(applyChildren([], r1.children));
    const r2 = syncStack(syncRequest(withStatus(stack, r1), ready, [repo]), fluxCtx);
    expect(r2.status.currentUpdate?.commit).toBe('main@sha1:' + 'c'.repeat(40));
  });
});

describe('the operation Job', () => {
  const id = { generation: 3, reconcileRequest: 'r1', commit: 'abc', previous: 'my-stack-up-00000000' };

  it('runs the agent with the operation, the workspace URL and an audience-scoped token', () => {
    const job = buildJob(
      makeStack({ targets: ['urn:a'], targetDependents: true, refresh: true } as any),
      'up',
      'New stack generation: 3',
      id,
      testConfig,
    );
    expect(job.metadata.name).toMatch(/^my-stack-up-[0-9a-f]{8}$/);
    expect(jobSpec(job).backoffLimit).toBe(0);
    expect(jobSpec(job).ttlSecondsAfterFinished).toBe(86400);
    const pod = podSpecOf(job);
    expect(pod.restartPolicy).toBe('Never');
    const c = pod.containers[0]!;
    expect(c.command).toEqual(['pko-agent', 'update']);
    expect(JSON.parse(c.env![0]!.value!)).toEqual({
      type: 'up',
      stack: 'dev',
      message: 'New stack generation: 3',
      target: ['urn:a'],
      targetDependents: true,
      refresh: true,
    });
    expect(c.env![1]).toEqual({ name: 'PULUMI_WORKSPACE_URL', value: 'http://my-stack-workspace.team-a.svc:50051' });
    expect(pod.volumes![0]!.projected!.sources![0]!.serviceAccountToken).toEqual({
      audience: 'my-stack.team-a',
      expirationSeconds: 3600,
      path: 'token',
    });
    expect(job.metadata.annotations).toEqual({
      'pulumi.com/update-generation': '3',
      'pulumi.com/update-reconcile-request': 'r1',
      'pulumi.com/update-commit': 'abc',
      'pulumi.com/update-previous': 'my-stack-up-00000000',
    });
  });

  it('applies updateTemplate: TTL, operation options and metadata', () => {
    const job = buildJob(
      makeStack({
        updateTemplate: {
          metadata: { labels: { team: 'a' } },
          spec: { ttlAfterCompleted: '1h', parallel: 4, expectNoChanges: true, message: 'custom' },
        },
      } as any),
      'up',
      'Initial stack update',
      id,
      testConfig,
    );
    expect(jobSpec(job).ttlSecondsAfterFinished).toBe(3600);
    expect(job.metadata.labels!.team).toBe('a');
    expect(JSON.parse(envValue(containerOf(job)))).toEqual({
      type: 'up',
      stack: 'dev',
      message: 'custom',
      parallel: 4,
      expectNoChanges: true,
    });
  });

  it('gets a new name for every attempt and the same name for the same attempt', () => {
    const stack = makeStack();
    const a = buildJob(stack, 'up', 'm', id, testConfig).metadata.name;
    expect(buildJob(stack, 'up', 'other message', id, testConfig).metadata.name).toBe(a);
    expect(buildJob(stack, 'up', 'm', { ...id, previous: a }, testConfig).metadata.name).not.toBe(a);
    expect(buildJob(stack, 'up', 'm', { ...id, commit: 'def' }, testConfig).metadata.name).not.toBe(a);
  });

  it('stays within the 63-character label limit for a 42-character Stack', () => {
    const stack = makeStack({}, { name: 'a'.repeat(42) });
    expect(buildJob(stack, 'destroy', 'm', id, testConfig).metadata.name.length).toBeLessThanOrEqual(63);
  });

  it('carries destroy options only on destroy', () => {
    const stack = makeStack({ runProgram: true, targets: ['urn:x'] } as any);
    expect(JSON.parse(envValue(containerOf(buildJob(stack, 'destroy', 'm', id, testConfig))))).toEqual({
      type: 'destroy',
      stack: 'dev',
      message: 'm',
      runProgram: true,
    });
  });
});

describe('the first sync of a Stack with many kinds of child', () => {
  it('returns only the kinds the controller declares', () => {
    const controller = yaml.load(
      readFileSync(join(__dirname, '..', '..', 'manifests', 'metacontroller', 'stack-controller.yaml'), 'utf8'),
    ) as any;
    const declared = controller.spec.childResources.map((r: any) => `${r.apiVersion}/${r.resource}`);
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
  const role = (res: { children: KObject[] }, name: string) =>
    res.children.find((c) => c.kind === 'Role' && c.metadata.name === name)!;

  it("give the workspace's account its own StatefulSet only, and the Jobs an account of their own", () => {
    const res = syncStack(syncRequest(makeStack({ serviceAccountName: 'deployer' })), ctx);
    expect(kinds(res.children).map((c) => `${c.kind}/${c.metadata.name}`)).toEqual([
      'ServiceAccount/my-stack-update',
      'Role/my-stack-workspace',
      'RoleBinding/my-stack-workspace',
      'Role/my-stack-update',
      'RoleBinding/my-stack-update',
    ]);
    expect((role(res, 'my-stack-workspace') as any).rules).toEqual([
      { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['patch'], resourceNames: ['my-stack-workspace'] },
    ]);
    const wsBinding = res.children.find(
      (c) => c.kind === 'RoleBinding' && c.metadata.name === 'my-stack-workspace',
    ) as any;
    expect(wsBinding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'deployer', namespace: 'team-a' }]);
    expect(wsBinding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'my-stack-workspace',
    });
    // No Job yet: the update account may call this workspace and create Secrets, and patch no Job at all.
    expect((role(res, 'my-stack-update') as any).rules).toEqual([
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
    expect((role(r2, 'my-stack-update') as any).rules[1]).toEqual({
      apiGroups: ['batch'],
      resources: ['jobs'],
      verbs: ['patch'],
      resourceNames: [job.metadata.name],
    });
    // The workspace still runs as the Stack's account.
    expect(podSpecOf(find(r2, 'StatefulSet')).serviceAccountName).toBe('default');
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
    } as any);
    const res = syncStack(syncRequest(broken, cluster), ctx);
    const byName = (cs: KObject[]) =>
      [...kinds(cs)].sort((a, b) => `${a.kind}/${a.metadata.name}`.localeCompare(`${b.kind}/${b.metadata.name}`));
    expect(byName(res.children)).toEqual(byName(r1.children));
    expect(condition(res.status, 'Stalled')).toMatchObject({ reason: 'SpecInvalid' });
  });
});
