/**
 * Issue 20, item 6: the Kubernetes Events of a Stack, as a user sees them with `kubectl describe
 * stack` (the real kubectl against the test bed's API server). The hooks write them with the
 * ServiceAccount, ClusterRole and binding of manifests/install.yaml (e2e/harness.ts gives the hook
 * server a token of that account), about the Stacks their watch holds:
 * - an update that fails, then one that succeeds: StackUpdateDetected for each Job it starts,
 *   StackUpdateFailure and StackCreated for each Job it absorbs, upstream's reasons and notes;
 * - Stalled: StackConfigInvalid for an invalid spec, the condition's reason otherwise;
 * - no second event for the same transition: Metacontroller's resyncs, a restarted hook server and
 *   a replayed sync (as after a lost status write, answered 409 by the API server) add nothing;
 * - the Stack's Workspace and Updates: upstream's Initialized, UpdateFailed and UpdateSucceeded, as
 *   `kubectl describe workspace|update` shows them.
 */
import * as k8s from '@kubernetes/client-node';
import type { Stack } from '../schemas/generated/types';
import {
  defined,
  describedEvents,
  e2eStackSpec,
  eventually,
  kubectl,
  condition,
  type DescribedEvent,
  type Operator,
} from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const ns = 'events';
const { recordTiming, getStack, readyStack } = e2eSuite('events', ns, (started) => (op = started));

const STACKS = { group: 'pulumi.com', version: 'v1', plural: 'stacks' } as const;
const PROGRAMS = { group: 'pulumi.com', version: 'v1', plural: 'programs' } as const;
const mergePatch = () => k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch);

/** `kubectl describe stack <name>`, as a user runs it, and the rows of its Events table. */
const describeEvents = (name: string): Promise<DescribedEvent[]> => describedEvents(op, ns, 'stack', name);

/** The Events about one Stack, oldest first. */
async function eventsOf(stack: Stack): Promise<k8s.CoreV1Event[]> {
  const list = await op.core.listNamespacedEvent({ namespace: ns });
  return list.items
    .filter((e) => e.involvedObject.uid === stack.metadata.uid)
    .sort((a, b) => String(a.eventTime).localeCompare(String(b.eventTime)));
}

/** Waits until the Stack's events satisfy `done`; returns them. */
function eventsUntil(
  name: string,
  what: string,
  done: (events: k8s.CoreV1Event[]) => boolean,
): Promise<k8s.CoreV1Event[]> {
  return eventually(
    what,
    async () => {
      const events = await eventsOf(await getStack(name));
      return done(events) ? events : undefined;
    },
    60_000,
    250,
  );
}

const reasons = (events: k8s.CoreV1Event[]) => events.map((e) => e.reason);

/** Waits until the Stack's status is Stalled with `reason`; returns the condition. */
function stalledAs(name: string, reason: string) {
  return eventually(`Stack ${name} to be Stalled ${reason}`, async () => {
    const stalled = condition(await getStack(name), 'Stalled');
    return stalled?.status === 'True' && stalled.reason === reason ? stalled : undefined;
  });
}

function program(name: string, broken: boolean): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name, namespace: ns },
    program: {
      variables: { greeting: 'hello' },
      outputs: broken ? { greeting: '${greeting}', oops: '${doesNotExist}' } : { greeting: '${greeting}' },
    },
  } as k8s.KubernetesObject;
}

function stack(name: string, spec: Record<string, unknown>): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: ns },
    spec: e2eStackSpec({ stack: 'dev', ...spec }),
  } as k8s.KubernetesObject;
}

/** How many stack syncs the running hook server has answered (its /metrics). */
async function stackSyncs(): Promise<number> {
  const { text } = await op.hookRequest('/metrics');
  const m = /^pulumi_hook_request_duration_seconds_count\{hook="stack_sync"\} (\d+)$/m.exec(text);
  return m ? Number(m[1]) : 0;
}

describe('Events on Stacks', () => {
  it('an update that fails, then one that succeeds: one event per Job started and per Job finished', async () => {
    const name = 'web';
    const started = Date.now();
    await op.objects.create(program(name, true));
    await op.objects.create(stack(name, { programRef: { name } }));

    // The first update fails.
    const failed = await eventsUntil(name, 'StackUpdateFailure', (es) => reasons(es).includes('StackUpdateFailure'));
    recordTiming('apply to StackUpdateFailure event', started);
    expect(failed.slice(0, 2).map((e) => [e.type, e.reason, e.message])).toEqual([
      ['Normal', 'StackUpdateDetected', 'Initial stack update'],
      ['Warning', 'StackUpdateFailure', expect.stringMatching(/^Failed to update stack: .*doesNotExist/s)],
    ]);

    // The program is fixed: a new update, and it succeeds.
    const fixed = Date.now();
    await op.custom.patchNamespacedCustomObject(
      { ...PROGRAMS, namespace: ns, name, body: { program: { outputs: { oops: null } } } },
      mergePatch(),
    );
    const ready = await readyStack(name, (s) => s.status?.lastUpdate?.state === 'succeeded');
    const all = await eventsUntil(name, 'StackCreated', (es) => reasons(es).includes('StackCreated'));
    recordTiming('fixed program to StackCreated event', fixed);
    expect(all.slice(-2).map((e) => [e.type, e.reason, e.message])).toEqual([
      ['Normal', 'StackUpdateDetected', 'New commit detected: "2"'],
      ['Normal', 'StackCreated', 'Successfully updated stack'],
    ]);

    // One StackUpdateDetected per Job, one StackUpdateFailure or StackCreated per finished Job,
    // each naming its Job; whatever retries ran in between.
    const jobs = (
      await op.batch.listNamespacedJob({ namespace: ns, labelSelector: `pulumi.com/stack-name=${name}` })
    ).items.map((j) => defined(j.metadata?.name, 'Job name'));
    const relatedOf = (reason: string) =>
      all
        .filter((e) => e.reason === reason)
        .map((e) => e.related?.name)
        .sort();
    expect(relatedOf('StackUpdateDetected')).toEqual([...jobs].sort());
    expect([...relatedOf('StackUpdateFailure'), ...relatedOf('StackCreated')].sort()).toEqual([...jobs].sort());
    expect(relatedOf('StackCreated')).toEqual([ready.status?.lastUpdate?.name]);

    // Written by the hooks, naming this operator, never counted up (one event per transition).
    for (const e of all) {
      expect(e).toMatchObject({
        source: { component: 'pulumi-mc-operator/hooks' },
        reportingComponent: 'pulumi-mc-operator/hooks',
        action: 'Up',
        count: 1,
      });
      expect(e.reportingInstance).not.toBe('');
      expect(e.series).toBeUndefined();
      expect(e.metadata?.managedFields?.map((f) => f.manager)).toEqual(['pulumi-mc-hooks']);
    }

    // What `kubectl describe stack web` shows: every event, ordered by the second (events of the
    // same second in any order), the first and the last seconds apart from the others.
    const described = await describeEvents(name);
    const row = (x: { type?: string; reason?: string }) => `${x.type} ${x.reason} pulumi-mc-operator/hooks`;
    expect(described.map((d) => `${d.type} ${d.reason} ${d.from}`).sort()).toEqual(all.map(row).sort());
    expect(described[0]?.message).toBe('Initial stack update');
    expect(described.at(-1)?.message).toBe('Successfully updated stack');
    // One row per event: none is shown repeated ("x2 over ...").
    for (const d of described) expect(d.age).not.toMatch(/\(x\d+ over/);

    // Its Workspace and Updates have upstream's events too: `kubectl describe workspace web`, `update …`.
    const describedUntil = (kind: string, object: string, done: (rows: DescribedEvent[]) => boolean) =>
      eventually(`kubectl describe ${kind} ${object} to show its events`, async () => {
        const rows = await describedEvents(op, ns, kind, object);
        return done(rows) ? rows : undefined;
      });
    // One per pod: the fixed Program is a new template, so the pod was initialised again.
    const workspace = await describedUntil('workspace', name, (rows) => rows.length > 0);
    expect([...new Set(workspace.map((d) => [d.type, d.reason, d.from, d.message].join(' | ')))]).toEqual([
      'Normal | Initialized | pulumi-mc-operator/hooks | Initialized workspace pod "web-workspace-0"',
    ]);
    for (const update of jobs) {
      const succeeded = update === ready.status?.lastUpdate?.name;
      const rows = await describedUntil('update', update, (r) => r.length > 0);
      expect(rows.map((d) => [d.type, d.reason, d.from, d.message])).toEqual([
        succeeded
          ? ['Normal', 'UpdateSucceeded', 'pulumi-mc-operator/hooks', 'Updated stack "dev"']
          : ['Warning', 'UpdateFailed', 'pulumi-mc-operator/hooks', 'Failed to update stack "dev"'],
      ]);
    }
  }, 420_000);

  it('Stalled: StackConfigInvalid for an invalid spec, the condition reason otherwise', async () => {
    // Admitted by the CRD, refused by the hooks (upstream refuses it too): a Secret of another namespace.
    await op.objects.create(
      stack('invalid', {
        programRef: { name: 'web' },
        envRefs: { TOKEN: { type: 'Secret', secret: { namespace: 'elsewhere', name: 'token', key: 'value' } } },
      }),
    );
    // A branch of a repository nobody serves: the hooks cannot resolve it.
    await op.objects.create(stack('unreachable', { projectRepo: 'http://127.0.0.1:9/nothing.git', branch: 'main' }));

    const invalid = await eventsUntil('invalid', 'StackConfigInvalid', (es) => es.length > 0);
    expect(invalid.map((e) => [e.type, e.reason, e.action])).toEqual([['Warning', 'StackConfigInvalid', 'Sync']]);
    // The event is written as the hook answers; Metacontroller writes the status after it.
    const stalled = await stalledAs('invalid', 'SpecInvalid');
    expect(invalid[0]?.message).toBe(stalled?.message);
    expect(invalid[0]?.message).toMatch(/cross-namespace refs are not allowed/);

    const unreachable = await eventsUntil('unreachable', 'SourceUnavailable', (es) => es.length > 0);
    expect(unreachable.map((e) => [e.type, e.reason])).toEqual([['Warning', 'SourceUnavailable']]);
    expect(await stalledAs('unreachable', 'SourceUnavailable')).toMatchObject({ status: 'True' });

    const described = await describeEvents('invalid');
    expect(described.map((d) => [d.type, d.reason, d.from])).toEqual([
      ['Warning', 'StackConfigInvalid', 'pulumi-mc-operator/hooks'],
    ]);
    expect(described[0]?.message).toMatch(/spec\.envRefs\.TOKEN: cross-namespace refs are not allowed/);
    // The core/v1 view of the same events, as docs/troubleshooting.md lists them.
    const listed = await kubectl(
      op,
      ns,
      'get',
      'events',
      '--field-selector',
      'involvedObject.name=unreachable,involvedObject.kind=Stack',
      '-o',
      'jsonpath={range .items[*]}{.type} {.reason} {.reportingComponent}{"\\n"}{end}',
    );
    expect(listed.trim().split('\n')).toEqual(['Warning SourceUnavailable pulumi-mc-operator/hooks']);
  }, 180_000);

  it('resyncs, a restarted hook server and a replayed sync add no event', async () => {
    const names = ['web', 'invalid', 'unreachable'];
    const snapshot = async (): Promise<Record<string, string[]>> => {
      const byStack: Record<string, string[]> = {};
      for (const n of names) byStack[n] = (await eventsOf(await getStack(n))).map((e) => e.metadata?.name ?? '').sort();
      return byStack;
    };
    const before = await snapshot();
    expect(Object.values(before).every((list) => list.length > 0)).toBe(true);

    // A hook server with no memory of what it wrote, then a change to every Stack that makes
    // Metacontroller sync it (a label: no new generation, no new update).
    await op.restartHooks();
    for (const [i, name] of names.entries()) {
      await op.custom.patchNamespacedCustomObject(
        { ...STACKS, namespace: ns, name, body: { metadata: { labels: { touched: String(i) } } } },
        mergePatch(),
      );
    }
    await eventually('Metacontroller to sync the touched Stacks', async () =>
      (await stackSyncs()) >= names.length ? true : undefined,
    );

    // What Metacontroller sends when the status it wrote was lost: the invalid Stack without it.
    // The hooks write the same event again, by name, and the API server answers AlreadyExists.
    const invalid = await getStack('invalid');
    const replay = { ...invalid, status: undefined };
    const res = await op.hookRequest('/stack/sync', {
      body: { controller: {}, parent: replay, children: {}, related: {} },
    });
    expect(res.status).toBe(200);
    const counts = await eventually('the replayed event to be refused', () => {
      const c = op.hookEvents();
      return Promise.resolve(c.duplicate >= 1 ? c : undefined);
    });
    // Every write reached the API server and was allowed: the ServiceAccount's role is enough.
    expect(counts).toMatchObject({ failed: 0, dropped: 0 });

    expect(await snapshot()).toEqual(before);
    const described = await describeEvents('invalid');
    expect(described.map((d) => d.reason)).toEqual(['StackConfigInvalid']);
  }, 120_000);
});
