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
  listenOnLoopback,
} from './answers';
import {
  applyChildren,
  condition,
  jobFinishes,
  jobsOf,
  makeProgram,
  makeStack,
  syncRequest,
  testConfig,
  withStatus,
  workspaceBecomesReady,
} from './builders';
import { at } from './children';
import { LAST_APPLIED_ANNOTATION, type KObject } from '../src/lib/k8s';
import { ctx } from './stories';

const DIR = join(__dirname, '..', '..', 'examples', 'hooks');

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
  const r1 = syncStack(syncRequest(stack), ctx());
  const s1 = withStatus(stack, r1);
  const ready = workspaceBecomesReady(applyChildren([], r1.children));
  // The up is recorded first (status.currentUpdate); the call on that status write makes its Update.
  const recorded = syncStack(syncRequest(s1, ready), ctx());
  const sRecorded = withStatus(s1, recorded);
  const readyRecorded = applyChildren(ready, recorded.children);
  const r2 = syncStack(syncRequest(sRecorded, readyRecorded), ctx());
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
      related: byKind(withControllerStatus(ready, ctx()).filter((o) => o.kind === 'Workspace')),
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

/**
 * What each example must produce; `check` reads the answer through the reader of its hook's
 * schema. `readme`: the README's words for it in the curl walkthrough (the comment above its curl),
 * which `check` holds it to.
 */
interface Expectation {
  path: string;
  status: number;
  readme?: string;
  check: (body: unknown) => void;
}
const expectations: Record<string, Expectation> = {
  'stack-customize.json': {
    path: '/stack/customize',
    status: 200,
    check: (body) =>
      expect(customizeAnswer(body).relatedResources.map((r) => r.resource)).toEqual(['programs', 'configmaps']),
  },
  'stack-sync-new.json': {
    path: '/stack/sync',
    status: 200,
    readme: 'A new Stack: the hooks ask for its Workspace and wait for it to be ready.',
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
    readme:
      'The workspace is ready: the hooks record the `up` as currentUpdate, and on the next call (to that status write) make its Update, which the Update controller runs as a Job.',
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
    readme:
      'The workspace is ready: the hooks record the `up` as currentUpdate, and on the next call (to that status write) make its Update, which the Update controller runs as a Job.',
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
    readme: 'The Job reported success: lastUpdate, outputs (secrets masked as "[secret]"), Ready=True.',
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
    readme: 'A typo in the spec: Stalled/SpecInvalid says what to fix, and every child is kept as it was.',
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
    readme: "The same, but someone rewrote the Workspace's last-applied copy: HTTP 409 naming the child, nothing kept.",
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
      expect(b.status.artifact?.url).toBe('https://pulumi-mc-hooks.pulumi-system.svc/programs/team-a/my-program');
      expect(b.attachments).toEqual([]);
    },
  },
  'malformed-no-parent.json': {
    path: '/stack/sync',
    status: 400,
    readme:
      'A malformed request: HTTP 400 naming the field as a JSON Pointer: {"error":"Bad Request","field":"/parent","message":"/parent is required"}',
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

  describe("the README's curl walkthrough", () => {
    const walkthrough = readmeWalkthrough();

    it('posts each example to the path its hook serves, with the words its expectation holds it to', () => {
      expect(walkthrough.curls.length).toBeGreaterThan(0);
      for (const c of walkthrough.curls) {
        const e = expectations[c.file];
        expect({ file: c.file, path: e?.path, readme: e?.readme }).toEqual({
          file: c.file,
          path: c.path,
          readme: c.claim,
        });
      }
      // Every example with README words is in the walkthrough.
      const walked = new Set(walkthrough.curls.map((c) => c.file));
      for (const [file, e] of Object.entries(expectations)) if (e.readme !== undefined) expect(walked).toContain(file);
    });

    it('names every other example, with the path it is posted to', () => {
      const walked = new Set(walkthrough.curls.map((c) => c.file));
      const others = Object.keys(expectations).filter((f) => !walked.has(f));
      expect(Object.keys(walkthrough.alsoThere).sort()).toEqual(others.sort());
      for (const [file, path] of Object.entries(walkthrough.alsoThere)) expect(path).toBe(expectations[file]?.path);
    });

    it('shows the exact answer where it prints one', async () => {
      const shown = walkthrough.curls.filter((c) => /\{.*\}/.test(c.claim));
      expect(shown.map((c) => c.file)).toEqual(['malformed-no-parent.json']);
      const { app } = buildServer(testConfig, { logger: false });
      try {
        const base = await listenOnLoopback(app);
        for (const c of shown) {
          const res = await request(`${base}${c.path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: readFileSync(join(DIR, c.file)),
          });
          expect(await res.body.json()).toEqual(JSON.parse(/\{.*\}/.exec(c.claim)![0]));
        }
      } finally {
        await app.close();
      }
    });
  });

  describe('posted to a real server (as the README does with curl)', () => {
    let base: string;
    let close: () => Promise<void>;
    beforeAll(async () => {
      const { app } = buildServer(testConfig, { logger: false });
      base = await listenOnLoopback(app);
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

/**
 * The README's section "Try the hooks with curl": each curl of its code block (the example file,
 * the path, and the comment above it, the claim), and the examples its "Also there:" sentence
 * names (file -> path).
 */
function readmeWalkthrough(): {
  curls: { file: string; path: string; claim: string }[];
  alsoThere: Record<string, string | undefined>;
} {
  const readme = readFileSync(join(__dirname, '..', '..', 'README.md'), 'utf8');
  const section = readme.split('\n## Try the hooks with curl\n')[1]?.split('\n## ')[0] ?? '';
  const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? '';
  const curls: { file: string; path: string; claim: string }[] = [];
  let comment: string[] = [];
  let claim = '';
  for (const line of block.split('\n')) {
    const c = /^# ?(.*)$/.exec(line.trim());
    if (c) {
      comment.push(c[1]!);
      continue;
    }
    if (comment.length > 0) [claim, comment] = [comment.join(' '), []];
    const curl = /^curl .*localhost:8080(\/\S+) .*-d @examples\/hooks\/(\S+\.json)/.exec(line.trim());
    if (curl) curls.push({ file: curl[2]!, path: curl[1]!, claim });
  }
  const also = /\nAlso there: ([\s\S]*?)\.\n/.exec(section)?.[1] ?? '';
  const alsoThere: Record<string, string | undefined> = {};
  for (const m of also.matchAll(/`([\w-]+\.json)`(?: \(`(\/[\w/]+)`)?/g)) alsoThere[m[1]!] = m[2];
  return { curls, alsoThere };
}

function withoutProgramRef<T extends { programRef?: unknown }>(spec: T): Omit<T, 'programRef'> {
  const rest: T = { ...spec };
  delete rest.programRef;
  return rest;
}
