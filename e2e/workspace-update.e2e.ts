/**
 * Issue 21: the Workspace and Update objects as upstream's users see them. The walkthrough of
 * upstream's docs (`kubectl get workspace`, `kubectl get update`: their columns, for a Stack's own),
 * then Updates made by hand: a `preview` and a `refresh` against a Stack's workspace, an `up` against
 * a Workspace made by hand (no Stack), and Updates against a Workspace that is missing or failed.
 * Issue 38: their events as `kubectl describe workspace|update` shows them (upstream's reasons and
 * messages), and a Workspace with two stacks, Stalled.
 * Everything goes through the API server, Metacontroller (the driver, or the real binary with
 * METACONTROLLER_BIN) and the agent with the real Pulumi CLI on the real node.
 */
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import type { Update, Workspace } from '../schemas/generated/types';
import { defined, describedEvents, e2eStackSpec, eventually, kubectl, type Operator } from './harness';
import { e2eSuite } from './suite';
import { startGitServer, type GitServer } from './testbed/git-server';

let op: Operator;
let git: GitServer;
const ns = 'workspace-update';
const { recordTiming, readyStack, getStack } = e2eSuite('workspace-update', ns, (started) => (op = started));

beforeAll(async () => {
  git = await startGitServer();
}, 60_000);

afterAll(async () => {
  await git?.close();
});

const AUTO = { group: 'auto.pulumi.com', version: 'v1alpha1' } as const;

async function getUpdate(name: string): Promise<Update> {
  return (await op.custom.getNamespacedCustomObject({ ...AUTO, namespace: ns, plural: 'updates', name })) as Update;
}

async function getWorkspace(name: string): Promise<Workspace> {
  return (await op.custom.getNamespacedCustomObject({
    ...AUTO,
    namespace: ns,
    plural: 'workspaces',
    name,
  })) as Workspace;
}

function conditionOf(obj: { status?: { conditions?: { type: string }[] } }, type: string) {
  return obj.status?.conditions?.find((c) => c.type === type) as
    { type: string; status: string; reason?: string; message?: string } | undefined;
}

/** Creates an Update as a user would (`kubectl apply -f update.yaml`). */
async function createUpdate(name: string, spec: Update['spec']): Promise<void> {
  await op.objects.create({
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Update',
    metadata: { name, namespace: ns },
    spec,
  } as k8s.KubernetesObject);
}

/** Waits until the Update is Complete, and returns it. */
async function completeUpdate(name: string, timeoutMs = 180_000): Promise<Update> {
  return eventually(
    `Update ${name} to be Complete`,
    async () => {
      const u = await getUpdate(name);
      return conditionOf(u, 'Complete')?.status === 'True' ? u : undefined;
    },
    timeoutMs,
    500,
  );
}

/** `kubectl get <resource> -n <ns>`, as a user types it; the printed table's lines. */
async function kubectlGet(resource: string): Promise<string[]> {
  return (await kubectl(op, ns, 'get', resource)).trim().split('\n');
}

/**
 * The rows of `kubectl describe <kind> <name>`'s Events table (type, reason, from, message), once
 * there are at least `count` (the hooks write an event just after the answer that implies it).
 */
async function describedUntil(kind: string, name: string, count = 1): Promise<string[][]> {
  const rows = await eventually(
    `kubectl describe ${kind} ${name} to show ${count} event(s)`,
    async () => {
      const events = await describedEvents(op, ns, kind, name);
      return events.length >= count ? events : undefined;
    },
    60_000,
    500,
  );
  return rows.map((d) => [d.type, d.reason, d.from, d.message]);
}

const HOOKS = 'pulumi-mc-operator/hooks';

const columns = (line: string | undefined): string[] => (line ?? '').trim().split(/\s{2,}/);

describe("a Stack's Workspace and Updates", () => {
  it('show what upstream shows: kubectl get workspace (NAME, IMAGE, READY, ADDRESS) and update', async () => {
    const started = Date.now();
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: 'hello', namespace: ns },
      program: { variables: { greeting: 'hello' }, outputs: { greeting: '${greeting}' } },
    } as k8s.KubernetesObject);
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'hello', namespace: ns },
      spec: e2eStackSpec({ stack: 'dev', programRef: { name: 'hello' } }),
    } as k8s.KubernetesObject);
    const stack = await readyStack('hello');
    recordTiming('Stack apply to Ready', started);
    const updateName = defined(stack.status?.lastUpdate?.name, 'lastUpdate.name');

    const workspaces = await kubectlGet('workspaces');
    expect(columns(workspaces[0])).toEqual(['NAME', 'IMAGE', 'READY', 'ADDRESS']);
    const ws = columns(workspaces.find((l) => l.startsWith('hello ')));
    expect(ws[0]).toBe('hello');
    expect(ws[1]).toMatch(/pulumi/);
    expect(ws.slice(2)).toEqual(['True', `hello-workspace.${ns}:50051`]);

    const updates = await kubectlGet('updates');
    expect(columns(updates[0])).toEqual(['NAME', 'WORKSPACE', 'PROGRESSING', 'FAILED', 'COMPLETE', 'URL']);
    // A local backend has no permalink: the URL column is empty.
    expect(columns(updates.find((l) => l.startsWith(`${updateName} `)))).toEqual([
      updateName,
      'hello',
      'False',
      'False',
      'True',
    ]);

    // The objects behind the columns: the Update's status has the outcome and the outputs.
    const update = await getUpdate(updateName);
    expect(update.spec).toMatchObject({ workspaceName: 'hello', stackName: 'dev', type: 'up' });
    expect(update.status).toMatchObject({
      message: expect.stringMatching(/up succeeded/),
      outputs: `${updateName}-stack-outputs`,
      outputValues: { greeting: 'hello' },
      projectInfo: { name: 'hello', runtime: 'yaml' },
    });
    expect(update.status?.startTime).toBeDefined();
    expect(update.status?.endTime).toBeDefined();
    const workspace = await getWorkspace('hello');
    expect(workspace.status).toMatchObject({ address: `hello-workspace.${ns}:50051`, observedGeneration: 1 });
    expect(workspace.status?.pulumiVersion).toMatch(/^v?3\./);
    // Owned as Metacontroller composes them: the Stack owns both; the Workspace its StatefulSet, the Update its Job.
    const sts = await op.apps.readNamespacedStatefulSet({ namespace: ns, name: 'hello-workspace' });
    expect(sts.metadata?.ownerReferences?.map((o) => `${o.kind}/${o.name}`)).toEqual(['Workspace/hello']);
    const job = await op.batch.readNamespacedJob({ namespace: ns, name: updateName });
    expect(job.metadata?.ownerReferences?.map((o) => `${o.kind}/${o.name}`)).toEqual([`Update/${updateName}`]);

    // Their events, as upstream's controllers record them.
    expect(await describedUntil('workspace', 'hello')).toEqual([
      ['Normal', 'Initialized', HOOKS, 'Initialized workspace pod "hello-workspace-0"'],
    ]);
    expect(await describedUntil('update', updateName)).toEqual([
      ['Normal', 'UpdateSucceeded', HOOKS, 'Updated stack "dev"'],
    ]);
  });

  it('run a hand-made preview and refresh once each, recording the outcome, without touching the Stack', async () => {
    const before = await getStack('hello');
    const started = Date.now();
    await createUpdate('hello-preview-by-hand', { workspaceName: 'hello', stackName: 'dev', type: 'preview' });
    const preview = await completeUpdate('hello-preview-by-hand');
    recordTiming('hand-made preview to Complete', started);
    expect(conditionOf(preview, 'Failed')).toMatchObject({ status: 'False', reason: 'UpdateSucceeded' });
    expect(conditionOf(preview, 'Progressing')).toMatchObject({ status: 'False', reason: 'Complete' });
    expect(preview.status?.message).toMatch(/preview/);

    const refreshStarted = Date.now();
    await createUpdate('hello-refresh-by-hand', { workspaceName: 'hello', stackName: 'dev', type: 'refresh' });
    const refresh = await completeUpdate('hello-refresh-by-hand');
    recordTiming('hand-made refresh to Complete', refreshStarted);
    expect(conditionOf(refresh, 'Failed')).toMatchObject({ status: 'False', reason: 'UpdateSucceeded' });

    // Each ran once: one Job each, named as its Update; the Stack's own history is unchanged.
    for (const name of ['hello-preview-by-hand', 'hello-refresh-by-hand']) {
      const jobs = await op.batch.listNamespacedJob({ namespace: ns, fieldSelector: `metadata.name=${name}` });
      expect(jobs.items).toHaveLength(1);
    }
    const after = await getStack('hello');
    expect(after.status?.lastUpdate).toEqual(before.status?.lastUpdate);
    expect(await describedUntil('update', 'hello-preview-by-hand')).toEqual([
      ['Normal', 'UpdateSucceeded', HOOKS, 'Previewed stack "dev"'],
    ]);
    expect(await describedUntil('update', 'hello-refresh-by-hand')).toEqual([
      ['Normal', 'UpdateSucceeded', HOOKS, 'Refreshed stack "dev"'],
    ]);

    // Deleting its Job does not run it again: the outcome stays in its status.
    await op.batch.deleteNamespacedJob({
      namespace: ns,
      name: 'hello-preview-by-hand',
      propagationPolicy: 'Background',
    });
    await eventually(
      'the Job to be gone',
      async () => {
        const jobs = await op.batch.listNamespacedJob({
          namespace: ns,
          fieldSelector: 'metadata.name=hello-preview-by-hand',
        });
        return jobs.items.length === 0;
      },
      60_000,
    );
    // The Job's deletion is a child event: Metacontroller has synced the Update again by now.
    await new Promise((r) => setTimeout(r, 3000));
    const kept = await getUpdate('hello-preview-by-hand');
    expect(conditionOf(kept, 'Complete')?.status).toBe('True');
    expect(kept.status?.message).toBe(preview.status?.message);
    const jobs = await op.batch.listNamespacedJob({
      namespace: ns,
      fieldSelector: 'metadata.name=hello-preview-by-hand',
    });
    expect(jobs.items).toHaveLength(0);
  });
});

describe("a Stack's finished Update, after its ttlAfterCompleted", () => {
  it('is deleted, and an UpdateExpired event says so', async () => {
    const before = await getStack('hello');
    await op.patchStack(ns, 'hello', { spec: { updateTemplate: { spec: { ttlAfterCompleted: '1s' } } } });
    // A new generation: a new up, whose Update carries the TTL.
    const after = await readyStack('hello', (s) => s.status?.lastUpdate?.name !== before.status?.lastUpdate?.name);
    const name = defined(after.status?.lastUpdate?.name, 'lastUpdate.name');
    const listed = await eventually(
      `an UpdateExpired event about ${name}`,
      async () => {
        const out = await kubectl(
          op,
          ns,
          'get',
          'events',
          '--field-selector',
          `involvedObject.kind=Update,involvedObject.name=${name},reason=UpdateExpired`,
          '-o',
          'jsonpath={range .items[*]}{.type}|{.reason}|{.reportingComponent}|{.message}{"\\n"}{end}',
        );
        return out.trim() === '' ? undefined : out.trim().split('\n');
      },
      60_000,
      500,
    );
    expect(listed).toEqual([`Normal|UpdateExpired|${HOOKS}|ttl expired and was deleted`]);
    const gone = await eventually('the Update to be deleted', async () => {
      const updates = (await op.custom.listNamespacedCustomObject({ ...AUTO, namespace: ns, plural: 'updates' })) as {
        items: Update[];
      };
      return updates.items.every((u) => u.metadata.name !== name);
    });
    expect(gone).toBe(true);
  });
});

describe('a Workspace made by hand', () => {
  it('gets its pod, and an Update of type up against it records its outputs', async () => {
    git.createRepo('by-hand');
    const commit = git.commit('by-hand', 'main', {
      'app/Pulumi.yaml': ['name: byhand', 'runtime: yaml', 'outputs:', '  message: made by hand', ''].join('\n'),
    });
    const started = Date.now();
    await op.objects.create({
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Workspace',
      metadata: { name: 'by-hand', namespace: ns },
      spec: {
        serviceAccountName: 'pulumi',
        git: { url: `${git.baseUrl}/by-hand.git`, ref: commit, dir: 'app' },
        env: [
          { name: 'PULUMI_BACKEND_URL', value: 'file:///state' },
          { name: 'PULUMI_CONFIG_PASSPHRASE', value: 'e2e-passphrase' },
        ],
        podTemplate: {
          spec: {
            volumes: [{ name: 'state', persistentVolumeClaim: { claimName: 'pulumi-state' } }],
            containers: [{ name: 'pulumi', volumeMounts: [{ name: 'state', mountPath: '/state' }] }],
          },
        },
        stacks: [{ name: 'by-hand', create: true }],
      },
    } as k8s.KubernetesObject);
    const ready = await eventually(
      'Workspace by-hand to be Ready',
      async () => {
        const w = await getWorkspace('by-hand');
        return conditionOf(w, 'Ready')?.status === 'True' ? w : undefined;
      },
      180_000,
      500,
    );
    recordTiming('hand-made Workspace to Ready', started);
    expect(ready.status?.address).toBe(`by-hand-workspace.${ns}:50051`);

    const upStarted = Date.now();
    await createUpdate('by-hand-up', { workspaceName: 'by-hand', stackName: 'by-hand', type: 'up' });
    const up = await completeUpdate('by-hand-up');
    recordTiming('hand-made up to Complete', upStarted);
    expect(conditionOf(up, 'Failed')).toMatchObject({ status: 'False' });
    expect(up.status).toMatchObject({
      outputs: 'by-hand-up-stack-outputs',
      outputValues: { message: 'made by hand' },
      projectInfo: { name: 'byhand', runtime: 'yaml' },
    });
    // The full outputs are in the Secret its status names, as upstream.
    const secret = await op.core.readNamespacedSecret({ namespace: ns, name: 'by-hand-up-stack-outputs' });
    expect(Object.keys(secret.data ?? {})).toContain('message');

    expect(await describedUntil('workspace', 'by-hand')).toEqual([
      ['Normal', 'Initialized', HOOKS, 'Initialized workspace pod "by-hand-workspace-0"'],
    ]);
    expect(await describedUntil('update', 'by-hand-up')).toEqual([
      ['Normal', 'UpdateSucceeded', HOOKS, 'Updated stack "by-hand"'],
    ]);
  });

  it('fails an Update for a stack it does not serve: UpdateFailed with upstream’s message', async () => {
    await createUpdate('by-hand-other', { workspaceName: 'by-hand', stackName: 'other', type: 'preview' });
    const failed = await completeUpdate('by-hand-other');
    expect(conditionOf(failed, 'Failed')).toMatchObject({ status: 'True', reason: 'StackMismatch' });
    expect(await describedUntil('update', 'by-hand-other')).toEqual([
      ['Warning', 'UpdateFailed', HOOKS, 'Failed to preview stack "other"'],
    ]);
  });
});

describe('an Update whose Workspace cannot run it', () => {
  it('says the Workspace is missing, and starts nothing', async () => {
    await createUpdate('nowhere-preview', { workspaceName: 'nowhere', stackName: 'dev', type: 'preview' });
    const waiting = await eventually(
      'Update nowhere-preview to say its Workspace is missing',
      async () => {
        const u = await getUpdate('nowhere-preview');
        return conditionOf(u, 'Progressing')?.reason === 'WorkspaceNotFound' ? u : undefined;
      },
      60_000,
      500,
    );
    expect(conditionOf(waiting, 'Progressing')).toMatchObject({
      status: 'False',
      message: 'workspace nowhere not found',
    });
    expect(conditionOf(waiting, 'Complete')?.status).toBe('False');
    const jobs = await op.batch.listNamespacedJob({ namespace: ns, fieldSelector: 'metadata.name=nowhere-preview' });
    expect(jobs.items).toHaveLength(0);
  });

  it('says why a failed Workspace is not ready', async () => {
    await op.objects.create({
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Workspace',
      metadata: { name: 'broken', namespace: ns },
      spec: {
        serviceAccountName: 'pulumi',
        git: { url: `${git.baseUrl}/no-such-repository.git`, ref: 'a'.repeat(40) },
        stacks: [{ name: 'dev' }],
      },
    } as k8s.KubernetesObject);
    await createUpdate('broken-up', { workspaceName: 'broken', stackName: 'dev', type: 'up' });
    const waiting = await eventually(
      'Update broken-up to say its Workspace is not ready',
      async () => {
        const u = await getUpdate('broken-up');
        return conditionOf(u, 'Progressing')?.reason === 'WorkspaceNotReady' ? u : undefined;
      },
      120_000,
      500,
    );
    expect(conditionOf(waiting, 'Progressing')?.message).toMatch(/^workspace broken is not ready/);
    expect(conditionOf(waiting, 'Complete')?.status).toBe('False');

    // The fetch failed: Stalled, and a Warning of that reason on the Workspace (ours: upstream's
    // fetch container only crash-loops).
    const stalled = await eventually(
      'Workspace broken to be Stalled SourceFetchFailed',
      async () => {
        const c = conditionOf(await getWorkspace('broken'), 'Stalled');
        return c?.status === 'True' && c.reason === 'SourceFetchFailed' ? c : undefined;
      },
      120_000,
      500,
    );
    // The message is the fetch's error, which may span lines: kubectl's table shows the first.
    const rows = await describedUntil('workspace', 'broken');
    expect(rows.map((r) => r.slice(0, 3))).toEqual([['Warning', 'SourceFetchFailed', HOOKS]]);
    expect(stalled.message?.startsWith(rows[0]![3]!.slice(0, 40))).toBe(true);
  });
});

describe('a Workspace with two stacks', () => {
  it('is Stalled MultipleStacksUnsupported, saying what to do, gets no pod, and a Warning event', async () => {
    await op.objects.create({
      apiVersion: 'auto.pulumi.com/v1alpha1',
      kind: 'Workspace',
      metadata: { name: 'two-stacks', namespace: ns },
      spec: {
        serviceAccountName: 'pulumi',
        git: { url: `${git.baseUrl}/by-hand.git`, ref: 'a'.repeat(40) },
        stacks: [{ name: 'dev' }, { name: 'prod' }],
      },
    } as k8s.KubernetesObject);
    const stalled = await eventually(
      'Workspace two-stacks to be Stalled',
      async () => {
        const c = conditionOf(await getWorkspace('two-stacks'), 'Stalled');
        return c?.status === 'True' ? c : undefined;
      },
      60_000,
      500,
    );
    expect(stalled).toMatchObject({
      reason: 'MultipleStacksUnsupported',
      message: expect.stringMatching(/^spec\.stacks has 2 entries \("dev", "prod"\); .*Make one Workspace per stack/),
    });
    const sets = await op.apps.listNamespacedStatefulSet({
      namespace: ns,
      fieldSelector: 'metadata.name=two-stacks-workspace',
    });
    expect(sets.items).toHaveLength(0);
    expect(await describedUntil('workspace', 'two-stacks')).toEqual([
      ['Warning', 'MultipleStacksUnsupported', HOOKS, stalled.message],
    ]);
  });
});
