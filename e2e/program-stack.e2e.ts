/**
 * Issue 5, scenario 1 and the lifecycle around it, the way users do it: `kubectl apply` a Program
 * and a Stack, watch the Stack become Ready, read its outputs and columns, edit the Program, force
 * a run, delete the Stack. Everything goes through the API server; the hooks run behind
 * Metacontroller and the agent runs in the workspace and Job pods with the real Pulumi CLI.
 */
import * as k8s from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { defined, e2eStackSpec, eventually, type Operator } from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const getStack = (ns: string, name: string) => op.getStack(ns, name);
const readyStack = (...args: Parameters<Operator['readyStack']>) => op.readyStack(...args);

const { timings } = e2eSuite('program-stack', undefined, (started) => (op = started));

function program(ns: string, greeting: string) {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name: 'hello', namespace: ns },
    program: {
      configuration: { secretWord: { type: 'String', default: 'swordfish' } },
      variables: { greeting },
      outputs: { greeting: '${greeting}', secretWord: { 'fn::secret': '${secretWord}' } },
    },
  } as k8s.KubernetesObject;
}

describe('a Program Stack', () => {
  const ns = 'program-stack';

  it('becomes Ready with its outputs, secret values masked', async () => {
    await op.namespace(ns);
    const started = Date.now();
    await op.objects.create(program(ns, 'hello'));
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'hello', namespace: ns },
      spec: e2eStackSpec({ stack: 'dev', programRef: { name: 'hello' }, destroyOnFinalize: true }),
    } as k8s.KubernetesObject);
    const stack = await readyStack(ns, 'hello');
    timings['apply to Ready'] = Date.now() - started;
    expect(stack.status?.lastUpdate).toMatchObject({
      type: 'up',
      state: 'succeeded',
      lastSuccessfulCommit: '1',
      failures: 0,
    });
    expect(stack.status?.outputs).toEqual({ greeting: 'hello', secretWord: '[secret]' });
    expect(stack.status?.projectInfo).toEqual({ name: 'hello', runtime: 'yaml' });
    // The workspace is named as upstream's.
    const pod = await op.core.readNamespacedPod({ namespace: ns, name: 'hello-workspace-0' });
    expect(pod.status?.phase).toBe('Running');
    // The secret value reached no annotation, status or log of ours.
    const job = await op.batch.readNamespacedJob({
      namespace: ns,
      name: defined(stack.status?.lastUpdate?.name, 'lastUpdate.name'),
    });
    expect(JSON.stringify(job.metadata?.annotations)).not.toContain('swordfish');
    expect(JSON.stringify(stack.status)).not.toContain('swordfish');
    const pods = await op.core.listNamespacedPod({ namespace: ns, labelSelector: `job-name=${job.metadata!.name}` });
    expect(pods.items.length).toBeGreaterThan(0);
    for (const p of pods.items) expect(await op.logs(ns, p.metadata!.name!, 'update')).not.toContain('swordfish');
    expect(await op.logs(ns, 'hello-workspace-0', 'pulumi')).not.toContain('swordfish');
  });

  it('shows upstream printer columns', async () => {
    // What `kubectl get stacks` asks for: the Table rendering of the CRD's printer columns.
    const res = await request(`${op.cp.server}/apis/pulumi.com/v1/namespaces/${ns}/stacks/hello`, {
      headers: { authorization: `Bearer ${op.cp.adminToken}`, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' },
      dispatcher: new Agent({ connect: { ca: op.cp.caData } }),
    });
    // meta.k8s.io/v1 Table, reduced to what is checked.
    const table = (await res.body.json()) as { columnDefinitions: { name: string }[]; rows: { cells: unknown[] }[] };
    expect(table.columnDefinitions.map((c) => c.name)).toEqual([
      'Name',
      'Stack',
      'Last Update',
      'Age',
      'Last Commit',
      'Ready',
      'Reconciling',
      'Stalled',
      'Permalink',
    ]);
    const row = defined(table.rows[0], 'the row of Stack hello').cells;
    expect([row[0], row[1], row[2], row[5]]).toEqual(['hello', 'dev', 'succeeded', 'True']);
  });

  it('runs a new update when the Program is edited', async () => {
    const before = await getStack(ns, 'hello');
    await op.custom.patchNamespacedCustomObject(
      {
        group: 'pulumi.com',
        version: 'v1',
        namespace: ns,
        plural: 'programs',
        name: 'hello',
        body: { program: { variables: { greeting: 'bonjour' } } },
      },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    const after = await readyStack(ns, 'hello', (s) => s.status?.lastUpdate?.name !== before.status?.lastUpdate?.name);
    expect(after.status?.outputs?.greeting).toBe('bonjour');
    expect(after.status?.lastUpdate?.lastSuccessfulCommit).toBe('2');
  });

  it('runs again on a reconciliation request', async () => {
    const before = await getStack(ns, 'hello');
    await op.custom.patchNamespacedCustomObject(
      {
        group: 'pulumi.com',
        version: 'v1',
        namespace: ns,
        plural: 'stacks',
        name: 'hello',
        body: { metadata: { annotations: { 'pulumi.com/reconciliation-request': 'please' } } },
      },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    const after = await readyStack(ns, 'hello', (s) => s.status?.lastUpdate?.reconcileRequest === 'please');
    expect(after.status?.lastUpdate?.name).not.toBe(before.status?.lastUpdate?.name);
    expect(after.status?.observedReconcileRequest).toBe('please');
  });

  it('is destroyed and removed on delete with destroyOnFinalize', async () => {
    const started = Date.now();
    await op.custom.deleteNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1',
      namespace: ns,
      plural: 'stacks',
      name: 'hello',
    });
    await eventually(
      'the Stack to be gone',
      async () => {
        try {
          await getStack(ns, 'hello');
          return false;
        } catch (e) {
          return e instanceof k8s.ApiException && e.code === 404;
        }
      },
      240_000,
      500,
    );
    timings['delete with destroy'] = Date.now() - started;
  });
});
