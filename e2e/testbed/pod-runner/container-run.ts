/** A pod's containers as the pod worker tracks them: state, restarts, back-off. */
import * as crypto from 'node:crypto';
import type { V1Container } from '@kubernetes/client-node';
import type { ContainerProcess } from './process';

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
}
