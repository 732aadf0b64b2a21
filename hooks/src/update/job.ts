import type { V1Container, V1Job, V1PodTemplateSpec } from '@kubernetes/client-node';
import type { Update, UpdateSpec } from '../../../schemas/generated/types';
import {
  AGENT_COMMAND,
  Env,
  Labels,
  Paths,
  type OperationRequest,
  type OperationType,
  type UpdateResult,
} from '../../../contract';
import { withEphemeralStorage } from '../bounded/resources';
import type { HookConfig } from '../config';
import { stableStringify } from '../lib/json';
import { conditionOf, type Json, type KObject, type Typed } from '../lib/k8s';
import { knownTime } from '../lib/time';
import {
  RESTRICTED_CONTAINER_SECURITY,
  RESTRICTED_POD_SECURITY,
  workspaceAudience,
  workspaceUrl,
} from '../workspace/pod';
import { outputsToEnv } from './outputs-to';
import { updateServiceAccountName } from './rbac';

/** The operation types an Update may name (upstream's UpdateType). */
export function operationType(value: unknown): OperationType | undefined {
  return value === 'up' || value === 'preview' || value === 'refresh' || value === 'destroy' ? value : undefined;
}

function jobType(job: KObject): OperationType | undefined {
  return operationType(job.metadata.labels?.[Labels.updateType]);
}

/** The operation an Update asks for, as the runner sends it to the workspace (`stackName` is its stack). */
export function operationOf(spec: UpdateSpec, type: OperationType, name?: string): OperationRequest {
  const op: OperationRequest = { type, stack: spec.stackName ?? '' };
  if (spec.message !== undefined) op.message = spec.message;
  if (spec.target !== undefined) op.target = [...spec.target];
  if (spec.targetDependents !== undefined) op.targetDependents = spec.targetDependents;
  if (spec.refresh !== undefined) op.refresh = spec.refresh;
  if (spec.parallel !== undefined) op.parallel = spec.parallel;
  if (spec.expectNoChanges !== undefined) op.expectNoChanges = spec.expectNoChanges;
  if (spec.continueOnError !== undefined) op.continueOnError = spec.continueOnError;
  if (spec.replace !== undefined) op.replace = [...spec.replace];
  if (spec.remove !== undefined) op.remove = spec.remove;
  if (spec.runProgram !== undefined) op.runProgram = spec.runProgram;
  if (spec.previewOnly === true && type === 'refresh') op.previewOnly = true;
  // Update plans (docs/approval.md): a preview saves its plan under its own name, an up applies one.
  if (type === 'preview' && spec.savePlan === true && name !== undefined) op.savePlan = name;
  if (type === 'up' && spec.plan !== undefined) op.plan = spec.plan;
  if (spec.selfHealing === true) op.selfHealing = true;
  return op;
}

/**
 * Seconds the Job may run beyond the operation's deadline, before Kubernetes stops it: time for
 * the runner, which cancels the operation at the deadline, to see Pulumi stop and report.
 */
export const DEADLINE_ALLOWANCE_SECONDS = 60;

/** The operation's deadline in seconds: the Update's own, else the hooks' default; undefined: none. */
export function operationDeadline(spec: UpdateSpec, config: HookConfig): number | undefined {
  const own = spec.activeDeadlineSeconds;
  if (own !== undefined && Number.isInteger(own) && own > 0) return own;
  return config.operationDeadlineSeconds;
}

/** The labels an Update passes on to its Job and identity: its own but Metacontroller's selector label. */
export function updateLabels(update: Update, type: OperationType): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(update.metadata.labels ?? {})) if (k !== 'controller-uid') labels[k] = String(v);
  // The workspace's Stack (for a Stack's Updates the Stack's name; else the Workspace's), and what runs.
  labels[Labels.stackName] ??= update.spec?.workspaceName ?? '';
  labels[Labels.workspaceComponent] = 'update';
  labels[Labels.updateType] = type;
  return labels;
}

/** The Job that runs an Update's operation through its workspace and reports on itself: named as the Update. */
export function buildJob(update: Update, type: OperationType, config: HookConfig): KObject {
  const spec = update.spec ?? {};
  const name = update.metadata.name;
  const namespace = update.metadata.namespace ?? '';
  const workspace = spec.workspaceName ?? '';
  const labels = updateLabels(update, type);
  const deadline = operationDeadline(spec, config);

  const runner: V1Container = {
    name: 'update',
    image: config.agentImage,
    command: [AGENT_COMMAND, 'update'],
    env: [
      { name: Env.operation, value: stableStringify(operationOf(spec, type, name)) },
      { name: Env.workspaceUrl, value: workspaceUrl(workspace, namespace) },
      { name: Env.jobName, value: name },
      { name: Env.stackName, value: workspace },
      { name: Env.podNamespace, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
      ...(deadline !== undefined ? [{ name: Env.operationDeadline, value: String(deadline) }] : []),
      ...outputsToEnv(update),
    ],
    volumeMounts: [{ name: 'workspace-token', mountPath: Paths.tokenDir, readOnly: true }],
    resources: withEphemeralStorage({ requests: { cpu: '10m', memory: '64Mi' } }, config.jobEphemeralStorage),
    securityContext: structuredClone(RESTRICTED_CONTAINER_SECURITY),
  };
  if (config.agentImagePullPolicy) runner.imagePullPolicy = config.agentImagePullPolicy;
  const podLabels = {
    [Labels.stackName]: labels[Labels.stackName] ?? workspace,
    [Labels.workspaceComponent]: 'update',
    [Labels.updateType]: type,
  };
  const template: Json<V1PodTemplateSpec> = {
    metadata: { labels: podLabels },
    spec: {
      // Its own identity (rbac.ts): allowed to call this workspace and report on its own Job.
      serviceAccountName: updateServiceAccountName(name),
      restartPolicy: 'Never',
      // The runner relays SIGTERM to the workspace, which interrupts Pulumi and lets it unlock the stack.
      terminationGracePeriodSeconds: 600,
      securityContext: { ...RESTRICTED_POD_SECURITY },
      containers: [runner],
      volumes: [
        {
          name: 'workspace-token',
          projected: {
            sources: [
              {
                serviceAccountToken: {
                  audience: workspaceAudience(workspace, namespace),
                  expirationSeconds: 3600,
                  path: 'token',
                },
              },
            ],
          },
        },
      ],
    },
  };
  const job: Typed<V1Job> = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name, namespace, labels },
    spec: {
      // Retries are the Stack's business (backoff, failure budget), never the Job controller's.
      backoffLimit: 0,
      // The runner cancels the operation at its deadline; Kubernetes stops the Job if it cannot.
      ...(deadline !== undefined ? { activeDeadlineSeconds: deadline + DEADLINE_ALLOWANCE_SECONDS } : {}),
      // No ttlSecondsAfterFinished: the TTL controller would delete a Job whose result nobody has
      // read yet. The Job goes with its Update (docs/design.md#update-retention).
      template,
    },
  };
  return job;
}

/** The result with only the start and end times that are known (lib/time.ts): the same object when both are. */
function withKnownTimes(result: UpdateResult, now: Date): UpdateResult {
  const start = knownTime(result.startTime, now);
  const end = knownTime(result.endTime, now);
  if (start === result.startTime && end === result.endTime) return result;
  const known: UpdateResult = { ...result };
  delete known.startTime;
  delete known.endTime;
  if (start !== undefined) known.startTime = start;
  if (end !== undefined) known.endTime = end;
  return known;
}

export interface JobOutcome {
  result: UpdateResult;
  /** When the operation ended: the result's end time, else the Job's; lastResyncTime. */
  endTime: string | undefined;
}

/**
 * A finished Job's result, or undefined while it runs. `result` is the Job's
 * `pulumi.com/update-result` annotation, parsed; a pod that died without reporting is a failure.
 */
export function jobOutcome(job: Typed<V1Job>, result: UpdateResult | undefined, now: Date): JobOutcome | undefined {
  const type = jobType(job) ?? 'up';
  const failed = conditionOf(job, 'Failed');
  const complete = conditionOf(job, 'Complete');
  const jobEnd =
    knownTime(job.status?.completionTime, now) ??
    knownTime(failed?.lastTransitionTime, now) ??
    knownTime(complete?.lastTransitionTime, now);
  if (result) {
    const known = withKnownTimes(result, now);
    return { result: known, endTime: known.endTime ?? jobEnd };
  }
  if (failed?.status === 'True') {
    const why = [failed.reason, failed.message].filter(Boolean).join(': ');
    return {
      result: {
        state: 'failed',
        type,
        reason: 'JobFailed',
        message: `the ${type} Job failed before reporting a result${why ? ` (${why})` : ''}`,
      },
      endTime: jobEnd,
    };
  }
  if (complete?.status === 'True') {
    return {
      result: {
        state: 'failed',
        type,
        reason: 'NoResult',
        message: `the ${type} Job completed without reporting a result`,
      },
      endTime: jobEnd,
    };
  }
  return undefined;
}
