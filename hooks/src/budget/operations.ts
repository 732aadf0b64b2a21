/**
 * The operations budget (docs/design.md, "The operations budget"): at most `max` Stacks in
 * operation at once cluster-wide, each namespace held to a fair share while others wait, the rest
 * queued first come, first served. Pure functions of what the Stack objects say, so that every
 * replica of the hook server, each with its own mirror of the Stacks (objects/gauges.ts), computes
 * the same queue; nothing is stored but the Stacks' own conditions (Reconciling/Queued).
 *
 * A Stack's phase, from its object alone:
 * - operating: an operation is recorded (`status.currentUpdate`) or it is processing one
 *   (Reconciling, reason StackProcessing): it holds a slot until its Reconciling condition ends;
 * - waiting: it says it is queued (Reconciling, reason Queued), it was never synced (no
 *   conditions), or its spec or reconciliation request is newer than its status says;
 * - idle: anything else (Ready, Stalled, backing off after a failure, waiting for prerequisites).
 * Its need began (the queue's order) when its Reconciling condition turned True; for a Stack never
 * synced, at its creation; for one whose change its status does not show yet, now. Ties: by uid.
 */
import { observedTime } from '../lib/time';
import { Reasons } from '../stack/conditions';

/** Settings: OPERATIONS_MAX (0: no budget). */
export interface OperationsBudget {
  /** Stacks in operation at once, cluster-wide. */
  max: number;
}

export type Phase = 'operating' | 'waiting' | 'idle';

/** What the budget keeps of a Stack (a few short strings: 10,000 Stacks cost a small map). */
export interface BudgetFacts {
  namespace: string;
  uid: string;
  phase: Phase;
  /** When its need began, as the object says (RFC 3339, unchecked); absent: now. */
  since?: string;
}

/** A Stack's place: admitted, or queued with its position (1-based) among those waiting. */
export type Admission =
  | { admitted: true }
  | {
      admitted: false;
      position: number;
      waiting: number;
      running: number;
      max: number;
      namespace: string;
      namespaceRunning: number;
      namespaceShare: number;
    };

function record(v: unknown): Record<string, unknown> | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
}

function text(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** The Reconciling condition, if the status has a well-formed one. */
function reconciling(status: Record<string, unknown> | undefined): {
  status?: string;
  reason?: string;
  since?: string;
} {
  const conditions = Array.isArray(status?.conditions) ? status.conditions : [];
  const c = conditions.map(record).find((x) => x?.type === 'Reconciling');
  const out: { status?: string; reason?: string; since?: string } = {};
  const s = text(c?.status);
  const reason = text(c?.reason);
  const since = text(c?.lastTransitionTime);
  if (s) out.status = s;
  if (reason) out.reason = reason;
  if (since) out.since = since;
  return out;
}

/** A Stack object (observed: any shape) as the budget sees it; undefined without namespace, name or uid. */
export function budgetFacts(object: unknown): BudgetFacts | undefined {
  const o = record(object);
  const meta = record(o?.metadata);
  const namespace = text(meta?.namespace);
  const uid = text(meta?.uid);
  if (!namespace || !uid || !text(meta?.name)) return undefined;
  const status = record(o?.status);
  const r = reconciling(status);
  const facts = (phase: Phase, since: string | undefined): BudgetFacts =>
    since === undefined ? { namespace, uid, phase } : { namespace, uid, phase, since };
  if (record(status?.currentUpdate) || (r.status === 'True' && r.reason === Reasons.StackProcessing))
    return facts('operating', r.since);
  if (r.status === 'True' && r.reason === Reasons.Queued) return facts('waiting', r.since);
  const conditions = Array.isArray(status?.conditions) ? status.conditions : [];
  if (conditions.length === 0) return facts('waiting', text(meta?.creationTimestamp));
  const request = text(record(meta?.annotations)?.['pulumi.com/reconciliation-request']);
  const changed =
    meta?.generation !== status?.observedGeneration ||
    (request !== undefined && request !== text(status?.observedReconcileRequest));
  return changed ? facts('waiting', undefined) : facts('idle', undefined);
}

/**
 * The Stack that is about to start an operation, as the budget sees it: operating if it already
 * is, else waiting, since its Reconciling condition turned True (or its creation, or now), as the
 * mirror will see it once its answer says Queued.
 */
export function selfFacts(object: unknown): BudgetFacts | undefined {
  const facts = budgetFacts(object);
  if (!facts || facts.phase === 'operating') return facts;
  const r = reconciling(record(record(object)?.status));
  const since = r.status === 'True' ? r.since : facts.phase === 'waiting' ? facts.since : undefined;
  return since === undefined
    ? { namespace: facts.namespace, uid: facts.uid, phase: 'waiting' }
    : { namespace: facts.namespace, uid: facts.uid, phase: 'waiting', since };
}

/**
 * Max-min fair shares of `total` slots between namespaces by their demand (operating + waiting):
 * a namespace that asks for less than an equal split gets what it asks, the rest is split among
 * the others (by demand, then name; the last ones get the remainder). Each namespace that asks
 * gets at least 1, so with more namespaces than slots the global cap and arrival order decide,
 * not the names.
 */
export function fairShares(demand: ReadonlyMap<string, number>, total: number): Map<string, number> {
  const sorted = [...demand].sort(([a, x], [b, y]) => x - y || (a < b ? -1 : a > b ? 1 : 0));
  const shares = new Map<string, number>();
  let left = total;
  sorted.forEach(([ns, d], i) => {
    const give = Math.min(d, Math.floor(left / (sorted.length - i)));
    shares.set(ns, Math.max(give, d > 0 ? 1 : 0));
    left -= give;
  });
  return shares;
}

/** The queue's order: when the need began (unknown or in the future: now), then uid. */
function byArrival(now: Date): (a: BudgetFacts, b: BudgetFacts) => number {
  const at = (f: BudgetFacts): number => Math.min(observedTime(f.since, now) ?? now.getTime(), now.getTime());
  return (a, b) => at(a) - at(b) || (a.uid < b.uid ? -1 : a.uid > b.uid ? 1 : 0);
}

/**
 * Whether `self` may start its operation now. Those operating keep their slot (never preempted);
 * the waiting are taken in arrival order while a slot is free cluster-wide and in their
 * namespace's fair share; `self` is admitted if its turn comes within the free slots.
 */
export function admit(
  self: BudgetFacts,
  others: Iterable<BudgetFacts>,
  budget: OperationsBudget,
  now: Date,
): Admission {
  if (self.phase === 'operating' || budget.max <= 0) return { admitted: true };
  let running = 0;
  const nsRunning = new Map<string, number>();
  const demand = new Map<string, number>();
  const waiters: BudgetFacts[] = [self];
  for (const f of others) {
    if (f.uid === self.uid || f.phase === 'idle') continue;
    demand.set(f.namespace, (demand.get(f.namespace) ?? 0) + 1);
    if (f.phase === 'waiting') {
      waiters.push(f);
      continue;
    }
    running++;
    nsRunning.set(f.namespace, (nsRunning.get(f.namespace) ?? 0) + 1);
  }
  demand.set(self.namespace, (demand.get(self.namespace) ?? 0) + 1);
  const shares = fairShares(demand, budget.max);
  waiters.sort(byArrival(now));
  let taken = running;
  const nsTaken = new Map(nsRunning);
  for (const w of waiters) {
    if (taken >= budget.max) break;
    const inNs = nsTaken.get(w.namespace) ?? 0;
    if (inNs >= (shares.get(w.namespace) ?? 0)) continue;
    if (w === self) return { admitted: true };
    taken++;
    nsTaken.set(w.namespace, inNs + 1);
  }
  return {
    admitted: false,
    position: waiters.indexOf(self) + 1,
    waiting: waiters.length,
    running,
    max: budget.max,
    namespace: self.namespace,
    namespaceRunning: nsRunning.get(self.namespace) ?? 0,
    namespaceShare: shares.get(self.namespace) ?? 0,
  };
}

/** The Queued condition's message: where the Stack stands and what it waits for. */
export function queuedMessage(q: Extract<Admission, { admitted: false }>): string {
  return (
    `queued: position ${q.position} of ${q.waiting} waiting; ${q.running} of ${q.max} operations running ` +
    `(namespace ${q.namespace}: ${q.namespaceRunning} running, fair share ${q.namespaceShare})`
  );
}

/** How soon a queued Stack looks again: soon near the front, less often further back (5 to 60 s). */
export function queuedResyncSeconds(q: Extract<Admission, { admitted: false }>): number {
  return Math.min(60, 5 * Math.ceil(q.position / Math.max(1, q.max)));
}

/** The numbers /metrics reports: Stacks queued and in operation, as this replica's mirror sees them. */
export function queueLengths(all: Iterable<BudgetFacts>): { queued: number; running: number } {
  let queued = 0;
  let running = 0;
  for (const f of all) {
    if (f.phase === 'waiting') queued++;
    else if (f.phase === 'operating') running++;
  }
  return { queued, running };
}
