/**
 * The request bodies in examples/hooks/ (the README's curl walkthrough) are built here from the
 * same builders the other tests use, so they always match the hooks (the workspace hash in a
 * "ready" example must be the one the hooks compute). Each one is then posted to a real server and
 * its answer checked against the table below.
 *
 * Refresh them after a change with: UPDATE_EXAMPLES=1 npx jest hooks/test/examples.test.ts
 */
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { request } from 'undici';
import { Annotations, SECRET_MASK } from '../../contract';
import { syncStack, withControllerStatus } from './controllers';
import { buildServer } from '../src/server';
import {
  customizeAnswer,
  errorAnswer,
  programSyncAnswer,
  stackSyncAnswer,
  updateSyncAnswer,
  workspaceSyncAnswer,
} from './answers';
import {
  applyChildren,
  condition,
  jobFinishes,
  jobsOf,
  makeProgram,
  makeStack,
  noLookups,
  NOW,
  syncRequest,
  testConfig,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { asChild, at } from './children';
import { LAST_APPLIED_ANNOTATION, type KObject } from '../src/lib/k8s';

const DIR = join(__dirname, '..', '..', 'examples', 'hooks');
const ctx = { config: testConfig, now: NOW, lookups: noLookups };

function buildExamples(): Record<string, unknown> {
  const controller = {
    apiVersion: 'metacontroller.k8s.io/v1alpha1',
    kind: 'CompositeController',
    metadata: { name: 'pulumi-stacks' },
  };
  const stack = makeStack({
    envRefs: { PULUMI_CONFIG_PASSPHRASE: { type: 'Literal', literal: { value: 'example' } } },
    backend: 'file:///state',
  });
  const r1 = syncStack(syncRequest(stack), ctx);
  const s1 = withStatus(stack, r1);
  const ready = workspaceBecomesReady(applyChildren([], r1.children));
  // The up is recorded first (status.currentUpdate); the call on that status write makes its Update.
  const recorded = syncStack(syncRequest(s1, ready), ctx);
  const sRecorded = withStatus(s1, recorded);
  const readyRecorded = applyChildren(ready, recorded.children);
  const r2 = syncStack(syncRequest(sRecorded, readyRecorded), ctx);
  const s2 = withStatus(sRecorded, r2);
  const running = applyChildren(readyRecorded, r2.children);
  const job = at(jobsOf(r2), 0, 'Job');
  const finished = jobFinishes(running, job.metadata.name, {
    state: 'succeeded',
    message: 'update succeeded',
    outputs: { url: 'https://example.test', dbPassword: SECRET_MASK },
    projectInfo: { name: 'my-program', runtime: 'yaml' },
  });
  const deleting = { ...s2, metadata: { ...s2.metadata, deletionTimestamp: '2026-11-22T10:05:00Z' } };
  const named = (kind: string, objects: KObject[]): KObject => {
    const found = objects.find((o) => o.kind === kind);
    if (!found) throw new Error(`no ${kind}`);
    return found;
  };
  const update = named('Update', running);
  const byKind = (objects: KObject[]) => {
    const map: Record<string, Record<string, KObject>> = {};
    for (const o of objects) (map[`${o.kind}.${o.apiVersion}`] ??= {})[`team-a/${o.metadata.name}`] = o;
    return map;
  };
  const program = makeProgram();
  // A Stack half edited to a git source (invalid: its children are kept as they are).
  const halfEdited = {
    ...s2,
    spec: { ...withoutProgramRef(s2.spec), projectRepo: 'https://github.com/example/infra.git' },
  };
  // Its Workspace's last-applied copy rewritten by someone else: not what the status's digest records.
  const changed = finished.map((o) => {
    if (o.kind !== 'Workspace') return o;
    const copy = JSON.parse(o.metadata.annotations?.[LAST_APPLIED_ANNOTATION] ?? '{}') as KObject;
    copy.spec = { ...(copy.spec as object), serviceAccountName: 'cluster-admin-holder' };
    return {
      ...o,
      metadata: {
        ...o.metadata,
        annotations: { ...o.metadata.annotations, [LAST_APPLIED_ANNOTATION]: JSON.stringify(copy) },
      },
    };
  });
  return {
    'stack-customize.json': { controller, parent: stack },
    'stack-sync-new.json': { controller, ...syncRequest(stack) },
    'workspace-sync.json': {
      controller: { ...controller, metadata: { name: 'pulumi-workspaces' } },
      parent: {
        ...named('Workspace', r1.children),
        metadata: { ...named('Workspace', r1.children).metadata, generation: 1 },
      },
      children: { 'StatefulSet.apps/v1': {}, 'Service.v1': {} },
    },
    'update-sync.json': {
      controller: { ...controller, metadata: { name: 'pulumi-updates' } },
      parent: { ...update, status: {} },
      // Its identity exists; its Workspace is ready (as syncRequest reports it).
      children: byKind(
        running.filter((o) => o.metadata.name === update.metadata.name && o.kind !== 'Update' && o.kind !== 'Job'),
      ),
      related: byKind(withControllerStatus(ready, ctx).filter((o) => o.kind === 'Workspace')),
    },
    'stack-sync-workspace-ready.json': { controller, ...syncRequest(s1, ready) },
    'stack-sync-start.json': { controller, ...syncRequest(sRecorded, readyRecorded) },
    'stack-sync-running.json': { controller, ...syncRequest(s2, running) },
    'stack-sync-succeeded.json': { controller, ...syncRequest(s2, finished) },
    'stack-sync-invalid.json': {
      controller,
      // A Program Stack moved to git, half edited: the repository is there, the commit or branch is not.
      ...syncRequest(halfEdited, finished),
    },
    'stack-sync-changed-child.json': { controller, ...syncRequest(halfEdited, changed) },
    'stack-sync-program-missing.json': { controller, ...syncRequest(s2, finished, []) },
    'stack-finalize.json': { controller, ...syncRequest(deleting, finished, [program], true) },
    'program-sync.json': {
      controller: {
        apiVersion: 'metacontroller.k8s.io/v1alpha1',
        kind: 'DecoratorController',
        metadata: { name: 'pulumi-programs' },
      },
      object: {
        apiVersion: 'pulumi.com/v1',
        kind: 'Program',
        metadata: {
          name: 'my-program',
          namespace: 'team-a',
          generation: 1,
          uid: '5d1e7c8a-0000-4000-8000-000000000001',
        },
        program: { variables: { greeting: 'hello' }, outputs: { greeting: '${greeting}' } },
      },
      attachments: { 'ConfigMap.v1': {} },
      related: {},
      finalizing: false,
    },
    'malformed-no-parent.json': { controller, children: {} },
  };
}

/** What each example must produce; `check` reads the answer through the reader of its hook's schema. */
const expectations: Record<string, { path: string; status: number; check: (body: unknown) => void }> = {
  'stack-customize.json': {
    path: '/stack/customize',
    status: 200,
    check: (body) =>
      expect(customizeAnswer(body).relatedResources.map((r) => r.resource)).toEqual(['programs', 'configmaps']),
  },
  'stack-sync-new.json': {
    path: '/stack/sync',
    status: 200,
    check: (body) => {
      const b = stackSyncAnswer(body);
      // The Stack's Workspace; the Workspace controller makes its StatefulSet (workspace-sync.json).
      expect(b.children.map((c) => `${c.kind}/${c.metadata.name}`)).toEqual(['Workspace/my-stack']);
      expect(condition(b.status, 'Reconciling')?.message).toBe('waiting for workspace readiness');
    },
  },
  'workspace-sync.json': {
    path: '/workspace/sync',
    status: 200,
    check: (body) => {
      const b = workspaceSyncAnswer(body);
      expect(b.children.map((c) => `${c.kind}/${c.metadata.name}`)).toEqual([
        'StatefulSet/my-stack-workspace',
        'Service/my-stack-workspace',
        'Role/my-stack-workspace',
        'RoleBinding/my-stack-workspace',
        'ConfigMap/my-stack-workspace-status',
      ]);
      expect(condition(b.status, 'Ready')).toMatchObject({ status: 'False', reason: 'WaitingForReplicas' });
    },
  },
  'update-sync.json': {
    path: '/update/sync',
    status: 200,
    check: (body) => {
      const b = updateSyncAnswer(body);
      expect(b.children.map((c) => c.kind)).toEqual(['Job', 'ServiceAccount', 'Role', 'RoleBinding']);
      expect(condition(b.status, 'Progressing')).toMatchObject({ status: 'True' });
    },
  },
  'stack-sync-workspace-ready.json': {
    path: '/stack/sync',
    status: 200,
    check: (body) => {
      const b = stackSyncAnswer(body);
      // Recorded, not made yet: the next call (on this status write) makes the Update.
      expect(b.children.filter((c) => c.kind === 'Update')).toHaveLength(0);
      expect(b.status.currentUpdate?.name).toMatch(/^my-stack-up-/);
    },
  },
  'stack-sync-start.json': {
    path: '/stack/sync',
    status: 200,
    check: (body) => {
      const b = stackSyncAnswer(body);
      // The Update the status records; the Update controller runs it as a Job (update-sync.json).
      expect(b.children.filter((c) => c.kind === 'Update').map((c) => c.metadata.name)).toEqual([
        b.status.currentUpdate?.name,
      ]);
    },
  },
  'stack-sync-running.json': {
    path: '/stack/sync',
    status: 200,
    check: (body) =>
      expect(condition(stackSyncAnswer(body).status, 'Reconciling')?.message).toBe('stack is being processed'),
  },
  'stack-sync-succeeded.json': {
    path: '/stack/sync',
    status: 200,
    check: (body) => {
      const b = stackSyncAnswer(body);
      expect(b.status.lastUpdate?.state).toBe('succeeded');
      expect(b.status.outputs).toEqual({ dbPassword: '[secret]', url: 'https://example.test' });
      expect(condition(b.status, 'Ready')?.status).toBe('True');
    },
  },
  'stack-sync-invalid.json': {
    path: '/stack/sync',
    status: 200,
    check: (body) => {
      const b = stackSyncAnswer(body);
      expect(condition(b.status, 'Stalled')).toMatchObject({
        reason: 'SpecInvalid',
        message: 'spec.commit, spec.branch: missing "commit" or "branch"; set one of them',
      });
      // Everything it had is kept: its Workspace and its Update.
      expect(b.children.map((c) => c.kind)).toEqual(['Workspace', 'Update']);
    },
  },
  'stack-sync-changed-child.json': {
    path: '/stack/sync',
    status: 409,
    check: (body) =>
      expect(errorAnswer(body)).toMatchObject({
        error: 'Conflict',
        field: '/children/Workspace.auto.pulumi.com~1v1alpha1/team-a~1my-stack',
        message: expect.stringContaining('is not what the operator last applied') as string,
      }),
  },
  'stack-sync-program-missing.json': {
    path: '/stack/sync',
    status: 200,
    check: (body) => {
      const b = stackSyncAnswer(body);
      expect(condition(b.status, 'Stalled')?.reason).toBe('SourceUnavailable');
      expect(b.resyncAfterSeconds).toBe(30);
    },
  },
  'stack-finalize.json': {
    path: '/stack/finalize',
    status: 200,
    check: (body) => expect(stackSyncAnswer(body).finalized).toBe(true),
  },
  'program-sync.json': {
    path: '/program/sync',
    status: 200,
    check: (body) => {
      const b = programSyncAnswer(body);
      expect(b.status.artifact?.revision).toBe('1');
      expect(asChild(b.attachments[0], 'ConfigMap').data?.['Pulumi.yaml']).toContain('name: my-program');
    },
  },
  'malformed-no-parent.json': {
    path: '/stack/sync',
    status: 400,
    check: (body) =>
      expect(errorAnswer(body)).toMatchObject({
        error: 'Bad Request',
        field: '/parent',
        message: '/parent is required',
      }),
  },
};

describe('examples/hooks', () => {
  const examples = buildExamples();

  it('are up to date (UPDATE_EXAMPLES=1 npx jest hooks/test/examples.test.ts refreshes them)', () => {
    for (const [file, body] of Object.entries(examples)) {
      const text = JSON.stringify(body, null, 2) + '\n';
      if (process.env.UPDATE_EXAMPLES === '1') writeFileSync(join(DIR, file), text);
      expect(readFileSync(join(DIR, file), 'utf8')).toBe(text);
    }
    expect(
      readdirSync(DIR)
        .filter((f) => f.endsWith('.json'))
        .sort(),
    ).toEqual(Object.keys(examples).sort());
  });

  it('each has an expectation', () => {
    expect(Object.keys(expectations).sort()).toEqual(Object.keys(examples).sort());
  });

  describe('posted to a real server (as the README does with curl)', () => {
    let base: string;
    let close: () => Promise<void>;
    beforeAll(async () => {
      const { app } = buildServer(testConfig, { logger: false });
      await app.listen({ port: 0, host: '127.0.0.1' });
      base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
      close = () => app.close();
    });
    afterAll(() => close());

    it.each(Object.keys(expectations))('%s', async (file) => {
      const e = expectations[file]!;
      const res = await request(`${base}${e.path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: readFileSync(join(DIR, file)),
      });
      expect(res.statusCode).toBe(e.status);
      e.check(await res.body.json());
    });
  });
});

export { Annotations };

function withoutProgramRef<T extends { programRef?: unknown }>(spec: T): Omit<T, 'programRef'> {
  const rest: T = { ...spec };
  delete rest.programRef;
  return rest;
}
