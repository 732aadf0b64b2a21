/**
 * A thousand distinct Stacks at rest, as Metacontroller's sync requests (for ./scale-resync.ts),
 * derived from the requests recorded on the test bed (bench/requests/: a Stack, its Workspace and
 * its three kept Updates). Per Stack:
 * - names, namespace and UIDs renamed (in the text, so labels, owner references and Metacontroller's
 *   last-applied annotations follow), and every timestamp moved by the same amount so the
 *   recording's last update is an hour ago;
 * - the source varied (seeded): the recorded Program, a git repository at a pinned commit, a git
 *   branch (looked up at the fake git host, ./scale-fakes.ts) or a Flux GitRepository (a related
 *   object with an artifact);
 * - then brought to rest as Metacontroller would leave it, by asking the real hooks: the Stack's
 *   last update is for the source's commit, its Workspace carries the spec (and spec hash) the
 *   Stack hook asks for, the Workspace's StatefulSet and Service the ones the Workspace hook asks
 *   for (merged over the recorded objects, so the API server's defaults and status stay), and its
 *   status the one the Workspace hook answers once Ready. Each
 *   request is checked to be answered as at rest (Stack Ready with no new Update, Workspace Ready,
 *   Updates Complete) before it is used.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Annotations, WORKSPACE_STATUS_KEY } from '../contract';
import { commitOf } from './scale-fakes';

export type SourceKind = 'program' | 'git-commit' | 'git-branch' | 'flux';
export const SOURCE_KINDS: SourceKind[] = ['program', 'git-commit', 'git-branch', 'flux'];

export type Route = '/stack/sync' | '/workspace/sync' | '/update/sync';

export interface HookRequest {
  route: Route;
  body: string;
}

export interface ScaleStack {
  name: string;
  namespace: string;
  source: SourceKind;
  /**
   * Parents whose answered status differs from the one they carry: Metacontroller would write
   * those statuses on every resync (at rest, none should).
   */
  statusWrites: { stack: boolean; workspace: boolean; updates: number };
  stack: HookRequest;
  workspace: HookRequest;
  updates: HookRequest[];
}

/** Answers a hook request (the bench's in-process hook server). */
export type Ask = (route: Route, body: unknown) => Promise<unknown>;

type Json = Record<string, unknown>;
type Children = Record<string, Record<string, Json>>;
interface SyncRequest {
  parent: Json & { metadata: Json; spec: Json; status?: Json };
  children: Children;
  related?: Children;
}
interface Answer {
  status?: { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
  children?: (Json & { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } })[];
}

const REQUESTS = join(__dirname, '..', '..', 'bench', 'requests');
const LAST_APPLIED = 'metacontroller.k8s.io/last-applied-configuration';
const FLUX_API = 'source.toolkit.fluxcd.io/v1';
const WORKSPACE_KEY = 'Workspace.auto.pulumi.com/v1alpha1';

/** The recorded requests' texts, and the agent image and program server they were answered with. */
export function recordings(): { texts: string[]; agentImage: string; programServer: { url: string; ca: string } } {
  const files = ['steady-state-sync.json', 'steady-state-workspace-sync.json'];
  for (let n = 1; n <= 3; n++) files.push(`steady-state-update-sync-${n}.json`);
  const data = files.map((f) => JSON.parse(readFileSync(join(REQUESTS, f), 'utf8')) as Json);
  return {
    texts: data.map((d) => JSON.stringify(d.request)),
    agentImage: data[0]!.agentImage as string,
    programServer: data[0]!.programServer as { url: string; ca: string },
  };
}

/** mulberry32: a small seeded PRNG, so that a seed names one set of Stacks. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function hex(random: () => number, length: number): string {
  let s = '';
  while (s.length < length) s += Math.floor(random() * 16).toString(16);
  return s;
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const TIMESTAMP = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g;

/** The texts with one Stack's names and UIDs, and timestamps moved by `shiftMs`. */
function renamed(texts: string[], i: number, namespace: string, random: () => number, shiftMs: number): string[] {
  const uids = new Map<string, string>();
  const uid = (old: string) => {
    let u = uids.get(old);
    if (!u) {
      const h = hex(random, 32);
      u = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
      uids.set(old, u);
    }
    return u;
  };
  const time = (t: string) => new Date(Date.parse(t) + shiftMs).toISOString().replace(/\.\d+Z$/, 'Z');
  return texts.map((t) =>
    t
      .replaceAll('my-stack', `stack-${i}`)
      .replaceAll('my-program', `program-${i}`)
      .replaceAll('team-a', namespace)
      .replace(UUID, uid)
      .replace(TIMESTAMP, time),
  );
}

/** Objects merged key by key (arrays of equal length item by item), `over` winning: an applied object over a stored one. */
function merged(stored: unknown, over: unknown): unknown {
  if (Array.isArray(stored) && Array.isArray(over) && stored.length === over.length)
    return over.map((v, k) => merged(stored[k], v));
  if (isObject(stored) && isObject(over)) {
    const out: Json = { ...stored };
    for (const [k, v] of Object.entries(over)) out[k] = merged(stored[k], v);
    return out;
  }
  return over;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const keyOf = (o: { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } }) => ({
  group: `${o.kind}.${o.apiVersion}`,
  name: `${o.metadata.namespace}/${o.metadata.name}`,
});

/** The stored object after Metacontroller applied `desired` over it: the new fields and last-applied annotation. */
function applied(stored: Json, desired: Json): Json {
  const next = merged(stored, desired) as Json & { metadata: Json & { annotations?: Record<string, string> } };
  next.metadata.annotations = { ...next.metadata.annotations, [LAST_APPLIED]: JSON.stringify(desired) };
  return next;
}

/**
 * The agent's report in each workspace's status ConfigMap (`<statefulset>-status`), for the new
 * template of its rolled-out StatefulSet.
 */
function agentReports(children: SyncRequest['children']): void {
  for (const [name, statefulSet] of Object.entries(children['StatefulSet.apps/v1'] ?? {})) {
    const spec = statefulSet.spec as { template?: { metadata?: { annotations?: Record<string, string> } } };
    const hash = spec.template?.metadata?.annotations?.[Annotations.workspaceHash];
    const configMap = children['ConfigMap.v1']?.[`${name}-status`];
    if (!configMap) continue;
    const data = (configMap.data ?? {}) as Record<string, string>;
    const report = JSON.parse(data[WORKSPACE_STATUS_KEY] ?? '{}') as Json;
    configMap.data = { ...data, [WORKSPACE_STATUS_KEY]: JSON.stringify({ ...report, hash }) };
  }
}

/** JSON with keys sorted: equal for values Metacontroller takes as equal. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    isObject(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );
}

const statusChanged = (parent: { status?: unknown }, answer: Answer) =>
  canonical(parent.status ?? {}) !== canonical(answer.status ?? {});

function conditionTrue(answer: Answer, type: string): boolean {
  return answer.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
}

function describe(answer: Answer): string {
  return JSON.stringify(
    answer.status?.conditions?.map((c) => `${c.type}=${c.status} ${c.reason ?? ''} ${c.message ?? ''}`),
  );
}

/** One Stack's source, and the commit it resolves to (what its last update must be for). */
function withSource(stack: SyncRequest, kind: SourceKind, i: number, gitUrl: string, random: () => number): string {
  const spec = stack.parent.spec;
  const ns = stack.parent.metadata.namespace as string;
  if (kind === 'program') return '1';
  delete spec.programRef;
  if (stack.related) delete stack.related['Program.pulumi.com/v1'];
  const repo = `org-${i % 37}/infra-${i}`;
  if (kind === 'git-commit') {
    const commit = hex(random, 40);
    Object.assign(spec, { projectRepo: `https://git.example.test/${repo}.git`, commit, repoDir: 'stacks/app' });
    return commit;
  }
  if (kind === 'git-branch') {
    Object.assign(spec, { projectRepo: `${gitUrl}/${repo}.git`, branch: 'main', repoDir: 'stacks/app' });
    return commitOf(repo);
  }
  const commit = hex(random, 40);
  const name = `infra-${i}`;
  spec.fluxSource = { sourceRef: { apiVersion: FLUX_API, kind: 'GitRepository', name }, dir: 'stacks/app' };
  const created = (stack.parent.metadata.creationTimestamp as string) ?? new Date().toISOString();
  const repository = {
    apiVersion: FLUX_API,
    kind: 'GitRepository',
    metadata: {
      name,
      namespace: ns,
      uid: `${hex(random, 8)}-${hex(random, 4)}-${hex(random, 4)}-${hex(random, 4)}-${hex(random, 12)}`,
      resourceVersion: String(100000 + i),
      generation: 1,
      creationTimestamp: created,
    },
    spec: { interval: '1m', url: `https://git.example.test/${repo}.git`, ref: { branch: 'main' }, timeout: '60s' },
    status: {
      artifact: {
        digest: `sha256:${hex(random, 64)}`,
        lastUpdateTime: created,
        path: `gitrepository/${ns}/${name}/${commit}.tar.gz`,
        revision: `main@sha1:${commit}`,
        size: 48213,
        url: `http://source-controller.flux-system.svc.cluster.local./gitrepository/${ns}/${name}/${commit}.tar.gz`,
      },
      conditions: [
        {
          lastTransitionTime: created,
          message: `stored artifact for revision 'main@sha1:${commit}'`,
          observedGeneration: 1,
          reason: 'Succeeded',
          status: 'True',
          type: 'Ready',
        },
      ],
      observedGeneration: 1,
    },
  };
  stack.related = { ...stack.related, [`GitRepository.${FLUX_API}`]: { [`${ns}/${name}`]: repository } };
  return `main@sha1:${commit}`;
}

/**
 * Stacks `count` with sources spread evenly over SOURCE_KINDS in a seeded order, in `namespaces`
 * namespaces, each brought to rest by `ask` and checked.
 */
export async function scaleStacks(opts: {
  count: number;
  seed: number;
  namespaces: number;
  gitUrl: string;
  now: Date;
  ask: Ask;
}): Promise<ScaleStack[]> {
  const { texts } = recordings();
  const random = prng(opts.seed);
  const recordedStack = JSON.parse(texts[0]!) as SyncRequest;
  const lastResync = Date.parse((recordedStack.parent.status!.lastUpdate as Json).lastResyncTime as string);
  const shiftMs = opts.now.getTime() - 3600_000 - lastResync;
  const stacks: ScaleStack[] = [];
  for (let i = 0; i < opts.count; i++) {
    const namespace = `team-${i % opts.namespaces}`;
    const source = SOURCE_KINDS[Math.floor(random() * SOURCE_KINDS.length)]!;
    const [stackText, workspaceText, ...updateTexts] = renamed(texts, i, namespace, random, shiftMs);
    const stack = JSON.parse(stackText!) as SyncRequest;
    const commit = withSource(stack, source, i, opts.gitUrl, random);
    const last = stack.parent.status!.lastUpdate as Json;
    last.lastAttemptedCommit = commit;
    last.lastSuccessfulCommit = commit;
    const label = `stack ${i} (${source})`;

    // The Stack's Workspace as the Stack hook wants it, applied over the stored one.
    const first = (await opts.ask('/stack/sync', stack)) as Answer;
    const desiredWorkspace = first.children?.find((c) => c.kind === 'Workspace');
    if (!desiredWorkspace) throw new Error(`${label}: no Workspace in the answer: ${describe(first)}`);
    const workspaces = stack.children[WORKSPACE_KEY]!;
    const wsName = keyOf(desiredWorkspace).name;
    workspaces[wsName] = applied(workspaces[wsName]!, desiredWorkspace);
    if (first.status) stack.parent.status = first.status;
    const atRest = (await opts.ask('/stack/sync', stack)) as Answer;
    const observedUpdates = Object.keys(stack.children['Update.auto.pulumi.com/v1alpha1'] ?? {});
    const newUpdates = (atRest.children ?? []).filter(
      (c) => c.kind === 'Update' && !observedUpdates.includes(keyOf(c).name),
    );
    if (!conditionTrue(atRest, 'Ready') || newUpdates.length > 0)
      throw new Error(`${label}: not at rest: ${describe(atRest)}, new Updates ${newUpdates.length}`);

    // The Workspace request: the stored Workspace, its StatefulSet and Service as its hook wants them.
    const workspace = JSON.parse(workspaceText!) as SyncRequest;
    workspace.parent = merged(workspace.parent, workspaces[wsName]) as SyncRequest['parent'];
    const wsFirst = (await opts.ask('/workspace/sync', workspace)) as Answer;
    for (const child of wsFirst.children ?? []) {
      const { group, name } = keyOf(child);
      const stored = workspace.children[group]?.[name];
      if (!stored) continue;
      workspace.children[group]![name] = applied(stored, child);
    }
    agentReports(workspace.children);
    // Its status as the hook answers it once Ready (Metacontroller writes it once: the recorded
    // one predates status.childDigests), then the request at rest.
    const wsReady = (await opts.ask('/workspace/sync', workspace)) as Answer;
    if (!conditionTrue(wsReady, 'Ready')) throw new Error(`${label}: Workspace not Ready: ${describe(wsReady)}`);
    if (wsReady.status) workspace.parent.status = wsReady.status;
    const wsAtRest = (await opts.ask('/workspace/sync', workspace)) as Answer;

    // The Updates see the Workspace as it now is.
    const updates = updateTexts.map((t) => {
      const update = JSON.parse(t) as SyncRequest;
      const related = update.related?.[WORKSPACE_KEY];
      if (related?.[wsName]) related[wsName] = workspace.parent;
      return update;
    });
    let updateWrites = 0;
    for (const update of updates) {
      const answer = (await opts.ask('/update/sync', update)) as Answer;
      if (!conditionTrue(answer, 'Complete')) throw new Error(`${label}: Update not Complete: ${describe(answer)}`);
      if (statusChanged(update.parent, answer)) updateWrites++;
    }
    stacks.push({
      name: `stack-${i}`,
      namespace,
      source,
      statusWrites: {
        stack: statusChanged(stack.parent, atRest),
        workspace: statusChanged(workspace.parent, wsAtRest),
        updates: updateWrites,
      },
      stack: { route: '/stack/sync', body: JSON.stringify(stack) },
      workspace: { route: '/workspace/sync', body: JSON.stringify(workspace) },
      updates: updates.map((u) => ({ route: '/update/sync', body: JSON.stringify(u) })),
    });
  }
  return stacks;
}
