/**
 * One pod on the pod runner's node: the kubelet's pod worker, reduced to what a test bed needs.
 * Volumes first, then init containers in order (restartable init containers — sidecars — keep
 * running), then the containers concurrently; restarts with the kubelet's back-off; graceful
 * termination on deletion, then the final delete with grace period 0. A container's state and
 * back-off: container-run.ts; what it is launched with: container-launch.ts; its probes:
 * probe-loops.ts; stopping it: termination.ts; the status computed: pod-status.ts, and written:
 * status-writer.ts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { ContainerConfigError } from './env';
import { runHandler } from './probes';
import { ContainerProcess } from './process';
import { PodTimers } from './pod-timers';
import { PodVolumes, VolumeError } from './volumes';
import { ContainerRun, now } from './container-run';
import { admissionProblem, type ContainerLaunch, prepareLaunch } from './container-launch';
import { buildPodStatus, computePhase, type PodPhase, type PodState } from './pod-status';
import { type ProbeHost, startProbes } from './probe-loops';
import type { RunnerContext } from './runner-context';
import { StatusWriter } from './status-writer';
import { finalDelete, killContainer, phaseAfterTermination, stopContainers } from './termination';

export class PodWorker {
  pod: V1Pod;
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly podDir: string;
  readonly logDir: string;
  private readonly volumes: PodVolumes;
  private readonly inits: ContainerRun[];
  private readonly mains: ContainerRun[];
  private startTime: string | undefined;
  private sandboxReady = false;
  private initDone = false;
  private phase: PodPhase = 'Pending';
  private podReason: string | undefined;
  private podMessage: string | undefined;
  private readonly conditionTimes = new Map<string, { status: string; time: string }>();
  private killDeadline = Infinity;
  private terminationStarted = false;
  private termination: Promise<void> | undefined;
  private finalized = false;
  private readonly status: StatusWriter;
  private readonly probeHost: ProbeHost = {
    pod: () => this.pod,
    event: (type, reason, message, fieldPath) => this.ctx.event(this.pod, type, reason, message, fieldPath),
    pushStatus: () => this.pushStatus(),
    killContainer: (c, deadline) => void this.killContainer(c, deadline),
  };
  private readonly timers = new PodTimers();
  readonly done: Promise<void>;
  private resolveDone: () => void = () => undefined;
  private volumeFailures = 0;

  constructor(
    private readonly ctx: RunnerContext,
    pod: V1Pod,
  ) {
    this.pod = ctx.transformPod ? ctx.transformPod(structuredClone(pod)) : pod;
    this.uid = pod.metadata!.uid!;
    this.namespace = pod.metadata!.namespace ?? 'default';
    this.name = pod.metadata!.name!;
    this.podDir = path.join(ctx.podsDir, this.uid);
    this.logDir = path.join(ctx.logsDir, `${this.namespace}_${this.name}_${this.uid}`);
    fs.mkdirSync(this.podDir, { recursive: true, mode: 0o755 });
    fs.mkdirSync(this.logDir, { recursive: true });
    this.volumes = new PodVolumes({
      api: ctx.api,
      pod: () => this.pod,
      podDir: this.podDir,
      claimsDir: ctx.claimsDir,
      nodeName: ctx.nodeName,
      capacity: ctx.capacity,
    });
    this.inits = (this.pod.spec?.initContainers ?? []).map(
      (c) => new ContainerRun(c, c.restartPolicy === 'Always' ? 'sidecar' : 'init', 'PodInitializing', ctx),
    );
    const hasInit = this.inits.length > 0;
    this.mains = (this.pod.spec?.containers ?? []).map(
      (c) => new ContainerRun(c, 'main', hasInit ? 'PodInitializing' : 'ContainerCreating', ctx),
    );
    this.status = new StatusWriter(
      ctx.api,
      { namespace: this.namespace, name: this.name },
      () => {
        const status = this.buildStatus();
        const phase = status.phase as string;
        if (phase === 'Succeeded' || phase === 'Failed') this.phase = phase;
        return status;
      },
      (msg) => ctx.log(msg),
    );
    this.done = new Promise((r) => (this.resolveDone = r));
  }

  private get restartPolicy(): string {
    return this.pod.spec?.restartPolicy ?? 'Always';
  }

  private get key(): string {
    return `${this.namespace}/${this.name}`;
  }

  // -------------------------------------------------------------------------------------------
  // Entry points from the runner

  start(): void {
    void this.run()
      .catch((e: unknown) => this.ctx.log(`pod ${this.key}: ${(e as Error).stack ?? String(e)}`))
      .finally(() => this.resolveDone());
  }

  /** A newer version of the pod from the watch. */
  update(pod: V1Pod): void {
    const spec = this.pod.spec;
    this.pod = { ...pod, spec: spec ?? pod.spec };
    // Readiness gates are conditions others set: Ready may change with them.
    if ((spec?.readinessGates ?? []).length > 0 && !this.terminationStarted) this.pushStatus();
    if (pod.metadata?.deletionTimestamp) {
      const grace = pod.metadata.deletionGracePeriodSeconds ?? pod.spec?.terminationGracePeriodSeconds ?? 30;
      void this.terminate(grace * 1000);
    }
  }

  /** The pod is gone from the API server: kill everything now, write nothing. */
  gone(): void {
    this.status.goneFromApi = true;
    this.status.silent = true;
    this.finalized = true;
    void this.terminate(0);
  }

  /** The runner stops: SIGKILL everything, no status writes. */
  async kill(): Promise<void> {
    this.status.silent = true;
    this.finalized = true;
    await this.terminate(0);
  }

  logFile(container: string, previous = false): string | undefined {
    const c = [...this.inits, ...this.mains].find((x) => x.name === container);
    if (!c) return undefined;
    return previous ? c.logFiles[c.logFiles.length - 2] : c.logFiles[c.logFiles.length - 1];
  }

  processes(): { container: string; reaperPid?: number; initPid?: number }[] {
    return [...this.inits, ...this.mains]
      .filter((c) => c.proc?.running)
      .map((c) => ({ container: c.name, reaperPid: c.proc!.reaper.pid, initPid: c.proc!.initPid }));
  }

  /** Synchronous SIGKILL of every process (exit hook). */
  killSync(): void {
    for (const c of [...this.inits, ...this.mains]) c.proc?.killAll();
  }

  // -------------------------------------------------------------------------------------------

  private get stopping(): boolean {
    return this.timers.stopping;
  }

  private async run(): Promise<void> {
    this.startTime = now();
    const problem = admissionProblem(this.pod, this.ctx);
    if (problem) {
      this.ctx.event(this.pod, 'Warning', problem.reason, problem.message);
      this.ctx.log(`pod ${this.key} rejected: ${problem.message}`);
      this.phase = 'Failed';
      this.podReason = problem.reason;
      this.podMessage = problem.message;
      for (const c of [...this.inits, ...this.mains]) c.state = { waiting: { reason: 'ContainerCreating' } };
      this.timers.stop();
      this.pushStatus();
      return;
    }
    if (this.pod.spec?.ephemeralContainers?.length) this.ctx.log(`pod ${this.key}: ephemeral containers are ignored`);
    this.pushStatus();
    const deadline = this.pod.spec?.activeDeadlineSeconds;
    if (deadline !== undefined && deadline !== null) {
      this.timers.after(
        deadline * 1000,
        () => void this.failPod('DeadlineExceeded', 'Pod was active on the node longer than the specified deadline'),
      );
    }

    // Volumes (kubelet: the pod waits until every volume is mounted, FailedMount events meanwhile).
    while (!this.stopping) {
      try {
        await this.volumes.setup();
        break;
      } catch (e) {
        const msg = e instanceof VolumeError ? e.message : `volume setup: ${(e as Error).message}`;
        if (this.volumeFailures++ % 10 === 0) {
          this.ctx.event(this.pod, 'Warning', 'FailedMount', `MountVolume.SetUp failed: ${msg}`);
          this.ctx.log(`pod ${this.key}: FailedMount: ${msg}`);
        }
        await this.timers.sleep(Math.min(500 * 2 ** Math.min(this.volumeFailures, 4), 5000));
      }
    }
    if (this.stopping) return;
    this.sandboxReady = true;
    this.startVolumeRefresh();
    this.pushStatus();

    // Init containers, in order.
    for (const c of this.inits) {
      if (this.stopping) return;
      if (c.kind === 'sidecar') {
        c.loopDone = this.containerLoop(c);
        // The next init container starts once the sidecar has started (startup probe passed).
        while (!this.stopping && !c.started) await this.timers.sleep(100);
        continue;
      }
      c.loopDone = this.containerLoop(c);
      await c.loopDone;
      const t = c.terminated;
      if (!t || t.exitCode !== 0) {
        // Only reached with restartPolicy Never (otherwise the loop retries until success).
        if (!this.stopping) {
          this.phase = 'Failed';
          this.timers.stop();
          await this.stopSidecars();
          this.pushStatus();
        }
        return;
      }
    }
    this.initDone = true;
    this.pushStatus();

    // Containers, concurrently.
    for (const c of this.mains) c.loopDone = this.containerLoop(c);
    await Promise.all(this.mains.map((c) => c.loopDone));
    if (!this.stopping) {
      // All containers are done for good (restartPolicy Never/OnFailure): the pod is terminal.
      this.phase = this.computePhase();
      this.timers.stop();
      await this.stopSidecars();
      this.pushStatus();
    }
  }

  private startVolumeRefresh(): void {
    const tick = async (): Promise<void> => {
      if (this.stopping || this.phase === 'Succeeded' || this.phase === 'Failed') return;
      try {
        await this.volumes.refresh();
      } catch (e) {
        this.ctx.log(`pod ${this.key}: volume refresh: ${(e as Error).message}`);
      }
      if (!this.stopping) this.timers.after(this.ctx.volumeRefreshMs, () => void tick());
    };
    this.timers.after(this.ctx.volumeRefreshMs, () => void tick());
  }

  // -------------------------------------------------------------------------------------------
  // Containers

  /** Runs one container until it is done for good (per restart policy) or the pod stops. */
  private async containerLoop(c: ContainerRun): Promise<void> {
    for (;;) {
      if (this.stopping) return;
      const outcome = await this.startAndWait(c);
      if (this.stopping) return;
      if (outcome === 'retry') continue;
      const t = c.terminated!;
      const policy = c.restartPolicy(this.restartPolicy);
      if (policy === 'Never' || (policy === 'OnFailure' && t.exitCode === 0)) return;
      if (c.kind === 'main' && this.pod.metadata?.deletionTimestamp) return;
      const wait = c.backoff.delay(Date.parse(t.finishedAt));
      if (wait > 0) {
        c.lastState = { terminated: t };
        c.state = {
          waiting: {
            reason: 'CrashLoopBackOff',
            message: `back-off ${Math.round(wait / 1000)}s restarting failed container=${c.name} pod=${this.name}_${this.namespace}(${this.uid})`,
          },
        };
        this.ctx.event(this.pod, 'Warning', 'BackOff', 'Back-off restarting failed container', c.fieldPath);
        this.pushStatus();
        await this.timers.sleep(wait);
        if (this.stopping) return;
      }
      c.backoff.next();
    }
  }

  /** Starts the container and waits for it to end. 'retry': it could not be created (state waiting). */
  private async startAndWait(c: ContainerRun): Promise<'exited' | 'retry'> {
    const spec = c.spec;
    const image = this.ctx.image(spec.image ?? '');
    if (typeof image === 'string') {
      c.state = { waiting: { reason: 'ErrImageNeverPull', message: image } };
      this.ctx.event(this.pod, 'Warning', 'ErrImageNeverPull', image, c.fieldPath);
      this.pushStatus();
      await this.timers.sleep(5000);
      return 'retry';
    }

    const containerDir = path.join(this.podDir, 'containers', spec.name);
    fs.mkdirSync(containerDir, { recursive: true });
    let launch: ContainerLaunch;
    try {
      launch = await prepareLaunch(this.ctx, this.pod, spec, image, {
        podDir: this.podDir,
        containerDir,
        volumes: this.volumes.prepared,
      });
    } catch (e) {
      const msg = (e as Error).message;
      const reason = e instanceof ContainerConfigError ? 'CreateContainerConfigError' : 'CreateContainerError';
      c.state = { waiting: { reason, message: msg } };
      this.ctx.event(this.pod, 'Warning', 'Failed', `Error: ${msg}`, c.fieldPath);
      this.ctx.log(`pod ${this.key} container ${spec.name}: ${reason}: ${msg}`);
      this.pushStatus();
      await this.timers.sleep(2000);
      return 'retry';
    }

    if (this.stopping) return 'retry';
    const logFile = c.beginRun(this.logDir);
    const startedAt = now();
    const stream = this.ctx.stream;
    const prefix = `${this.namespace}/${this.name}/${spec.name}`;
    const proc = new ContainerProcess(this.ctx.tools, {
      ...launch,
      logFile,
      ...(stream ? { onOutput: (chunk: Buffer) => stream(prefix, chunk) } : {}),
    });
    c.proc = proc;
    c.everStarted = true;
    this.ctx.event(
      this.pod,
      'Normal',
      'Pulled',
      `Container image "${spec.image ?? ''}" already present on machine`,
      c.fieldPath,
    );
    this.ctx.event(this.pod, 'Normal', 'Created', `Created container ${spec.name}`, c.fieldPath);
    const pid = await proc.started;
    if (pid !== undefined) {
      c.state = { running: { startedAt } };
      this.ctx.event(this.pod, 'Normal', 'Started', `Started container ${spec.name}`, c.fieldPath);
      startProbes(c, proc, this.probeHost);
      this.pushStatus();
      if (spec.lifecycle?.postStart) {
        const r = await runHandler(spec.lifecycle.postStart, c.target(proc), Infinity);
        if (!r.ok && proc.running) {
          this.ctx.event(this.pod, 'Warning', 'FailedPostStartHook', r.message, c.fieldPath);
          proc.signal('SIGTERM');
          const grace = (this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
          const t = setTimeout(() => proc.killAll(), grace);
          void proc.exited.then(() => clearTimeout(t));
        }
      }
    }
    const exit = await proc.exited;
    c.recordExit(exit, startedAt);
    if (exit.startError !== undefined) {
      this.ctx.event(this.pod, 'Warning', 'Failed', `Error: ${exit.startError}`, c.fieldPath);
      this.ctx.log(`pod ${this.key} container ${spec.name}: StartError: ${exit.startError}`);
    }
    this.pushStatus();
    return 'exited';
  }

  /** preStop, SIGTERM, SIGKILL at the deadline, or earlier if the pod's termination deadline comes first. */
  private killContainer(c: ContainerRun, deadline: number, runPreStop = true): Promise<void> {
    return killContainer(c, () => Math.min(deadline, this.killDeadline), runPreStop);
  }

  private async stopSidecars(): Promise<void> {
    const grace = (this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
    for (const s of [...this.inits].reverse()) {
      if (s.kind === 'sidecar') await this.killContainer(s, Date.now() + grace);
    }
    await Promise.all(this.inits.filter((s) => s.kind === 'sidecar').map((s) => s.loopDone));
  }

  // -------------------------------------------------------------------------------------------
  // Termination

  private async failPod(reason: string, message: string): Promise<void> {
    if (this.phase === 'Succeeded' || this.phase === 'Failed' || this.stopping) return;
    this.podReason = reason;
    this.podMessage = message;
    this.ctx.event(this.pod, 'Warning', reason, message);
    this.timers.stop();
    const grace = (this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
    await Promise.all([...this.inits, ...this.mains].map((c) => this.killContainer(c, Date.now() + grace)));
    this.phase = 'Failed';
    this.pushStatus();
  }

  /** Graceful termination within graceMs (0: SIGKILL now), then the final status and delete. */
  terminate(graceMs: number): Promise<void> {
    const deadline = Date.now() + graceMs;
    this.killDeadline = Math.min(this.killDeadline, deadline);
    this.termination ??= this.doTerminate();
    return this.termination;
  }

  private async doTerminate(): Promise<void> {
    this.terminationStarted = true;
    this.timers.stop();
    const all = [...this.inits, ...this.mains];
    if (!this.status.silent && this.killDeadline > Date.now()) {
      for (const c of all)
        if (c.proc?.running) this.ctx.event(this.pod, 'Normal', 'Killing', `Stopping container ${c.name}`, c.fieldPath);
    }
    await stopContainers(this.inits, this.mains, (c) => this.killContainer(c, this.killDeadline, !this.status.silent));
    await Promise.all(all.map((c) => c.loopDone));
    await this.done;
    this.timers.clear();
    for (const c of all) {
      if (!c.terminated && c.everStarted && !c.running) {
        // Stopped while waiting for a restart: report the last termination.
        if (c.lastState) c.state = c.lastState;
      }
    }
    if (!this.status.silent) {
      if (this.phase !== 'Succeeded' && this.phase !== 'Failed')
        this.phase = phaseAfterTermination(this.mains, this.initDone);
      this.pushStatus();
      await this.status.flush();
      if (!this.finalized && !this.status.goneFromApi) {
        this.finalized = true;
        await finalDelete(this.ctx.api, this, (msg) => this.ctx.log(msg));
      }
    }
    this.cleanup();
  }

  private cleanup(): void {
    try {
      fs.rmSync(this.podDir, { recursive: true, force: true });
    } catch (e) {
      this.ctx.log(`pod ${this.key}: cannot remove ${this.podDir}: ${(e as Error).message}`);
    }
  }

  /** Deletion of a pod that is already terminal: no containers to stop. */
  get terminal(): boolean {
    return this.phase === 'Succeeded' || this.phase === 'Failed';
  }

  // -------------------------------------------------------------------------------------------
  // Status (computed in pod-status.ts)

  private get state(): PodState {
    return {
      pod: this.pod,
      restartPolicy: this.restartPolicy,
      phase: this.phase,
      initDone: this.initDone,
      sandboxReady: this.sandboxReady,
      inits: this.inits,
      mains: this.mains,
      startTime: this.startTime,
      podReason: this.podReason,
      podMessage: this.podMessage,
      conditionTimes: this.conditionTimes,
    };
  }

  private computePhase(): PodPhase {
    return computePhase(this.state);
  }

  buildStatus(): Record<string, unknown> {
    return buildPodStatus(this.state);
  }

  pushStatus(): void {
    this.status.push();
  }

  async flushStatus(): Promise<void> {
    await this.status.flush();
  }
}
