/**
 * Upstream's gauges (stacks_active, stacks_failing{namespace,name}, programs_active), derived from
 * the Stack and Program objects themselves: every replica of the hook server mirrors them from the
 * API server (reflector.ts), so every replica, and one just restarted, reports the same numbers.
 * The same mirrors, with those of Workspaces and Updates, tell the events which objects exist
 * (events/recorder.ts).
 * A gauge is exported only while its mirror is synced: absent, rather than wrong, before the first
 * list and after a failed one. pulumi_hook_objects_synced and pulumi_hook_object_watch_failures_total
 * say which, and why.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import type { ProgramReader } from '../program/serve';
import { Reflector, type ListWatch, type Operation, type ReflectorOptions } from './reflector';
import { isRecord } from '../lib/json';
import { budgetFacts, queueLengths, type BudgetFacts } from '../budget/operations';

export type WatchedResource = 'stacks' | 'programs' | 'workspaces' | 'updates';

/** The list and watch of each resource mirrored: the gauges' (Stacks, Programs) and the events' (all but Programs). */
export interface ObjectsApi {
  stacks: ListWatch;
  programs: ListWatch;
  workspaces: ListWatch;
  updates: ListWatch;
}

/** The gauges from objects on (with the API and where it points) or off (and why). */
export type ObjectsAccess = { api: ObjectsApi; via: string } | { off: string };

/** Where failures are logged (pino's shape). */
export interface WarnLog {
  warn(fields: object, msg: string): void;
}

/** What a Stack's gauges need: whether its last operation failed (1), succeeded (0), or none yet (-1). */
type LastOutcome = 1 | 0 | -1;
type DriftOutcome = 1 | 0 | -1;

function metadataKey(object: unknown): string | undefined {
  if (!isRecord(object)) return undefined;
  const meta = Object.hasOwn(object, 'metadata') ? object.metadata : undefined;
  if (!isRecord(meta)) return undefined;
  const { namespace, name } = meta;
  if (typeof namespace !== 'string' || namespace === '' || typeof name !== 'string' || name === '') return undefined;
  return `${namespace}/${name}`;
}

/** A member of an object that is a record, as unknown: undefined when either is not. */
function member(object: unknown, key: string): unknown {
  return isRecord(object) ? object[key] : undefined;
}

/** Upstream counts a Stack failing when status.lastUpdate.state is "failed", not when "succeeded". */
export function stackProjection(object: unknown): { key: string; value: LastOutcome } | undefined {
  const key = metadataKey(object);
  if (key === undefined) return undefined;
  const state = member(member(member(object, 'status'), 'lastUpdate'), 'state');
  return { key, value: state === 'failed' ? 1 : state === 'succeeded' ? 0 : -1 };
}

/** Whether a Stack's last drift check found drift (1), found none (0), or failed or never ran (-1). */
export function driftProjection(object: unknown): DriftOutcome {
  const drifted = member(member(member(object, 'status'), 'lastDriftCheck'), 'drifted');
  return drifted === true ? 1 : drifted === false ? 0 : -1;
}

/** What the mirror keeps of a Stack: what the gauges need, its uid (for the events), its place in the operations budget. */
interface StackFacts {
  outcome: LastOutcome;
  drifted: DriftOutcome;
  uid: string | undefined;
  budget: BudgetFacts | undefined;
}

function uidOf(object: unknown): string | undefined {
  const uid = member(member(object, 'metadata'), 'uid');
  return typeof uid === 'string' && uid !== '' ? uid : undefined;
}

function stackFacts(object: unknown): { key: string; value: StackFacts } | undefined {
  const projected = stackProjection(object);
  return (
    projected && {
      key: projected.key,
      value: {
        outcome: projected.value,
        drifted: driftProjection(object),
        uid: uidOf(object),
        budget: budgetFacts(object),
      },
    }
  );
}

/** The Stacks, Workspaces and Updates the hooks' own watch knows, as the events see them (events/recorder.ts). */
export interface ObjectMirror {
  /** Whether the mirror holds this object: its kind, namespace and name, with this uid. */
  holds(object: { kind: string; namespace: string; name: string; uid?: string }): boolean;
  /** Resolves at the mirrors' next change, when they stop, or when `signal` aborts. */
  changed(signal: AbortSignal): Promise<void>;
}

/**
 * What the mirror keeps of a Workspace: its uid (the events), and what the program server needs
 * (program/serve.ts): the URL it downloads a Program from, if any, and its pod's ServiceAccount.
 */
interface WorkspaceFacts {
  uid: string | undefined;
  /** `spec.flux.url` when it is a URL of this server's Programs' length (longer ones name no Program). */
  programUrl: string | undefined;
  serviceAccount: string;
}

/** A Program's URL is `<server>/programs/<namespace: 63>/<name: 253>`; longer strings are not kept. */
const MAX_PROGRAM_URL = 1024;

function stringAt(object: unknown, ...path: string[]): string | undefined {
  const at = path.reduce<unknown>((o, key) => (isRecord(o) && Object.hasOwn(o, key) ? o[key] : undefined), object);
  return typeof at === 'string' ? at : undefined;
}

export function workspaceProjection(object: unknown): { key: string; value: WorkspaceFacts } | undefined {
  const key = metadataKey(object);
  if (key === undefined) return undefined;
  const url = stringAt(object, 'spec', 'flux', 'url');
  // As workspacePodServiceAccount (workspace/pod.ts): the podTemplate's account, else spec.serviceAccountName.
  const serviceAccount =
    stringAt(object, 'spec', 'podTemplate', 'spec', 'serviceAccountName') ||
    stringAt(object, 'spec', 'serviceAccountName') ||
    'default';
  return {
    key,
    value: {
      uid: uidOf(object),
      programUrl: url !== undefined && url.length <= MAX_PROGRAM_URL ? url : undefined,
      serviceAccount: serviceAccount.slice(0, 253),
    },
  };
}

/** What the mirror keeps of an Update: its uid, for the events. */
function uidProjection(object: unknown): { key: string; value: string | undefined } | undefined {
  const key = metadataKey(object);
  return key === undefined ? undefined : { key, value: uidOf(object) };
}

export function programProjection(object: unknown): { key: string; value: null } | undefined {
  const key = metadataKey(object);
  return key === undefined ? undefined : { key, value: null };
}

const WARN_EVERY_MS = 60_000;

export interface ObjectGaugesOptions {
  log: WarnLog;
  /** Passed to the mirrors (tests: retries without waiting). */
  reflector?: Pick<ReflectorOptions<unknown>, 'sleep' | 'pageSize' | 'watchTimeoutSeconds' | 'listTimeoutMs'>;
  /** The clock of the log rate limit. */
  now?: () => number;
}

export class ObjectGauges {
  /** Always exported: whether each mirror is synced, and the failures. */
  private readonly health = new Registry();
  /** Exported only while the Stack mirror is synced. */
  private readonly stackGauges = new Registry();
  /** Exported only while the Program mirror is synced. */
  private readonly programGauges = new Registry();
  private readonly stacks: Reflector<StackFacts>;
  private readonly programs: Reflector<null>;
  private readonly workspaces: Reflector<WorkspaceFacts>;
  private readonly updates: Reflector<string | undefined>;
  private readonly all: [WatchedResource, Reflector<unknown>][];
  private readonly failures: Counter<'resource' | 'operation'>;
  private readonly lastWarnAt = new Map<WatchedResource, number>();
  private readonly unlogged = new Map<WatchedResource, number>();
  private readonly now: () => number;

  constructor(
    api: ObjectsApi,
    private readonly options: ObjectGaugesOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.failures = new Counter({
      name: 'pulumi_hook_object_watch_failures_total',
      help: 'Failed lists and watches of Stacks, Programs, Workspaces and Updates by this replica, by resource and operation (list, watch); each is retried.',
      labelNames: ['resource', 'operation'],
      registers: [this.health],
    });
    this.stacks = new Reflector<StackFacts>({
      ...options.reflector,
      api: api.stacks,
      project: stackFacts,
      onFailure: (operation, err) => this.failed('stacks', operation, err),
    });
    this.programs = new Reflector<null>({
      ...options.reflector,
      api: api.programs,
      project: programProjection,
      onFailure: (operation, err) => this.failed('programs', operation, err),
    });
    this.workspaces = new Reflector<WorkspaceFacts>({
      ...options.reflector,
      api: api.workspaces,
      project: workspaceProjection,
      onFailure: (operation, err) => this.failed('workspaces', operation, err),
    });
    this.updates = new Reflector<string | undefined>({
      ...options.reflector,
      api: api.updates,
      project: uidProjection,
      onFailure: (operation, err) => this.failed('updates', operation, err),
    });
    this.all = [
      ['stacks', this.stacks],
      ['programs', this.programs],
      ['workspaces', this.workspaces],
      ['updates', this.updates],
    ];
    const mirrors = this.all;
    const synced: Gauge<'resource'> = new Gauge({
      name: 'pulumi_hook_objects_synced',
      help: '1 while this replica mirrors every Stack (resource="stacks"), Program ("programs"), Workspace ("workspaces") or Update ("updates") from the API server, 0 before its first list and after a failed one (the gauges derived from them are then absent).',
      labelNames: ['resource'],
      registers: [this.health],
      collect: () => {
        for (const [resource, mirror] of mirrors) synced.set({ resource }, mirror.isSynced ? 1 : 0);
      },
    });
    const stacksActive: Gauge = new Gauge({
      name: 'stacks_active',
      help: 'Number of Stacks in the cluster.',
      registers: [this.stackGauges],
      collect: () => stacksActive.set(this.stacks.entries.size),
    });
    const stacksFailing: Gauge<'namespace' | 'name'> = new Gauge({
      name: 'stacks_failing',
      help: "1 for a Stack whose last operation failed, 0 for one whose last operation succeeded (status.lastUpdate.state); no series before a Stack's first operation.",
      labelNames: ['namespace', 'name'],
      registers: [this.stackGauges],
      collect: () => {
        stacksFailing.reset();
        for (const [key, { outcome }] of this.stacks.entries) {
          if (outcome < 0) continue;
          const slash = key.indexOf('/');
          stacksFailing.set({ namespace: key.slice(0, slash), name: key.slice(slash + 1) }, outcome);
        }
      },
    });
    const stackDrifted: Gauge<'namespace' | 'name'> = new Gauge({
      name: 'stacks_drifted',
      help: '1 for a Stack whose last drift check found resources changed outside Pulumi, 0 for one whose last check found none (status.lastDriftCheck.drifted); no series for a Stack without drift detection, before its first check, or after a check that failed.',
      labelNames: ['namespace', 'name'],
      registers: [this.stackGauges],
      collect: () => {
        stackDrifted.reset();
        for (const [key, { drifted }] of this.stacks.entries) {
          if (drifted < 0) continue;
          const slash = key.indexOf('/');
          stackDrifted.set({ namespace: key.slice(0, slash), name: key.slice(slash + 1) }, drifted);
        }
      },
    });
    const queue = () => queueLengths(this.allBudgetFacts());
    const queued: Gauge = new Gauge({
      name: 'pulumi_operations_queued',
      help: 'Stacks waiting for a slot of the operations budget (Reconciling, reason Queued) or for their first sync, as this replica mirrors them.',
      registers: [this.stackGauges],
      collect: () => queued.set(queue().queued),
    });
    const running: Gauge = new Gauge({
      name: 'pulumi_operations_running',
      help: 'Stacks in operation (an operation recorded or being processed), as this replica mirrors them.',
      registers: [this.stackGauges],
      collect: () => running.set(queue().running),
    });
    const programsActive: Gauge = new Gauge({
      name: 'programs_active',
      help: 'Number of Programs in the cluster.',
      registers: [this.programGauges],
      collect: () => programsActive.set(this.programs.entries.size),
    });
  }

  private *allBudgetFacts(): Iterable<BudgetFacts> {
    for (const { budget } of this.stacks.entries.values()) if (budget) yield budget;
  }

  /** Every Stack's place in the operations budget (budget/gate.ts); undefined until the Stacks are listed. */
  budgetFacts(): Iterable<BudgetFacts> | undefined {
    return this.stacks.isSynced ? this.allBudgetFacts() : undefined;
  }

  /** The mirror the events consult: only the objects it holds get any (a forged request names others). */
  readonly mirror: ObjectMirror = {
    holds: ({ kind, namespace, name, uid }) => {
      if (uid === undefined || uid === '') return false;
      const key = `${namespace}/${name}`;
      if (kind === 'Stack') return this.stacks.entries.get(key)?.uid === uid;
      if (kind === 'Workspace') return this.workspaces.entries.get(key)?.uid === uid;
      if (kind === 'Update') return this.updates.entries.get(key) === uid;
      return false;
    },
    changed: async (signal) => {
      // The first change of any mirror; the others' waits are let go with it.
      const first = new AbortController();
      const stop = () => first.abort();
      signal.addEventListener('abort', stop, { once: true });
      await Promise.race(this.all.map(([, m]) => m.changed(first.signal)));
      first.abort();
      signal.removeEventListener('abort', stop);
    },
  };

  /**
   * The Workspaces of `namespace` that download from `url` (a Program's URL), or undefined while
   * the Workspace mirror is not synced (the program server answers 503 then).
   */
  programReaders(namespace: string, url: string): ProgramReader[] | undefined {
    if (!this.workspaces.isSynced) return undefined;
    const readers: ProgramReader[] = [];
    const prefix = `${namespace}/`;
    for (const [key, facts] of this.workspaces.entries)
      if (facts.programUrl === url && key.startsWith(prefix))
        readers.push({ workspace: key.slice(prefix.length), serviceAccount: facts.serviceAccount });
    return readers;
  }

  /** Starts the mirrors (in the background); idempotent. */
  start(): void {
    for (const [, m] of this.all) m.start();
  }

  async stop(): Promise<void> {
    await Promise.all(this.all.map(([, m]) => m.stop()));
  }

  /** Resolves once every mirror is synced (or stopped): for tests and the first scrape's log. */
  async whenSynced(): Promise<void> {
    await Promise.all(this.all.map(([, m]) => m.whenSynced()));
  }

  /** Every metric this can export, synced or not (docs test). */
  async metricNames(): Promise<string[]> {
    const all = await Promise.all([this.health, this.stackGauges, this.programGauges].map((r) => r.getMetricsAsJSON()));
    return all.flat().map((m) => m.name);
  }

  /** The Prometheus text of the health metrics and of the gauges whose mirror is synced. */
  async metrics(): Promise<string> {
    const parts = [await this.health.metrics()];
    if (this.stacks.isSynced) parts.push(await this.stackGauges.metrics());
    if (this.programs.isSynced) parts.push(await this.programGauges.metrics());
    return parts.join('');
  }

  /** Counts a failure; logs at most one per resource a minute, the next saying how many were not logged. */
  private failed(resource: WatchedResource, operation: Operation, err: unknown): void {
    this.failures.inc({ resource, operation });
    const now = this.now();
    if (now - (this.lastWarnAt.get(resource) ?? Number.NEGATIVE_INFINITY) < WARN_EVERY_MS) {
      this.unlogged.set(resource, (this.unlogged.get(resource) ?? 0) + 1);
      return;
    }
    this.lastWarnAt.set(resource, now);
    const notLogged = this.unlogged.get(resource) ?? 0;
    this.unlogged.set(resource, 0);
    const message = err instanceof Error ? err.message : String(err);
    this.options.log.warn(
      { resource, operation, err: message.slice(0, 300), ...(notLogged > 0 ? { notLogged } : {}) },
      `cannot ${operation} ${resource} for the ${resource === 'workspaces' || resource === 'updates' ? 'events' : 'gauges'} derived from them; retrying`,
    );
  }
}
