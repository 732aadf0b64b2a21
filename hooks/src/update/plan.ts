/** The update-plan fields of an Update (ours, docs/approval.md): `savePlan` on a preview, `plan` on an up. */
import { PLAN_ID, type OperationType } from '../../../contract';

/** Why an Update's plan fields cannot run, if they cannot. */
export function planProblem(spec: unknown, type: OperationType): string | undefined {
  const s = typeof spec === 'object' && spec !== null ? (spec as Record<string, unknown>) : {};
  if (s.savePlan !== undefined) {
    if (typeof s.savePlan !== 'boolean') return `spec.savePlan must be a boolean; got ${JSON.stringify(s.savePlan)}`;
    if (s.savePlan && type !== 'preview') return `spec.savePlan is for a preview only; this Update is a ${type}`;
  }
  if (s.plan !== undefined) {
    if (typeof s.plan !== 'string' || !PLAN_ID.test(s.plan))
      return `spec.plan must name a preview Update (a DNS label); got ${JSON.stringify(s.plan)}`;
    if (type !== 'up') return `spec.plan is for an up only; this Update is a ${type}`;
  }
  return undefined;
}
