import type { DriftCheckState, StackStatus } from '../../../schemas/generated/types';
import { MAX_CHANGED_URNS } from '../../../contract';
import { isRecord, MAX_NESTING, nestedDeeperThan } from '../lib/json';
import { carriedPlan } from './plan';

/**
 * What a sync carries over from the observed status (the previous answer, as written) before it
 * decides anything: lastUpdate, currentUpdate, projectInfo and outputsTo with their scalar fields, outputs
 * unless nested deeper than MAX_NESTING, and the conditions (applyMark keeps only their fields).
 * The status is the hooks' own output, but anyone allowed to write the status subresource can put
 * anything there; what cannot be the hooks' is left out rather than copied into the answer, where
 * a value nested thousands of levels deep would overflow the stack of the JSON serialiser. An
 * unexpected status never stalls a Stack: outputs left out come back with the next `up`.
 */
export function carriedStatus(observed: unknown): StackStatus {
  const status: StackStatus = {};
  if (!isRecord(observed)) return status;
  // Carried over by copy: the decision replaces these objects, it never edits them in place.
  if (isRecord(observed.lastUpdate)) status.lastUpdate = scalarsOf(observed.lastUpdate);
  if (isRecord(observed.currentUpdate)) status.currentUpdate = scalarsOf(observed.currentUpdate);
  if (isRecord(observed.outputs) && !nestedDeeperThan(observed.outputs, MAX_NESTING))
    status.outputs = { ...observed.outputs };
  if (isRecord(observed.projectInfo))
    status.projectInfo = scalarsOf(observed.projectInfo) as unknown as StackStatus['projectInfo'];
  // Only whole: the CRD requires its three fields, and a status missing one could never be written back.
  const to = observed.outputsTo;
  if (isRecord(to) && typeof to.kind === 'string' && typeof to.name === 'string' && typeof to.state === 'string')
    status.outputsTo = { kind: to.kind, name: to.name, state: to.state };
  const driftCheck = carriedDriftCheck(observed.lastDriftCheck);
  if (driftCheck) status.lastDriftCheck = driftCheck;
  const plan = carriedPlan(observed.plan);
  if (plan) status.plan = plan;
  // Absorbing a result may set conditions of its own (outputs.ts); respond() adds the kstatus ones.
  if (Array.isArray(observed.conditions)) status.conditions = observed.conditions as StackStatus['conditions'];
  return status;
}

/** The members of an object whose values are strings, numbers or booleans. */
function scalarsOf(value: Record<string, unknown>): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [key, v] of Object.entries(value)) {
    if (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') out[key] = v;
  }
  return out;
}

/** The observed `status.lastDriftCheck`, carried over field by field . */
function carriedDriftCheck(observed: unknown): DriftCheckState | undefined {
  if (!isRecord(observed)) return undefined;
  const check: DriftCheckState = {};
  for (const key of ['time', 'name', 'message'] as const)
    if (typeof observed[key] === 'string') check[key] = observed[key];
  if (observed.state === 'succeeded' || observed.state === 'failed') check.state = observed.state;
  if (typeof observed.drifted === 'boolean') check.drifted = observed.drifted;
  if (typeof observed.changedResources === 'number') check.changedResources = observed.changedResources;
  if (Array.isArray(observed.urns))
    check.urns = observed.urns.filter((u): u is string => typeof u === 'string').slice(0, MAX_CHANGED_URNS);
  return check;
}
