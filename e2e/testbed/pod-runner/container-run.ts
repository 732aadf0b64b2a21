/** A pod's containers as the pod worker tracks them: state, runs (log files, exit), restarts, back-off. */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { V1Container } from '@kubernetes/client-node';
import type { ProbeTarget } from './probes';
import type { ContainerProcess, ExitInfo } from './process';

export type Waiting = { waiting: { reason: string; message?: string } };
export type Running = { running: { startedAt: string } };
export type Terminated = {
  terminated: {
    exitCode: number;
    reason: string;
    message?: string;
    startedAt?: string;
    finishedAt: string;
    containerID?: string;
    signal?: number;
  };
};
export type State = Waiting | Running | Terminated;

export const now = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');
export const sha = (s: string): string => crypto.createHash('sha256').update(s).digest('hex');

/** The kubelet's crash-loop back-off: doubles per restart up to max, reset after 2 × max without one. */
class Backoff {
  private duration = 0;
  private lastUpdate = 0;
  constructor(
    private readonly initial: number,
    private readonly max: number,
  ) {}
  /** ms to wait before restarting a container that finished at `finished` (0: restart now). */
  delay(finished: number): number {
    if (this.lastUpdate === 0) return 0;
    const until = this.lastUpdate + this.duration;
    return finished - this.lastUpdate < this.duration ? Math.max(0, until - Date.now()) : 0;
  }
  next(): number {
    const t = Date.now();
    if (this.lastUpdate === 0 || t - this.lastUpdate > 2 * this.max) this.duration = this.initial;
    else this.duration = Math.min(this.duration * 2, this.max);
    this.lastUpdate = t;
    return this.duration;
  }
}

/** One container of a pod: its state as the status reports it, its process, its restart back-off. */
export class ContainerRun {
  state: State;
  lastState: Terminated | undefined;
  restartCount = 0;
  ready = false;
  started = false;
  everStarted = false;
  proc: ContainerProcess | undefined;
  containerID: string | undefined;
  stopProbes: (() => void) | undefined;
  /** The loop that runs this container has ended. */
  loopDone: Promise<void> = Promise.resolve();
  readonly backoff: Backoff;
  logFiles: string[] = [];

  constructor(
    readonly spec: V1Container,
    readonly kind: 'init' | 'sidecar' | 'main',
    initialReason: string,
    backoff: { backoffInitialMs: number; backoffMaxMs: number },
  ) {
    this.state = { waiting: { reason: initialReason } };
    this.backoff = new Backoff(backoff.backoffInitialMs, backoff.backoffMaxMs);
  }

  get name(): string {
    return this.spec.name;
  }
  get running(): boolean {
    return 'running' in this.state;
  }
  get terminated(): Terminated['terminated'] | undefined {
    return 'terminated' in this.state ? this.state.terminated : undefined;
  }
  /** The container in events' involvedObject.fieldPath. */
  get fieldPath(): string {
    return `spec.${this.kind === 'main' ? 'containers' : 'initContainers'}{${this.name}}`;
  }

  /** Its restart policy within a pod with restart policy `podPolicy` (sidecars always, init containers until success). */
  restartPolicy(podPolicy: string): string {
    if (this.kind === 'sidecar') return 'Always';
    if (this.kind === 'init') return podPolicy === 'Never' ? 'Never' : 'OnFailure';
    return podPolicy;
  }

  /** Probes and handlers run against this run's process. */
  target(proc: ContainerProcess): ProbeTarget {
    return { container: this.spec, exec: (argv, ms) => proc.exec(argv, ms) };
  }

  /** A new run is about to start: the restart count, last state and container ID move on; its log file under logDir. */
  beginRun(logDir: string): string {
    if (this.everStarted) {
      this.restartCount++;
      if (this.terminated) this.lastState = { terminated: this.terminated };
    }
    const logFile = path.join(logDir, this.name, `${this.restartCount}.log`);
    fs.mkdirSync(path.dirname(logFile), { recursive: true });
    this.logFiles.push(logFile);
    this.containerID = `pko-pod-runner://${crypto.randomBytes(32).toString('hex')}`;
    this.ready = false;
    this.started = false;
    return logFile;
  }

  /** The run's process has ended (or never ran: StartError): the terminated state it leaves. */
  recordExit(exit: ExitInfo, startedAt: string): void {
    this.stopProbes?.();
    this.stopProbes = undefined;
    this.ready = false;
    this.started = false;
    const finishedAt = now();
    if (exit.startError !== undefined) {
      this.state = {
        terminated: {
          exitCode: 128,
          reason: 'StartError',
          message: exit.startError,
          startedAt: '1970-01-01T00:00:00Z',
          finishedAt,
          containerID: this.containerID,
        },
      };
    } else {
      this.state = {
        terminated: {
          exitCode: exit.exitCode,
          reason: exit.exitCode === 0 ? 'Completed' : 'Error',
          startedAt,
          finishedAt,
          containerID: this.containerID,
          ...(exit.exitCode > 128 ? { signal: exit.exitCode - 128 } : {}),
        },
      };
    }
    this.proc = undefined;
  }
}
