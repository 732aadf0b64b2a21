/**
 * A realistic Stack sync request for the benchmark: a Stack with envRefs, config, secretsRef, a
 * workspaceTemplate (image, resources, an extra volume and sidecar), in steady state (Ready) with a
 * StatefulSet, a Service and three finished Jobs observed — the request Metacontroller sends on
 * every resync and every child event.
 */
import { syncStack } from '../hooks/src/stack/sync';
import { applyChildren, jobFinishes, jobsOf, makeStack, noLookups, NOW, syncRequest, testConfig, withStatus, workspaceBecomesReady } from '../hooks/test/builders';
import type { KObject } from '../hooks/src/lib/k8s';

export function realisticSyncRequest(): { body: string; response: string } {
  let stack = makeStack({
    backend: 's3://example-pulumi-state',
    envRefs: {
      PULUMI_CONFIG_PASSPHRASE: { type: 'Secret', secret: { name: 'pulumi', key: 'passphrase' } },
      AWS_REGION: { type: 'Literal', literal: { value: 'us-west-2' } },
      AWS_ACCESS_KEY_ID: { type: 'Secret', secret: { name: 'aws', key: 'id' } },
      AWS_SECRET_ACCESS_KEY: { type: 'Secret', secret: { name: 'aws', key: 'secret' } },
    },
    config: { 'aws:region': 'us-west-2', 'app:replicas': 3, 'app:tags': { team: 'a', env: 'dev' }, 'app:domain': 'example.test', 'app:debug': false },
    secretsRef: { 'app:dbPassword': { type: 'Secret', secret: { name: 'db', key: 'password' } } },
    workspaceTemplate: {
      spec: {
        image: 'example.test/custom-agent:1',
        resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '2Gi' } },
        podTemplate: {
          spec: {
            volumes: [{ name: 'cache', emptyDir: {} }],
            containers: [{ name: 'pulumi', volumeMounts: [{ name: 'cache', mountPath: '/cache' }] }, { name: 'sidecar', image: 'busybox', command: ['sleep', 'infinity'] }],
          },
        },
      },
    },
  } as any);
  let cluster: KObject[] = [];
  // Three updates, each absorbed: the steady state has three finished Jobs.
  for (let i = 1; i <= 3; i++) {
    stack = { ...stack, metadata: { ...stack.metadata!, generation: i } };
    const r1 = syncStack(syncRequest(stack, cluster), { config: testConfig, now: NOW, lookups: noLookups });
    stack = withStatus(stack, r1);
    cluster = workspaceBecomesReady(applyChildren(cluster, r1.children));
    const r2 = syncStack(syncRequest(stack, cluster), { config: testConfig, now: NOW, lookups: noLookups });
    stack = withStatus(stack, r2);
    cluster = applyChildren(cluster, r2.children);
    // The update in flight (created by r1 once the workspace exists, else by r2).
    const running = r2.status.currentUpdate?.name;
    if (!running) throw new Error('benchmark request: no update started');
    cluster = jobFinishes(cluster, running, { state: 'succeeded', outputs: { url: 'https://example.test', password: '[secret]' } });
    const r3 = syncStack(syncRequest(stack, cluster), { config: testConfig, now: NOW, lookups: noLookups });
    stack = withStatus(stack, r3);
    cluster = applyChildren(cluster, r3.children);
  }
  const request = { controller: { apiVersion: 'metacontroller.k8s.io/v1alpha1', kind: 'CompositeController', metadata: { name: 'pulumi-stacks' } }, ...syncRequest(stack, cluster) };
  const response = syncStack(request, { config: testConfig, now: NOW, lookups: noLookups });
  const ready = response.status.conditions?.find((c) => c.type === 'Ready');
  if (ready?.status !== 'True' || jobsOf(response).length !== 3) throw new Error('benchmark request is not the steady state it claims to be');
  return { body: JSON.stringify(request), response: JSON.stringify(response) };
}
