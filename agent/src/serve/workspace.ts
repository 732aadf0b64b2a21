import * as crypto from 'node:crypto';
import { LocalWorkspace } from '@pulumi/pulumi/automation';
import {
  rfc3339,
  WORKSPACE_UNAUTHENTICATED,
  type OperationRequest,
  type ProjectInfo,
  type WorkspaceStackSpec,
  type WorkspaceStatus,
} from '../../../contract';
import type { OperationResult, StreamLine } from '../api';
import { AgentError, errorMessage, oneLine, truncate } from '../lib/errors';
import { logger } from '../lib/log';
import type { Redactor } from '../lib/redact';
import { sleep } from '../lib/sleep';
import { pulumiVersionProblem, secretConfigSet } from './cli-version';
import { configJson, hasStructuredConfig, resolveConfig, type ResolvedConfig } from './config';
import type { CallerVerification } from './auth-check';
import { runOperation } from './operation';
import { runPulumi, type RunResult } from './pulumi';
import { localLockProbe, runWithSelfHealing } from './self-healing';
import { missingRuntime } from './runtime';
import { StackStateReader } from './stack-state';
import type { StatusReporter } from './status';

export interface WorkspaceOptions {
  /** The project directory (the workspace symlink resolved). */
  workDir: string;
  stack: WorkspaceStackSpec;
  /** The pod template hash this pod runs (PULUMI_WORKSPACE_HASH). */
  hash: string;
  reporter: StatusReporter;
  redactor: Redactor;
  logLevel: number;
  /**
   * Whether callers can be verified (auth-check.ts), when the server checks them (--auth-mode kube):
   * the workspace is not reported Ready before they can. Without it, always.
   */
  verifiesCallers?: boolean;
  /** First and largest delay between retries of a failed installation or initialisation. */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
}

export interface RunningOperation {
  id: string;
  type: OperationRequest['type'];
  startTime: string;
  /** Aborted with the reason of the interruption (a string). */
  abort: AbortController;
  done: Promise<OperationResult>;
}

/** The last few meaningful lines of a failed CLI call. */
function cliError(r: RunResult): string {
  const lines = `${r.stderr}\n${r.stdout}`
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  const errors = lines.filter((l) => /^error:/i.test(l));
  return truncate(
    oneLine((errors.length ? errors : lines.slice(-5)).join('; ')) || `exit code ${String(r.code)}`,
    2000,
  );
}

/**
 * The workspace: installs the project once, selects (or creates) the stack, applies its config and
 * environments, then runs operations one at a time. Its state is reported in its status ConfigMap.
 */
export class Workspace {
  state: WorkspaceStatus['state'] = 'Installing';
  reason?: string;
  message?: string;
  pulumiVersion?: string;
  projectInfo?: ProjectInfo;
  installs = 0;
  private ws?: LocalWorkspace;
  private config: ResolvedConfig[] = [];
  private stackReady = false;
  private current?: RunningOperation;
  private readonly stopping = new AbortController();
  /** Keeps the passphrase key between operations (secret outputs without a CLI call). */
  private readonly stateReader = new StackStateReader();
  /** The image lacks the project's language runtime (found when `pulumi install` failed). */
  private runtimeMissing = false;
  private callers: CallerVerification;

  constructor(private readonly options: WorkspaceOptions) {
    this.callers = options.verifiesCallers ? { state: 'checking' } : { state: 'verified' };
  }

  get stackName(): string {
    return this.options.stack.name;
  }

  get busy(): RunningOperation | undefined {
    return this.current;
  }

  /**
   * The state reported in the status ConfigMap and served on /readyz. Callers that cannot be verified
   * come first: no operation can run until they can, whatever the installation does meanwhile.
   */
  status(): WorkspaceStatus {
    const s: WorkspaceStatus = { hash: this.options.hash, state: this.state };
    if (this.reason) s.reason = this.reason;
    if (this.message) s.message = this.message;
    if (this.callers.state === 'refused') {
      s.state = 'Failed';
      s.reason = WORKSPACE_UNAUTHENTICATED;
      s.message = this.callers.message;
    } else if (this.callers.state === 'checking' && s.state === 'Ready') {
      s.state = 'Installing';
      s.reason = 'CheckingAccess';
      s.message = 'checking that this workspace may verify its callers (TokenReview, SubjectAccessReview)';
    }
    if (this.pulumiVersion) s.pulumiVersion = this.pulumiVersion;
    if (this.projectInfo) s.projectInfo = this.projectInfo;
    return s;
  }

  /** The callers' verification changed (auth-check.ts): report the state it implies. */
  setCallerVerification(state: CallerVerification): void {
    this.callers =
      state.state === 'refused' ? { ...state, message: this.options.redactor.redact(state.message) } : state;
    this.options.reporter.report(this.status());
  }

  private set(state: WorkspaceStatus['state'], reason?: string, message?: string): void {
    this.state = state;
    this.reason = reason;
    this.message = message === undefined ? undefined : this.options.redactor.redact(message);
    this.options.reporter.report(this.status());
  }

  /**
   * Installs and initialises, retrying failures with a growing delay (never in a tight loop). The
   * reported state stays Failed while retrying; it turns Ready once everything succeeded.
   */
  async initialize(): Promise<void> {
    this.set('Installing', 'Installing', 'installing the project dependencies');
    let delay = this.options.retryDelayMs ?? 60_000;
    const maxDelay = this.options.maxRetryDelayMs ?? 15 * 60_000;
    let installed = false;
    while (!this.stopping.signal.aborted) {
      try {
        if (!this.ws) await this.open();
        if (!installed) {
          await this.install();
          installed = true;
        }
        await this.initStack();
        this.set('Ready', 'Succeeded', `stack ${this.stackName} is ready`);
        return;
      } catch (e) {
        const err = e instanceof AgentError ? e : new AgentError(errorMessage(e), { reason: 'InitializationFailed' });
        const reason = err.reason ?? 'InitializationFailed';
        this.set('Failed', reason, err.message);
        // Neither goes away by retrying: a new image (a new pod) is needed.
        if (reason === 'IncompatibleConfiguration' || this.runtimeMissing) return;
        logger.warn('workspace initialisation failed; will retry', {
          reason,
          retryInSeconds: Math.round(delay / 1000),
        });
        await sleep(delay, this.stopping.signal);
        delay = Math.min(delay * 2, maxDelay);
      }
    }
  }

  private async open(): Promise<void> {
    let ws: LocalWorkspace;
    try {
      ws = await LocalWorkspace.create({
        workDir: this.options.workDir,
        ...(this.options.stack.secretsProvider ? { secretsProvider: this.options.stack.secretsProvider } : {}),
      });
    } catch (e) {
      throw new AgentError(`cannot open the Pulumi workspace at ${this.options.workDir}: ${errorMessage(e)}`, {
        reason: 'InitializationFailed',
      });
    }
    this.pulumiVersion = ws.pulumiVersion;
    const items = this.options.stack.config ?? [];
    // Before installing: a CLI that is too old is not retried (a new image rolls the pod).
    const tooLow = pulumiVersionProblem(this.pulumiVersion, hasStructuredConfig(items));
    if (tooLow) throw new AgentError(tooLow, { reason: 'IncompatibleConfiguration' });
    try {
      const settings = await ws.projectSettings();
      const runtime = typeof settings.runtime === 'string' ? settings.runtime : (settings.runtime?.name ?? '');
      this.projectInfo = { name: settings.name, runtime };
    } catch (e) {
      throw new AgentError(`cannot read the project (Pulumi.yaml) in ${this.options.workDir}: ${errorMessage(e)}`, {
        reason: 'InitializationFailed',
      });
    }
    // Read (and register as secrets) every config value before anything can print one.
    this.config = resolveConfig(items, this.projectInfo.name);
    for (const c of this.config) if (c.secret) this.options.redactor.add(c.value);
    this.ws = ws;
    logger.info('workspace opened', {
      dir: this.options.workDir,
      project: this.projectInfo.name,
      runtime: this.projectInfo.runtime,
      pulumi: this.pulumiVersion,
    });
  }

  private async install(): Promise<void> {
    const t0 = Date.now();
    logger.info('installing dependencies (pulumi install)');
    this.installs++;
    const r = await runPulumi({
      args: ['install'],
      cwd: this.options.workDir,
      onStdout: (l) => l.trim() && logger.info(`install: ${l}`),
      onStderr: (l) => l.trim() && logger.info(`install: ${l}`),
    });
    if (r.code !== 0) {
      // The CLI's words name the language host, not the image: say what is missing and what to use.
      const missing = missingRuntime(
        this.projectInfo?.runtime ?? '',
        process.env.PATH ?? '',
        this.pulumiVersion?.replace(/^v/, ''),
      );
      this.runtimeMissing = missing !== undefined;
      const message = missing ? `${missing} (pulumi install: ${cliError(r)})` : `pulumi install failed: ${cliError(r)}`;
      throw new AgentError(message, { reason: 'InstallationFailed' });
    }
    logger.info('dependencies installed', { ms: Date.now() - t0 });
  }

  private async cli(args: string[], stdin?: string): Promise<RunResult> {
    return runPulumi({ args, cwd: this.options.workDir, ...(stdin !== undefined ? { stdin } : {}) });
  }

  /** Selects or creates the stack, then applies config and environments (upstream's initialisation). */
  private async initStack(): Promise<void> {
    const ws = this.ws!;
    const name = this.stackName;
    try {
      await ws.selectStack(name);
      logger.info('stack selected', { stack: name });
    } catch (e) {
      const text = errorMessage(e);
      const missing = /no stack named|not found|does not exist/i.test(text);
      if (!missing)
        throw new AgentError(`cannot select stack ${name}: ${truncate(this.options.redactor.redact(text), 2000)}`, {
          reason: 'InitializationFailed',
        });
      if (!this.options.stack.create)
        throw new AgentError(`stack ${name} not found (it is not created because useLocalStackOnly is set)`, {
          reason: 'InitializationFailed',
        });
      try {
        await ws.createStack(name);
        logger.info('stack created', { stack: name });
      } catch (e2) {
        throw new AgentError(
          `cannot create stack ${name}: ${truncate(this.options.redactor.redact(errorMessage(e2)), 2000)}`,
          { reason: 'InitializationFailed' },
        );
      }
    }
    await this.applyConfig();
    const envs = this.options.stack.environment ?? [];
    if (envs.length) {
      try {
        await ws.addEnvironments(name, ...envs);
      } catch (e) {
        throw new AgentError(`cannot add environments ${envs.join(', ')}: ${truncate(errorMessage(e), 2000)}`, {
          reason: 'InitializationFailed',
        });
      }
    }
    this.stackReady = true;
  }

  /**
   * Plain and structured values in one `config set-all` (`--json` when any is structured); each
   * secret string through `config set --secret` with the value on stdin, never on a command line
   * (secretConfigSet). (A structured secret can only go through `set-all --json`, like upstream.)
   */
  private async applyConfig(): Promise<void> {
    const stack = this.stackName;
    const byKey = this.config.filter((c) => !c.path);
    const plain = byKey.filter((c) => !c.secret);
    const secretStrings = byKey.filter((c) => c.secret && !c.structured);
    const secretStructured = byKey.filter((c) => c.secret && c.structured);
    const batch = [...plain, ...secretStructured];
    if (batch.length) {
      const structured = batch.some((c) => c.structured);
      const args = ['config', 'set-all', '--stack', stack];
      if (structured) args.push('--json', configJson(batch));
      else for (const c of batch) args.push('--plaintext', `${c.key}=${String(c.value)}`);
      const r = await this.cli(args);
      if (r.code !== 0)
        throw new AgentError(`cannot set the stack config: ${this.options.redactor.redact(cliError(r))}`, {
          reason: 'InitializationFailed',
        });
    }
    // Property paths (a Workspace's `path: true`; strings only): plain ones in one `set-all --path`.
    const paths = this.config.filter((c) => c.path && !c.secret);
    if (paths.length) {
      const args = ['config', 'set-all', '--stack', stack, '--path'];
      for (const c of paths) args.push('--plaintext', `${c.key}=${String(c.value)}`);
      const r = await this.cli(args);
      if (r.code !== 0)
        throw new AgentError(`cannot set the stack config: ${this.options.redactor.redact(cliError(r))}`, {
          reason: 'InitializationFailed',
        });
    }
    for (const c of [...secretStrings, ...this.config.filter((c) => c.path && c.secret)]) {
      const set = secretConfigSet(this.pulumiVersion ?? '', stack, c.key, String(c.value));
      if (c.path) set.args.splice(set.args.indexOf('--stack'), 0, '--path');
      const r = await this.cli(set.args, set.stdin);
      if (r.code !== 0)
        throw new AgentError(`cannot set the secret config ${c.key}: ${this.options.redactor.redact(cliError(r))}`, {
          reason: 'InitializationFailed',
        });
    }
    if (this.config.length)
      logger.info('stack config applied', {
        keys: this.config.map((c) => c.key + (c.secret ? ' (secret)' : '')).join(', '),
      });
  }

  /** Starts an operation; the caller checked readiness and that nothing else runs. */
  start(req: OperationRequest, emit: (line: StreamLine) => void): RunningOperation {
    const id = `op-${Date.now().toString(36)}-${crypto.randomBytes(3).toString('hex')}`;
    const abort = new AbortController();
    const startTime = rfc3339();
    emit({ kind: 'started', id, type: req.type, stack: this.stackName, startTime });
    const running: RunningOperation = {
      id,
      type: req.type,
      startTime,
      abort,
      done: this.run(id, req, emit, abort.signal, startTime),
    };
    this.current = running;
    return running;
  }

  private async run(
    id: string,
    req: OperationRequest,
    emit: (line: StreamLine) => void,
    signal: AbortSignal,
    startTime: string,
  ): Promise<OperationResult> {
    try {
      if (!this.stackReady) {
        try {
          await this.initStack();
        } catch (e) {
          return {
            id,
            type: req.type,
            state: 'failed',
            reason: 'InitializationFailed',
            message: this.options.redactor.redact(errorMessage(e)),
            startTime,
            endTime: rfc3339(),
          };
        }
      }
      logger.info('operation started', { id, type: req.type, stack: this.stackName });
      const context = {
        workDir: this.options.workDir,
        stack: this.stackName,
        redactor: this.options.redactor,
        logLevel: this.options.logLevel,
        state: this.stateReader,
        ...(this.projectInfo ? { projectInfo: this.projectInfo } : {}),
      };
      const run = (to: (line: StreamLine) => void): Promise<OperationResult> =>
        runOperation(context, { id, req, emit: to, signal });
      // This operation holds the workspace's one slot (this.current): no other runs here meanwhile.
      const result = req.selfHealing
        ? await runWithSelfHealing(
            {
              stack: this.stackName,
              cli: (args, sig) => runPulumi({ args, cwd: this.options.workDir, signal: sig }),
              emit,
              probe: localLockProbe(),
              signal,
            },
            req.type,
            run,
          )
        : await run(emit);
      result.message = this.options.redactor.redact(result.message);
      if (req.type === 'destroy' && req.remove && result.state === 'succeeded') this.stackReady = false;
      logger.info('operation finished', {
        id,
        type: req.type,
        state: result.state,
        reason: result.reason,
        message: result.message,
      });
      return result;
    } finally {
      if (this.current?.id === id) this.current = undefined;
    }
  }

  /**
   * Interrupts the running operation (SIGINT to the CLI); the first reason given is the one the
   * result names. False when `id` is not running.
   */
  cancel(id: string | undefined, reason: string): boolean {
    const running = this.current;
    if (!running || (id !== undefined && running.id !== id)) return false;
    logger.warn('interrupting the running operation', { id: running.id, type: running.type, reason });
    running.abort.abort(reason);
    return true;
  }

  /** Stops retrying initialisation; interrupts and waits for a running operation. */
  async shutdown(reason: string): Promise<OperationResult | undefined> {
    this.stopping.abort();
    const running = this.current;
    if (!running) return undefined;
    this.cancel(running.id, reason);
    return running.done;
  }
}
