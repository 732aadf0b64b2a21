import type { V1ConfigMap } from '@kubernetes/client-node';
import type { Stack } from '../../../schemas/generated/types';
import { Annotations, Labels } from '../../../contract';
import { parseDuration } from '../lib/duration';
import { findObject, objectsOf, type KObject, type ObjectMap } from '../lib/k8s';
import { observedTime } from '../lib/time';
import { PULUMI_API_VERSION } from '../lib/api-versions';

/**
 * Upstream re-runs an out-of-date prerequisite by patching its reconciliation-request annotation.
 * A hook may only shape its own children, so the dependent asks instead: it keeps a small ConfigMap
 * child labelled with the prerequisite's name, which the prerequisite sees as a related object and
 * answers with an update. The request names the prerequisite's last update, so it is satisfied as
 * soon as a newer one exists, and the dependent drops it once the prerequisite is fresh.
 */
export const REFRESH_LABEL = 'pulumi.com/refresh-requested-for';
const AFTER_KEY = 'after';
const REQUESTED_BY_KEY = 'requestedBy';

export function refreshRequestName(dependent: string, prerequisite: string): string {
  return `${dependent}-refresh-${prerequisite}`;
}

export interface PrerequisiteCheck {
  /** Messages of unmet prerequisites, in spec order. */
  unmet: string[];
  /** Refresh requests to keep as children while waiting. */
  refreshRequests: KObject[];
}

export function checkPrerequisites(stack: Stack, related: ObjectMap | undefined, now: Date): PrerequisiteCheck {
  const ns = stack.metadata.namespace ?? '';
  const name = stack.metadata.name;
  const failures: { name: string; error: string }[] = [];
  const refreshRequests: KObject[] = [];
  for (const p of stack.spec.prerequisites ?? []) {
    const pre = findObject<Stack>(related, 'Stack', PULUMI_API_VERSION, ns, p.name);
    if (!pre) {
      failures.push({ name: p.name, error: `stacks.pulumi.com "${p.name}" not found` });
      continue;
    }
    const last = pre.status?.lastUpdate;
    const request = pre.metadata.annotations?.[Annotations.reconciliationRequest] ?? '';
    if (!last || last.generation !== pre.metadata.generation || (last.reconcileRequest ?? '') !== request) {
      failures.push({ name: p.name, error: 'prerequisite has not run to completion' });
      continue;
    }
    if (last.state !== 'succeeded') {
      failures.push({ name: p.name, error: 'prerequisite failed' });
      continue;
    }
    const within = p.requirement?.succeededWithinDuration;
    if (within !== undefined) {
      const ended = observedTime(last.lastResyncTime, now);
      // Validation refused a spec with an invalid duration; NaN here would compare false, as before.
      if (ended === undefined || now.getTime() - ended > (parseDuration(within) ?? NaN)) {
        failures.push({
          name: p.name,
          error: `prerequisite is out of date (last succeeded at ${last.lastResyncTime ?? 'an unknown time'}, needed within ${within})`,
        });
        refreshRequests.push({
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: {
            name: refreshRequestName(name, p.name),
            namespace: ns,
            labels: { [Labels.stackName]: name, [REFRESH_LABEL]: p.name },
          },
          data: { [AFTER_KEY]: `after-${last.name}`, [REQUESTED_BY_KEY]: name },
        });
      }
    }
  }
  const [only] = failures;
  const unmet =
    failures.length === 1 && only
      ? [`prerequisite not satisfied for "${only.name}": ${only.error}`]
      : failures.length > 1
        ? [
            `multiple prerequisites were not satisfied ${failures.map((f) => f.name).join(', ')}: ${failures.map((f) => `${f.name}: ${f.error}`).join('; ')}`,
          ]
        : [];
  return { unmet, refreshRequests };
}

/** Dependents asking this Stack to run again after its last update (see REFRESH_LABEL). */
export function refreshRequestsFor(stack: Stack, related: ObjectMap | undefined): string[] {
  const name = stack.metadata.name;
  const last = stack.status?.lastUpdate?.name;
  if (!last) return [];
  return objectsOf<V1ConfigMap>(related, 'ConfigMap', 'v1')
    .filter((cm) => cm.metadata.labels?.[REFRESH_LABEL] === name && cm.data?.[AFTER_KEY] === `after-${last}`)
    .map((cm) => cm.data?.[REQUESTED_BY_KEY] ?? cm.metadata.name)
    .sort();
}
