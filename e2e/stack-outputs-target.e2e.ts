/**
 * Issue 24, item 2: a Stack's outputs in a Secret or ConfigMap of the user's naming
 * (spec.outputsTo, docs/outputs-to.md), the way users do it: `kubectl apply` a Program and a Stack
 * that names a Secret, read the outputs from a pod through env and a mounted volume, edit the
 * Program, move the outputs to a ConfigMap (the Secret goes, secret outputs stay out of it), name
 * a Secret that someone else already has (Stalled, the Secret untouched), and delete the Stack (its
 * object goes with it). Everything through the API server; the runner writes the objects from the
 * Job's pod with the identity the hooks gave it.
 */
import { createHash } from 'node:crypto';
import * as k8s from '@kubernetes/client-node';
import type { Stack } from '../schemas/generated/types';
import { AGENT_IMAGE, defined, e2eStackSpec, eventually, exists, condition, type Operator } from './harness';
import { e2eSuite } from './suite';
import { podOf } from './testbed/pod-bed';

const ns = 'outputs-target';
const SECRET_WORD = 'swordfish-outputs-target';

let op: Operator;
const { recordTiming, getStack, readyStack } = e2eSuite('stack-outputs-target', ns, (started) => (op = started));

function program(greeting: string): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name: 'app', namespace: ns },
    program: {
      configuration: { secretWord: { type: 'String', default: SECRET_WORD } },
      variables: { greeting },
      outputs: {
        greeting: '${greeting}',
        secretWord: { 'fn::secret': '${secretWord}' },
        replicas: 3,
        settings: { zones: ['a', 'b'] },
      },
    },
  } as k8s.KubernetesObject;
}

const mergePatch = k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);
const patchProgram = (body: object) =>
  op.custom.patchNamespacedCustomObject(
    { group: 'pulumi.com', version: 'v1', namespace: ns, plural: 'programs', name: 'app', body },
    mergePatch,
  );
const readSecret = (name: string) => op.core.readNamespacedSecret({ namespace: ns, name });
const readConfigMap = (name: string) => op.core.readNamespacedConfigMap({ namespace: ns, name });
const decoded = (data: Record<string, string> | undefined) =>
  Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** The next up of the Stack after `before` has been absorbed, whatever the Stack's conditions say. */
async function nextUpAbsorbed(before: Stack): Promise<Stack> {
  return eventually(
    'the next up to be absorbed',
    async () => {
      const s = await getStack('app');
      const last = s.status?.lastUpdate;
      return last?.name !== before.status?.lastUpdate?.name &&
        last?.generation === s.metadata.generation &&
        s.status?.observedGeneration === s.metadata.generation
        ? s
        : undefined;
    },
    300_000,
    1000,
  );
}

/** A pod of the agent image that prints what it reads of the outputs Secret: through env, and mounted. */
function readerPod(): k8s.V1Pod {
  const script = [
    "const fs = require('fs');",
    "const crypto = require('crypto');",
    "const sha = (s) => crypto.createHash('sha256').update(s).digest('hex');",
    'console.log(JSON.stringify({',
    '  greeting: process.env.GREETING,',
    '  secretWordSha: sha(process.env.SECRET_WORD),',
    "  settings: fs.readFileSync('/outputs/settings', 'utf8'),",
    "  mountedSecretSha: sha(fs.readFileSync('/outputs/secretWord', 'utf8')),",
    '}));',
  ].join('\n');
  const pod = podOf(ns, 'reader', AGENT_IMAGE, {
    command: ['node', '-e', script],
    env: [
      { name: 'GREETING', valueFrom: { secretKeyRef: { name: 'app-outputs', key: 'greeting' } } },
      { name: 'SECRET_WORD', valueFrom: { secretKeyRef: { name: 'app-outputs', key: 'secretWord' } } },
    ],
    volumeMounts: [{ name: 'outputs', mountPath: '/outputs', readOnly: true }],
  });
  pod.spec!.volumes = [{ name: 'outputs', secret: { secretName: 'app-outputs' } }];
  return pod;
}

describe('outputs to a Secret or ConfigMap of the user’s naming', () => {
  it('writes every output into the Secret, owned by the Stack, readable by a pod', async () => {
    const started = Date.now();
    await op.objects.create(program('hello'));
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'app', namespace: ns },
      spec: e2eStackSpec({
        stack: 'dev',
        programRef: { name: 'app' },
        outputsTo: { kind: 'Secret', name: 'app-outputs' },
      }),
    } as k8s.KubernetesObject);
    const stack = await readyStack('app');
    recordTiming('apply to Ready, outputs in a Secret', started);
    expect(stack.status?.outputsTo).toEqual({ kind: 'Secret', name: 'app-outputs', state: 'written' });
    expect(stack.status?.outputs).toEqual({
      greeting: 'hello',
      secretWord: '[secret]',
      replicas: 3,
      settings: { zones: ['a', 'b'] },
    });

    const secret = await readSecret('app-outputs');
    expect(decoded(secret.data)).toEqual({
      greeting: 'hello',
      secretWord: SECRET_WORD,
      replicas: '3',
      settings: '{"zones":["a","b"]}',
    });
    expect(secret.type).toBe('Opaque');
    expect(secret.metadata?.labels).toMatchObject({ 'pulumi.com/outputs-of': 'app', 'pulumi.com/stack-name': 'app' });
    expect(secret.metadata?.ownerReferences).toEqual([
      { apiVersion: 'pulumi.com/v1', kind: 'Stack', name: 'app', uid: stack.metadata.uid },
    ]);

    // The secret value reached no annotation, status or log of ours.
    const jobName = defined(stack.status?.lastUpdate?.name, 'lastUpdate.name');
    const job = await op.batch.readNamespacedJob({ namespace: ns, name: jobName });
    expect(JSON.stringify(job.metadata?.annotations)).not.toContain(SECRET_WORD);
    expect(JSON.stringify(stack)).not.toContain(SECRET_WORD);
    const update: unknown = await op.custom.getNamespacedCustomObject({
      group: 'auto.pulumi.com',
      version: 'v1alpha1',
      namespace: ns,
      plural: 'updates',
      name: jobName,
    });
    expect(JSON.stringify(update)).not.toContain(SECRET_WORD);
    const jobPods = await op.core.listNamespacedPod({ namespace: ns, labelSelector: `job-name=${jobName}` });
    expect(jobPods.items.length).toBeGreaterThan(0);
    for (const p of jobPods.items) {
      const log = await op.logs(ns, p.metadata!.name!, 'update');
      expect(log).toContain('outputs written to Secret app-outputs: 4 key(s)');
      expect(log).not.toContain(SECRET_WORD);
    }

    // A pod reads them: env from the Secret's keys, and the Secret mounted.
    await op.core.createNamespacedPod({ namespace: ns, body: readerPod() });
    const done = await eventually(
      'the reader pod to finish',
      async () => {
        const p = await op.core.readNamespacedPod({ namespace: ns, name: 'reader' });
        return p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed' ? p : undefined;
      },
      120_000,
      500,
    );
    expect(done.status?.phase).toBe('Succeeded');
    const read = JSON.parse((await op.logs(ns, 'reader', 'main')).trim()) as Record<string, string>;
    expect(read).toEqual({
      greeting: 'hello',
      secretWordSha: sha256(SECRET_WORD),
      settings: '{"zones":["a","b"]}',
      mountedSecretSha: sha256(SECRET_WORD),
    });
  });

  it('updates the Secret after the next up', async () => {
    const before = await getStack('app');
    const { uid, resourceVersion } = (await readSecret('app-outputs')).metadata!;
    await patchProgram({ program: { variables: { greeting: 'bonjour' } } });
    await readyStack('app', (s) => s.status?.lastUpdate?.name !== before.status?.lastUpdate?.name);
    const secret = await readSecret('app-outputs');
    expect(decoded(secret.data).greeting).toBe('bonjour');
    // The same object, updated in place.
    expect(secret.metadata?.uid).toBe(uid);
    expect(secret.metadata?.resourceVersion).not.toBe(resourceVersion);
  });

  it('moves the outputs to a ConfigMap: secret outputs stay out, keys renamed, the Secret deleted', async () => {
    const before = await getStack('app');
    await op.patchStack(ns, 'app', {
      spec: {
        outputsTo: {
          kind: 'ConfigMap',
          name: 'app-config',
          outputs: [{ name: 'greeting', key: 'GREETING' }, { name: 'secretWord' }, { name: 'replicas' }],
        },
      },
    });
    const stack = await readyStack('app', (s) => s.status?.lastUpdate?.name !== before.status?.lastUpdate?.name);
    expect(stack.status?.outputsTo).toEqual({ kind: 'ConfigMap', name: 'app-config', state: 'written' });
    const cm = await readConfigMap('app-config');
    expect(cm.data).toEqual({ GREETING: 'bonjour', replicas: '3' });
    expect(JSON.stringify(cm)).not.toContain(SECRET_WORD);
    const skipped = condition(stack, 'OutputsSkipped');
    expect(skipped).toMatchObject({ status: 'True', reason: 'SecretOutputs' });
    expect(skipped?.message).toContain('secret outputs, which only a Secret may hold: "secretWord"');
    // The Secret of the earlier ups is gone.
    expect(await exists(() => readSecret('app-outputs'))).toBe(false);
  });

  it('stalls, and leaves it untouched, when the named Secret is someone else’s', async () => {
    await op.core.createNamespacedSecret({
      namespace: ns,
      body: { metadata: { name: 'taken', labels: { owner: 'someone-else' } }, stringData: { theirs: 'keep me' } },
    });
    const foreign = await readSecret('taken');
    const before = await getStack('app');
    // `outputs: null`: a merge patch would keep the list of the ConfigMap.
    await op.patchStack(ns, 'app', { spec: { outputsTo: { kind: 'Secret', name: 'taken', outputs: null } } });
    const stack = await nextUpAbsorbed(before);
    expect(stack.status?.lastUpdate?.state).toBe('succeeded');
    expect(stack.status?.outputsTo).toEqual({ kind: 'Secret', name: 'taken', state: 'conflict' });
    const stalled = await eventually('Stalled OutputsConflict', async () => {
      const s = await getStack('app');
      const c = condition(s, 'Stalled');
      return c?.reason === 'OutputsConflict' ? c : undefined;
    });
    expect(stalled.message).toContain('Secret taken exists and is not this Stack');
    expect(condition(stack, 'Ready')?.status).toBe('False');
    const after = await readSecret('taken');
    expect(after.metadata?.resourceVersion).toBe(foreign.metadata?.resourceVersion);
    expect(decoded(after.data)).toEqual({ theirs: 'keep me' });
    expect(after.metadata?.ownerReferences).toBeUndefined();
    // The ConfigMap of the earlier up went anyway: the outputs are no longer wanted there.
    expect(await exists(() => readConfigMap('app-config'))).toBe(false);

    // Its owner deletes it and asks for a run: the outputs go there, and the Stack is Ready.
    await op.core.deleteNamespacedSecret({ namespace: ns, name: 'taken' });
    await op.patchStack(ns, 'app', {
      metadata: { annotations: { 'pulumi.com/reconciliation-request': 'taken-is-free' } },
    });
    const ready = await readyStack('app', (s) => s.status?.lastUpdate?.reconcileRequest === 'taken-is-free');
    expect(ready.status?.outputsTo).toEqual({ kind: 'Secret', name: 'taken', state: 'written' });
    expect(condition(ready, 'Stalled')).toBeUndefined();
    expect(decoded((await readSecret('taken')).data).greeting).toBe('bonjour');
  });

  it('goes with the Stack when the Stack is deleted', async () => {
    await op.custom.deleteNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1',
      namespace: ns,
      plural: 'stacks',
      name: 'app',
    });
    await eventually(
      'the Stack and its outputs Secret to be gone',
      async () =>
        !(await exists(() => getStack('app'))) && !(await exists(() => readSecret('taken'))) ? true : undefined,
      120_000,
      1000,
    );
  });
});
