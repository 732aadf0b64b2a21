/**
 * Issue 5, scenario 1 and the lifecycle around it, the way users do it: `kubectl apply` a Program
 * and a Stack, watch the Stack become Ready, read its outputs and columns, edit the Program, force
 * a run, delete the Stack. Everything goes through the API server; the hooks run behind
 * Metacontroller and the agent runs in the workspace and Job pods with the real Pulumi CLI.
 * Issue 20's limits too: outputs over a result's 64 KiB, `ttlAfterCompleted: 0s`; and issue 38's
 * Programs served by the hook server: one of about 1 MiB, and a download whose digest is not the
 * expected one, refused.
 */
import * as k8s from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { MAX_OUTPUTS_ANNOTATION_BYTES } from '../contract';
import type { Program } from '../schemas/generated/types';
import { defined, e2eStackSpec, eventually, exists, condition, type Operator, greetingProgram } from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const getStack = (ns: string, name: string) => op.getStack(ns, name);
const readyStack = (...args: Parameters<Operator['readyStack']>) => op.readyStack(...args);

const { timings } = e2eSuite('program-stack', undefined, (started) => (op = started));

const program = (ns: string, greeting: string) => greetingProgram('hello', ns, greeting);

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

  it('was synced by Metacontroller over HTTPS with its token; a call without the token is refused', async () => {
    const unauthorized = async () => {
      const m = /^pulumi_hook_errors_total\{hook="stack_sync",reason="unauthorized"\} (\d+)$/m.exec(
        (await op.hookRequest('/metrics')).text,
      );
      return m ? Number(m[1]) : 0;
    };
    const syncs = /^pulumi_hook_request_duration_seconds_count\{hook="stack_sync"\} (\d+)$/m.exec(
      (await op.hookRequest('/metrics')).text,
    );
    // Metacontroller's calls made the Stack Ready above, and none was refused.
    expect(Number(syncs?.[1] ?? 0)).toBeGreaterThan(0);
    expect(await unauthorized()).toBe(0);
    // A caller of the hooks that is not Metacontroller: a request naming the Stack, forged.
    const forged = { controller: {}, parent: await getStack(ns, 'hello'), children: {}, related: {} };
    for (const authorization of [null, 'Bearer not-the-token', `Basic ${Buffer.from('a:b').toString('base64')}`]) {
      const res = await op.hookRequest('/stack/sync', { body: forged, authorization });
      expect({ authorization, status: res.status }).toEqual({ authorization, status: 401 });
      expect(res.headers['www-authenticate']).toBe('Bearer realm="pulumi-mc-hooks"');
    }
    expect(await unauthorized()).toBe(3);
    // Plain HTTP on the hook port gets no answer at all: it is a TLS port.
    await expect(request(`http://127.0.0.1:${op.hooksPort}/healthz`)).rejects.toThrow();
    // And the Stack is still Ready, its status untouched by the refused calls.
    expect(condition(await getStack(ns, 'hello'), 'Ready')?.status).toBe('True');
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

  const patch = (plural: 'stacks' | 'programs', body: object) =>
    op.custom.patchNamespacedCustomObject(
      { group: 'pulumi.com', version: 'v1', namespace: ns, plural, name: 'hello', body },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
  const huge = 'z'.repeat(70 * 1024);

  it('shows the outputs that fit when they exceed a result, says so, and keeps them all in the Secret', async () => {
    const before = await getStack(ns, 'hello');
    await patch('programs', { program: { outputs: { huge } } });
    const after = await readyStack(ns, 'hello', (s) => s.status?.lastUpdate?.name !== before.status?.lastUpdate?.name);
    // "huge" alone is over the budget: the other two are shown, the secret one still masked.
    expect(after.status?.outputs).toEqual({ greeting: 'bonjour', secretWord: '[secret]' });
    const job = defined(after.status?.lastUpdate?.name, 'lastUpdate.name');
    const truncated = condition(after, 'OutputsTruncated');
    expect(truncated).toMatchObject({ status: 'True', reason: 'OutputsTooLarge' });
    expect(truncated?.message).toContain("status.outputs holds 2 of the stack's 3 outputs");
    expect(truncated?.message).toContain(`Secret ${job}-stack-outputs`);
    const annotation = defined(
      (await op.batch.readNamespacedJob({ namespace: ns, name: job })).metadata?.annotations?.[
        'pulumi.com/update-result'
      ],
      'the result annotation',
    );
    expect(Buffer.byteLength(annotation)).toBeLessThanOrEqual(MAX_OUTPUTS_ANNOTATION_BYTES);
    expect(annotation).not.toContain('swordfish');
    const secret = await op.core.readNamespacedSecret({ namespace: ns, name: `${job}-stack-outputs` });
    const data = secret.data ?? {};
    expect(Object.keys(data).sort()).toEqual(['greeting', 'huge', 'secretWord']);
    expect(JSON.parse(Buffer.from(defined(data.huge, 'huge'), 'base64').toString())).toBe(huge);
  });

  it('keeps the result of a Job deleted as soon as it is absorbed (ttlAfterCompleted: 0s)', async () => {
    const before = await getStack(ns, 'hello');
    await patch('stacks', { spec: { updateTemplate: { spec: { ttlAfterCompleted: '0s' } } } });
    const after = await readyStack(ns, 'hello', (s) => s.status?.lastUpdate?.name !== before.status?.lastUpdate?.name);
    expect(after.status?.lastUpdate).toMatchObject({
      type: 'up',
      state: 'succeeded',
      generation: after.metadata.generation,
    });
    const job = defined(after.status?.lastUpdate?.name, 'lastUpdate.name');
    await eventually(
      `Job ${job} and its outputs Secret to be deleted`,
      async () =>
        !(await exists(() => op.batch.readNamespacedJob({ namespace: ns, name: job }))) &&
        !(await exists(() => op.core.readNamespacedSecret({ namespace: ns, name: `${job}-stack-outputs` }))),
      60_000,
      500,
    );
    const later = await getStack(ns, 'hello');
    expect(later.status?.lastUpdate).toEqual(after.status?.lastUpdate);
    expect(later.status?.outputs).toEqual({ greeting: 'bonjour', secretWord: '[secret]' });
    expect(condition(later, 'Ready')?.status).toBe('True');
  });

  it('shows all outputs again, and drops the condition, once they fit', async () => {
    const before = await getStack(ns, 'hello');
    await patch('programs', { program: { outputs: { huge: null, small: 'fits' } } });
    const after = await readyStack(ns, 'hello', (s) => s.status?.lastUpdate?.name !== before.status?.lastUpdate?.name);
    expect(after.status?.outputs).toEqual({ greeting: 'bonjour', secretWord: '[secret]', small: 'fits' });
    expect(condition(after, 'OutputsTruncated')).toBeUndefined();
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

describe('a Program of about 1 MiB, served by the hook server', () => {
  const ns = 'program-size';
  /** A Program whose one variable is `text` and whose output is its length. */
  const sized = (name: string, text: string): Program => ({
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name, namespace: ns },
    program: { variables: { blob: text }, outputs: { size: 'counted' } },
  });
  const getProgram = async (name: string) =>
    (await op.custom.getNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1',
      namespace: ns,
      plural: 'programs',
      name,
    })) as Program;

  it('reaches Ready, and so does its Stack: no ConfigMap and no 256 KiB cap', async () => {
    await op.namespace(ns);
    // Four times what the ConfigMap of earlier releases could carry; plain characters, since the
    // API server stores `<` as `\u003c` and etcd takes at most 1.5 MiB per object.
    await op.objects.create(sized('large', 'abc'.repeat(350_000)) as k8s.KubernetesObject);
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'large', namespace: ns },
      spec: e2eStackSpec({ stack: 'dev', programRef: { name: 'large' } }),
    } as k8s.KubernetesObject);
    const program = await eventually('the Program to be Ready', async () => {
      const p = await getProgram('large');
      return condition(p, 'Ready')?.status === 'True' ? p : undefined;
    });
    expect(program.status?.artifact?.size).toBeGreaterThan(1024 * 1024);
    expect(program.status?.artifact?.url).toBe(`${op.programServer.url}/programs/${ns}/large`);
    const stack = await readyStack(ns, 'large');
    expect(stack.status?.outputs).toEqual({ size: 'counted' });
    expect(await exists(() => op.core.readNamespacedConfigMap({ namespace: ns, name: 'large-program' }))).toBe(false);
  });

  it('is refused by the workspace when the answer is not the digest the Stack handed over', async () => {
    // A Workspace of the namespace that downloads the Program, as a Stack's does, but expecting
    // other content: what a tampered answer looks like to the fetch container.
    const url = `${op.programServer.url}/programs/${ns}/large`;
    const forged = `sha256:${'0'.repeat(64)}`;
    await op.objects.create({
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Workspace',
      metadata: { name: 'tampered', namespace: ns },
      spec: { flux: { url, digest: forged }, stacks: [{ name: 'dev' }] },
    } as k8s.KubernetesObject);
    const failed = await eventually(
      'the Workspace to report the refused download',
      async () => {
        const ws = (await op.custom.getNamespacedCustomObject({
          group: 'auto.pulumi.com',
          version: 'v1alpha1',
          namespace: ns,
          plural: 'workspaces',
          name: 'tampered',
        })) as { status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] } };
        const ready = ws.status?.conditions?.find((c) => c.type === 'Ready');
        return ready?.status === 'False' && ready.message?.includes('digest mismatch') ? ready : undefined;
      },
      180_000,
      1000,
    );
    expect(failed.message).toContain(`want sha256:${'0'.repeat(64)}`);
    expect(failed.message).toContain('tampered with');
    // Nothing of it reached the workspace container: the pod never got past its init containers.
    const pod = await op.core.readNamespacedPod({ namespace: ns, name: 'tampered-workspace-0' });
    expect(pod.status?.containerStatuses?.find((c) => c.name === 'pulumi')?.state?.running).toBeUndefined();
  });
});
