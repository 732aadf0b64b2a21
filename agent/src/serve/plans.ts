/**
 * Update plans in the workspace pod: a preview with `savePlan` writes one (`pulumi preview
 * --save-plan`), an `up` with `plan` applies exactly it (`pulumi up --plan`). They live on the pod's
 * shared emptyDir, named by the id (a DNS label, checked by parseOperationRequest), so a plan is
 * only ever applied by the workspace pod that previewed it. Pulumi writes secret values in a plan
 * encrypted with the stack's secrets provider; the agent never reads or logs a plan's contents.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Paths, PLAN_ID, PLAN_NOT_FOUND, type OperationRequest } from '../../../contract';

/** The file of a plan id, or undefined for an id that is not one (never a path outside the directory). */
export function planFile(id: string, dir: string = Paths.plans): string | undefined {
  return PLAN_ID.test(id) ? path.join(dir, `${id}.json`) : undefined;
}

/** The CLI flags an operation's plan fields add. */
export function planArgs(req: OperationRequest, dir: string = Paths.plans): string[] {
  if (req.type === 'preview' && req.savePlan) {
    const file = planFile(req.savePlan, dir);
    return file ? ['--save-plan', file] : [];
  }
  if (req.type === 'up' && req.plan) {
    const file = planFile(req.plan, dir);
    return file ? ['--plan', file] : [];
  }
  return [];
}

/**
 * Readies the plan directory for a preview that saves a plan, and checks that the plan an `up`
 * applies is there: undefined when the operation may run, else the failure's reason and message.
 */
export function preparePlan(
  req: OperationRequest,
  dir: string = Paths.plans,
): { reason: string; message: string } | undefined {
  if (req.type === 'preview' && req.savePlan) {
    fs.mkdirSync(dir, { recursive: true });
    return undefined;
  }
  if (req.type === 'up' && req.plan) {
    const file = planFile(req.plan, dir);
    if (file && fs.existsSync(file)) return undefined;
    return {
      reason: PLAN_NOT_FOUND,
      message:
        `up failed: the plan of preview ${req.plan} is not in this workspace ` +
        `(its pod was replaced since the preview); nothing was applied`,
    };
  }
  return undefined;
}
