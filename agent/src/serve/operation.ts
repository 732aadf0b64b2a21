import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { stripVTControlCharacters } from 'node:util';
import { rfc3339, type OperationRequest, type ProjectInfo } from '../../../contract';
import type { OperationResult, OutputValue, StreamLine } from '../api';
import { oneLine, truncate } from '../lib/errors';
import { logger } from '../lib/log';
import type { Redactor } from '../lib/redact';
import { DriftCollector } from './drift';
import { planArgs, preparePlan } from './plans';
import { runPulumi } from './pulumi';
import { containsSecret, hasMarker, STACK_TYPE, type StackStateReader } from './stack-state';
import { isRecord, parseJsonObject } from '../lib/json';

export interface OperationContext {
  workDir: string;
  stack: string;
  projectInfo?: ProjectInfo;
  redactor: Redactor;
  /** PULUMI_LOG_LEVEL: > 0 turns on Pulumi's debug logging to stderr (upstream). */
  logLevel: number;
  /** Reads secret outputs from the state (passphrase stacks) instead of `stack output --show-secrets`. */
  state?: StackStateReader;
  /** Where update plans are saved (default Paths.plans): plans.ts. */
  planDir?: string;
}
const MAX_MESSAGE = 4000;

/** The CLI arguments of an operation (the Automation API's, minus its follow-up calls). */
export function operationArgs(
  req: OperationRequest,
  stack: string,
  eventLog: string,
  logLevel: number,
  planDir?: string,
): string[] {
  const a: string[] = [];
  const list = (flag: string, values: string[] | undefined): void => {
    for (const v of values ?? []) a.push(flag, v);
  };
  switch (req.type) {
    case 'up':
      a.push('up', '--yes', '--skip-preview', '--diff', '--suppress-progress');
      if (req.expectNoChanges) a.push('--expect-no-changes');
      if (req.refresh) a.push('--refresh');
      list('--replace', req.replace);
      list('--target', req.target);
      if (req.targetDependents) a.push('--target-dependents');
      if (req.continueOnError) a.push('--continue-on-error');
      break;
    case 'preview':
      a.push('preview', '--diff', '--suppress-progress');
      if (req.expectNoChanges) a.push('--expect-no-changes');
      if (req.refresh) a.push('--refresh');
      list('--replace', req.replace);
      list('--target', req.target);
      if (req.targetDependents) a.push('--target-dependents');
      break;
    case 'refresh':
      // --preview-only: a drift check, which shows what the refresh would change and changes nothing.
      if (req.previewOnly) a.push('refresh', '--preview-only', '--suppress-progress');
      else a.push('refresh', '--yes', '--skip-preview', '--suppress-progress');
      if (req.expectNoChanges) a.push('--expect-no-changes');
      list('--target', req.target);
      if (req.runProgram !== undefined) a.push(`--run-program=${req.runProgram}`);
      break;
    case 'destroy':
      a.push('destroy', '--yes', '--skip-preview', '--suppress-progress');
      list('--target', req.target);
      if (req.targetDependents) a.push('--target-dependents');
      if (req.refresh) a.push('--refresh');
      if (req.continueOnError) a.push('--continue-on-error');
      if (req.remove) a.push('--remove');
      if (req.runProgram !== undefined) a.push(`--run-program=${req.runProgram}`);
      break;
  }
  a.push(...planArgs(req, planDir));
  if (req.message) a.push('--message', req.message);
  if (req.parallel !== undefined && req.parallel > 0) a.push('--parallel', String(req.parallel));
  a.push(
    '--stack',
    stack,
    '--color',
    'never',
    '--exec-kind',
    'auto.local',
    '--event-log',
    eventLog,
    '--non-interactive',
  );
  if (logLevel > 0) a.push('--logtostderr', '--logflow', '--verbose', String(logLevel), '--debug');
  return a;
}

/** Follows the CLI's event log file (one JSON engine event per line) while the CLI writes it. */
class EventLogTail {
  private offset = 0;
  private partial = '';
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> = Promise.resolve();

  constructor(
    private readonly file: string,
    private readonly onEvent: (e: Record<string, unknown>) => void,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.reading = this.reading.then(() => this.readMore());
    }, 100);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.reading;
    await this.readMore();
    if (this.partial.trim() !== '') this.emit(this.partial);
    this.partial = '';
  }

  private emit(line: string): void {
    if (line.trim() === '') return;
    try {
      this.onEvent(parseJsonObject(line));
    } catch {
      /* a torn or non-JSON line: skip */
    }
  }

  private async readMore(): Promise<void> {
    let fd: fs.promises.FileHandle;
    try {
      fd = await fs.promises.open(this.file, 'r');
    } catch {
      return;
    }
    try {
      const buf = Buffer.alloc(256 * 1024);
      for (;;) {
        const { bytesRead } = await fd.read(buf, 0, buf.length, this.offset);
        if (bytesRead === 0) break;
        this.offset += bytesRead;
        this.partial += buf.subarray(0, bytesRead).toString('utf8');
        let i: number;
        while ((i = this.partial.indexOf('\n')) >= 0) {
          const line = this.partial.slice(0, i);
          this.partial = this.partial.slice(i + 1);
          this.emit(line);
        }
      }
    } finally {
      await fd.close();
    }
  }
}

const PERMALINK = /(?:View Live|View in Browser(?: \(Ctrl\+O\))?|Permalink):\s+(https?:\/\/\S+)/;

export function findPermalink(stdout: string): string | undefined {
  return PERMALINK.exec(stdout)?.[1];
}

const CHANGE_WORDS: Record<string, [string, string]> = {
  create: ['created', 'to create'],
  update: ['updated', 'to update'],
  delete: ['deleted', 'to delete'],
  replace: ['replaced', 'to replace'],
  same: ['unchanged', 'unchanged'],
  read: ['read', 'to read'],
  refresh: ['refreshed', 'to refresh'],
  'create-replacement': ['created for replacement', 'to create for replacement'],
  'delete-replaced': ['deleted after replacement', 'to delete after replacement'],
  import: ['imported', 'to import'],
  discard: ['discarded', 'to discard'],
};

export function describeChanges(changes: Record<string, number> | undefined, planned: boolean): string {
  if (!changes) return '';
  const parts = Object.entries(changes)
    .filter(([, n]) => n > 0)
    .map(([op, n]) => `${n} ${CHANGE_WORDS[op]?.[planned ? 1 : 0] ?? op}`);
  return parts.join(', ');
}

/** The text without terminal escapes and the CLI's `<{%…%}>` markers. */
function stripAnsi(s: string): string {
  return stripVTControlCharacters(s).replace(/<\{%[^%]*%\}>/g, '');
}

/** The most useful lines of a failure: error diagnostics, else the CLI's own `error:` lines. */
function failureDetail(diagnostics: string[], stderr: string, stdout: string): string {
  const diags = [...new Set(diagnostics.map((d) => oneLine(stripAnsi(d))).filter((d) => d !== ''))];
  if (diags.length) return diags.join('; ');
  const lines = `${stderr}\n${stdout}`
    .split('\n')
    .map((l) => stripAnsi(l).trim())
    .filter((l) => /^error:/i.test(l));
  if (lines.length) return [...new Set(lines)].join('; ');
  const last = stderr.trim().split('\n').slice(-3).join(' ');
  return oneLine(stripAnsi(last)) || 'the Pulumi CLI failed without a message';
}

function classify(text: string): string | undefined {
  if (/Conflict: Another update is currently in progress|the stack is currently locked/i.test(text))
    return 'UpdateConflict';
  if (/invalid access token/i.test(text)) return 'InvalidAccessToken';
  return undefined;
}

const tempDirs = new Set<string>();

/** Removes the event-log dirs of operations still running (a hard exit). */
export function removeTempDirs(): void {
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
  tempDirs.clear();
}

export interface RunOperationOptions {
  id: string;
  req: OperationRequest;
  emit: (line: StreamLine) => void;
  /** Aborting interrupts the CLI; the abort's reason (a string) says why. */
  signal: AbortSignal;
}

/**
 * The stack's outputs with their secret flags and plaintext values, with as few CLI calls as
 * possible. The stack resource's engine event carries them with secrets blinded: without any
 * special value they are the outputs. With only secrets in a passphrase stack, the plaintext comes
 * from the state the `up` just wrote (stack-state.ts). Otherwise one `pulumi stack output --json
 * --show-secrets` reads the values. The secret flags come from the event (an output is secret when
 * it contains a secret anywhere); without the event, from `stack output` without `--show-secrets`
 * (upstream's way).
 */
async function readOutputs(
  ctx: OperationContext,
  fromEvent: { outputs: Record<string, unknown>; urn: string } | undefined,
  since: Date,
): Promise<{ outputs: Record<string, OutputValue> } | { error: string }> {
  if (fromEvent && !hasMarker(fromEvent.outputs)) {
    const outputs: Record<string, OutputValue> = {};
    for (const key of Object.keys(fromEvent.outputs).sort())
      outputs[key] = { value: fromEvent.outputs[key], secret: false };
    return { outputs };
  }
  if (fromEvent && ctx.state) {
    const t0 = Date.now();
    const got = await ctx.state.read({
      workDir: ctx.workDir,
      stack: ctx.stack,
      eventOutputs: fromEvent.outputs,
      stackUrn: fromEvent.urn,
      since,
      ...(ctx.projectInfo ? { project: ctx.projectInfo.name } : {}),
    });
    if ('outputs' in got) {
      const outputs: Record<string, OutputValue> = {};
      for (const key of Object.keys(got.outputs).sort()) {
        const secret = containsSecret(fromEvent.outputs[key]);
        outputs[key] = { value: got.outputs[key], secret };
        if (secret) ctx.redactor.add(got.outputs[key]);
      }
      logger.debug('secret stack outputs decrypted from the state', { source: got.source, ms: Date.now() - t0 });
      return { outputs };
    }
    logger.debug('secret stack outputs: reading them with pulumi stack output', { why: got.reason });
  }
  const base = ['stack', 'output', '--json', '--stack', ctx.stack, '--non-interactive'];
  const [plain, masked] = await Promise.all([
    runPulumi({ args: [...base, '--show-secrets'], cwd: ctx.workDir }),
    fromEvent ? Promise.resolve(undefined) : runPulumi({ args: base, cwd: ctx.workDir }),
  ]);
  if (plain.code !== 0) return { error: `cannot read the stack outputs: ${failureDetail([], plain.stderr, '')}` };
  let values: Record<string, unknown>;
  let maskedValues: Record<string, unknown> = {};
  try {
    values = parseJsonObject(plain.stdout || '{}');
    if (masked) {
      if (masked.code !== 0) return { error: `cannot read the stack outputs: ${failureDetail([], masked.stderr, '')}` };
      maskedValues = parseJsonObject(masked.stdout || '{}');
    }
  } catch {
    return { error: 'cannot read the stack outputs: the CLI did not print JSON' };
  }
  const outputs: Record<string, OutputValue> = {};
  for (const key of Object.keys(values).sort()) {
    const secret = fromEvent ? containsSecret(fromEvent.outputs[key]) : maskedValues[key] === '[secret]';
    outputs[key] = { value: values[key], secret };
    if (secret) ctx.redactor.add(values[key]);
  }
  return { outputs };
}

/** Runs one operation with the CLI, streaming its events and output; never throws. */
export async function runOperation(ctx: OperationContext, options: RunOperationOptions): Promise<OperationResult> {
  const { id, req, emit, signal } = options;
  const started = new Date();
  const startTime = rfc3339(started);
  const noPlan = preparePlan(req, ctx.planDir);
  if (noPlan) {
    const failed: OperationResult = { id, type: req.type, startTime, state: 'failed', ...noPlan, endTime: rfc3339() };
    if (ctx.projectInfo) failed.projectInfo = ctx.projectInfo;
    return failed;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-op-'));
  tempDirs.add(dir);
  const eventLog = path.join(dir, 'events.jsonl');
  fs.writeFileSync(eventLog, '');
  const diagnostics: string[] = [];
  let summary: { resourceChanges?: Record<string, number> } | undefined;
  let stackOutputsEvent: { outputs: Record<string, unknown>; urn: string } | undefined;
  const r = ctx.redactor;
  const drift = new DriftCollector();
  const tail = new EventLogTail(eventLog, (event) => {
    if (req.type === 'refresh') drift.add(event);
    const diag = event.diagnosticEvent;
    if (isRecord(diag) && diag.severity === 'error' && typeof diag.message === 'string') diagnostics.push(diag.message);
    const sum = event.summaryEvent as { resourceChanges?: Record<string, number> } | undefined;
    if (sum) summary = sum;
    const outs = event.resOutputsEvent;
    const meta = isRecord(outs) && isRecord(outs.metadata) ? outs.metadata : undefined;
    const outputs = meta && isRecord(meta.new) ? meta.new.outputs : undefined;
    if (meta?.type === STACK_TYPE && isRecord(outputs))
      stackOutputsEvent = { outputs, urn: typeof meta.urn === 'string' ? meta.urn : '' };
    emit({ kind: 'event', event: r.redactValue(event) });
  });
  tail.start();
  let result: OperationResult;
  try {
    const run = await runPulumi({
      args: operationArgs(req, ctx.stack, eventLog, ctx.logLevel, ctx.planDir),
      cwd: ctx.workDir,
      // As the Automation API: --event-log exists only with PULUMI_DEBUG_COMMANDS.
      env: { PULUMI_DEBUG_COMMANDS: 'true', PULUMI_AUTOMATION_API: 'true' },
      signal,
      onStdout: (line) => emit({ kind: 'output', stream: 'stdout', line: r.redact(line) }),
      onStderr: (line) => emit({ kind: 'output', stream: 'stderr', line: r.redact(line) }),
    });
    await tail.stop();
    const base = { id, type: req.type, startTime, projectInfo: ctx.projectInfo } as const;
    const permalink = findPermalink(run.stdout);
    const changes = summary?.resourceChanges;
    const why: unknown = signal.reason;
    if (run.interrupted && typeof why === 'string') {
      // Pulumi exits 0 after a Ctrl-C once the steps in flight are done, even when it skipped the
      // rest (a destroy that deleted one of two resources "succeeds"): an interrupted operation
      // is never reported as done.
      const described = describeChanges(changes, req.type === 'preview');
      const detail =
        run.code === 0
          ? `Pulumi stopped after the steps in flight${described ? ` (${described})` : ''}`
          : failureDetail(diagnostics, run.stderr, run.stdout);
      result = {
        ...base,
        state: 'failed',
        reason: 'Aborted',
        message: `${req.type} was interrupted (${why}): ${detail}`,
        endTime: '',
      };
    } else if (run.code === 0) {
      const described = describeChanges(changes, req.type === 'preview' || req.previewOnly === true);
      result = {
        ...base,
        state: 'succeeded',
        message: `${req.type} succeeded${described ? ` (${described})` : ''}`,
        endTime: '',
      };
      if (req.type === 'up') {
        const outs = await readOutputs(ctx, stackOutputsEvent, started);
        if ('error' in outs) {
          result = {
            ...base,
            state: 'failed',
            reason: 'UpdateFailed',
            message: `up succeeded but ${outs.error}`,
            endTime: '',
          };
        } else {
          result.outputs = outs.outputs;
        }
      }
    } else {
      const detail = failureDetail(diagnostics, run.stderr, run.stdout);
      result = {
        ...base,
        state: 'failed',
        reason: classify(`${detail}\n${run.stderr}`) ?? 'UpdateFailed',
        message: `${req.type} failed: ${detail}`,
        endTime: '',
      };
    }
    if (permalink) result.permalink = permalink;
    if (changes) result.resourceChanges = changes;
    if (req.type === 'refresh' && result.state === 'succeeded') Object.assign(result, drift.result());
  } catch (e) {
    await tail.stop().catch(() => undefined);
    result = {
      id,
      type: req.type,
      startTime,
      state: 'failed',
      reason: 'UpdateFailed',
      message: `${req.type} failed: ${e instanceof Error ? e.message : String(e)}`,
      endTime: '',
    };
    if (ctx.projectInfo) result.projectInfo = ctx.projectInfo;
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
    tempDirs.delete(dir);
  }
  result.endTime = rfc3339();
  result.message = truncate(r.redact(result.message), MAX_MESSAGE);
  if (result.projectInfo === undefined) delete result.projectInfo;
  return result;
}
