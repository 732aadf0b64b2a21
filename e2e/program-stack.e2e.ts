/**
 * Issue 5, scenario 1 and the lifecycle around it, the way users do it: `kubectl apply` a Program
 * and a Stack, watch the Stack become Ready, read its outputs and columns, edit the Program, force
 * a run, delete the Stack. Everything goes through the API server; the hooks run behind
 * Metacontroller and the agent runs in the workspace and Job pods with the real Pulumi CLI.
 * Issue 20's limits too: outputs over a result's 64 KiB, `ttlAfterCompleted: 0s`, and Programs
 * around the size the API server accepts for their ConfigMap.
 */
import * as k8s from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { MAX_OUTPUTS_ANNOTATION_BYTES } from '../contract';
import { syncProgram } from '../hooks/src/program/sync';
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

describe('a Program larger than its ConfigMap may carry', () => {
  const ns = 'program-size';
  /** A Program whose one variable is `text`, as the API server will hold it (generation 1). */
  const sized = (name: string, text: string): Program => ({
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name, namespace: ns, generation: 1 },
    program: { variables: { blob: text }, outputs: { size: 'counted' } },
  });
  const programCondition = async (name: string, type: string) =>
    condition(
      (await op.custom.getNamespacedCustomObject({
        group: 'pulumi.com',
        version: 'v1',
        namespace: ns,
        plural: 'programs',
        name,
      })) as Program,
      type,
    );
  const configMapExists = (name: string) =>
    exists(() => op.core.readNamespacedConfigMap({ namespace: ns, name: `${name}-program` }));

  it('stalls, never writing a ConfigMap the API server refuses, and so does its Stack', async () => {
    await op.namespace(ns);
    await op.objects.create(sized('toolarge', 'x'.repeat(300_000)) as k8s.KubernetesObject);
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'toolarge', namespace: ns },
      spec: e2eStackSpec({ stack: 'dev', programRef: { name: 'toolarge' } }),
    } as k8s.KubernetesObject);
    const stalled = await eventually('the Program to stall', async () => {
      const c = await programCondition('toolarge', 'Stalled');
      return c?.status === 'True' ? c : undefined;
    });
    expect(stalled.reason).toBe('ProgramTooLarge');
    expect(stalled.message).toContain('262144 bytes (256 KiB) of annotations');
    // The Stack may stall first on a Program with no status yet ("has no artifact"), and says why
    // once a later sync sees the Program's: wait for that sync, not the first.
    const stack = await eventually('the Stack to stall saying why', async () => {
      const s = await op.getStack(ns, 'toolarge');
      const c = condition(s, 'Stalled');
      return c?.status === 'True' && c.message?.includes(':') ? s : undefined;
    });
    expect(condition(stack, 'Stalled')?.reason).toBe('SourceUnavailable');
    expect(condition(stack, 'Stalled')?.message).toContain('renders to a Pulumi.yaml of');
    expect(await configMapExists('toolarge')).toBe(false);
  });

  it('delivers the largest Program it accepts: the API server takes its ConfigMap', async () => {
    // The longest variable the hooks accept, by bisection, with characters Go escapes in the copy.
    const text = (n: number) => 'ab<'.repeat(Math.ceil(n / 3)).slice(0, n);
    const accepted = (n: number) =>
      syncProgram({ object: sized('largest', text(n)) }, new Date()).attachments.length > 0;
    let [lo, hi] = [0, 300_000];
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (accepted(mid)) lo = mid;
      else hi = mid;
    }
    await op.objects.create(sized('largest', text(lo)) as k8s.KubernetesObject);
    await eventually('its ConfigMap', () => configMapExists('largest'), 60_000, 500);
    const ready = await eventually('the Program to be Ready', async () => {
      const c = await programCondition('largest', 'Ready');
      return c?.status === 'True' ? c : undefined;
    });
    expect(ready.reason).toBe('ProcessingCompleted');
    // Close to the limit: the API server's own check is what was tested.
    const cm = await op.core.readNamespacedConfigMap({ namespace: ns, name: 'largest-program' });
    const annotationBytes = Object.entries(cm.metadata?.annotations ?? {}).reduce(
      (n, [k, v]) => n + Buffer.byteLength(k + v),
      0,
    );
    expect(annotationBytes).toBeGreaterThan(254 * 1024);
  });
});
