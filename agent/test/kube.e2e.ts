/**
 * The agent against a real kube-apiserver (e2e/testbed/control-plane): `serve --auth-mode kube`
 * authenticates callers with TokenReview (audience-scoped tokens minted with TokenRequest) and
 * authorises them with SubjectAccessReview (`use workspaces/rpc`), reports its state in its
 * status ConfigMap; `update` writes its result on a real Job and the outputs Secret owned by it. Both
 * run as child processes with KUBECONFIGs of ServiceAccounts that have exactly the RBAC of
 * docs/agent.md.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import {
  Annotations,
  parseUpdateResult,
  parseWorkspaceStatus,
  Paths,
  WORKSPACE_STATUS_KEY,
  type OperationRequest,
  type WorkspaceStackSpec,
} from '../../contract';
import { startControlPlane, type ControlPlane } from '../../e2e/testbed/control-plane';
import { eventually } from '../../e2e/testbed/helpers';
import { versions } from '../../e2e/testbed/toolchain';
import { sleep } from '../src/lib/sleep';
import {
  capturedOutput,
  ensureBuilt,
  pulumiEnv,
  runAgent,
  startAgent,
  testResource,
  tmpDir,
  writeFiles,
  type RunResult,
} from './helpers';
import { startWorkspace, type RunningWorkspace } from './workspace';
import { getJson, operate } from './workspace-client';

const NS = 'agent-e2e';
const STACK = 'mystack'; // the Stack object's name (workspace name, SAR resource name)
const PULUMI_STACK = 'dev';
const AUDIENCE = `${STACK}.${NS}`;
const PASSWORD = 'kube-test-secret-value-3e9d';

let cp: ControlPlane;
let core: k8s.CoreV1Api;
let batch: k8s.BatchV1Api;
let root: string;
let ws: RunningWorkspace;
const tokens: Record<string, string> = {};
const kubeconfigs: Record<string, string> = {};

async function saToken(sa: string, audience: string): Promise<string> {
  const tr = await core.createNamespacedServiceAccountToken({
    name: sa,
    namespace: NS,
    body: {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { audiences: [audience], expirationSeconds: 3600 },
    },
  });
  return tr.status!.token;
}

/** A kubeconfig for a ServiceAccount: what the pod would get from its projected kube-api-access volume. */
async function saKubeconfig(sa: string): Promise<string> {
  const token = await saToken(sa, cp.apiAudiences[0]!);
  const file = path.join(root, `${sa}.kubeconfig`);
  fs.writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'c',
          cluster: { server: cp.server, 'certificate-authority-data': Buffer.from(cp.caData).toString('base64') },
        },
      ],
      users: [{ name: sa, user: { token } }],
      contexts: [{ name: sa, context: { cluster: 'c', user: sa, namespace: NS } }],
      'current-context': sa,
    }),
  );
  return file;
}

/**
 * What the hooks give the workspace of the Stack `stack` run as `account` (hooks/src/workspace):
 * its status ConfigMap, empty, and the Role that lets the account patch that ConfigMap and nothing else.
 */
async function workspaceStatusObjects(stack: string, account: string): Promise<void> {
  const rbac = cp.kubeConfig.makeApiClient(k8s.RbacAuthorizationV1Api);
  const name = `${stack}-workspace`;
  await core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: `${name}-status` } } });
  await rbac.createNamespacedRole({
    namespace: NS,
    body: {
      metadata: { name },
      rules: [{ apiGroups: [''], resources: ['configmaps'], resourceNames: [`${name}-status`], verbs: ['patch'] }],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: NS,
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name: account, namespace: NS }],
    },
  });
}

/** What the workspace of the Stack `stack` reported last: its status ConfigMap's value, raw. */
async function reportedText(stack: string): Promise<string | undefined> {
  const cm = await core.readNamespacedConfigMap({ name: `${stack}-workspace-status`, namespace: NS });
  return cm.data?.[WORKSPACE_STATUS_KEY];
}

async function createJob(name: string, type: string): Promise<k8s.V1Job> {
  return batch.createNamespacedJob({
    namespace: NS,
    body: {
      metadata: { name, labels: { 'pulumi.com/stack-name': STACK, 'auto.pulumi.com/update-type': type } },
      spec: {
        backoffLimit: 0,
        template: {
          spec: {
            restartPolicy: 'Never',
            containers: [{ name: 'update', image: 'agent', command: ['pko-agent', 'update'] }],
          },
        },
      },
    },
  });
}

function runnerEnv(job: string, op: OperationRequest, tokenFor: string): Record<string, string> {
  const tokenFile = path.join(root, Paths.token);
  fs.mkdirSync(path.dirname(tokenFile), { recursive: true });
  fs.writeFileSync(tokenFile, tokens[tokenFor]!);
  return pulumiEnv(root, {
    PKO_AGENT_ROOT: root,
    KUBECONFIG: kubeconfigs.runner,
    PULUMI_OPERATION: JSON.stringify(op),
    PULUMI_WORKSPACE_URL: ws.base,
    PULUMI_JOB_NAME: job,
    PULUMI_STACK_NAME: STACK,
    POD_NAMESPACE: NS,
    PKO_AGENT_WAIT_SECONDS: '60',
  });
}

async function jobResult(name: string) {
  const job = await batch.readNamespacedJob({ name, namespace: NS });
  return parseUpdateResult(job.metadata?.annotations?.[Annotations.updateResult]);
}

beforeAll(async () => {
  ensureBuilt();
  root = tmpDir('kube');
  cp = await startControlPlane();
  core = cp.kubeConfig.makeApiClient(k8s.CoreV1Api);
  batch = cp.kubeConfig.makeApiClient(k8s.BatchV1Api);
  const rbac = cp.kubeConfig.makeApiClient(k8s.RbacAuthorizationV1Api);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  for (const sa of ['workspace', 'runner', 'intruder'])
    await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name: sa } } });

  // docs/agent.md, "RBAC": the workspace's identity…
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: `${NS}-workspace-auth-delegator` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
      subjects: [{ kind: 'ServiceAccount', name: 'workspace', namespace: NS }],
    },
  });
  await workspaceStatusObjects(STACK, 'workspace');
  // …and the runner's.
  await rbac.createNamespacedRole({
    namespace: NS,
    body: {
      metadata: { name: `${STACK}-update` },
      rules: [
        { apiGroups: ['auto.pulumi.com'], resources: ['workspaces/rpc'], resourceNames: [STACK], verbs: ['use'] },
        { apiGroups: ['batch'], resources: ['jobs'], verbs: ['patch'] },
        { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
      ],
    },
  });
  await rbac.createNamespacedRoleBinding({
    namespace: NS,
    body: {
      metadata: { name: `${STACK}-update` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `${STACK}-update` },
      subjects: [{ kind: 'ServiceAccount', name: 'runner', namespace: NS }],
    },
  });
  await eventually(
    'ServiceAccounts',
    async () => (await core.readNamespacedServiceAccount({ name: 'intruder', namespace: NS })) && true,
  );
  kubeconfigs.workspace = await saKubeconfig('workspace');
  kubeconfigs.runner = await saKubeconfig('runner');
  tokens.runner = await saToken('runner', AUDIENCE);
  tokens.intruder = await saToken('intruder', AUDIENCE);
  tokens.wrongAudience = await saToken('runner', cp.apiAudiences[0]!);

  writeFiles(path.join(root, 'share', 'workspace'), {
    'Pulumi.yaml': [
      'name: kubeproj',
      'runtime: yaml',
      'config:',
      '  password:',
      '    type: string',
      'resources:',
      ...testResource('slow', 'Sleep', { seconds: 3, deleteSeconds: 8, message: 'made' }),
      // Deleted first (it depends on slow): a destroy interrupted while deleting it has more to do.
      ...testResource('after', 'Sleep', { seconds: 0, deleteSeconds: 8, message: '${slow.message}' }),
      'outputs:',
      '  plain: visible',
      '  secretOut: ${password}',
      '  "weird name/x": 42',
      '  made: ${slow.message}',
      '',
    ].join('\n'),
  });
  writeFiles(root, { 'var/run/secrets/stacks.pulumi.com/secrets/db/password': PASSWORD });
  const stack: WorkspaceStackSpec = {
    name: PULUMI_STACK,
    create: true,
    config: [
      { key: 'password', valueFrom: { path: '/var/run/secrets/stacks.pulumi.com/secrets/db/password' }, secret: true },
    ],
  };
  ws = await startWorkspace({
    root,
    authMode: 'kube',
    stack,
    env: pulumiEnv(root, {
      KUBECONFIG: kubeconfigs.workspace,
      POD_NAMESPACE: NS,
      PULUMI_STACK_NAME: STACK,
      PULUMI_WORKSPACE_STATUS_CONFIGMAP: `${STACK}-workspace-status`,
      PULUMI_WORKSPACE_AUDIENCE: AUDIENCE,
      PULUMI_WORKSPACE_HASH: 'hash-0123',
    }),
  });
}, 300_000);

afterAll(async () => {
  await ws?.proc.stop();
  await cp?.stop();
  const all = capturedOutput.join('\n');
  expect(all).not.toContain(PASSWORD);
  fs.rmSync(root, { recursive: true, force: true });
});

describe('serve --auth-mode kube', () => {
  it('reports its state in its status ConfigMap', async () => {
    const status = await eventually('the Ready workspace status', async () => {
      const st = parseWorkspaceStatus(await reportedText(STACK));
      return st?.state === 'Ready' ? st : undefined;
    });
    expect(status).toMatchObject({
      hash: 'hash-0123',
      state: 'Ready',
      projectInfo: { name: 'kubeproj', runtime: 'yaml' },
    });
    expect(status.pulumiVersion?.replace(/^v/, '')).toBe(versions.pulumi.replace(/^v/, ''));
  });

  it('lets in an authorised caller, and refuses unauthenticated (401) and forbidden (403) ones', async () => {
    expect((await getJson(ws.base, '/healthz')).status).toBe(200);
    const none = await getJson(ws.base, '/v1/workspace');
    expect(none).toMatchObject({ status: 401, body: { reason: 'Unauthenticated' } });
    expect((await getJson(ws.base, '/v1/workspace', 'not-a-token')).status).toBe(401);
    const audience = await getJson(ws.base, '/v1/workspace', tokens.wrongAudience);
    expect(audience.status).toBe(401);
    const intruder = await getJson(ws.base, '/v1/workspace', tokens.intruder);
    expect(intruder).toMatchObject({ status: 403, body: { reason: 'PermissionDenied' } });
    expect((intruder.body as { message: string }).message).toContain(
      `system:serviceaccount:${NS}:intruder may not use workspaces/rpc "${STACK}"`,
    );
    const forbiddenOp = await operate(ws.base, { type: 'up', stack: PULUMI_STACK }, { token: tokens.intruder });
    expect(forbiddenOp.status).toBe(403);
    const ok = await getJson(ws.base, '/v1/workspace', tokens.runner);
    expect(ok).toMatchObject({ status: 200, body: { state: 'Ready', stack: PULUMI_STACK } });
  });
});

describe('update (the Job runner)', () => {
  let upJob: k8s.V1Job;
  let run: RunResult;

  it('writes the result on its Job and the outputs in a Secret owned by the Job', async () => {
    upJob = await createJob('mystack-up-aaaa1111', 'up');
    run = await runAgent(
      ['update'],
      runnerEnv('mystack-up-aaaa1111', { type: 'up', stack: PULUMI_STACK, message: 'from the runner' }, 'runner'),
    );
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('[pko-agent] up of stack dev started');
    expect(run.stdout).toContain('+ agenttest:index:Sleep: (create)');
    expect(run.stdout).toContain('result written on Job agent-e2e/mystack-up-aaaa1111');

    const result = await jobResult('mystack-up-aaaa1111');
    expect(result).toMatchObject({
      state: 'succeeded',
      type: 'up',
      projectInfo: { name: 'kubeproj', runtime: 'yaml' },
      outputs: { made: 'made', plain: 'visible', secretOut: '[secret]', 'weird name/x': 42 },
      outputsSecret: 'mystack-up-aaaa1111-stack-outputs',
    });
    expect(result!.message).toMatch(/^up succeeded \(.*created/);
    expect(Date.parse(result!.startTime!)).toBeLessThanOrEqual(Date.parse(result!.endTime!));
    expect(result!.startTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);

    const secret = await core.readNamespacedSecret({ name: 'mystack-up-aaaa1111-stack-outputs', namespace: NS });
    expect(secret.immutable).toBe(true);
    expect(secret.metadata?.ownerReferences).toEqual([
      expect.objectContaining({
        apiVersion: 'batch/v1',
        kind: 'Job',
        name: 'mystack-up-aaaa1111',
        uid: upJob.metadata!.uid,
        controller: true,
      }),
    ]);
    expect(secret.metadata?.annotations?.[Annotations.secretOutputs]).toBe('["secretOut"]');
    const data = Object.fromEntries(
      Object.entries(secret.data ?? {}).map(([k, v]) => [
        k,
        JSON.parse(Buffer.from(v, 'base64').toString('utf8')) as unknown,
      ]),
    );
    expect(data).toEqual({ made: 'made', plain: 'visible', secretOut: PASSWORD, weird_name_x: 42 });
    const job = await batch.readNamespacedJob({ name: 'mystack-up-aaaa1111', namespace: NS });
    expect(job.metadata?.annotations?.[Annotations.updateResult]).not.toContain(PASSWORD);
  });

  it('reports UpdateConflict when the workspace is busy (409)', async () => {
    let started = false;
    const destroy = operate(
      ws.base,
      { type: 'destroy', stack: PULUMI_STACK },
      { token: tokens.runner, onLine: (l) => (started ||= l.kind === 'started') },
    );
    while (!started) await sleep(50);
    await createJob('mystack-preview-bbbb2222', 'preview');
    const r = await runAgent(
      ['update'],
      runnerEnv('mystack-preview-bbbb2222', { type: 'preview', stack: PULUMI_STACK }, 'runner'),
    );
    expect(r.code).toBe(1);
    expect(await jobResult('mystack-preview-bbbb2222')).toMatchObject({
      state: 'failed',
      type: 'preview',
      reason: 'UpdateConflict',
    });
    expect((await destroy).result).toMatchObject({ state: 'succeeded' });
  });

  it('on SIGTERM asks the workspace to interrupt Pulumi and writes an Aborted result', async () => {
    // The resource was destroyed by the previous test: create it again, so that there is a slow delete to interrupt.
    await createJob('mystack-up-cccc3333', 'up');
    expect(
      (await runAgent(['update'], runnerEnv('mystack-up-cccc3333', { type: 'up', stack: PULUMI_STACK }, 'runner')))
        .code,
    ).toBe(0);
    await createJob('mystack-destroy-dddd4444', 'destroy');
    const proc = startAgent(
      ['update'],
      runnerEnv('mystack-destroy-dddd4444', { type: 'destroy', stack: PULUMI_STACK }, 'runner'),
    );
    await proc.waitForOutput(/agenttest:index:Sleep after deleting/);
    proc.child.kill('SIGTERM');
    const exit = await proc.exited;
    expect(exit.code).toBe(1);
    expect(proc.output()).toContain('cancel request for op-');
    const result = await jobResult('mystack-destroy-dddd4444');
    expect(result).toMatchObject({ state: 'failed', type: 'destroy', reason: 'Aborted' });
    expect(result!.message).toContain('interrupted (cancelled by system:serviceaccount:agent-e2e:runner)');
    // Nothing is left running or locked: the next operation goes through.
    expect((await getJson(ws.base, '/v1/workspace', tokens.runner)).body).toMatchObject({ busy: false });
    await createJob('mystack-up-eeee5555', 'up');
    const again = await runAgent(
      ['update'],
      runnerEnv('mystack-up-eeee5555', { type: 'up', stack: PULUMI_STACK }, 'runner'),
    );
    expect(again.code).toBe(0);
    expect(await jobResult('mystack-up-eeee5555')).toMatchObject({ state: 'succeeded' });
  });

  it('refuses a runner whose identity may not use the workspace (403 → PermissionDenied)', async () => {
    await createJob('mystack-up-ffff6666', 'up');
    const r = await runAgent(
      ['update'],
      runnerEnv('mystack-up-ffff6666', { type: 'up', stack: PULUMI_STACK }, 'intruder'),
    );
    expect(r.code).toBe(1);
    expect(await jobResult('mystack-up-ffff6666')).toMatchObject({ state: 'failed', reason: 'PermissionDenied' });
  });
});

describe('fetch failures', () => {
  it("are reported in the workspace's status ConfigMap (Failed / SourceFetchFailed) with the cause", async () => {
    const r = await runAgent(
      ['fetch', 'git'],
      pulumiEnv(root, {
        PKO_AGENT_ROOT: path.join(root, 'fetch-pod'),
        KUBECONFIG: kubeconfigs.workspace,
        POD_NAMESPACE: NS,
        PULUMI_WORKSPACE_STATUS_CONFIGMAP: `${STACK}-workspace-status`,
        PULUMI_WORKSPACE_HASH: 'hash-fetch',
        GIT_URL: 'http://127.0.0.1:1/nowhere.git',
        GIT_REVISION: 'b'.repeat(40),
        GIT_PASSWORD: PASSWORD,
        GIT_USERNAME: 'someone',
      }),
    );
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('cannot reach the repository');
    const text = await reportedText(STACK);
    const st = parseWorkspaceStatus(text);
    expect(st).toMatchObject({ hash: 'hash-fetch', state: 'Failed', reason: 'SourceFetchFailed' });
    expect(st!.message).toMatch(/^fetch git: http:\/\/127\.0\.0\.1:1\/nowhere\.git: cannot reach the repository/);
    expect(text).not.toContain(PASSWORD);
  });
});

describe('serve --auth-mode kube, as a ServiceAccount without system:auth-delegator', () => {
  it('reports Failed / Unauthenticated in its status ConfigMap, and Ready once the binding is created', async () => {
    const name = 'lonely';
    const lonelyRoot = tmpDir('kube-lonely');
    const rbac = cp.kubeConfig.makeApiClient(k8s.RbacAuthorizationV1Api);
    await core.createNamespacedServiceAccount({ namespace: NS, body: { metadata: { name } } });
    // What the hooks grant every workspace (its own status ConfigMap), and nothing cluster-wide.
    await workspaceStatusObjects(name, name);
    const kubeconfig = await saKubeconfig(name);
    writeFiles(path.join(lonelyRoot, 'share', 'workspace'), { 'Pulumi.yaml': 'name: lonely\nruntime: yaml\n' });
    const lonely = await startWorkspace({
      root: lonelyRoot,
      authMode: 'kube',
      stack: { name: PULUMI_STACK, create: true, config: [] },
      waitReady: false,
      env: pulumiEnv(lonelyRoot, {
        KUBECONFIG: kubeconfig,
        POD_NAMESPACE: NS,
        PULUMI_STACK_NAME: name,
        PULUMI_WORKSPACE_STATUS_CONFIGMAP: `${name}-workspace-status`,
        PULUMI_WORKSPACE_AUDIENCE: `${name}.${NS}`,
        PULUMI_WORKSPACE_HASH: 'hash-lonely',
      }),
    });
    try {
      const reported = async () => parseWorkspaceStatus(await reportedText(name));
      const refused = await eventually('the Unauthenticated report', async () => {
        const st = await reported();
        return st?.state === 'Failed' ? st : undefined;
      });
      expect(refused).toMatchObject({ hash: 'hash-lonely', state: 'Failed', reason: 'Unauthenticated' });
      expect(refused.message).toContain(
        `its ServiceAccount (system:serviceaccount:${NS}:${name}) may not create tokenreviews.authentication.k8s.io ` +
          'or subjectaccessreviews.authorization.k8s.io, which the ClusterRole system:auth-delegator grants',
      );
      expect(await getJson(lonely.base, '/readyz')).toMatchObject({ status: 503, body: { reason: 'Unauthenticated' } });
      // A caller with a good token is refused too: the workspace cannot check it.
      const token = await saToken('runner', `${name}.${NS}`);
      expect(await getJson(lonely.base, '/v1/workspace', token)).toMatchObject({
        status: 401,
        body: { reason: 'Unauthenticated', message: 'unauthenticated: TokenReview API is unavailable' },
      });

      await rbac.createClusterRoleBinding({
        body: {
          metadata: { name: `${NS}-${name}-auth-delegator` },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
          subjects: [{ kind: 'ServiceAccount', name, namespace: NS }],
        },
      });
      // Checked again 30 s after the first refusal, then 60 s later: no restart.
      const ready = await eventually(
        'the Ready report after the binding',
        async () => {
          const st = await reported();
          return st?.state === 'Ready' ? st : undefined;
        },
        150_000,
      );
      expect(ready).toMatchObject({ hash: 'hash-lonely', state: 'Ready' });
      expect(lonely.proc.child.exitCode).toBeNull();
      expect(lonely.proc.output()).toContain("bind the ClusterRole system:auth-delegator to this pod's ServiceAccount");
      expect(lonely.proc.output()).not.toContain(token);
    } finally {
      await lonely.proc.stop();
      fs.rmSync(lonelyRoot, { recursive: true, force: true });
    }
  }, 240_000);
});
