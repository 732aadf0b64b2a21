import type { Workspace } from '../../schemas/generated/types';
import { Annotations, Env } from '../../contract';
import { cloneJson } from '../src/lib/json';
import { LAST_APPLIED_ANNOTATION, type KObject } from '../src/lib/k8s';
import { recordDigests } from '../src/lib/kept-children';
import { MAX_STALLS } from '../src/events/event';
import { workspaceEvents } from '../src/workspace/events';
import { syncWorkspace, WORKSPACE_HOLD, type WorkspaceSyncResponse } from '../src/workspace/sync';
import { agentReports, applyChildren, condition, NOW, objectMap, testConfig, workspaceHashOf } from './builders';
import { asChild, childOf, containerOf, envValue, fetchContainerOf, podSpecOf, templateOf } from './children';
import { ctx } from './stories';

/** A Workspace as a user writes it by hand: upstream's fields only. */
function workspace(spec: Workspace['spec'] = {}): Workspace {
  return {
    apiVersion: 'auto.pulumi.com/v1alpha1',
    kind: 'Workspace',
    metadata: {
      name: 'ws',
      namespace: 'team-a',
      uid: 'ws-uid',
      generation: 3,
      labels: { team: 'a', 'controller-uid': 'x' },
    },
    spec: {
      git: { url: 'https://git.example/repo.git', ref: 'a'.repeat(40), dir: 'app' },
      stacks: [{ name: 'dev', config: [{ key: 'greeting', value: 'hi' }] }],
      ...spec,
    },
  };
}

/** The Workspace as Metacontroller leaves it after writing a sync's status. */
const written = (ws: Workspace, res: WorkspaceSyncResponse): Workspace => ({ ...ws, status: res.status });

/** The cluster after an answer was applied: the StatefulSet rolled out, its pod ready; no report yet. */
function unreported(answer: { children: KObject[] }): KObject[] {
  return applyChildren([], answer.children).map((c) =>
    c.kind === 'StatefulSet'
      ? { ...c, status: { observedGeneration: 1, readyReplicas: 1, currentRevision: 'r', updateRevision: 'r' } }
      : c,
  );
}

/** As unreported(), with the agent reporting `state` for the pod's hash in the status ConfigMap. */
function observed(answer: { children: KObject[] }, state: 'Ready' | 'Failed' | 'Installing', reason?: string) {
  return agentReports(unreported(answer), { state, reason, message: 'the message', pulumiVersion: 'v3.274.1' });
}

/** The same objects with the StatefulSet's annotation `key` set to `value` (the agent's earlier place). */
function withStatefulSetAnnotation(cluster: KObject[], value: unknown): KObject[] {
  return cluster.map((c) =>
    c.kind === 'StatefulSet'
      ? {
          ...c,
          metadata: {
            ...c.metadata,
            annotations: { ...c.metadata.annotations, [Annotations.workspaceStatus]: JSON.stringify(value) },
          },
        }
      : c,
  );
}

describe('a Workspace', () => {
  it('gets its StatefulSet, Service, Role and status ConfigMap, named as upstream, with its labels but not its selector label', () => {
    const res = syncWorkspace({ parent: workspace() }, ctx());
    expect(res.children.map((c) => `${c.kind}/${c.metadata.name}`)).toEqual([
      'StatefulSet/ws-workspace',
      'Service/ws-workspace',
      'Role/ws-workspace',
      'RoleBinding/ws-workspace',
      'ConfigMap/ws-workspace-status',
    ]);
    const sts = asChild(res.children[0], 'StatefulSet');
    expect(sts.metadata.labels).toEqual({ team: 'a' });
    // Metadata only: what is in it is the agent's.
    expect(childOf(res, 'ConfigMap')).toEqual({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'ws-workspace-status', namespace: 'team-a', labels: { team: 'a' } },
    });
    const fetch = fetchContainerOf(sts);
    expect(fetch.command).toEqual(['pko-agent', 'fetch', 'git']);
    expect(envValue(fetch, 'GIT_REVISION')).toBe('a'.repeat(40));
    expect(envValue(fetch, 'GIT_DIR')).toBe('app');
    const pulumi = containerOf(podSpecOf(sts), 'pulumi');
    expect(pulumi.image).toBe(testConfig.workspaceImage.restricted);
    expect(JSON.parse(envValue(pulumi, 'PULUMI_WORKSPACE_STACK'))).toEqual({
      name: 'dev',
      create: true,
      config: [{ key: 'greeting', value: 'hi', secret: false }],
    });
  });

  it('reports Ready False while it rolls out, and upstream’s address', () => {
    const res = syncWorkspace({ parent: workspace() }, ctx());
    expect(res.status).toMatchObject({ observedGeneration: 3, address: 'ws-workspace.team-a:50051' });
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'WaitingForReplicas' });
    expect(condition(res.status, 'Stalled')).toBeUndefined();
  });

  it('reports Ready True and the Pulumi version once the agent is ready for its template', () => {
    const first = syncWorkspace({ parent: workspace() }, ctx());
    const res = syncWorkspace({ parent: workspace(), children: objectMap(...observed(first, 'Ready')) }, ctx());
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True', reason: 'Succeeded' });
    expect(res.status.pulumiVersion).toBe('v3.274.1');
    // Installing, or nothing reported yet: not ready.
    const installing = syncWorkspace(
      { parent: workspace(), children: objectMap(...observed(first, 'Installing')) },
      ctx(),
    );
    expect(condition(installing.status, 'Ready')).toMatchObject({ status: 'False', reason: 'Installing' });
    const silent = syncWorkspace({ parent: workspace(), children: objectMap(...unreported(first)) }, ctx());
    expect(condition(silent.status, 'Ready')).toMatchObject({ status: 'False', reason: 'Installing' });
  });

  it('is Stalled with the reason the agent reports, and says how to fix Unauthenticated', () => {
    const plain = syncWorkspace({ parent: workspace() }, ctx());
    const failed = syncWorkspace(
      { parent: workspace(), children: objectMap(...observed(plain, 'Failed', 'InstallationFailed')) },
      ctx(),
    );
    expect(condition(failed.status, 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'InstallationFailed',
      message: 'the message',
    });
    const first = syncWorkspace({ parent: workspace({ serviceAccountName: 'deployer' }) }, ctx());
    const unauth = syncWorkspace(
      {
        parent: workspace({ serviceAccountName: 'deployer' }),
        children: objectMap(...observed(first, 'Failed', 'Unauthenticated')),
      },
      ctx(),
    );
    expect(condition(unauth.status, 'Stalled')?.message).toMatch(
      /--clusterrole=system:auth-delegator --serviceaccount=team-a:deployer$/,
    );
  });

  it('keeps its conditions’ transition times while nothing changes', () => {
    const first = syncWorkspace({ parent: workspace() }, ctx());
    const later = syncWorkspace(
      { parent: { ...workspace(), status: first.status } },
      { ...ctx(), now: new Date(NOW.getTime() + 60_000) },
    );
    expect(later.status).toEqual(first.status);
  });

  it('runs a Program handed over as its artifact URL (a Stack with programRef) from the hook server', () => {
    const fetchOf = (url: string) =>
      fetchContainerOf(
        asChild(
          syncWorkspace({ parent: workspace({ git: undefined, flux: { url, digest: 'sha256:00' } }) }, ctx())
            .children[0],
          'StatefulSet',
        ),
      );
    const program = fetchOf('https://pulumi-mc-hooks.pulumi-system.svc/programs/team-a/hello');
    expect(program.command).toEqual(['pko-agent', 'fetch', 'program']);
    expect(program.env).toContainEqual({
      name: 'PROGRAM_URL',
      value: 'https://pulumi-mc-hooks.pulumi-system.svc/programs/team-a/hello',
    });
    // Another namespace's Program, another server's or a path that names no Program: a plain
    // Flux download, without the pod's token.
    for (const url of [
      'https://pulumi-mc-hooks.pulumi-system.svc/programs/team-b/hello',
      'https://other.test/programs/team-a/hello',
      'https://pulumi-mc-hooks.pulumi-system.svc/programs/team-a/hello/../x',
    ])
      expect(fetchOf(url).command).toEqual(['pko-agent', 'fetch', 'flux']);
  });
});

describe('a hostile Workspace', () => {
  it('nested deeper than any pod spec is Stalled, and what it has stays', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 20_000; i++) deep = { a: deep };
    const first = syncWorkspace({ parent: workspace() }, ctx());
    const parent = {
      ...workspace({
        podTemplate: { spec: { containers: [], extra: deep } } as unknown as NonNullable<
          Workspace['spec']
        >['podTemplate'],
      }),
      status: first.status,
    };
    const res = syncWorkspace({ parent, children: objectMap(...applyChildren([], first.children)) }, ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'SpecInvalid' });
    expect(condition(res.status, 'Stalled')?.message).toMatch(
      /^spec\.podTemplate\.spec\.extra.* is nested more than 108 levels deep/,
    );
    // Kept as last answered: the digests the first answer recorded verify them.
    expect(res.children).toEqual(first.children);
    expect(res.status.childDigests).toEqual(first.status.childDigests);
  });
});

describe('a Workspace whose spec breaks its CRD schema (a request the API server never sends)', () => {
  it.each([
    [{ stacks: [{ name: 'dev', config: { hasOwnProperty: 1 } }] }, 'spec.stacks[0].config must be array'],
    [{ env: { A: '1' } }, 'spec.env must be array'],
  ])('is Stalled SpecInvalid naming the field, and builds nothing from it (%j)', (spec, message) => {
    const first = syncWorkspace({ parent: workspace() }, ctx());
    const parent = { ...workspace(spec as unknown as Workspace['spec']), status: first.status };
    const res = syncWorkspace({ parent, children: objectMap(...applyChildren([], first.children)) }, ctx());
    expect(condition(res.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'SpecInvalid', message });
    expect(res.children).toEqual(first.children);
  });
});

/** The Workspace while one of its Stack's Updates runs, with the status its last answer recorded. */
function held(status: Workspace['status']): Workspace {
  return {
    ...workspace(),
    metadata: { ...workspace().metadata, annotations: { [WORKSPACE_HOLD]: 'my-stack-up-12345678' } },
    status,
  };
}

describe('a Workspace held for a running operation', () => {
  it('keeps its StatefulSet exactly as it is, even when the hook server would build another', () => {
    const first = syncWorkspace({ parent: workspace() }, ctx());
    const running = observed(first, 'Ready');
    const upgraded = { ...ctx(), config: { ...testConfig, agentImage: 'example.test/pko-agent:v0.2.0' } };
    const res = syncWorkspace({ parent: held(first.status), children: objectMap(...running) }, upgraded);
    const sts = asChild(res.children[0], 'StatefulSet');
    expect(podSpecOf(sts)).toEqual(podSpecOf(childOf({ children: running }, 'StatefulSet')));
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True' });
    // Released, it gets the new template.
    const released = syncWorkspace({ parent: workspace(), children: objectMap(...running) }, upgraded);
    expect(containerOf(podSpecOf(asChild(released.children[0], 'StatefulSet')), 'bootstrap', true).image).toBe(
      'example.test/pko-agent:v0.2.0',
    );
  });

  it('named longer than its StatefulSet allows is Stalled', () => {
    const long = { ...workspace(), metadata: { ...workspace().metadata, name: 'w'.repeat(43) } };
    const res = syncWorkspace({ parent: long }, ctx());
    expect(res.children).toEqual([]);
    expect(condition(res.status, 'Stalled')?.message).toMatch(/^metadata\.name is 43 characters long/);
  });
});

describe("the workspace's account", () => {
  it('may patch its status ConfigMap and nothing else: no StatefulSet, no Pod, no other object', () => {
    const res = syncWorkspace({ parent: workspace({ serviceAccountName: 'deployer' }) }, ctx());
    const rules = childOf(res, 'Role', 'ws-workspace').rules ?? [];
    expect(rules).toEqual([
      { apiGroups: [''], resources: ['configmaps'], verbs: ['patch'], resourceNames: ['ws-workspace-status'] },
    ]);
    for (const rule of rules) {
      expect(rule.resources).not.toContain('statefulsets');
      expect(rule.resources).not.toContain('pods');
      expect(rule.resourceNames).toEqual([childOf(res, 'ConfigMap').metadata.name]);
    }
    expect(childOf(res, 'RoleBinding', 'ws-workspace').subjects).toEqual([
      { kind: 'ServiceAccount', name: 'deployer', namespace: 'team-a' },
    ]);
  });
});

describe("the agent's report", () => {
  const first = syncWorkspace({ parent: workspace() }, ctx());
  const hash = workspaceHashOf(childOf(first, 'StatefulSet'));

  it('counts only from the status ConfigMap: the StatefulSet annotation of earlier releases, forged, does not', () => {
    const forgedReady = withStatefulSetAnnotation(observed(first, 'Installing'), { hash, state: 'Ready' });
    const res = syncWorkspace({ parent: workspace(), children: objectMap(...forgedReady) }, ctx());
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'Installing' });
    const forgedFailure = withStatefulSetAnnotation(unreported(first), {
      hash,
      state: 'Failed',
      reason: 'InstallationFailed',
      message: 'forged',
    });
    const failed = syncWorkspace({ parent: workspace(), children: objectMap(...forgedFailure) }, ctx());
    expect(condition(failed.status, 'Stalled')).toBeUndefined();
    expect(condition(failed.status, 'Ready')).toMatchObject({ status: 'False', reason: 'Installing' });
  });

  it("of another pod template never counts (a pod's report outlives it)", () => {
    const stale = (state: 'Ready' | 'Failed') =>
      unreported(first).map((c) =>
        c.kind === 'ConfigMap' ? { ...c, data: { 'workspace-status': JSON.stringify({ hash: 'old', state }) } } : c,
      );
    for (const state of ['Ready', 'Failed'] as const) {
      const res = syncWorkspace({ parent: workspace(), children: objectMap(...stale(state)) }, ctx());
      expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'Installing' });
      expect(condition(res.status, 'Stalled')).toBeUndefined();
    }
  });

  it('is never answered back: the status ConfigMap is returned with its metadata only, whatever it holds', () => {
    const fresh = childOf(first, 'ConfigMap');
    // The workspace's account may write anything in it, Metacontroller's last-applied annotation too.
    const tampered = observed(first, 'Ready').map((c) =>
      c.kind === 'ConfigMap'
        ? {
            ...c,
            metadata: {
              ...c.metadata,
              labels: { team: 'b' },
              annotations: { [LAST_APPLIED_ANNOTATION]: JSON.stringify({ ...fresh, data: { injected: 'x' } }) },
            },
            data: { ...(c.data as object), injected: 'x' },
          }
        : c,
    );
    let nested: unknown = 'x';
    for (let i = 0; i < 200; i++) nested = { a: nested };
    const deep = {
      ...workspace({
        podTemplate: { spec: { containers: [], extra: nested } } as unknown as NonNullable<
          Workspace['spec']
        >['podTemplate'],
      }),
      status: first.status,
    };
    for (const parent of [workspace(), held(first.status), deep]) {
      const res = syncWorkspace({ parent, children: objectMap(...tampered) }, ctx());
      expect(childOf(res, 'ConfigMap')).toEqual(fresh);
    }
  });
});

/**
 * The answer of the release before the status ConfigMap (one that records digests; from one that
 * did not, a keep path answers 409, as for any child without a digest): its agent is told the
 * StatefulSet's name (PULUMI_WORKSPACE_NAME) and reports in the StatefulSet's annotation, which its
 * Role lets its account patch.
 */
function earlierRelease(answer: WorkspaceSyncResponse): WorkspaceSyncResponse {
  const legacyEnv = (env: { name: string; value?: string }[]) =>
    env.map((e) =>
      e.name === Env.workspaceStatusConfigMap ? { name: 'PULUMI_WORKSPACE_NAME', value: 'ws-workspace' } : e,
    );
  const children = answer.children
    .filter((c) => c.kind !== 'ConfigMap')
    .map((c) => {
      if (c.kind === 'Role')
        return {
          ...c,
          rules: [
            { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['patch'], resourceNames: ['ws-workspace'] },
          ],
        };
      if (c.kind !== 'StatefulSet') return c;
      const sts = cloneJson(asChild(c, 'StatefulSet'));
      const pod = podSpecOf(sts);
      for (const container of [...pod.containers, ...(pod.initContainers ?? [])])
        if (container.env) container.env = legacyEnv(container.env);
      templateOf(sts).metadata.annotations = { [Annotations.workspaceHash]: 'of-the-earlier-release' };
      return sts;
    });
  const kinds = new Set(children.map((c) => c.kind));
  return { children, status: { ...answer.status, childDigests: recordDigests(children, 'team-a', kinds) } };
}

describe('a workspace of the release before the status ConfigMap', () => {
  const first = syncWorkspace({ parent: workspace() }, ctx());
  const earlier = earlierRelease(first);
  const running = unreported(earlier);
  const oldHash = workspaceHashOf(childOf({ children: running }, 'StatefulSet'));
  const reported = withStatefulSetAnnotation(running, { hash: oldHash, state: 'Ready', pulumiVersion: 'v3.274.1' });

  it('held for a running operation: ready by its StatefulSet annotation, its Role kept, no ConfigMap made', () => {
    const res = syncWorkspace({ parent: held(earlier.status), children: objectMap(...reported) }, ctx());
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True', reason: 'Succeeded' });
    expect(res.children.map((c) => `${c.kind}/${c.metadata.name}`)).toEqual([
      'StatefulSet/ws-workspace',
      'Service/ws-workspace',
      'Role/ws-workspace',
      'RoleBinding/ws-workspace',
    ]);
    expect(childOf(res, 'Role').rules).toEqual(childOf({ children: running }, 'Role').rules);
    const failing = withStatefulSetAnnotation(running, {
      hash: oldHash,
      state: 'Failed',
      reason: 'InstallationFailed',
    });
    const failed = syncWorkspace({ parent: held(earlier.status), children: objectMap(...failing) }, ctx());
    expect(condition(failed.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'InstallationFailed' });
  });

  it('released: rolls to the new template, whose agent reports in the ConfigMap; the annotation no longer counts', () => {
    const res = syncWorkspace({ parent: workspace(), children: objectMap(...reported) }, ctx());
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'RollingUpdate' });
    expect(workspaceHashOf(childOf(res, 'StatefulSet'))).not.toBe(oldHash);
    expect(childOf(res, 'Role').rules).toEqual(childOf(first, 'Role').rules);
    expect(childOf(res, 'ConfigMap')).toEqual(childOf(first, 'ConfigMap'));
    // Rolled out, the new pod's annotation is read no more, even rewritten for its hash.
    const rolled = applyChildren(reported, res.children).map((c) =>
      c.kind === 'StatefulSet'
        ? {
            ...c,
            status: {
              observedGeneration: c.metadata.generation,
              readyReplicas: 1,
              currentRevision: 'r2',
              updateRevision: 'r2',
            },
          }
        : c,
    );
    const newHash = workspaceHashOf(childOf(res, 'StatefulSet'));
    const forged = withStatefulSetAnnotation(rolled, { hash: newHash, state: 'Ready' });
    const after = syncWorkspace({ parent: workspace(), children: objectMap(...forged) }, ctx());
    expect(condition(after.status, 'Ready')).toMatchObject({ status: 'False', reason: 'Installing' });
    const ready = syncWorkspace(
      { parent: workspace(), children: objectMap(...agentReports(forged, { state: 'Ready' })) },
      ctx(),
    );
    expect(condition(ready.status, 'Ready')).toMatchObject({ status: 'True', reason: 'Succeeded' });
  });
});

describe('a Workspace with more than one stack', () => {
  it('is Stalled MultipleStacksUnsupported, saying what to do, and what it has stays', () => {
    const first = syncWorkspace({ parent: workspace() }, ctx());
    const parent = written(workspace({ stacks: [{ name: 'dev' }, { name: 'prod' }] }), first);
    const res = syncWorkspace({ parent, children: objectMap(...applyChildren([], first.children)) }, ctx());
    const message =
      'spec.stacks has 2 entries ("dev", "prod"); a workspace here serves one stack. Make one Workspace per ' +
      "stack, each with this source and that stack alone in spec.stacks, and name it in the workspaceName of that stack's Updates";
    expect(condition(res.status, 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'MultipleStacksUnsupported',
      message,
    });
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'MultipleStacksUnsupported' });
    // Nothing is built from it; its pod stays as last answered.
    expect(res.children).toEqual(first.children);
    // A Warning event of that reason, once.
    const events = workspaceEvents({ workspace: parent, status: res.status });
    expect(events.map((e) => [e.type, e.reason, e.message])).toEqual([
      ['Warning', 'MultipleStacksUnsupported', message],
    ]);
    expect(workspaceEvents({ workspace: written(parent, res), status: res.status })).toEqual([]);
  });

  it('lists the first five names at most', () => {
    const stacks = Array.from({ length: 7 }, (_, i) => ({ name: `s${i}` }));
    const res = syncWorkspace({ parent: workspace({ stacks }) }, ctx());
    expect(condition(res.status, 'Stalled')?.message).toMatch(
      /^spec\.stacks has 7 entries \("s0", "s1", "s2", "s3", "s4", …\);/,
    );
  });
});

describe('events of a Workspace sync', () => {
  /** Syncs and returns the answer with the events it implies. */
  const sync = (parent: Workspace, children: KObject[] = [], now = NOW) => {
    const res = syncWorkspace({ parent, children: objectMap(...children) }, { ...ctx(), now });
    return { res, events: workspaceEvents({ workspace: parent, status: res.status }) };
  };

  it('Initialized when the workspace pod is ready, once per pod, as upstream', () => {
    const first = sync(workspace());
    expect(first.events).toEqual([]);
    const s1 = written(workspace(), first.res);
    const ready = sync(s1, observed(first.res, 'Ready'));
    expect(ready.events.map((e) => e.name)).toEqual([expect.stringMatching(/^ws\.[0-9a-f]{16}$/)]);
    expect(ready.events.map((e) => ({ ...e, name: 'n' }))).toEqual([
      {
        name: 'n',
        namespace: 'team-a',
        type: 'Normal',
        reason: 'Initialized',
        action: 'Initialize',
        message: 'Initialized workspace pod "ws-workspace-0"',
        regarding: {
          apiVersion: 'auto.pulumi.com/v1alpha1',
          kind: 'Workspace',
          name: 'ws',
          namespace: 'team-a',
          uid: 'ws-uid',
        },
        labels: { 'pulumi.com/stack-name': 'ws' },
      },
    ]);
    // The same sync again (its status write was lost): the same event, by name.
    expect(sync(s1, observed(first.res, 'Ready')).events).toEqual(ready.events);
    // Resyncs once the status is written: nothing.
    const s2 = written(s1, ready.res);
    expect(sync(s2, observed(first.res, 'Ready'), new Date('2026-11-22T11:00:00Z')).events).toEqual([]);
    // The pod restarts (installing again), then is ready again: a new event.
    const installing = sync(s2, observed(first.res, 'Installing'), new Date('2026-11-22T11:05:00Z'));
    expect(installing.events).toEqual([]);
    const again = sync(written(s2, installing.res), observed(first.res, 'Ready'), new Date('2026-11-22T11:06:00Z'));
    expect(again.events.map((e) => e.reason)).toEqual(['Initialized']);
    expect(again.events[0]?.name).not.toBe(ready.events[0]?.name);
  });

  it.each([
    ['InstallationFailed', 'InstallationFailure', 'Install', 'the message'],
    [
      'InitializationFailed',
      'StackInitializationFailure',
      'Initialize',
      'Failed to initialize stack "dev": the message',
    ],
    ['IncompatibleConfiguration', 'StackInitializationFailure', 'Initialize', 'the message'],
    [
      'Unauthenticated',
      'ConnectionFailure',
      'Connect',
      expect.stringMatching(/^the message\. To grant system:auth-delegator/) as unknown as string,
    ],
    ['SourceFetchFailed', 'SourceFetchFailed', 'Sync', 'the message'],
  ])('Stalled %s: a Warning %s, once per stall', (agentReason, reason, action, message) => {
    const first = sync(workspace());
    const s1 = written(workspace(), first.res);
    const failed = observed(first.res, 'Failed', agentReason);
    const stalled = sync(s1, failed);
    expect(stalled.events).toEqual([
      expect.objectContaining({ type: 'Warning', reason, action, message, labels: { 'pulumi.com/stack-name': 'ws' } }),
    ]);
    // Two identical syncs name the same event; once the stall is written, nothing more.
    expect(sync(s1, failed).events).toEqual(stalled.events);
    const s2 = written(s1, stalled.res);
    expect(sync(s2, failed, new Date('2026-11-22T11:00:00Z')).events).toEqual([]);
    // Still stalled after an edit (a new generation): a new event.
    const edited = { ...s2, metadata: { ...s2.metadata, generation: 4 } };
    const after = sync(edited, failed);
    expect(after.events.map((e) => e.reason)).toEqual([reason]);
    expect(after.events[0]?.name).not.toBe(stalled.events[0]?.name);
  });

  it('a stall seen again from a copy older than the last status written is the same event; after a recovery, a new one', () => {
    const first = sync(workspace());
    const s1 = written(workspace(), first.res);
    const failed = observed(first.res, 'Failed', 'SourceFetchFailed');
    // The agent reports the failure. Metacontroller syncs with the Workspace as last written, and
    // again from its informer's copy, which does not have the first status yet: the same stall.
    const stalled = sync(s1, failed);
    expect(stalled.events.map((e) => e.reason)).toEqual(['SourceFetchFailed']);
    expect(sync(workspace(), failed).events).toEqual(stalled.events);
    expect(stalled.res.status.stalls).toBe(1);
    // The pod installs again (a recovery), then fails again: a new event.
    const s2 = written(s1, stalled.res);
    const recovered = sync(s2, observed(first.res, 'Installing'), new Date('2026-11-22T11:05:00Z'));
    expect(recovered.events).toEqual([]);
    expect(recovered.res.status.stalls).toBe(1);
    const again = sync(written(s2, recovered.res), failed, new Date('2026-11-22T11:06:00Z'));
    expect(again.events.map((e) => e.reason)).toEqual(['SourceFetchFailed']);
    expect(again.events[0]?.name).not.toBe(stalled.events[0]?.name);
    expect(again.res.status.stalls).toBe(2);
  });

  it('a stall count that is not one counts as none, and the count wraps after its maximum', () => {
    const first = sync(workspace());
    const failed = observed(first.res, 'Failed', 'InstallationFailed');
    const honest = sync(written(workspace(), first.res), failed);
    for (const stalls of [-1, 1.5, '7', 2 ** 31, { n: 1 }]) {
      const forged = { ...written(workspace(), first.res), status: { ...first.res.status, stalls } } as Workspace;
      const res = sync(forged, failed);
      expect(res.res.status.stalls).toBe(1);
      expect(res.events).toEqual(honest.events);
    }
    const most = { ...written(workspace(), first.res), status: { ...first.res.status, stalls: MAX_STALLS } };
    expect(sync(most, failed).res.status.stalls).toBe(1);
  });

  it('names differ between Workspaces, and none without a uid', () => {
    const first = sync(workspace());
    const failed = observed(first.res, 'Failed', 'InstallationFailed');
    const a = sync(written(workspace(), first.res), failed).events;
    const other = { ...workspace(), metadata: { ...workspace().metadata, uid: 'other-uid' } };
    const b = sync(written(other, first.res), failed).events;
    expect(a[0]?.name).not.toBe(b[0]?.name);
    const noUid = { ...workspace(), metadata: { ...workspace().metadata, uid: undefined } };
    expect(sync(written(noUid, first.res), failed).events).toEqual([]);
  });
});
