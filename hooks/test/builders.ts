/**
 * Builders for hook requests, and a tiny stand-in for what Metacontroller and the cluster do
 * between two hook calls (apply children, write status, roll out the workspace, finish Jobs), so
 * lifecycle tests read as a story. The e2e suite does the same against a real API server.
 */
import type { Stack, StackSpec, StackStatus } from '../../schemas/generated/types';
import {
  Annotations,
  formatUpdateResult,
  WORKSPACE_STATUS_KEY,
  type UpdateResult,
  type WorkspaceStatus,
} from '../../contract';
import type { HookConfig } from '../src/config';
import { cloneJson, isRecord } from '../src/lib/json';
import { LAST_APPLIED_ANNOTATION, mapKey, type KObject, type ObjectMap } from '../src/lib/k8s';
import type { StackSyncRequest, StackSyncResponse } from '../src/stack/sync';
import { asChild, childrenOf, templateOf, type Child } from './children';
import { answeredStatusOf, isStackChild, withCluster, withControllerStatus } from './controllers';
import type { RefLookup } from '../src/git/ref-lookup';

export const NOW = new Date('2026-11-22T10:00:00Z');

export const testConfig: HookConfig = {
  port: 0,
  programPort: 0,
  host: '127.0.0.1',
  agentImage: 'example.test/pko-agent:v0.1.0',
  workspaceImage: { restricted: 'example.test/pulumi:3-nonroot', baseline: 'example.test/pulumi:3' },
  bodyLimit: 1024 * 1024,
  logLevel: 'silent',
  gitTimeoutMs: 2000,
  gitCacheTtlMs: 20000,
  programServer: {
    url: 'https://pulumi-mc-hooks.pulumi-system.svc',
    ca: '-----BEGIN CERTIFICATE-----\ntest CA\n-----END CERTIFICATE-----\n',
  },
};

export function makeStack(
  spec: Partial<StackSpec> = {},
  meta: Partial<Stack['metadata']> & Record<string, unknown> = {},
  status?: StackStatus,
): Stack {
  const stack: Stack = {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: {
      name: 'my-stack',
      namespace: 'team-a',
      uid: '1f0c6a52-8d1f-4a53-9d7c-0a1b2c3d4e5f',
      generation: 1,
      ...meta,
    },
    spec: { stack: 'dev', programRef: { name: 'my-program' }, ...spec },
  };
  if (status) stack.status = status;
  return stack;
}

export function makeProgram(name = 'my-program', generation = 1, digest = 'sha256:' + 'a'.repeat(64)): KObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name, namespace: 'team-a', generation },
    program: { outputs: { hello: 'world' } },
    status: {
      observedGeneration: generation,
      artifact: {
        path: `programs/team-a/${name}/${generation}`,
        url: `https://pulumi-mc-hooks.pulumi-system.svc/programs/team-a/${name}`,
        revision: String(generation),
        digest,
        lastUpdateTime: '2026-11-22T09:00:00Z',
      },
    },
  };
}

export function objectMap(...objects: KObject[]): ObjectMap {
  const map: ObjectMap = {};
  for (const o of objects) {
    const key = mapKey(o.kind, o.apiVersion);
    map[key] ??= {};
    map[key][`${o.metadata.namespace ?? 'team-a'}/${o.metadata.name}`] = o;
  }
  return map;
}

/** Every child kind the Stack controller declares is always present in a request, even when empty. */
export function childrenMap(...objects: KObject[]): ObjectMap {
  return {
    'Workspace.auto.pulumi.com/v1alpha1': {},
    'Update.auto.pulumi.com/v1alpha1': {},
    'ConfigMap.v1': {},
    'StatefulSet.apps/v1': {},
    'Service.v1': {},
    'Job.batch/v1': {},
    'ServiceAccount.v1': {},
    'Role.rbac.authorization.k8s.io/v1': {},
    'RoleBinding.rbac.authorization.k8s.io/v1': {},
    ...objectMap(...objects),
  };
}

/**
 * A sync request for `stack` in the stand-in cluster `cluster` (every object, whoever owns it): the
 * Stack's own children are what the Workspace and Update controllers report on them when
 * controllers.syncStack answers it.
 */
export function syncRequest(
  stack: Stack,
  cluster: KObject[] = [],
  related: KObject[] = [makeProgram()],
  finalizing = false,
): StackSyncRequest {
  // As the other controllers report with the test bed's config and clock (sent as is over HTTP;
  // controllers.syncStack recomputes them with its own context).
  const reported = withControllerStatus(cluster, { config: testConfig, now: NOW, lookups: noLookups });
  const own = reported.filter(isStackChild);
  return withCluster(
    { parent: stack, children: childrenMap(...own), related: objectMap(...related), finalizing },
    cluster,
  );
}

export const noLookups: ReadonlyMap<string, RefLookup> = new Map();

export function find(res: { children: KObject[] }, kind: string, name?: string): KObject | undefined {
  return res.children.find((c) => c.kind === kind && (name === undefined || c.metadata.name === name));
}

/**
 * The condition of `type` of an object (a Stack, Program, Workspace or Update as the API server has
 * it) or of its status (as a hook answers it). The one condition helper of the unit and e2e tests.
 */
export function condition<C extends { type: string }>(
  of: { status?: { conditions?: C[] } } | { conditions?: C[] } | undefined,
  type: string,
): C | undefined {
  const conditions =
    of === undefined
      ? undefined
      : 'conditions' in of
        ? of.conditions
        : (of as { status?: { conditions?: C[] } }).status?.conditions;
  return conditions?.find((c) => c.type === type);
}

/** The `controller-uid` label value the stand-in gives applied children (Metacontroller: the parent's uid). */
export const STAND_IN_CONTROLLER_UID = '00000000-0000-4000-8000-00000000c0de';

/** What Metacontroller adds to a child it applies, before it records the last-applied copy. */
type Marking = (child: KObject) => void;

/** A CompositeController with `generateSelector`: the `controller-uid` label. */
const byComposite: Marking = (child) => {
  child.metadata.labels = { ...child.metadata.labels, 'controller-uid': STAND_IN_CONTROLLER_UID };
};

/** The top-level fields Metacontroller last applied to an observed child (its annotation), none if unreadable. */
function lastAppliedOf(observed: KObject): Record<string, unknown> {
  const raw = observed.metadata.annotations?.[LAST_APPLIED_ANNOTATION];
  try {
    const parsed: unknown = raw === undefined ? undefined : JSON.parse(raw);
    return isRecord(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/**
 * What the cluster would hold after Metacontroller applied a response: each child as returned,
 * with what Metacontroller adds (`by`: a CompositeController's `controller-uid` label by default),
 * and the last-applied annotation it writes (the child as returned plus that), merged over the
 * observed object (a three-way merge in miniature: the agent's annotations, the fields the hooks
 * never set, such as a status ConfigMap's data, and the server's status survive). A Workspace gets
 * the status its controller answered (controllers.syncStack), as Metacontroller writes it after
 * that sync.
 */
export function applyChildren(observed: KObject[], desired: KObject[], by: Marking = byComposite): KObject[] {
  return desired.map((d) => {
    const old = observed.find((o) => o.kind === d.kind && o.metadata.name === d.metadata.name);
    if (old && (d.kind === 'Job' || d.kind === 'Update' || d.kind === 'PersistentVolumeClaim')) return old; // OnDelete: never updated
    const copy = cloneJson(d);
    by(copy);
    const lastApplied = JSON.stringify(copy);
    // A field neither answered now nor last applied is someone else's (the agent's data): it stays.
    if (old) {
      const previous = lastAppliedOf(old);
      for (const [key, value] of Object.entries(old))
        if (!(key in copy) && !(key in previous)) copy[key] = cloneJson(value);
    }
    copy.metadata.annotations = {
      ...(old?.metadata.annotations ?? {}),
      ...(copy.metadata.annotations ?? {}),
      [LAST_APPLIED_ANNOTATION]: lastApplied,
    };
    copy.metadata.generation =
      (old?.metadata.generation ?? 0) +
      (old && JSON.stringify(old.spec) !== JSON.stringify(copy.spec) ? 1 : old ? 0 : 1);
    const status: unknown = answeredStatusOf(d) ?? old?.status;
    if (status) copy.status = status;
    return copy;
  });
}

/**
 * The agent's report in the status ConfigMap of each workspace StatefulSet (`<statefulset>-status`),
 * for the StatefulSet's current template.
 */
export function agentReports(children: KObject[], report: Omit<WorkspaceStatus, 'hash'>): KObject[] {
  const hashes = new Map(
    children
      .filter((c) => c.kind === 'StatefulSet')
      .map((c) => [`${c.metadata.name}-status`, workspaceHashOf(asChild(c, 'StatefulSet'))]),
  );
  return children.map((c) => {
    const hash = hashes.get(c.metadata.name);
    if (c.kind !== 'ConfigMap' || hash === undefined) return c;
    return { ...c, data: { ...(c.data as object), [WORKSPACE_STATUS_KEY]: JSON.stringify({ hash, ...report }) } };
  });
}

/** The workspace StatefulSet rolled out, its pod ready and the agent reporting Ready. */
export function workspaceBecomesReady(children: KObject[]): KObject[] {
  const rolledOut = children.map((c) => {
    if (c.kind !== 'StatefulSet') return c;
    return {
      ...c,
      status: {
        observedGeneration: c.metadata.generation,
        replicas: 1,
        readyReplicas: 1,
        currentRevision: 'r1',
        updateRevision: 'r1',
      },
    };
  });
  return agentReports(rolledOut, { state: 'Ready', pulumiVersion: 'v3.248.0' });
}

/** The agent reports a workspace failure for the current template. */
export function workspaceFails(children: KObject[], reason: string, message: string): KObject[] {
  return agentReports(children, { state: 'Failed', reason, message });
}

/** A Job finished: the runner wrote its result and the Job controller marked it. */
export function jobFinishes(
  children: KObject[],
  jobName: string,
  result: Partial<UpdateResult> & Pick<UpdateResult, 'state'>,
  endTime = '2026-11-22T10:01:00Z',
): KObject[] {
  return children.map((c) => {
    if (c.kind !== 'Job' || c.metadata.name !== jobName) return c;
    const type = c.metadata.labels?.['auto.pulumi.com/update-type'] as UpdateResult['type'];
    const full: UpdateResult = {
      type,
      message: result.state === 'succeeded' ? 'update succeeded' : 'update failed',
      endTime,
      ...result,
    };
    return {
      ...c,
      metadata: {
        ...c.metadata,
        annotations: { ...c.metadata.annotations, [Annotations.updateResult]: formatUpdateResult(full) },
      },
      status:
        result.state === 'succeeded'
          ? {
              succeeded: 1,
              completionTime: endTime,
              conditions: [{ type: 'Complete', status: 'True', lastTransitionTime: endTime }],
            }
          : {
              failed: 1,
              conditions: [
                { type: 'Failed', status: 'True', reason: 'BackoffLimitExceeded', lastTransitionTime: endTime },
              ],
            },
    };
  });
}

/** The Stack as Metacontroller would leave it after writing the hook's status. */
export function withStatus(stack: Stack, res: StackSyncResponse): Stack {
  return { ...cloneJson(stack), status: cloneJson({ ...res.status, observedGeneration: stack.metadata.generation }) };
}

export function jobsOf(res: { children: readonly unknown[] }): Child<'Job'>[] {
  return childrenOf(res, 'Job');
}

/** The pod template hash the hooks put on a workspace StatefulSet. */
export function workspaceHashOf(sts: Child<'StatefulSet'>): string | undefined {
  return templateOf(sts).metadata.annotations?.[Annotations.workspaceHash];
}
