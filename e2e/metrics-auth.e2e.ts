/**
 * Issue 38, item 5: secured /metrics, as upstream serves its metrics. The hook server runs with
 * METRICS_AUTH on and the identity manifests/install.yaml gives it (ClusterRole
 * pulumi-operator:hooks, which may create TokenReviews and SubjectAccessReviews), behind
 * Metacontroller, against the test bed's API server and node. A ServiceAccount's token reads
 * /metrics only once the account is bound to install.yaml's pulumi-operator:metrics-reader; the
 * metrics it then reads count Metacontroller's calls of a Program's hook.
 * Run: npm run test:e2e -- e2e/metrics-auth.e2e.ts
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import type * as k8s from '@kubernetes/client-node';
import { defined, eventually, greetingProgram, type Operator } from './harness';
import { e2eSuite } from './suite';
import { REPO_ROOT } from './testbed/toolchain';

const ns = 'metrics-auth';
let op: Operator;
e2eSuite(
  'metrics-auth',
  ns,
  (started) => (op = started),
  () => ({ hookConfig: { metricsAuth: true } }),
);

/** A new ServiceAccount of the namespace and a token of it (TokenRequest, the API server's audience), as a pod gets one. */
async function serviceAccountToken(name: string): Promise<string> {
  await op.core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name } } });
  const { status } = await op.core.createNamespacedServiceAccountToken({
    name,
    namespace: ns,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  return defined(status?.token, 'the TokenRequest returns a token');
}

const scrape = (authorization: string | null) => op.hookRequest('/metrics', { authorization });

test("no token, a forged one, or Metacontroller's hook token: 401", async () => {
  for (const authorization of [null, 'Bearer forged-token', `Basic ${Buffer.from('a:b').toString('base64')}`]) {
    const res = await scrape(authorization);
    expect({ status: res.status, challenge: res.headers['www-authenticate'] }).toEqual({
      status: 401,
      challenge: 'Bearer realm="pulumi-mc-hooks metrics"',
    });
    expect(res.text).not.toContain('pulumi_hook_');
  }
  // The hook routes' token is the hooks' own secret, not a Kubernetes credential.
  expect((await op.hookRequest('/metrics')).status).toBe(401);
}, 60_000);

test('a ServiceAccount reads /metrics once bound to pulumi-operator:metrics-reader, and not before', async () => {
  await op.objects.create(greetingProgram('hello', ns, 'hello'));
  const token = await serviceAccountToken('scraper');
  const denied = await scrape(`Bearer ${token}`);
  expect({ status: denied.status, body: JSON.parse(denied.text) as unknown }).toEqual({
    status: 403,
    body: {
      error: 'Forbidden',
      message: `system:serviceaccount:${ns}:scraper may not get the non-resource URL /metrics (grant it with a ClusterRole)`,
    },
  });

  const install = loadAll(readFileSync(join(REPO_ROOT, 'manifests', 'install.yaml'), 'utf8')) as k8s.KubernetesObject[];
  const reader = defined(
    install.find((o) => o.kind === 'ClusterRole' && o.metadata?.name === 'pulumi-operator:metrics-reader'),
    'install.yaml has the ClusterRole pulumi-operator:metrics-reader',
  );
  await op.objects.create(reader);
  await op.objects.create({
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'metrics-auth-scraper' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'pulumi-operator:metrics-reader' },
    subjects: [{ kind: 'ServiceAccount', name: 'scraper', namespace: ns }],
  } as k8s.KubernetesObject);
  // The refusal is remembered for a few seconds (kube/token-review.ts); then the grant counts.
  const metrics = await eventually(
    'the bound ServiceAccount to read the metrics, with a program_sync call of Metacontroller counted',
    async () => {
      const res = await scrape(`Bearer ${token}`);
      const count = /^pulumi_hook_request_duration_seconds_count\{hook="program_sync"\} (\d+)$/m.exec(res.text);
      return res.status === 200 && count && Number(count[1]) > 0 ? res.text : undefined;
    },
  );
  expect(metrics).toContain('# TYPE pulumi_hook_request_duration_seconds histogram');

  // Another account of the namespace is still refused: the grant is the binding's, not the namespace's.
  expect((await scrape(`Bearer ${await serviceAccountToken('other')}`)).status).toBe(403);
}, 120_000);
