/**
 * Issue 5, scenario 8: security, driven through the API server with the real agent and Pulumi CLI.
 * - Workspace and Job pods are admitted in a namespace enforcing the `restricted` Pod Security level
 *   (op.namespace labels it so), and run.
 * - The workspace server refuses callers without a valid token: no token, a malformed one, one for
 *   another audience (401), one whose account may not use the workspace (403); the Jobs' own kind of
 *   token is let in.
 * - A pod running as the namespace's `default` account, which a Stack that names no account runs
 *   as, may not patch that Stack's workspace StatefulSet or pod (403): only write its status
 *   ConfigMap; the workspace stays as it is, and Ready.
 * - A Stack referring to a Secret in another namespace is Stalled/SpecInvalid, naming the field.
 */
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import { request } from 'undici';
import type { Program } from '../schemas/generated/types';
import { Annotations, WORKSPACE_PORT } from '../contract';
import {
  AGENT_IMAGE,
  defined,
  e2eStackSpec,
  eventually,
  exists,
  type Operator,
  condition,
  workspaceReport,
} from './harness';
import { e2eSuite } from './suite';
import { IMAGE_REFS } from './testbed/images/refs';
import { podOf, runPod } from './testbed/pod-bed';

let op: Operator;
const ns = 'security';

const { recordTiming, getStack, readyStack } = e2eSuite('security', ns, (started) => (op = started));

const program = {
  apiVersion: 'pulumi.com/v1',
  kind: 'Program',
  metadata: { name: 'secure', namespace: ns },
  program: {
    resources: { stash: { type: 'pulumi:index:Stash', properties: { input: 'secure' } } },
    outputs: { value: '${stash.output}' },
  },
} as k8s.KubernetesObject;

/** The workspace server's address: its pod's IP, reachable from the test network, and the agent's port. */
async function workspaceAddress(stack: string): Promise<string> {
  const pod = await op.core.readNamespacedPod({ namespace: ns, name: `${stack}-workspace-0` });
  const ip = pod.status?.podIP;
  if (!ip) throw new Error(`the workspace of ${stack} has no IP yet`);
  return `${ip}:${WORKSPACE_PORT}`;
}

async function token(serviceAccount: string, audiences: string[]): Promise<string> {
  const res = await op.core.createNamespacedServiceAccountToken({
    name: serviceAccount,
    namespace: ns,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { audiences, expirationSeconds: 600 } },
  });
  return res.status!.token;
}

async function call(
  address: string,
  method: 'GET' | 'POST',
  path: string,
  authorization?: string,
): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (authorization !== undefined) headers.authorization = authorization;
  const res = await request(`http://${address}${path}`, {
    method,
    headers,
    ...(method === 'POST' ? { body: JSON.stringify({ type: 'up', stack: 'dev', message: 'not allowed' }) } : {}),
  });
  const text = await res.body.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.statusCode, body };
}

describe('security', () => {
  it('admits and runs the workspace and Job pods under the restricted Pod Security level', async () => {
    const started = Date.now();
    const namespace = await op.core.readNamespace({ name: ns });
    expect(namespace.metadata?.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    // The level is enforced: a pod that breaks it is refused.
    const refused = await op.core
      .createNamespacedPod({
        namespace: ns,
        body: {
          metadata: { name: 'privileged' },
          spec: { containers: [{ name: 'c', image: 'example.test/c', securityContext: { privileged: true } }] },
        },
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(refused).toBeInstanceOf(k8s.ApiException);
    expect((refused as k8s.ApiException<string>).code).toBe(403);
    expect((JSON.parse((refused as k8s.ApiException<string>).body) as { message?: string }).message).toContain(
      'violates PodSecurity "restricted',
    );

    await op.objects.create(program);
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'secure', namespace: ns },
      spec: e2eStackSpec({ stack: 'dev', programRef: { name: 'secure' } }),
    } as k8s.KubernetesObject);
    const stack = await readyStack('secure');
    recordTiming('restricted namespace: apply to Ready', started);
    expect(stack.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });

    const ws = await op.core.readNamespacedPod({ namespace: ns, name: 'secure-workspace-0' });
    expect(ws.status?.phase).toBe('Running');
    // The agent image built from our Dockerfile bootstrapped the pod; the workspace runs in the
    // default workspace image (the stand-in of pulumi/pulumi:<version>-nonroot), on the node's containerd.
    const bootstrap = ws.status?.initContainerStatuses?.find((c) => c.name === 'bootstrap');
    expect(bootstrap?.image).toBe(AGENT_IMAGE);
    const pulumi = ws.status?.containerStatuses?.find((c) => c.name === 'pulumi');
    expect(pulumi?.image).toBe(IMAGE_REFS.pulumiNonroot);
    const containerId = defined(pulumi?.containerID, 'containerID').replace('containerd://', '');
    expect(await op.node.crictl('ps', '--quiet', '--id', containerId)).toContain(containerId);
    expect(ws.spec?.securityContext).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    for (const c of [...(ws.spec?.initContainers ?? []), ...(ws.spec?.containers ?? [])]) {
      expect(c.securityContext).toMatchObject({ allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } });
    }
    // The Job's result reaches the Stack before kubelet has reported its pod's end: wait for that.
    const jobPods = await eventually(
      'the update pod to have succeeded',
      async () => {
        const pods = await op.core.listNamespacedPod({
          namespace: ns,
          labelSelector: `job-name=${stack.status?.lastUpdate?.name}`,
        });
        return pods.items.every((p) => p.status?.phase !== 'Running' && p.status?.phase !== 'Pending')
          ? pods
          : undefined;
      },
      60_000,
      500,
    );
    expect(jobPods.items.map((p) => p.status?.phase)).toEqual(['Succeeded']);
    expect(jobPods.items[0]!.spec?.securityContext).toMatchObject({
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
    });
  });

  it('the workspace refuses callers without a valid token', async () => {
    const started = Date.now();
    const address = await eventually('the workspace address', () => workspaceAddress('secure'), 30_000);
    // The right server: health needs no token.
    expect((await call(address, 'GET', '/healthz')).status).toBe(200);

    const anonymous = await call(address, 'GET', '/v1/workspace');
    expect(anonymous).toMatchObject({ status: 401, body: { reason: 'Unauthenticated' } });
    expect((await call(address, 'POST', '/v1/operations')).status).toBe(401);
    expect((await call(address, 'GET', '/v1/workspace', 'Bearer not-a-token')).status).toBe(401);
    expect((await call(address, 'POST', '/v1/operations', 'Basic dXNlcjpwYXNz')).status).toBe(401);

    // A genuine token of an update Job's account (each Update has its own), but for the API
    // server's audience, not the workspace's.
    const updateAccount = defined((await getStack('secure')).status?.lastUpdate?.name, 'the last Update');
    const wrongAudience = await call(address, 'GET', '/v1/workspace', `Bearer ${await token(updateAccount, [])}`);
    expect(wrongAudience).toMatchObject({ status: 401, body: { reason: 'Unauthenticated' } });
    // The workspace's audience, but an account that may not use it.
    const audience = 'secure.security';
    const forbidden = await call(address, 'POST', '/v1/operations', `Bearer ${await token('default', [audience])}`);
    expect(forbidden).toMatchObject({ status: 403, body: { reason: 'PermissionDenied' } });
    // Nor the Stack's own account, which the user's program runs as: it cannot drive the workspace.
    const program = await call(address, 'POST', '/v1/operations', `Bearer ${await token('pulumi', [audience])}`);
    expect(program).toMatchObject({ status: 403, body: { reason: 'PermissionDenied' } });
    // What a Job presents (its Update's account, the workspace's audience) is let in.
    const allowed = await call(address, 'GET', '/v1/workspace', `Bearer ${await token(updateAccount, [audience])}`);
    expect(allowed).toMatchObject({ status: 200, body: { stack: 'dev', busy: false } });
    recordTiming('workspace token checks', started);
  });

  it("a pod running as the namespace's default account, which a Stack runs as, cannot rewrite its workspace (403)", async () => {
    const started = Date.now();
    // A Stack that names no ServiceAccount runs as `default`, like every pod that names none: grant it
    // what a workspace's account needs (manifests/stack-rbac.yaml, for this account).
    await op.objects.create({
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: `pulumi-operator:auth-delegator:${ns}:default` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: ns }],
    } as k8s.KubernetesObject);
    const spec = e2eStackSpec({ stack: 'default-account', programRef: { name: 'secure' } });
    delete spec.serviceAccountName;
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'as-default', namespace: ns },
      spec,
    } as k8s.KubernetesObject);
    await readyStack('as-default');
    const sts = await op.apps.readNamespacedStatefulSet({ namespace: ns, name: 'as-default-workspace' });
    const template = defined(sts.spec?.template, 'the workspace pod template');
    expect(template.spec?.serviceAccountName).toBe('default');
    const hash = template.metadata?.annotations?.[Annotations.workspaceHash];
    expect(await workspaceReport(op, ns, 'as-default')).toMatchObject({ hash, state: 'Ready' });

    // Any pod of the namespace that names no account has the workspace's identity. What it tries,
    // with the token Kubernetes mounts for it, and how the API server answers.
    const statefulSet = `/apis/apps/v1/namespaces/${ns}/statefulsets/as-default-workspace`;
    const statusConfigMap = `/api/v1/namespaces/${ns}/configmaps/as-default-workspace-status`;
    const forged = JSON.stringify({ hash, state: 'Failed', reason: 'Forged' });
    const attempts = [
      {
        what: 'patch the workspace StatefulSet',
        method: 'PATCH',
        path: statefulSet,
        body: { spec: { template: { spec: { serviceAccountName: 'pulumi' } } } },
      },
      {
        what: 'annotate the workspace StatefulSet',
        method: 'PATCH',
        path: statefulSet,
        body: { metadata: { annotations: { [Annotations.workspaceStatus]: forged } } },
      },
      {
        what: 'patch the workspace pod',
        method: 'PATCH',
        path: `/api/v1/namespaces/${ns}/pods/as-default-workspace-0`,
        body: { metadata: { labels: { taken: 'over' } } },
      },
      { what: 'read the status ConfigMap', method: 'GET', path: statusConfigMap },
      { what: 'write the status ConfigMap', method: 'PATCH', path: statusConfigMap, body: { data: { intruder: 'x' } } },
    ];
    const script = [
      "const fs = require('fs');",
      "const https = require('https');",
      "const dir = '/var/run/secrets/kubernetes.io/serviceaccount';",
      "const token = fs.readFileSync(`${dir}/token`, 'utf8');",
      'const ca = fs.readFileSync(`${dir}/ca.crt`);',
      'const call = (a) => new Promise((resolve) => {',
      '  const headers = { authorization: `Bearer ${token}`, "content-type": "application/merge-patch+json" };',
      '  const req = https.request({ host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT, ca, method: a.method, path: a.path, headers }, (res) => { res.resume(); res.on("end", () => resolve(res.statusCode)); });',
      '  req.on("error", (e) => resolve(String(e)));',
      '  req.end(a.body === undefined ? undefined : JSON.stringify(a.body));',
      '});',
      '(async () => { for (const a of JSON.parse(process.env.ATTEMPTS)) console.log(JSON.stringify({ what: a.what, status: await call(a) })); })();',
    ].join('\n');
    const intruder = podOf(ns, 'intruder', AGENT_IMAGE, {
      command: ['node', '-e', script],
      env: [{ name: 'ATTEMPTS', value: JSON.stringify(attempts) }],
    });
    const { phase, log } = await runPod({ core: op.core, ns }, intruder);
    expect(phase).toBe('Succeeded');
    const answers = log
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { what: string; status: number });
    expect(answers).toEqual([
      { what: 'patch the workspace StatefulSet', status: 403 },
      { what: 'annotate the workspace StatefulSet', status: 403 },
      { what: 'patch the workspace pod', status: 403 },
      { what: 'read the status ConfigMap', status: 403 },
      // The one write the account has: the workspace's report, and it is its own.
      { what: 'write the status ConfigMap', status: 200 },
    ]);

    // The workspace is as it was, and still Ready.
    const after = await op.apps.readNamespacedStatefulSet({ namespace: ns, name: 'as-default-workspace' });
    expect(after.metadata?.generation).toBe(sts.metadata?.generation);
    expect(after.spec?.template.spec?.serviceAccountName).toBe('default');
    expect(after.metadata?.annotations?.[Annotations.workspaceStatus]).toBeUndefined();
    expect(await workspaceReport(op, ns, 'as-default')).toMatchObject({ hash, state: 'Ready' });
    expect(condition(await getStack('as-default'), 'Ready')).toMatchObject({ status: 'True' });
    recordTiming('the default account refused its workspace', started);
  });

  it('a Stack referring to a Secret in another namespace is Stalled/SpecInvalid', async () => {
    const started = Date.now();
    await op.objects.create({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'elsewhere' },
    });
    await op.objects.create({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'creds', namespace: 'elsewhere' },
      stringData: { token: 't0p-s3cret' },
    } as k8s.KubernetesObject);
    const elsewhere = { type: 'Secret', secret: { namespace: 'elsewhere', name: 'creds', key: 'token' } };
    const cases: [string, Record<string, unknown>, string][] = [
      [
        'cross-env',
        {
          envRefs: {
            PULUMI_CONFIG_PASSPHRASE: { type: 'Literal', literal: { value: 'e2e-passphrase' } },
            API_TOKEN: elsewhere,
          },
        },
        'spec.envRefs.API_TOKEN',
      ],
      ['cross-secret', { secretsRef: { apiToken: elsewhere } }, 'spec.secretsRef.apiToken'],
    ];
    for (const [name, spec] of cases) {
      await op.objects.create({
        apiVersion: 'pulumi.com/v1',
        kind: 'Stack',
        metadata: { name, namespace: ns },
        spec: e2eStackSpec({ stack: 'dev', programRef: { name: 'secure' }, ...spec }),
      } as k8s.KubernetesObject);
    }
    for (const [name, , field] of cases) {
      const stalled = await eventually(
        `Stack ${name} to be Stalled`,
        async () => {
          const s = await getStack(name);
          return condition(s, 'Stalled')?.status === 'True' ? s : undefined;
        },
        120_000,
      );
      const c = condition(stalled, 'Stalled');
      expect(c?.reason).toBe('SpecInvalid');
      expect(c?.message).toContain(field);
      expect(c?.message).toContain('elsewhere/creds');
      expect(condition(stalled, 'Ready')).toMatchObject({ status: 'False' });
      expect(stalled.status?.lastUpdate).toBeUndefined();
      // Nothing runs for it: no workspace, no Job, and the Secret's value is nowhere in its status.
      expect(await exists(() => op.apps.readNamespacedStatefulSet({ namespace: ns, name: `${name}-workspace` }))).toBe(
        false,
      );
      expect(
        (await op.batch.listNamespacedJob({ namespace: ns, labelSelector: `pulumi.com/stack-name=${name}` })).items,
      ).toEqual([]);
      expect(JSON.stringify(stalled.status)).not.toContain('t0p-s3cret');
    }
    recordTiming('cross-namespace Secret refused', started);
  });

  it('a Stack and a Program nested deeper than 100 levels are Stalled/SpecInvalid, not a failing hook', async () => {
    const started = Date.now();
    // Free-form fields (config values, Program variables) keep whatever JSON the API server decodes.
    const nested = (depth: number): unknown => {
      let value: unknown = 'x';
      for (let i = 0; i < depth; i++) value = [value];
      return value;
    };
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'deep', namespace: ns },
      spec: e2eStackSpec({ stack: 'dev', programRef: { name: 'secure' }, config: { deep: nested(DEEP) } }),
    } as k8s.KubernetesObject);
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: 'deep-program', namespace: ns },
      program: { variables: { deep: nested(DEEP) }, outputs: { value: 'x' } },
    } as k8s.KubernetesObject);
    const stack = await eventually(
      'Stack deep to be Stalled',
      async () => {
        const s = await getStack('deep');
        return condition(s, 'Stalled')?.status === 'True' ? s : undefined;
      },
      120_000,
    );
    expect(condition(stack, 'Stalled')).toMatchObject({
      reason: 'SpecInvalid',
      message: expect.stringMatching(
        /^spec\.config\.deep\[0\]\[0\]\[0\]\[0\]\[0\]… is nested more than 100 levels deep/,
      ),
    });
    expect(await exists(() => op.apps.readNamespacedStatefulSet({ namespace: ns, name: 'deep-workspace' }))).toBe(
      false,
    );
    const program = await eventually(
      'Program deep-program to be Stalled',
      async () => {
        const p = (await op.custom.getNamespacedCustomObject({
          group: 'pulumi.com',
          version: 'v1',
          plural: 'programs',
          namespace: ns,
          name: 'deep-program',
        })) as Program;
        return condition(p, 'Stalled')?.status === 'True' ? p : undefined;
      },
      120_000,
    );
    expect(condition(program, 'Stalled')).toMatchObject({
      reason: 'SpecInvalid',
      message: expect.stringMatching(
        /^program\.variables\.deep\[0\]\[0\]\[0\]\[0\]\[0\]… is nested more than 100 levels deep/,
      ),
    });
    expect(program.status?.artifact).toBeUndefined();
    recordTiming('deeply nested Stack and Program refused', started);
  });
});

/**
 * Far past the hooks' limit, and as deep as this test can send: Node's JSON.stringify (the client's,
 * the driver's) overflows near 5,000 levels, while the API server decodes up to 10,000. The unit
 * tests (hooks/test/stack-invalid.test.ts) take the hooks to 10,000.
 */
const DEEP = 3_000;
