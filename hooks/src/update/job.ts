import type { V1Container, V1Job, V1PodTemplateSpec } from '@kubernetes/client-node';
import type { Stack } from '../../../schemas/generated/types';
import {
  AGENT_COMMAND,
  Env,
  Labels,
  Paths,
  type OperationRequest,
  type OperationType,
  type UpdateResult,
} from '../../../contract';
import type { HookConfig } from '../config';
import { parseDuration } from '../lib/duration';
import { shortHash, stableStringify } from '../lib/json';
import { conditionOf, type Json, type KObject, type Typed } from '../lib/k8s';
import { strategicMerge } from '../lib/merge';
import { updateServiceAccountName } from './rbac';
import { RESTRICTED_CONTAINER_SECURITY, RESTRICTED_POD_SECURITY, workspaceAudience, workspaceUrl } from './workspace';

/**
 * Hook-internal annotations on each Job: what it runs for. They make a Job self-describing, so a
 * result is absorbed correctly even if the status that named the Job was never written.
 */
export const JobAnnotations = {
  generation: 'pulumi.com/update-generation',
  reconcileRequest: 'pulumi.com/update-reconcile-request',
  commit: 'pulumi.com/update-commit',
  /** `lastUpdate.name` when the Job was created: the Job that follows it in the Stack's history. */
  previous: 'pulumi.com/update-previous',
  /** Seconds to keep the Job once finished and absorbed (`ttlAfterCompleted`; retention.ts). */
  ttl: 'pulumi.com/update-ttl-seconds',
} as const;

/** Upstream's TTL for Stack-created Updates. */
const DEFAULT_TTL_SECONDS = 24 * 3600;

/** What a Job runs for: the fields of upstream's `status.currentUpdate`. */
export interface UpdateIdentity {
  generation: number;
  reconcileRequest: string;
  commit: string;
  previous: string;
}

/**
 * `<stack>-<type>-<hash>`: readable in `kubectl get jobs`, at most 42+1+7+1+8 = 59 characters, and a
 * function of what it runs for, so the same request yields the same Job and each retry a new one.
 */
export function jobName(stack: Stack, type: OperationType, id: UpdateIdentity): string {
  const uid = stack.metadata.uid ?? '';
  return `${stack.metadata.name}-${type}-${shortHash({ uid, type, ...id }, 8)}`;
}

export function identityOf(job: KObject): UpdateIdentity | undefined {
  const a = job.metadata.annotations ?? {};
  const generation = Number(a[JobAnnotations.generation]);
  if (!Number.isInteger(generation)) return undefined;
  return {
    generation,
    reconcileRequest: a[JobAnnotations.reconcileRequest] ?? '',
    commit: a[JobAnnotations.commit] ?? '',
    previous: a[JobAnnotations.previous] ?? '',
  };
}

function jobType(job: KObject): OperationType | undefined {
  const t = job.metadata.labels?.[Labels.updateType];
  return t === 'up' || t === 'preview' || t === 'refresh' || t === 'destroy' ? t : undefined;
}

/**
 * The operation, from the Stack and its updateTemplate (upstream's newUp and applyUpdateTemplate:
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L1794).
 */
export function operationFor(stack: Stack, type: OperationType, message: string): OperationRequest {
  const spec = stack.spec;
  const op: OperationRequest = { type, stack: spec.stack, message };
  if (type === 'up' || type === 'preview') {
    if (spec.targets?.length) op.target = [...spec.targets];
    if (spec.targetDependents) op.targetDependents = true;
    if (spec.refresh) op.refresh = true;
  }
  if (type === 'destroy' && spec.runProgram) op.runProgram = true;
  const t = spec.updateTemplate?.spec;
  if (t) {
    if (t.parallel !== undefined) op.parallel = t.parallel;
    if (t.message !== undefined) op.message = t.message;
    if (t.expectNoChanges !== undefined) op.expectNoChanges = t.expectNoChanges;
    if (t.refresh !== undefined) op.refresh = t.refresh;
    if (t.continueOnError !== undefined) op.continueOnError = t.continueOnError;
    if (t.target !== undefined) op.target = [...t.target];
    if (t.targetDependents !== undefined) op.targetDependents = t.targetDependents;
    if (t.replace !== undefined) op.replace = [...t.replace];
    if (t.remove !== undefined) op.remove = t.remove;
    if (t.runProgram !== undefined) op.runProgram = t.runProgram;
  }
  return op;
}

/** The Job that runs one operation through the workspace and reports on itself. */
export function buildJob(
  stack: Stack,
  type: OperationType,
  message: string,
  id: UpdateIdentity,
  config: HookConfig,
): KObject {
  const spec = stack.spec;
  const name = stack.metadata.name;
  const namespace = stack.metadata.namespace ?? '';
  const job = jobName(stack, type, id);
  const ttl = spec.updateTemplate?.spec?.ttlAfterCompleted;
  const ttlSeconds = ttl !== undefined ? Math.round(parseDuration(ttl)! / 1000) : DEFAULT_TTL_SECONDS;

  const runner: V1Container = {
    name: 'update',
    image: config.agentImage,
    command: [AGENT_COMMAND, 'update'],
    env: [
      { name: Env.operation, value: stableStringify(operationFor(stack, type, message)) },
      { name: Env.workspaceUrl, value: workspaceUrl(name, namespace) },
      { name: Env.jobName, value: job },
      { name: Env.stackName, value: name },
      { name: Env.podNamespace, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } },
    ],
    volumeMounts: [{ name: 'workspace-token', mountPath: Paths.tokenDir, readOnly: true }],
    resources: { requests: { cpu: '10m', memory: '64Mi' } },
    securityContext: structuredClone(RESTRICTED_CONTAINER_SECURITY),
  };
  if (config.agentImagePullPolicy) runner.imagePullPolicy = config.agentImagePullPolicy;
  const template: Json<V1PodTemplateSpec> = {
    metadata: {
      labels: { [Labels.stackName]: name, [Labels.workspaceComponent]: 'update', [Labels.updateType]: type },
    },
    spec: {
      // Its own identity (rbac.ts): allowed to call this Stack's workspace and report on its own Job.
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
                  audience: workspaceAudience(name, namespace),
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
  let obj: Typed<V1Job> = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name: job,
      namespace,
      labels: { [Labels.stackName]: name, [Labels.workspaceComponent]: 'update', [Labels.updateType]: type },
      annotations: {
        [JobAnnotations.generation]: String(id.generation),
        [JobAnnotations.reconcileRequest]: id.reconcileRequest,
        [JobAnnotations.commit]: id.commit,
        [JobAnnotations.previous]: id.previous,
        [JobAnnotations.ttl]: String(ttlSeconds),
      },
    },
    spec: {
      // Retries are the Stack's business (backoff, failure budget), never the Job controller's.
      backoffLimit: 0,
      // No ttlSecondsAfterFinished: the TTL controller would delete a Job whose result the Stack has
      // not absorbed yet. The hooks delete it instead, once absorbed (retention.ts).
      template,
    },
  };
  const userMeta = spec.updateTemplate?.metadata;
  if (userMeta) {
    obj = strategicMerge(obj, { metadata: { labels: userMeta.labels, annotations: userMeta.annotations } });
    // Our keys win: they identify the Job.
    obj.metadata.labels = {
      ...obj.metadata.labels,
      [Labels.stackName]: name,
      [Labels.workspaceComponent]: 'update',
      [Labels.updateType]: type,
    };
  }
  return obj;
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
export function jobOutcome(job: Typed<V1Job>, result: UpdateResult | undefined): JobOutcome | undefined {
  const type = jobType(job) ?? 'up';
  const failed = conditionOf(job, 'Failed');
  const complete = conditionOf(job, 'Complete');
  const jobEnd = job.status?.completionTime ?? failed?.lastTransitionTime ?? complete?.lastTransitionTime;
  if (result) return { result, endTime: result.endTime ?? jobEnd };
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
