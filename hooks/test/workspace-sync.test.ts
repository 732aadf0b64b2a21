import type { V1StatefulSet } from '@kubernetes/client-node';
import type { Workspace } from '../../schemas/generated/types';
import { Annotations } from '../../contract';
import type { KObject } from '../src/lib/k8s';
import { workspaceEvents } from '../src/workspace/events';
import { syncWorkspace, WORKSPACE_HOLD, type WorkspaceSyncResponse } from '../src/workspace/sync';
import { applyChildren, condition, NOW, objectMap, testConfig } from './builders';
import { asChild, containerOf, envValue, fetchContainerOf, podSpecOf } from './children';

const ctx = { config: testConfig, now: NOW };

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

/** The StatefulSet as the cluster has it: rolled out, the agent reporting `state` for the pod's hash. */
function observed(sts: KObject, state: 'Ready' | 'Failed' | 'Installing', reason?: string): KObject {
  const hash = (sts as unknown as V1StatefulSet).spec?.template.metadata?.annotations?.[Annotations.workspaceHash];
  return {
    ...sts,
    metadata: {
      ...sts.metadata,
      generation: 1,
      annotations: {
        ...sts.metadata.annotations,
        [Annotations.workspaceStatus]: JSON.stringify({
          hash,
          state,
          reason,
          message: 'the message',
          pulumiVersion: 'v3.274.1',
        }),
      },
    },
    status: { observedGeneration: 1, readyReplicas: 1, currentRevision: 'r', updateRevision: 'r' },
  };
}

describe('a Workspace', () => {
  it('gets its StatefulSet, Service and Role, named as upstream, with its labels but not its selector label', () => {
    const res = syncWorkspace({ parent: workspace() }, ctx);
    expect(res.children.map((c) => `${c.kind}/${c.metadata.name}`)).toEqual([
      'StatefulSet/ws-workspace',
      'Service/ws-workspace',
      'Role/ws-workspace',
      'RoleBinding/ws-workspace',
    ]);
    const sts = asChild(res.children[0], 'StatefulSet');
    expect(sts.metadata.labels).toEqual({ team: 'a' });
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
    const res = syncWorkspace({ parent: workspace() }, ctx);
    expect(res.status).toMatchObject({ observedGeneration: 3, address: 'ws-workspace.team-a:50051' });
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'False', reason: 'WaitingForReplicas' });
    expect(condition(res.status, 'Stalled')).toBeUndefined();
  });

  it('reports Ready True and the Pulumi version once the agent is ready for its template', () => {
    const first = syncWorkspace({ parent: workspace() }, ctx);
    const sts = observed(first.children[0]!, 'Ready');
    const res = syncWorkspace({ parent: workspace(), children: objectMap(sts) }, ctx);
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True', reason: 'Succeeded' });
    expect(res.status.pulumiVersion).toBe('v3.274.1');
  });

  it('is Stalled with the reason the agent reports, and says how to fix Unauthenticated', () => {
    const plain = syncWorkspace({ parent: workspace() }, ctx);
    const failed = syncWorkspace(
      { parent: workspace(), children: objectMap(observed(plain.children[0]!, 'Failed', 'InstallationFailed')) },
      ctx,
    );
    expect(condition(failed.status, 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'InstallationFailed',
      message: 'the message',
    });
    const first = syncWorkspace({ parent: workspace({ serviceAccountName: 'deployer' }) }, ctx);
    const unauth = syncWorkspace(
      {
        parent: workspace({ serviceAccountName: 'deployer' }),
        children: objectMap(observed(first.children[0]!, 'Failed', 'Unauthenticated')),
      },
      ctx,
    );
    expect(condition(unauth.status, 'Stalled')?.message).toMatch(
      /--clusterrole=system:auth-delegator --serviceaccount=team-a:deployer$/,
    );
  });

  it('keeps its conditions’ transition times while nothing changes', () => {
    const first = syncWorkspace({ parent: workspace() }, ctx);
    const later = syncWorkspace(
      { parent: { ...workspace(), status: first.status } },
      { ...ctx, now: new Date(NOW.getTime() + 60_000) },
    );
    expect(later.status).toEqual(first.status);
  });

  it('runs a Program handed over as its artifact URL (a Stack with programRef) from the ConfigMap', () => {
    const res = syncWorkspace(
      {
        parent: workspace({
          git: undefined,
          flux: { url: 'configmap://team-a/hello-program/Pulumi.yaml', digest: 'sha256:00' },
        }),
      },
      ctx,
    );
    const sts = asChild(res.children[0], 'StatefulSet');
    expect(fetchContainerOf(sts).command).toEqual(['pko-agent', 'fetch', 'program']);
    expect(podSpecOf(sts).volumes).toContainEqual({ name: 'program', configMap: { name: 'hello-program' } });
    // Another namespace's ConfigMap is not one a pod can mount: it stays a URL to download.
    const other = syncWorkspace(
      {
        parent: workspace({
          git: undefined,
          flux: { url: 'configmap://team-b/x-program/Pulumi.yaml', digest: 'sha256:00' },
        }),
      },
      ctx,
    );
    expect(fetchContainerOf(asChild(other.children[0], 'StatefulSet')).command).toEqual(['pko-agent', 'fetch', 'flux']);
  });
});

describe('a hostile Workspace', () => {
  it('nested deeper than any pod spec is Stalled, and what it has stays', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 20_000; i++) deep = { a: deep };
    const first = syncWorkspace({ parent: workspace() }, ctx);
    const parent = {
      ...workspace({
        podTemplate: { spec: { containers: [], extra: deep } } as unknown as NonNullable<
          Workspace['spec']
        >['podTemplate'],
      }),
      status: first.status,
    };
    const res = syncWorkspace({ parent, children: objectMap(...applyChildren([], first.children)) }, ctx);
    expect(condition(res.status, 'Stalled')).toMatchObject({ status: 'True', reason: 'SpecInvalid' });
    expect(condition(res.status, 'Stalled')?.message).toMatch(
      /^spec\.podTemplate\.spec\.extra.* is nested more than 108 levels deep/,
    );
    // Kept as last answered: the digests the first answer recorded verify them.
    expect(res.children).toEqual(first.children);
    expect(res.status.childDigests).toEqual(first.status.childDigests);
  });
});

describe('a Workspace held for a running operation', () => {
  it('keeps its StatefulSet exactly as it is, even when the hook server would build another', () => {
    const first = syncWorkspace({ parent: workspace() }, ctx);
    const running = observed(applyChildren([], first.children)[0]!, 'Ready');
    const held: Workspace = {
      ...workspace(),
      metadata: { ...workspace().metadata, annotations: { [WORKSPACE_HOLD]: 'my-stack-up-12345678' } },
      status: first.status,
    };
    const upgraded = { ...ctx, config: { ...testConfig, agentImage: 'example.test/pko-agent:v0.2.0' } };
    const res = syncWorkspace({ parent: held, children: objectMap(running) }, upgraded);
    const sts = asChild(res.children[0], 'StatefulSet');
    expect(podSpecOf(sts)).toEqual(podSpecOf(asChild(running, 'StatefulSet')));
    expect(condition(res.status, 'Ready')).toMatchObject({ status: 'True' });
    // Released, it gets the new template.
    const released = syncWorkspace({ parent: workspace(), children: objectMap(running) }, upgraded);
    expect(containerOf(podSpecOf(asChild(released.children[0], 'StatefulSet')), 'bootstrap', true).image).toBe(
      'example.test/pko-agent:v0.2.0',
    );
  });

  it('named longer than its StatefulSet allows is Stalled', () => {
    const long = { ...workspace(), metadata: { ...workspace().metadata, name: 'w'.repeat(43) } };
    const res = syncWorkspace({ parent: long }, ctx);
    expect(res.children).toEqual([]);
    expect(condition(res.status, 'Stalled')?.message).toMatch(/^metadata\.name is 43 characters long/);
  });
});

describe('a Workspace with more than one stack', () => {
  it('is Stalled MultipleStacksUnsupported, saying what to do, and what it has stays', () => {
    const first = syncWorkspace({ parent: workspace() }, ctx);
    const parent = written(workspace({ stacks: [{ name: 'dev' }, { name: 'prod' }] }), first);
    const res = syncWorkspace({ parent, children: objectMap(...applyChildren([], first.children)) }, ctx);
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
    const res = syncWorkspace({ parent: workspace({ stacks }) }, ctx);
    expect(condition(res.status, 'Stalled')?.message).toMatch(
      /^spec\.stacks has 7 entries \("s0", "s1", "s2", "s3", "s4", …\);/,
    );
  });
});

describe('events of a Workspace sync', () => {
  /** Syncs and returns the answer with the events it implies. */
  const sync = (parent: Workspace, children: KObject[] = [], now = NOW) => {
    const res = syncWorkspace({ parent, children: objectMap(...children) }, { ...ctx, now });
    return { res, events: workspaceEvents({ workspace: parent, status: res.status }) };
  };

  it('Initialized when the workspace pod is ready, once per pod, as upstream', () => {
    const first = sync(workspace());
    expect(first.events).toEqual([]);
    const s1 = written(workspace(), first.res);
    const sts = applyChildren([], first.res.children)[0]!;
    const ready = sync(s1, [observed(sts, 'Ready')]);
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
    expect(sync(s1, [observed(sts, 'Ready')]).events).toEqual(ready.events);
    // Resyncs once the status is written: nothing.
    const s2 = written(s1, ready.res);
    expect(sync(s2, [observed(sts, 'Ready')], new Date('2026-11-22T11:00:00Z')).events).toEqual([]);
    // The pod restarts (installing again), then is ready again: a new event.
    const installing = sync(s2, [observed(sts, 'Installing')], new Date('2026-11-22T11:05:00Z'));
    expect(installing.events).toEqual([]);
    const again = sync(written(s2, installing.res), [observed(sts, 'Ready')], new Date('2026-11-22T11:06:00Z'));
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
    const failed = [observed(applyChildren([], first.res.children)[0]!, 'Failed', agentReason)];
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

  it('names differ between Workspaces, and none without a uid', () => {
    const first = sync(workspace());
    const failed = [observed(applyChildren([], first.res.children)[0]!, 'Failed', 'InstallationFailed')];
    const a = sync(written(workspace(), first.res), failed).events;
    const other = { ...workspace(), metadata: { ...workspace().metadata, uid: 'other-uid' } };
    const b = sync(written(other, first.res), failed).events;
    expect(a[0]?.name).not.toBe(b[0]?.name);
    const noUid = { ...workspace(), metadata: { ...workspace().metadata, uid: undefined } };
    expect(sync(written(noUid, first.res), failed).events).toEqual([]);
  });
});
