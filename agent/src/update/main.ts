import * as fs from 'node:fs';
import type * as k8s from '@kubernetes/client-node';
import {
  Annotations,
  Env,
  fitOutputs,
  formatUpdateResult,
  Labels,
  MAX_OUTPUTS_ANNOTATION_BYTES,
  maskOutputs,
  outputSecretKey,
  Paths,
  rfc3339,
  type OperationRequest,
  type UpdateResult,
} from '../../../contract';
import { parseOperationRequest, type OperationResult, type OutputValue, type StreamLine } from '../api';
import { AgentError, errorMessage, truncate } from '../lib/errors';
import { annotationsPatch, k8sModule, loadKubeConfig, mergePatchOptions, withRetries } from '../lib/kube';
import { say } from '../lib/log';
import { hostPath } from '../lib/paths';
import { redactor } from '../lib/redact';
import { cancelRemoteOperation, runRemoteOperation, waitForWorkspace, type RemoteOutcome } from './client';
import { withOutputsTo } from './outputs-to';

const MAX_MESSAGE = 4000;

/** Reasons of a result when the workspace refused the operation, by HTTP status. */
const REFUSAL_REASONS: Record<number, string> = {
  400: 'InvalidRequest',
  401: 'Unauthenticated',
  403: 'PermissionDenied',
  409: 'UpdateConflict',
  422: 'StackMismatch',
  503: 'WorkspaceUnavailable',
};

/** A duration in milliseconds from an env var in seconds, else `fallbackSeconds`. */
function durationMs(name: string, fallbackSeconds: number): number {
  const v = process.env[name];
  const n = v === undefined || v === '' ? NaN : Number(v);
  return (Number.isFinite(n) && n >= 0 ? n : fallbackSeconds) * 1000;
}

/** The projected token the runner presents to the workspace, read anew for each call (the kubelet rotates it). */
function readToken(): string | undefined {
  try {
    return fs.readFileSync(hostPath(Paths.token), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The Job this runner runs in, and what it was asked to do. */
interface JobContext {
  op: OperationRequest;
  /** The workspace server's base URL. */
  url: string;
  kubeConfig: k8s.KubeConfig;
  namespace: string;
  job: string;
  stack: string;
  startTime: string;
  /** Seconds the operation may take (PULUMI_OPERATION_DEADLINE_SECONDS); undefined: no deadline. */
  deadlineSeconds?: number;
}

function readJobContext(env: NodeJS.ProcessEnv): JobContext {
  let op: OperationRequest;
  try {
    const body: unknown = JSON.parse(env[Env.operation] ?? '');
    op = parseOperationRequest(body);
  } catch (e) {
    throw new AgentError(`${Env.operation} is not a valid operation: ${errorMessage(e)}`, {
      reason: 'InvalidArguments',
      exitCode: 2,
    });
  }
  const url = env[Env.workspaceUrl];
  const job = env[Env.jobName];
  const namespace = env[Env.podNamespace];
  if (!url || !job || !namespace)
    throw new AgentError(`${Env.workspaceUrl}, ${Env.jobName} and ${Env.podNamespace} must be set`, {
      reason: 'InvalidArguments',
      exitCode: 2,
    });
  const ctx: JobContext = {
    op,
    url,
    kubeConfig: loadKubeConfig(env),
    namespace,
    job,
    stack: env[Env.stackName] ?? op.stack,
    startTime: rfc3339(),
  };
  const deadline = Number(env[Env.operationDeadline] || NaN);
  if (Number.isInteger(deadline) && deadline > 0) ctx.deadlineSeconds = deadline;
  return ctx;
}

function failedResult(ctx: JobContext, reason: string, message: string): UpdateResult {
  return { state: 'failed', type: ctx.op.type, reason, message, startTime: ctx.startTime, endTime: rfc3339() };
}

/** The Job's UID (for the outputs Secret's owner reference), from a no-op merge patch: needs only `patch`. */
async function jobUid(ctx: JobContext): Promise<string> {
  const batch = ctx.kubeConfig.makeApiClient(k8sModule().BatchV1Api);
  const job = await withRetries(`reading Job ${ctx.namespace}/${ctx.job}`, () =>
    batch.patchNamespacedJob({ name: ctx.job, namespace: ctx.namespace, body: { metadata: {} } }, mergePatchOptions()),
  );
  const uid = job.metadata?.uid;
  if (!uid) throw new AgentError(`Job ${ctx.namespace}/${ctx.job} has no UID`);
  return uid;
}

/** Upstream's immutable `<update>-stack-outputs` Secret, owned by the Job. */
async function createOutputsSecret(ctx: JobContext, outputs: Record<string, OutputValue>): Promise<string> {
  const name = `${ctx.job}-stack-outputs`;
  const uid = await jobUid(ctx);
  const data: Record<string, string> = {};
  const secretKeys: string[] = [];
  for (const [k, v] of Object.entries(outputs)) {
    const key = outputSecretKey(k);
    data[key] = Buffer.from(JSON.stringify(v.value) ?? 'null').toString('base64');
    if (v.secret) secretKeys.push(key);
  }
  const body: k8s.V1Secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name,
      namespace: ctx.namespace,
      labels: { [Labels.stackName]: ctx.stack, [Labels.workspaceComponent]: 'update' },
      annotations: { [Annotations.secretOutputs]: JSON.stringify([...new Set(secretKeys)].sort()) },
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: ctx.job, uid, controller: true }],
    },
    type: 'Opaque',
    immutable: true,
    data,
  };
  const core = ctx.kubeConfig.makeApiClient(k8sModule().CoreV1Api);
  try {
    await withRetries(`creating Secret ${ctx.namespace}/${name}`, () =>
      core.createNamespacedSecret({ namespace: ctx.namespace, body }),
    );
  } catch (e) {
    // Already there: an earlier attempt of this same Job wrote it (immutable, same content).
    if (!(e instanceof AgentError && e.status === 409)) throw e;
  }
  return name;
}

async function writeResult(ctx: JobContext, result: UpdateResult): Promise<void> {
  const batch = ctx.kubeConfig.makeApiClient(k8sModule().BatchV1Api);
  const value = redactor.redact(formatUpdateResult(result));
  await withRetries(`writing the result on Job ${ctx.namespace}/${ctx.job}`, () =>
    batch.patchNamespacedJob(
      { name: ctx.job, namespace: ctx.namespace, body: annotationsPatch({ [Annotations.updateResult]: value }) },
      mergePatchOptions(),
    ),
  );
}

/** The result of what the workspace answered, secret outputs masked (exported for tests). */
export function toUpdateResult(op: OperationRequest, res: OperationResult): UpdateResult {
  const u: UpdateResult = {
    state: res.state,
    type: op.type,
    message: res.message,
    startTime: res.startTime,
    endTime: res.endTime,
  };
  if (res.reason) u.reason = res.reason;
  if (res.permalink) u.permalink = res.permalink;
  if (res.projectInfo) u.projectInfo = res.projectInfo;
  if (res.changedResources !== undefined) u.changedResources = res.changedResources;
  if (res.changedUrns !== undefined) u.changedUrns = res.changedUrns.map((urn) => redactor.redact(urn));
  if (res.resourceChanges) u.resourceChanges = { ...res.resourceChanges };
  if (op.type === 'up' && res.state === 'succeeded' && res.outputs) {
    const values: Record<string, unknown> = {};
    const secret: string[] = [];
    for (const [k, v] of Object.entries(res.outputs)) {
      values[k] = v.value;
      if (v.secret) secret.push(k);
    }
    u.outputs = maskOutputs(values, secret);
  }
  return u;
}

function printLine(line: StreamLine): void {
  if (line.kind === 'started') say(`[pko-agent] ${line.type} of stack ${line.stack} started (operation ${line.id})`);
  else if (line.kind === 'output') say(line.line);
}

/**
 * SIGTERM and SIGINT: the first asks the workspace to interrupt the operation (Pulumi finishes the
 * steps in flight and unlocks the stack) and waits for its result, for a while; the second writes
 * an Aborted result and ends the runner.
 */
class Interruptions {
  /** Aborted when the runner stops waiting for the workspace. */
  readonly abort = new AbortController();
  /** How many interruptions came: signals, and the deadline. */
  received = 0;
  private operationId: string | undefined;
  private endRunner: (code: number) => void = () => undefined;
  /** Resolves with the exit code when a second signal ends the runner. */
  readonly ended = new Promise<number>((resolve) => (this.endRunner = resolve));

  constructor(private readonly ctx: JobContext) {}

  listen(): void {
    process.on('SIGTERM', this.onSignal);
    process.on('SIGINT', this.onSignal);
  }

  /** The workspace started the operation: a signal from now on cancels it there. */
  operationStarted(id: string): void {
    this.operationId = id;
    // A signal that arrived while the request was on its way.
    if (this.received > 0) void cancelRemoteOperation(this.ctx.url, readToken(), id);
  }

  /** The deadline passed: the operation is cancelled as on a first signal, and its result says why. */
  watchDeadline(): void {
    const seconds = this.ctx.deadlineSeconds;
    if (seconds === undefined) return;
    setTimeout(() => {
      if (this.received > 0) return;
      this.received++;
      this.deadlineExceeded = true;
      say(`[pko-agent] the ${this.ctx.op.type} exceeded its deadline of ${seconds}s: cancelling it`);
      this.interrupt('the deadline');
    }, seconds * 1000).unref();
  }

  /** Whether the deadline cancelled the operation. */
  deadlineExceeded = false;

  private readonly onSignal = (sig: NodeJS.Signals): void => {
    // The deadline's cancel counts as the first interruption.
    this.received++;
    if (this.received > 1) {
      this.onSecond(sig);
      return;
    }
    say(`[pko-agent] ${sig} received: asking the workspace to interrupt the ${this.ctx.op.type}`);
    this.interrupt(sig);
  };

  private onSecond(sig: NodeJS.Signals): void {
    const { op } = this.ctx;
    say(`[pko-agent] second ${sig}: writing an Aborted result and exiting`);
    this.abort.abort();
    const result = this.deadlineExceeded
      ? failedResult(
          this.ctx,
          'DeadlineExceeded',
          `the ${op.type} exceeded its deadline of ${this.ctx.deadlineSeconds}s and was cancelled, but had not ` +
            `stopped when the Job was stopped (${sig}); the workspace still lets Pulumi stop and unlock the stack`,
        )
      : failedResult(this.ctx, 'Aborted', `the ${op.type} was aborted (${sig})`);
    void writeResult(this.ctx, result)
      .catch(() => undefined)
      .finally(() => this.endRunner(1));
  }

  /** Asks the workspace to interrupt the operation, and stops waiting for it after a while. */
  private interrupt(why: string): void {
    const id = this.operationId;
    if (!id) {
      this.abort.abort();
      return;
    }
    void cancelRemoteOperation(this.ctx.url, readToken(), id).then((s) =>
      say(`[pko-agent] cancel request for ${id} (${why}): ${s}`),
    );
    setTimeout(() => this.abort.abort(), durationMs('PKO_AGENT_CANCEL_TIMEOUT_SECONDS', 570)).unref();
  }
}

/** Waits for the workspace to be ready, saying why not every 15 s. */
function awaitWorkspace(ctx: JobContext, signal: AbortSignal): ReturnType<typeof waitForWorkspace> {
  let lastLogged = 0;
  return waitForWorkspace(
    ctx.url,
    durationMs('PKO_AGENT_WAIT_SECONDS', 600),
    (why) => {
      if (Date.now() - lastLogged > 15_000) {
        lastLogged = Date.now();
        say(`[pko-agent] waiting for the workspace to be ready: ${why}`);
      }
    },
    signal,
  );
}

/** The result of what the workspace answered, and the outputs that go into the outputs Secret. */
function resultOf(
  ctx: JobContext,
  outcome: RemoteOutcome,
  interrupted: boolean,
): { result: UpdateResult; outputs?: Record<string, OutputValue> } {
  const { op } = ctx;
  switch (outcome.kind) {
    case 'result': {
      const res = outcome.result;
      if (res.outputs) for (const v of Object.values(res.outputs)) if (v.secret) redactor.add(v.value);
      const result = toUpdateResult(op, res);
      if (interrupted && res.state === 'failed') result.reason = 'Aborted';
      if (op.type === 'up' && res.state === 'succeeded') return { result, outputs: res.outputs ?? {} };
      return { result };
    }
    case 'refused': {
      const reason = REFUSAL_REASONS[outcome.status] ?? 'WorkspaceUnavailable';
      return { result: failedResult(ctx, reason, `the workspace refused the ${op.type}: ${outcome.error.message}`) };
    }
    case 'broken':
      return {
        result: interrupted
          ? failedResult(ctx, 'Aborted', `the ${op.type} was aborted and did not finish: ${outcome.message}`)
          : failedResult(ctx, 'WorkspaceUnavailable', outcome.message),
      };
  }
}

/** What the operation ended with, and the outputs that go into the outputs Secret. */
type Ran = { result: UpdateResult; outputs?: Record<string, OutputValue> };

/** Runs the operation through the workspace; never throws. */
async function runOperation(ctx: JobContext, interruptions: Interruptions): Promise<Ran> {
  const { op, url } = ctx;
  say(`[pko-agent] ${op.type} of stack ${op.stack} through ${url}`);
  const signal = interruptions.abort.signal;
  const ready = await awaitWorkspace(ctx, signal);
  if (!ready.ready) {
    return {
      result: signal.aborted
        ? failedResult(ctx, 'Aborted', `the ${op.type} was aborted before it started`)
        : failedResult(ctx, 'WorkspaceUnavailable', `the workspace at ${url} did not become ready: ${ready.why}`),
    };
  }
  const outcome = await runRemoteOperation(
    url,
    readToken(),
    op,
    { onStarted: (id) => interruptions.operationStarted(id), onLine: printLine },
    signal,
  );
  return resultOf(ctx, outcome, interruptions.received > 0);
}

/** A failed result of an operation its deadline cancelled says so. */
function withDeadline(ctx: JobContext, ran: Ran, deadlineExceeded: boolean): Ran {
  if (!deadlineExceeded || ran.result.state !== 'failed') return ran;
  const message = `the ${ctx.op.type} exceeded its deadline of ${ctx.deadlineSeconds}s and was cancelled: ${ran.result.message}`;
  return { ...ran, result: { ...ran.result, reason: 'DeadlineExceeded', message } };
}

/** Creates the outputs Secret of a successful `up`; a failure to do so fails the result. */
async function withOutputsSecret(
  ctx: JobContext,
  result: UpdateResult,
  outputs: Record<string, OutputValue>,
): Promise<UpdateResult> {
  try {
    return { ...result, outputsSecret: await createOutputsSecret(ctx, outputs) };
  } catch (e) {
    const failed: UpdateResult = {
      ...result,
      state: 'failed',
      reason: 'UpdateFailed',
      message: `the up succeeded, but the outputs Secret could not be written: ${errorMessage(e)}`,
    };
    delete failed.outputs;
    return failed;
  }
}

/** Prints the result and writes it on the Job; the exit code. */
async function reportResult(ctx: JobContext, result: UpdateResult): Promise<number> {
  result.message = truncate(redactor.redact(result.message), MAX_MESSAGE);
  say(`[pko-agent] ${result.state === 'succeeded' ? '' : `${result.reason ?? 'failed'}: `}${result.message}`);
  const outputs = result.outputs ?? {};
  const names = Object.keys(outputs).map((k) => (outputs[k] === '[secret]' ? `${k} (secret)` : k));
  if (names.length) say(`[pko-agent] outputs: ${names.join(', ')}`);
  const carried = fitOutputs(result);
  if (carried.outputsOmitted) {
    say(
      `[pko-agent] the outputs exceed the ${MAX_OUTPUTS_ANNOTATION_BYTES / 1024} KiB of a result: it carries ` +
        `${Object.keys(carried.outputs ?? {}).length} of ${carried.outputsTotal ?? '?'} (status.outputs shows those); ` +
        `all are in Secret ${result.outputsSecret ?? '(none)'}`,
    );
  }
  const job = `${ctx.namespace}/${ctx.job}`;
  try {
    await writeResult(ctx, result);
    say(
      `[pko-agent] result written on Job ${job}${result.outputsSecret ? ` (outputs in Secret ${result.outputsSecret})` : ''}`,
    );
  } catch (e) {
    say(`[pko-agent] cannot write the result on Job ${job}: ${errorMessage(e)}`);
    return 1;
  }
  return result.state === 'succeeded' ? 0 : 1;
}

/**
 * `pko-agent update`: runs the Job's operation through the workspace and writes the result on the
 * Job (and, for `up`, the outputs Secret). Exit 0 on success, 1 on failure.
 */
export async function updateCommand(): Promise<number> {
  const ctx = readJobContext(process.env);
  const interruptions = new Interruptions(ctx);
  interruptions.listen();
  interruptions.watchDeadline();
  const run = async (): Promise<number> => {
    const ran = withDeadline(ctx, await runOperation(ctx, interruptions), interruptions.deadlineExceeded);
    let result = ran.outputs ? await withOutputsSecret(ctx, ran.result, ran.outputs) : ran.result;
    if (ran.outputs && result.state === 'succeeded')
      result = await withOutputsTo(result, ran.outputs, { ...ctx, env: process.env });
    return reportResult(ctx, result);
  };
  return Promise.race([run(), interruptions.ended]);
}
