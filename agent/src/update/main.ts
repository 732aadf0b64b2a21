import * as fs from 'node:fs';
import type * as k8s from '@kubernetes/client-node';
import {
  Annotations,
  Env,
  formatUpdateResult,
  Labels,
  maskOutputs,
  outputSecretKey,
  Paths,
  type OperationRequest,
  type UpdateResult,
} from '../../../contract';
import { parseOperationRequest, type OperationResult, type OutputValue, type StreamLine } from '../api';
import { AgentError, errorMessage, truncate } from '../lib/errors';
import { annotationsPatch, apiStatus, k8sModule, loadKubeConfig, mergePatchOptions, withRetries } from '../lib/kube';
import { say } from '../lib/log';
import { hostPath } from '../lib/paths';
import { redactor } from '../lib/redact';
import { cancelRemoteOperation, runRemoteOperation, waitForWorkspace } from './client';

function seconds(name: string, fallback: number): number {
  const v = process.env[name];
  const n = v === undefined || v === '' ? NaN : Number(v);
  return Number.isFinite(n) && n >= 0 ? n * 1000 : fallback * 1000;
}

function readToken(): string | undefined {
  try {
    return fs.readFileSync(hostPath(Paths.token), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

const REFUSAL_REASONS: Record<number, string> = {
  400: 'InvalidRequest',
  401: 'Unauthenticated',
  403: 'PermissionDenied',
  409: 'UpdateConflict',
  422: 'StackMismatch',
  503: 'WorkspaceUnavailable',
};

interface Reporter {
  kc: k8s.KubeConfig;
  namespace: string;
  job: string;
  stack: string;
}

/** The Job's UID (for the outputs Secret's owner reference), from a no-op merge patch: needs only `patch`. */
async function jobUid(r: Reporter): Promise<string> {
  const batch = r.kc.makeApiClient(k8sModule().BatchV1Api);
  const job = await withRetries(`reading Job ${r.namespace}/${r.job}`, () =>
    batch.patchNamespacedJob({ name: r.job, namespace: r.namespace, body: { metadata: {} } }, mergePatchOptions()),
  );
  const uid = job.metadata?.uid;
  if (!uid) throw new AgentError(`Job ${r.namespace}/${r.job} has no UID`);
  return uid;
}

/** Upstream's immutable `<update>-stack-outputs` Secret, owned by the Job. */
async function createOutputsSecret(r: Reporter, outputs: Record<string, OutputValue>): Promise<string> {
  const name = `${r.job}-stack-outputs`;
  const uid = await jobUid(r);
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
      namespace: r.namespace,
      labels: { [Labels.stackName]: r.stack, [Labels.workspaceComponent]: 'update' },
      annotations: { [Annotations.secretOutputs]: JSON.stringify([...new Set(secretKeys)].sort()) },
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: r.job, uid, controller: true }],
    },
    type: 'Opaque',
    immutable: true,
    data,
  };
  const core = r.kc.makeApiClient(k8sModule().CoreV1Api);
  try {
    await withRetries(`creating Secret ${r.namespace}/${name}`, () =>
      core.createNamespacedSecret({ namespace: r.namespace, body }),
    );
  } catch (e) {
    // Already there: an earlier attempt of this same Job wrote it (immutable, same content).
    if (!(e instanceof AgentError && e.status === 409)) throw e;
  }
  return name;
}

async function writeResult(r: Reporter, result: UpdateResult): Promise<void> {
  const batch = r.kc.makeApiClient(k8sModule().BatchV1Api);
  const value = redactor.redact(formatUpdateResult(result));
  await withRetries(`writing the result on Job ${r.namespace}/${r.job}`, () =>
    batch.patchNamespacedJob(
      { name: r.job, namespace: r.namespace, body: annotationsPatch({ [Annotations.updateResult]: value }) },
      mergePatchOptions(),
    ),
  );
}

function toUpdateResult(op: OperationRequest, res: OperationResult): UpdateResult {
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
  switch (line.kind) {
    case 'started':
      say(`[pko-agent] ${line.type} of stack ${line.stack} started (operation ${line.id})`);
      break;
    case 'output':
      say(line.line);
      break;
    default:
      break;
  }
}

/**
 * `pko-agent update`: runs the Job's operation through the workspace and writes the result on the
 * Job (and, for `up`, the outputs Secret). Exit 0 on success, 1 on failure.
 */
export async function updateCommand(): Promise<number> {
  const env = process.env;
  let op: OperationRequest;
  try {
    op = parseOperationRequest(JSON.parse(env[Env.operation] ?? ''));
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
  const reporter: Reporter = { kc: loadKubeConfig(env), namespace, job, stack: env[Env.stackName] ?? op.stack };
  const startTime = new Date().toISOString();

  const interrupt = new AbortController();
  let opId: string | undefined;
  let signals = 0;
  let hardExit: ((code: number) => void) | undefined;
  const hardExitPromise = new Promise<number>((resolve) => (hardExit = resolve));
  const onSignal = (sig: NodeJS.Signals): void => {
    signals++;
    if (signals === 1) {
      say(`[pko-agent] ${sig} received: asking the workspace to interrupt the ${op.type}`);
      if (opId) {
        const id = opId;
        void cancelRemoteOperation(url, readToken(), id).then((s) => say(`[pko-agent] cancel request for ${id}: ${s}`));
        // Wait for the result (Pulumi finishes and unlocks the stack), but not forever.
        setTimeout(() => interrupt.abort(), seconds('PKO_AGENT_CANCEL_TIMEOUT_SECONDS', 570)).unref();
      } else {
        interrupt.abort();
      }
    } else {
      say(`[pko-agent] second ${sig}: writing an Aborted result and exiting`);
      interrupt.abort();
      void writeResult(reporter, {
        state: 'failed',
        type: op.type,
        reason: 'Aborted',
        message: `the ${op.type} was aborted (${sig})`,
        startTime,
        endTime: new Date().toISOString(),
      })
        .catch(() => undefined)
        .finally(() => hardExit?.(1));
    }
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  const run = async (): Promise<number> => {
    let result: UpdateResult;
    let outputs: Record<string, OutputValue> | undefined;
    say(`[pko-agent] ${op.type} of stack ${op.stack} through ${url}`);
    let lastWait = 0;
    const ready = await waitForWorkspace(
      url,
      seconds('PKO_AGENT_WAIT_SECONDS', 600),
      (why) => {
        if (Date.now() - lastWait > 15_000) {
          lastWait = Date.now();
          say(`[pko-agent] waiting for the workspace to be ready: ${why}`);
        }
      },
      interrupt.signal,
    );
    const now = (): string => new Date().toISOString();
    if (!ready.ready) {
      const aborted = interrupt.signal.aborted;
      result = {
        state: 'failed',
        type: op.type,
        reason: aborted ? 'Aborted' : 'WorkspaceUnavailable',
        message: aborted
          ? `the ${op.type} was aborted before it started`
          : `the workspace at ${url} did not become ready: ${ready.why}`,
        startTime,
        endTime: now(),
      };
    } else {
      const outcome = await runRemoteOperation(
        url,
        readToken(),
        op,
        {
          onStarted: (id) => {
            opId = id;
            // A signal that arrived while the request was on its way.
            if (signals > 0) void cancelRemoteOperation(url, readToken(), id);
          },
          onLine: printLine,
        },
        interrupt.signal,
      );
      if (outcome.kind === 'result') {
        const res = outcome.result;
        if (res.outputs) for (const v of Object.values(res.outputs)) if (v.secret) redactor.add(v.value);
        result = toUpdateResult(op, res);
        if (signals > 0 && res.state === 'failed') result.reason = 'Aborted';
        if (op.type === 'up' && res.state === 'succeeded') outputs = res.outputs ?? {};
      } else if (outcome.kind === 'refused') {
        const reason = REFUSAL_REASONS[outcome.status] ?? 'WorkspaceUnavailable';
        result = {
          state: 'failed',
          type: op.type,
          reason,
          message: `the workspace refused the ${op.type}: ${outcome.error.message}`,
          startTime,
          endTime: now(),
        };
      } else {
        const aborted = signals > 0;
        result = {
          state: 'failed',
          type: op.type,
          reason: aborted ? 'Aborted' : 'WorkspaceUnavailable',
          message: aborted ? `the ${op.type} was aborted and did not finish: ${outcome.message}` : outcome.message,
          startTime,
          endTime: now(),
        };
      }
    }
    if (outputs) {
      try {
        result.outputsSecret = await createOutputsSecret(reporter, outputs);
      } catch (e) {
        result = {
          ...result,
          state: 'failed',
          reason: 'UpdateFailed',
          message: `the up succeeded, but the outputs Secret could not be written: ${errorMessage(e)}`,
        };
        delete result.outputs;
      }
    }
    result.message = truncate(redactor.redact(result.message), 4000);
    say(`[pko-agent] ${result.state === 'succeeded' ? '' : `${result.reason ?? 'failed'}: `}${result.message}`);
    if (result.outputs) {
      const names = Object.keys(result.outputs).map((k) => (result.outputs![k] === '[secret]' ? `${k} (secret)` : k));
      if (names.length) say(`[pko-agent] outputs: ${names.join(', ')}`);
    }
    try {
      await writeResult(reporter, result);
      say(
        `[pko-agent] result written on Job ${namespace}/${job}${result.outputsSecret ? ` (outputs in Secret ${result.outputsSecret})` : ''}`,
      );
    } catch (e) {
      say(`[pko-agent] cannot write the result on Job ${namespace}/${job}: ${errorMessage(e)}`);
      return 1;
    }
    return result.state === 'succeeded' ? 0 : 1;
  };
  return Promise.race([run(), hardExitPromise]);
}

/** Exposed for tests. */
export const _internal = { toUpdateResult, apiStatus };
