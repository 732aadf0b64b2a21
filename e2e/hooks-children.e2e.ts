/**
 * Every object the hooks emit is accepted by a real kube-apiserver (server-side dry run), and the
 * workspace and Job pod templates pass Pod Security admission in a `restricted` namespace — the
 * default profile — while a `baseline` workspace is refused there, as it should be.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import * as k8s from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from './testbed/control-plane';
import { syncStack } from '../hooks/test/controllers';
import { syncProgram } from '../hooks/src/program/sync';
import type { KObject } from '../hooks/src/lib/k8s';
import type { Program, Stack, StackSpec } from '../schemas/generated/types';
import { jobsOf, makeProgram, makeStack, NOW, syncRequest } from '../hooks/test/builders';
import { ctx, toFirstJob } from '../hooks/test/stories';

let cp: ControlPlane;
let objects: k8s.KubernetesObjectApi;
const NS = 'team-a';

beforeAll(async () => {
  cp = await startControlPlane();
  objects = k8s.KubernetesObjectApi.makeApiClient(cp.kubeConfig);
  for (const file of readdirSync(join(__dirname, '..', 'manifests', 'crds'))) {
    for (const doc of loadAll(readFileSync(join(__dirname, '..', 'manifests', 'crds', file), 'utf8')))
      await objects.create(doc as k8s.KubernetesObject);
  }
  await objects.create({
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: NS, labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } },
  });
  await objects.create({
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: 'deployer', namespace: NS },
  });
  // CRDs take a moment to be served.
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await objects.create(makeStack() as k8s.KubernetesObject, undefined, 'All');
      break;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}, 120_000);

afterAll(async () => {
  await cp?.stop();
});

/** The children of a Stack at creation and once its first Job starts (recorded, then made: stories.toFirstJob). */
function childrenOf(spec: Parameters<typeof makeStack>[0], related: KObject[] = [makeProgram()]): KObject[] {
  const { r2 } = toFirstJob(makeStack(spec), related);
  expect(jobsOf(r2)).toHaveLength(1);
  return r2.children;
}

const everything: Partial<StackSpec> = {
  backend: 'file:///state',
  accessTokenSecret: 'token',
  envRefs: {
    PASS: { type: 'Literal', literal: { value: 'x' } },
    SECRET: { type: 'Secret', secret: { name: 's', key: 'k' } },
  },
  envs: ['cm'],
  envSecrets: ['sec'],
  config: { 'aws:region': 'us-west-2', structured: { a: [1, 2] } },
  configRef: { fromCm: { name: 'app-config', key: 'settings.json', json: true } },
  secretsRef: { password: { type: 'Secret', secret: { name: 'db', key: 'password' } } },
  serviceAccountName: 'deployer',
  targets: ['urn:pulumi:dev::p::t::n'],
  refresh: true,
  workspaceTemplate: {
    metadata: { labels: { team: 'a' }, annotations: { note: 'x' } },
    spec: {
      image: 'example.test/custom:1',
      imagePullPolicy: 'IfNotPresent',
      resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } },
      pulumiLogLevel: 2,
      serviceTemplate: { metadata: { labels: { svc: 'yes' } } },
      podTemplate: {
        spec: {
          nodeSelector: { disk: 'ssd' },
          volumes: [{ name: 'cache', emptyDir: {} }],
          initContainers: [
            {
              name: 'setup',
              image: 'busybox',
              command: ['sh', '-c', 'true'],
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            },
          ],
          containers: [{ name: 'pulumi', volumeMounts: [{ name: 'cache', mountPath: '/cache' }] }],
        },
      },
    },
  },
  updateTemplate: { metadata: { labels: { run: 'x' } }, spec: { ttlAfterCompleted: '2h', parallel: 2 } },
};

const scenarios: [string, KObject[]][] = [
  ['a Program Stack', childrenOf({})],
  ['a Stack using every pod-shaping field', childrenOf(everything)],
  [
    'a git Stack with credentials',
    childrenOf(
      {
        programRef: undefined,
        projectRepo: 'https://g.test/r.git',
        commit: 'a'.repeat(40),
        repoDir: 'x',
        shallow: true,
        gitAuthSecret: 'legacy',
      },
      [],
    ),
  ],
  [
    'a Flux Stack',
    childrenOf(
      {
        programRef: undefined,
        fluxSource: {
          sourceRef: { apiVersion: 'source.toolkit.fluxcd.io/v1', kind: 'GitRepository', name: 'r' },
          dir: 'd',
        },
      },
      [
        {
          apiVersion: 'source.toolkit.fluxcd.io/v1',
          kind: 'GitRepository',
          metadata: { name: 'r', namespace: NS },
          status: {
            artifact: {
              url: 'http://x/a.tgz',
              revision: 'main@sha1:' + 'b'.repeat(40),
              digest: 'sha256:' + 'c'.repeat(64),
            },
          },
        },
      ],
    ),
  ],
  ['a preview Stack', childrenOf({ preview: true })],
];

/** A Pod built from a pod template, as the StatefulSet or Job controller would create it. */
function podFrom(owner: KObject): k8s.V1Pod {
  const { template } = owner.spec as k8s.V1StatefulSetSpec | k8s.V1JobSpec;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `${owner.metadata.name}-probe`, namespace: NS, labels: template.metadata?.labels },
    spec: template.spec,
  };
}

describe('objects the hooks emit, against a real API server', () => {
  it.each(scenarios)('%s: every child is accepted (server-side dry run)', async (_name, children) => {
    for (const child of children) {
      await expect(objects.create(child as k8s.KubernetesObject, undefined, 'All')).resolves.toMatchObject({
        kind: child.kind,
      });
    }
  });

  it.each(scenarios)('%s: workspace and Job pods pass restricted Pod Security admission', async (_name, children) => {
    const owners = children.filter((c) => c.kind === 'StatefulSet' || c.kind === 'Job');
    expect(owners.length).toBe(2);
    // A pod's ServiceAccount must exist: the Jobs' one is among the children (created for real here).
    for (const sa of children.filter((c) => c.kind === 'ServiceAccount')) {
      await objects.create(sa as k8s.KubernetesObject).catch((e: unknown) => {
        if (!(e instanceof k8s.ApiException && e.code === 409)) throw e;
      });
    }
    for (const owner of owners)
      await expect(objects.create(podFrom(owner), undefined, 'All')).resolves.toMatchObject({ kind: 'Pod' });
  });

  it('a baseline workspace is refused by a restricted namespace', async () => {
    const children = childrenOf({ workspaceTemplate: { spec: { securityProfile: 'baseline' } } });
    const sts = children.find((c) => c.kind === 'StatefulSet')!;
    const refusal = await objects.create(podFrom(sts), undefined, 'All').then(
      () => 'admitted',
      (e: unknown) => String((e as Error).message),
    );
    expect(refusal).toMatch(/violates PodSecurity/);
    expect(refusal).toMatch(/restricted/);
  });

  it('the CRDs accept upstream-style manifests that set every Stack and Program field', async () => {
    for (const file of ['stack-full.yaml', 'program-full.yaml']) {
      for (const doc of loadAll(readFileSync(join(__dirname, '..', 'schemas', 'testdata', file), 'utf8'))) {
        // A Stack (spec) or a Program (program), either way a custom object.
        type Custom = k8s.KubernetesObject & { spec?: Record<string, unknown>; program?: Record<string, unknown> };
        const given: Custom = { ...(doc as Custom), metadata: { ...(doc as Custom).metadata, namespace: NS } };
        const created: Custom = await objects.create(given, undefined, 'All');
        // Nothing pruned: a field the CRD did not know would be missing from what the server kept.
        if (given.spec) expect(created.spec).toMatchObject(given.spec);
        if (given.program) expect(created.program).toMatchObject(given.program);
      }
    }
  });

  it('the Program and Stack statuses are accepted', async () => {
    const program: Program = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: 'p', namespace: NS, generation: 1 },
      program: { outputs: { a: 'b' } },
    };
    const res = syncProgram({ object: program }, NOW, 'https://hooks.test');
    // The status the hooks compute fits the CRD's status schema (written with the status subresource).
    const created = await objects.create({ ...program, status: undefined } as k8s.KubernetesObject);
    await objects.replace({ ...created, status: res.status } as k8s.KubernetesObject, undefined, undefined, undefined);
    const stack = makeStack();
    const r = syncStack(syncRequest(stack), ctx());
    const s = await objects.create({
      apiVersion: stack.apiVersion,
      kind: stack.kind,
      spec: stack.spec,
      metadata: { name: stack.metadata.name, namespace: NS },
    });
    const withStatusObj = { ...s, status: { ...r.status, observedGeneration: 1 } } as k8s.KubernetesObject;
    const client = cp.kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    const written = (await client.replaceNamespacedCustomObjectStatus({
      group: 'pulumi.com',
      version: 'v1',
      namespace: NS,
      plural: 'stacks',
      name: 'my-stack',
      body: withStatusObj,
    })) as Stack;
    expect(written.status?.conditions).toEqual(r.status?.conditions);
    expect(written.status?.observedGeneration).toBe(1);
  });
});
