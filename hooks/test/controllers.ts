/**
 * The three controllers a Stack's life goes through, composed as Metacontroller composes them in a
 * cluster: the Stack's sync returns Workspace and Update objects; the Workspace controller turns
 * each Workspace into its StatefulSet, Service and Role, and the Update controller each Update into
 * its Job and identity; their statuses are what the Stack sees of them. The builders' requests
 * carry the whole stand-in cluster (clusterOf), so a test reads the Stack's answer together with
 * what the other two controllers make of it: `syncStack` here is the Stack's hook plus the other
 * controllers' answers for its Workspace and Updates, appended to its children.
 */
import type { Stack } from '../../schemas/generated/types';
import type { OperationType } from '../../contract';
import type { HookConfig } from '../src/config';
import { buildUpdate, type UpdateIdentity } from '../src/stack/update';
import { buildJob } from '../src/update/job';
import { stackWorkspace as desiredStackWorkspace } from '../src/stack/workspace';
import { desiredPod, workspaceStatusName, type DesiredPod } from '../src/workspace/pod';
import type { FetchSource } from '../src/workspace/source';
import type { KObject, ObjectMap } from '../src/lib/k8s';
import {
  syncStack as syncStackHook,
  type StackSyncRequest,
  type StackSyncResponse,
  type SyncContext,
} from '../src/stack/sync';
import { syncUpdate } from '../src/update/sync';
import { syncWorkspace } from '../src/workspace/sync';

const clusters = new WeakMap<object, KObject[]>();

/**
 * The status each Workspace's controller answered when the Stack's answer held that Workspace:
 * what Metacontroller writes on the Workspace after that sync, so builders.applyChildren stores it
 * with the Workspace (its `childDigests` are what the Workspace's next syncs keep children by).
 */
const answeredStatuses = new WeakMap<KObject, unknown>();

/** The status the Workspace controller answered for this Workspace of a Stack's answer, if any. */
export function answeredStatusOf(child: KObject): unknown {
  return answeredStatuses.get(child);
}

/** Records the cluster a request was built from (builders.syncRequest). */
export function withCluster<R extends object>(req: R, cluster: KObject[]): R {
  clusters.set(req, cluster);
  return req;
}

function mapOf(objects: readonly KObject[]): ObjectMap {
  const map: ObjectMap = {};
  for (const o of objects) {
    const key = `${o.kind}.${o.apiVersion}`;
    map[key] ??= {};
    map[key][`${o.metadata.namespace ?? 'team-a'}/${o.metadata.name}`] = o;
  }
  return map;
}

/** The objects a Workspace's or an Update's controller owns, by the names it gives them. */
function grandchildrenOf(cluster: readonly KObject[], parent: KObject): KObject[] {
  const name = parent.metadata.name;
  if (parent.kind === 'Workspace')
    return cluster.filter(
      (o) =>
        (['StatefulSet', 'Service', 'Role', 'RoleBinding'].includes(o.kind) &&
          o.metadata.name === `${name}-workspace`) ||
        (o.kind === 'ConfigMap' && o.metadata.name === workspaceStatusName(name)),
    );
  return cluster.filter(
    (o) => ['Job', 'ServiceAccount', 'Role', 'RoleBinding'].includes(o.kind) && o.metadata.name === name,
  );
}

/**
 * The cluster after the Workspace and Update controllers ran on it: each Workspace's and Update's
 * status as their syncs report it from their observed children (Workspaces first: an Update reads its Workspace).
 */
export function withControllerStatus(cluster: readonly KObject[], ctx: SyncContext): KObject[] {
  const ws = cluster.map((o) =>
    o.kind === 'Workspace'
      ? {
          ...o,
          status: syncWorkspace(
            { parent: o, children: mapOf(grandchildrenOf(cluster, o)) },
            { config: ctx.config, now: ctx.now },
          ).status,
        }
      : o,
  );
  const workspaces = ws.filter((o) => o.kind === 'Workspace');
  return ws.map((o) =>
    o.kind === 'Update'
      ? {
          ...o,
          status: syncUpdate(
            { parent: o, children: mapOf(grandchildrenOf(ws, o)), related: mapOf(workspaces) },
            { config: ctx.config, now: ctx.now },
          ).status,
        }
      : o,
  );
}

/** A child of the Stack as Metacontroller stores it: with the Stack as its controller owner. */
function ownedBy(stack: Stack, child: KObject): KObject {
  if (!isStackChild(child) || child.metadata.ownerReferences?.length) return child;
  const owner = {
    apiVersion: stack.apiVersion ?? 'pulumi.com/v1',
    kind: stack.kind ?? 'Stack',
    name: stack.metadata.name,
    uid: stack.metadata.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
  return { ...child, metadata: { ...child.metadata, ownerReferences: [owner] } };
}

/** What the Workspace and Update controllers return for the Stack's answer. */
function grandchildren(res: StackSyncResponse, cluster: readonly KObject[], ctx: SyncContext, stack: Stack): KObject[] {
  const out: KObject[] = [];
  const workspaces = cluster.filter((o) => o.kind === 'Workspace');
  for (const child of res.children) {
    if (child.kind === 'Workspace') {
      // The Workspace as stored: the Stack's answer over the status its own controller last wrote.
      const observed = cluster.find((o) => o.kind === 'Workspace' && o.metadata.name === child.metadata.name);
      const parent: KObject = {
        ...child,
        metadata: { ...child.metadata, generation: observed?.metadata.generation ?? 1 },
        ...(observed?.status ? { status: observed.status } : {}),
      };
      const answer = syncWorkspace(
        { parent: parent, children: mapOf(grandchildrenOf(cluster, child)) },
        { config: ctx.config, now: ctx.now },
      );
      answeredStatuses.set(child, answer.status);
      out.push(...answer.children);
    } else if (child.kind === 'Update') {
      const observed =
        cluster.find((o) => o.kind === 'Update' && o.metadata.name === child.metadata.name) ?? ownedBy(stack, child);
      // A new Update's first syncs make the Job's identity, step by step, the next (right after, as
      // Metacontroller calls it on each new child) its Job.
      let kids: KObject[] = grandchildrenOf(cluster, observed);
      for (let round = 0; round < 3; round++) {
        const answer = syncUpdate(
          { parent: observed, children: mapOf(kids), related: mapOf(workspaces) },
          { config: ctx.config, now: ctx.now },
        );
        kids = [...answer.children.filter((k) => k.kind !== 'Job'), ...kids.filter((k) => k.kind === 'Job')];
        if (round === 2 || answer.children.some((k) => k.kind === 'Job')) {
          out.push(...answer.children);
          break;
        }
      }
    }
  }
  return out;
}

/** The kinds a Stack owns: the rest of the stand-in cluster belongs to its Workspace and Updates. */
const STACK_CHILD_KINDS = new Set(['Workspace', 'Update', 'ConfigMap', 'PersistentVolumeClaim']);

/** Whether the Stack owns `o`: a Workspace's status ConfigMap is its Workspace's. */
export function isStackChild(o: KObject): boolean {
  return STACK_CHILD_KINDS.has(o.kind) && !(o.kind === 'ConfigMap' && o.metadata.name.endsWith('-workspace-status'));
}

/**
 * The Stack's sync hook, its answer followed by what the Workspace and Update controllers make of
 * it. For a request made from a stand-in cluster (builders.syncRequest), the Stack sees its own
 * children as the other two controllers, with the same config and clock, last reported on them.
 */
export function syncStack(req: StackSyncRequest, ctx: SyncContext): StackSyncResponse {
  const cluster = clusters.get(req);
  if (!cluster) return syncStackHook(req, ctx);
  const observed = withControllerStatus(
    cluster.map((o) => ownedBy(req.parent, o)),
    ctx,
  );
  const children = { ...req.children, ...mapOf(observed.filter(isStackChild)) };
  const res = syncStackHook({ ...req, children }, ctx);
  return { ...res, children: [...res.children, ...grandchildren(res, observed, ctx, req.parent)] };
}

/** The StatefulSet, Service and pod hash the Workspace controller makes of a Stack's Workspace for `source`. */
export function stackWorkspacePod(stack: Stack, source: FetchSource, config: HookConfig): DesiredPod {
  const { workspace } = desiredStackWorkspace(stack, source, config);
  return desiredPod({ ...workspace, metadata: { ...workspace.metadata, generation: 1 } }, config);
}

/** The Job the Update controller makes of the Update a Stack creates for one operation. */
export function stackJob(
  stack: Stack,
  type: OperationType,
  message: string,
  id: UpdateIdentity,
  config: HookConfig,
): KObject {
  return buildJob(buildUpdate(stack, type, message, id), type, config);
}
