/**
 * One pod on the pod runner's node: the kubelet's pod worker, reduced to what a test bed needs.
 * Volumes first, then init containers in order (restartable init containers — sidecars — keep
 * running), then the containers concurrently; restarts with the kubelet's back-off; probes;
 * status written through pods/status as a strategic merge patch (as the kubelet does); graceful
 * termination on deletion, then the final delete with grace period 0. A container's state and
 * back-off: container-run.ts; its credentials and mounts: container-setup.ts; the status written:
 * pod-status.ts.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { V1LifecycleHandler, V1Pod, V1Probe } from '@kubernetes/client-node';
import { type Api, isNotFound, p } from './api';
import { ContainerConfigError, containerEnv, expandCommand, POD_IP } from './env';
import type { ImageConfig } from './images';
import { ensureHostMountPoint, mountTargetProblem } from './mountpoints';
import { httpGet, type ProbeResult, probeTimings, runProbe, tcpSocket, resolvePort } from './probes';
import { type BindMount, ContainerProcess, type Credentials, type HostTools } from './process';
import { PodVolumes, readConfigMap, readSecret, VolumeError } from './volumes';
import { ContainerRun, now } from './container-run';
import { buildMounts, containerCredentials } from './container-setup';
import { buildPodStatus, computePhase, type PodPhase, type PodState } from './pod-status';

export interface RunnerContext {
  api: Api;
  tools: HostTools;
  nodeName: string;
  podsDir: string;
  logsDir: string;
  claimsDir: string;
  /** Directories no mount may overlap (the runner's own). */
  ownDirs: string[];
  protectedPaths: string[];
  capacity: Record<string, string>;
  serviceEnv: Record<string, string>;
  backoffInitialMs: number;
  backoffMaxMs: number;
  volumeRefreshMs: number;
  /** The image config, or a string: why the image cannot be "pulled". */
  image(image: string): ImageConfig | string;
  /** Contents of the pod's /etc/hosts. */
  hostsFile(pod: V1Pod): Promise<string>;
  /** Output lines, when streaming. */
  stream?: (prefix: string, chunk: Buffer) => void;
  log(msg: string): void;
  event(pod: V1Pod, type: 'Normal' | 'Warning', reason: string, message: string, fieldPath?: string): void;
  /** The test's rewrite of the pod spec before it runs (ports, commands). */
  transformPod?: (pod: V1Pod) => V1Pod;
}

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
  /** Set once: no more container starts. */
  private stopping = false;
  private readonly stopWaiters = new Set<() => void>();
  private killDeadline = Infinity;
  private terminationStarted = false;
  private termination: Promise<void> | undefined;
  private finalized = false;
  private goneFromApi = false;
  /** No status writes any more (the pod was deleted, or the runner stops). */
  private silent = false;
  private statusDirty = false;
  private statusWriting: Promise<void> | undefined;
  private lastWritten = '';
  private readonly timers = new Set<NodeJS.Timeout>();
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
    this.goneFromApi = true;
    this.silent = true;
    this.finalized = true;
    void this.terminate(0);
  }

  /** The runner stops: SIGKILL everything, no status writes. */
  async kill(): Promise<void> {
    this.silent = true;
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

  private sleep(ms: number): Promise<void> {
    if (this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        this.stopWaiters.delete(wake);
        resolve();
      }, ms);
      const wake = (): void => {
        clearTimeout(t);
        this.timers.delete(t);
        resolve();
      };
      this.timers.add(t);
      this.stopWaiters.add(wake);
    });
  }

  private setStopping(): void {
    if (this.stopping) return;
    this.stopping = true;
    for (const w of this.stopWaiters) w();
    this.stopWaiters.clear();
  }

  private async run(): Promise<void> {
    this.startTime = now();
    const problem = this.admit();
    if (problem) {
      this.ctx.event(this.pod, 'Warning', problem.reason, problem.message);
      this.ctx.log(`pod ${this.key} rejected: ${problem.message}`);
      this.phase = 'Failed';
      this.podReason = problem.reason;
      this.podMessage = problem.message;
      for (const c of [...this.inits, ...this.mains]) c.state = { waiting: { reason: 'ContainerCreating' } };
      this.setStopping();
      this.pushStatus();
      return;
    }
    this.pushStatus();
    const deadline = this.pod.spec?.activeDeadlineSeconds;
    if (deadline !== undefined && deadline !== null) {
      const t = setTimeout(
        () => void this.failPod('DeadlineExceeded', 'Pod was active on the node longer than the specified deadline'),
        deadline * 1000,
      );
      this.timers.add(t);
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
        await this.sleep(Math.min(500 * 2 ** Math.min(this.volumeFailures, 4), 5000));
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
        while (!this.stopping && !c.started) await this.sleep(100);
        continue;
      }
      c.loopDone = this.containerLoop(c);
      await c.loopDone;
      const t = c.terminated;
      if (!t || t.exitCode !== 0) {
        // Only reached with restartPolicy Never (otherwise the loop retries until success).
        if (!this.stopping) {
          this.phase = 'Failed';
          this.setStopping();
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
      this.setStopping();
      await this.stopSidecars();
      this.pushStatus();
    }
  }

  private admit(): { reason: string; message: string } | undefined {
    const containers = [...(this.pod.spec?.initContainers ?? []), ...(this.pod.spec?.containers ?? [])];
    for (const c of containers) {
      const targets = (c.volumeMounts ?? []).map((m) => m.mountPath);
      const img = this.ctx.image(c.image ?? '');
      if (typeof img !== 'string')
        targets.push(...Object.keys(img.binds ?? {}), ...Object.keys(img.writableDirs ?? {}));
      for (const t of targets) {
        const problem = mountTargetProblem(t, this.ctx.protectedPaths, this.ctx.ownDirs);
        if (problem)
          return { reason: 'UnsafeMountPath', message: `pod runner refuses container ${c.name}: ${problem}` };
      }
    }
    if (this.pod.spec?.ephemeralContainers?.length) this.ctx.log(`pod ${this.key}: ephemeral containers are ignored`);
    return undefined;
  }

  private startVolumeRefresh(): void {
    const tick = async (): Promise<void> => {
      if (this.stopping || this.phase === 'Succeeded' || this.phase === 'Failed') return;
      try {
        await this.volumes.refresh();
      } catch (e) {
        this.ctx.log(`pod ${this.key}: volume refresh: ${(e as Error).message}`);
      }
      if (!this.stopping) {
        const t = setTimeout(() => {
          this.timers.delete(t);
          void tick();
        }, this.ctx.volumeRefreshMs);
        this.timers.add(t);
      }
    };
    const t = setTimeout(() => {
      this.timers.delete(t);
      void tick();
    }, this.ctx.volumeRefreshMs);
    this.timers.add(t);
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
      const policy =
        c.kind === 'sidecar'
          ? 'Always'
          : c.kind === 'init'
            ? this.restartPolicy === 'Never'
              ? 'Never'
              : 'OnFailure'
            : this.restartPolicy;
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
        this.ctx.event(this.pod, 'Warning', 'BackOff', 'Back-off restarting failed container', this.fieldPath(c));
        this.pushStatus();
        await this.sleep(wait);
        if (this.stopping) return;
      }
      c.backoff.next();
    }
  }

  private fieldPath(c: ContainerRun): string {
    return `spec.${c.kind === 'main' ? 'containers' : 'initContainers'}{${c.name}}`;
  }

  /** Starts the container and waits for it to end. 'retry': it could not be created (state waiting). */
  private async startAndWait(c: ContainerRun): Promise<'exited' | 'retry'> {
    const spec = c.spec;
    const image = this.ctx.image(spec.image ?? '');
    if (typeof image === 'string') {
      c.state = { waiting: { reason: 'ErrImageNeverPull', message: image } };
      this.ctx.event(this.pod, 'Warning', 'ErrImageNeverPull', image, this.fieldPath(c));
      this.pushStatus();
      await this.sleep(5000);
      return 'retry';
    }

    const containerDir = path.join(this.podDir, 'containers', spec.name);
    fs.mkdirSync(containerDir, { recursive: true });
    let env: Record<string, string>;
    let argv: string[];
    let mounts: BindMount[];
    let creds: Credentials;
    let workingDir: string;
    const hostname = this.hostname();
    try {
      creds = containerCredentials(this.pod, spec, image);
      const list = await containerEnv({
        pod: this.pod,
        container: spec,
        nodeName: this.ctx.nodeName,
        capacity: this.ctx.capacity,
        serviceEnv: this.ctx.serviceEnv,
        objects: {
          secret: async (ns, name) => {
            const m = await readSecret(this.ctx.api, ns, name);
            return m && Object.fromEntries([...m].map(([k, v]) => [k, v.toString('utf8')]));
          },
          configMap: async (ns, name) => {
            const m = await readConfigMap(this.ctx.api, ns, name);
            return m && Object.fromEntries([...m].map(([k, v]) => [k, v.toString('utf8')]));
          },
        },
      });
      const basePath =
        image.basePath ?? process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
      env = {
        PATH: [...(image.path ?? []), basePath].filter((x) => x !== '').join(':'),
        HOSTNAME: hostname,
        HOME: creds.uid === 0 ? '/root' : '/',
        ...(image.env ?? {}),
      };
      for (const [k, v] of list) env[k] = v;
      const command = spec.command?.length ? spec.command : (image.entrypoint ?? []);
      const args = spec.command?.length ? (spec.args ?? []) : spec.args?.length ? spec.args : (image.cmd ?? []);
      argv = [...expandCommand(command, env), ...expandCommand(args, env)];
      if (argv.length === 0)
        throw new ContainerConfigError(
          'no command specified (the image has no ENTRYPOINT/CMD in the pod runner registry)',
        );
      workingDir = spec.workingDir || image.workingDir || '/';
      mounts = buildMounts(spec, image, env, creds, containerDir, {
        podDir: this.podDir,
        hostsFile: await this.ctx.hostsFile(this.pod),
        volumes: this.volumes.prepared,
      });
      // A working dir outside every mount and missing on the host is created (and remembered).
      if (
        !mounts.some((m) => workingDir === m.target || workingDir.startsWith(`${m.target}/`)) &&
        !fs.existsSync(workingDir)
      ) {
        ensureHostMountPoint(workingDir, 'dir');
      }
    } catch (e) {
      const msg = (e as Error).message;
      const reason = e instanceof ContainerConfigError ? 'CreateContainerConfigError' : 'CreateContainerError';
      c.state = { waiting: { reason, message: msg } };
      this.ctx.event(this.pod, 'Warning', 'Failed', `Error: ${msg}`, this.fieldPath(c));
      this.ctx.log(`pod ${this.key} container ${spec.name}: ${reason}: ${msg}`);
      this.pushStatus();
      await this.sleep(2000);
      return 'retry';
    }

    if (this.stopping) return 'retry';
    if (c.everStarted) {
      c.restartCount++;
      if (c.terminated) c.lastState = { terminated: c.terminated };
    }
    const logFile = path.join(this.logDir, spec.name, `${c.restartCount}.log`);
    fs.mkdirSync(path.dirname(logFile), { recursive: true });
    c.logFiles.push(logFile);
    c.containerID = `pko-pod-runner://${crypto.randomBytes(32).toString('hex')}`;
    c.ready = false;
    c.started = false;
    const startedAt = now();
    const stream = this.ctx.stream;
    const prefix = `${this.namespace}/${this.name}/${spec.name}`;
    const proc = new ContainerProcess(this.ctx.tools, {
      argv,
      env,
      workingDir,
      mounts,
      hostname,
      creds,
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
      this.fieldPath(c),
    );
    this.ctx.event(this.pod, 'Normal', 'Created', `Created container ${spec.name}`, this.fieldPath(c));
    const pid = await proc.started;
    if (pid !== undefined) {
      c.state = { running: { startedAt } };
      this.ctx.event(this.pod, 'Normal', 'Started', `Started container ${spec.name}`, this.fieldPath(c));
      this.startProbes(c, proc);
      this.pushStatus();
      if (spec.lifecycle?.postStart) {
        const r = await this.runHandler(spec.lifecycle.postStart, c, proc, Infinity);
        if (!r.ok && proc.running) {
          this.ctx.event(this.pod, 'Warning', 'FailedPostStartHook', r.message, this.fieldPath(c));
          proc.signal('SIGTERM');
          const grace = (this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000;
          const t = setTimeout(() => proc.killAll(), grace);
          void proc.exited.then(() => clearTimeout(t));
        }
      }
    }
    const exit = await proc.exited;
    c.stopProbes?.();
    c.stopProbes = undefined;
    c.ready = false;
    c.started = false;
    const finishedAt = now();
    if (exit.startError !== undefined) {
      c.state = {
        terminated: {
          exitCode: 128,
          reason: 'StartError',
          message: exit.startError,
          startedAt: '1970-01-01T00:00:00Z',
          finishedAt,
          containerID: c.containerID,
        },
      };
      this.ctx.event(this.pod, 'Warning', 'Failed', `Error: ${exit.startError}`, this.fieldPath(c));
      this.ctx.log(`pod ${this.key} container ${spec.name}: StartError: ${exit.startError}`);
    } else {
      c.state = {
        terminated: {
          exitCode: exit.exitCode,
          reason: exit.exitCode === 0 ? 'Completed' : 'Error',
          startedAt,
          finishedAt,
          containerID: c.containerID,
          ...(exit.exitCode > 128 ? { signal: exit.exitCode - 128 } : {}),
        },
      };
    }
    c.proc = undefined;
    this.pushStatus();
    return 'exited';
  }

  private hostname(): string {
    const h = this.pod.spec?.hostname || this.name;
    return h.slice(0, 63).replace(/[-.]+$/, '');
  }

  // -------------------------------------------------------------------------------------------
  // Probes and handlers

  private async runHandler(
    h: V1LifecycleHandler,
    c: ContainerRun,
    proc: ContainerProcess,
    timeoutMs: number,
  ): Promise<ProbeResult> {
    const t = Number.isFinite(timeoutMs) ? Math.max(timeoutMs, 1) : 2 ** 31 - 1;
    if (h.exec) {
      const r = await proc.exec(h.exec.command ?? [], t);
      return {
        ok: r.exitCode === 0 && !r.timedOut,
        message: `exec ${JSON.stringify(h.exec.command)} exited ${r.exitCode}: ${r.output.trim()}`,
      };
    }
    if (h.httpGet) return httpGet(h.httpGet, c.spec, Math.min(t, 2 ** 31 - 1));
    if (h.tcpSocket) {
      try {
        return await tcpSocket(h.tcpSocket.host || POD_IP, resolvePort(h.tcpSocket.port, c.spec), Math.min(t, 30_000));
      } catch (e) {
        return { ok: false, message: (e as Error).message };
      }
    }
    if (h.sleep) {
      await new Promise((r) => setTimeout(r, Math.min(h.sleep!.seconds * 1000, t)));
      return { ok: true, message: '' };
    }
    return { ok: false, message: 'handler has no action' };
  }

  private startProbes(c: ContainerRun, proc: ContainerProcess): void {
    let stopped = false;
    const timers = new Set<NodeJS.Timeout>();
    c.stopProbes = () => {
      stopped = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
    };
    const later = (ms: number, fn: () => void): void => {
      const t = setTimeout(() => {
        timers.delete(t);
        if (!stopped) fn();
      }, ms);
      timers.add(t);
    };
    const target = { container: c.spec, exec: (argv: string[], ms: number) => proc.exec(argv, ms) };
    const startup = c.spec.startupProbe;
    const readiness = c.spec.readinessProbe;
    const liveness = c.spec.livenessProbe;

    const loop = (
      probe: V1Probe,
      kind: 'Startup' | 'Readiness' | 'Liveness',
      onResult: (ok: boolean, changedTo?: boolean) => boolean,
    ): void => {
      const t = probeTimings(probe);
      let successes = 0;
      let failures = 0;
      let result: boolean | undefined;
      const tick = async (): Promise<void> => {
        if (stopped || !proc.running) return;
        const r = await runProbe(probe, target);
        if (stopped || !proc.running) return;
        if (r.ok) {
          successes++;
          failures = 0;
        } else {
          failures++;
          successes = 0;
          this.ctx.event(this.pod, 'Warning', 'Unhealthy', `${kind} probe failed: ${r.message}`, this.fieldPath(c));
        }
        let changed: boolean | undefined;
        if (r.ok && successes >= t.successThreshold && result !== true) changed = result = true;
        else if (!r.ok && failures >= t.failureThreshold && result !== false) {
          result = false;
          changed = false;
          if (kind !== 'Readiness') failures = 0;
        }
        const keepGoing = onResult(r.ok, changed);
        if (keepGoing) later(t.periodMs, () => void tick());
      };
      later(t.initialDelayMs, () => void tick());
    };

    const afterStartup = (): void => {
      c.started = true;
      if (!readiness) c.ready = true;
      this.pushStatus();
      if (readiness) {
        loop(readiness, 'Readiness', (_ok, changed) => {
          if (changed !== undefined && c.ready !== changed) {
            c.ready = changed;
            this.pushStatus();
          }
          return true;
        });
      }
      if (liveness) {
        loop(liveness, 'Liveness', (_ok, changed) => {
          if (changed === false) {
            this.ctx.event(
              this.pod,
              'Normal',
              'Killing',
              `Container ${c.name} failed liveness probe, will be restarted`,
              this.fieldPath(c),
            );
            void this.killContainer(
              c,
              Date.now() +
                (liveness.terminationGracePeriodSeconds ?? this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000,
            );
            return false;
          }
          return true;
        });
      }
    };

    if (startup) {
      loop(startup, 'Startup', (_ok, changed) => {
        if (changed === true) {
          afterStartup();
          return false;
        }
        if (changed === false) {
          this.ctx.event(
            this.pod,
            'Normal',
            'Killing',
            `Container ${c.name} failed startup probe, will be restarted`,
            this.fieldPath(c),
          );
          void this.killContainer(
            c,
            Date.now() +
              (startup.terminationGracePeriodSeconds ?? this.pod.spec?.terminationGracePeriodSeconds ?? 30) * 1000,
          );
          return false;
        }
        return true;
      });
    } else {
      afterStartup();
    }
  }

  /** preStop, SIGTERM, SIGKILL at the deadline (which may move earlier). */
  private async killContainer(c: ContainerRun, deadline: number, runPreStop = true): Promise<void> {
    const proc = c.proc;
    if (!proc || !proc.running) return;
    const localDeadline = (): number => Math.min(deadline, this.killDeadline);
    const exited = proc.exited.then(() => true);
    if (runPreStop && c.spec.lifecycle?.preStop && localDeadline() > Date.now()) {
      const budget = localDeadline() - Date.now();
      await Promise.race([
        this.runHandler(c.spec.lifecycle.preStop, c, proc, budget),
        exited,
        this.waitUntil(localDeadline),
      ]);
    }
    if (!proc.running) return;
    if (localDeadline() > Date.now()) {
      proc.signal('SIGTERM');
      await Promise.race([exited, this.waitUntil(localDeadline)]);
    }
    if (proc.running) {
      proc.killAll();
      await proc.exited;
    }
  }

  /** Resolves once Date.now() passes deadline() (re-read every 100 ms, so it can move earlier). */
  private waitUntil(deadline: () => number): Promise<void> {
    return new Promise((resolve) => {
      const check = (): void => {
        if (Date.now() >= deadline()) resolve();
        else setTimeout(check, Math.min(100, Math.max(1, deadline() - Date.now())));
      };
      check();
    });
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
    this.setStopping();
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
    this.setStopping();
    const all = [...this.inits, ...this.mains];
    if (!this.silent && this.killDeadline > Date.now()) {
      for (const c of all)
        if (c.proc?.running)
          this.ctx.event(this.pod, 'Normal', 'Killing', `Stopping container ${c.name}`, this.fieldPath(c));
    }
    // Regular containers first, then sidecars in reverse order (kubelet).
    await Promise.all(this.mains.map((c) => this.killContainer(c, this.killDeadline, !this.silent)));
    for (const s of [...this.inits].reverse()) await this.killContainer(s, this.killDeadline, !this.silent);
    await Promise.all(all.map((c) => c.loopDone));
    await this.done;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    for (const c of all) {
      if (!c.terminated && c.everStarted && !c.running) {
        // Stopped while waiting for a restart: report the last termination.
        if (c.lastState) c.state = c.lastState;
      }
    }
    if (!this.silent) {
      if (this.phase !== 'Succeeded' && this.phase !== 'Failed') {
        const mainsDone = this.mains.filter((c) => c.terminated);
        this.phase =
          mainsDone.length === this.mains.length &&
          mainsDone.every((c) => c.terminated!.exitCode === 0) &&
          this.initDone
            ? 'Succeeded'
            : 'Failed';
      }
      this.pushStatus();
      await this.flushStatus();
      await this.finalDelete();
    }
    this.cleanup();
  }

  private async finalDelete(): Promise<void> {
    if (this.finalized || this.goneFromApi) return;
    this.finalized = true;
    try {
      await this.ctx.api.request('DELETE', p`/api/v1/namespaces/${this.namespace}/pods/${this.name}`, {
        apiVersion: 'v1',
        kind: 'DeleteOptions',
        gracePeriodSeconds: 0,
        preconditions: { uid: this.uid },
      });
    } catch (e) {
      if (!isNotFound(e) && !(e instanceof Error && /HTTP 409/.test(e.message)))
        this.ctx.log(`pod ${this.key}: final delete: ${(e as Error).message}`);
    }
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
    if (this.silent) return;
    this.statusDirty = true;
    if (this.statusWriting) return;
    this.statusWriting = (async () => {
      let failures = 0;
      while (this.statusDirty && !this.silent) {
        this.statusDirty = false;
        const status = this.buildStatus();
        const phase = status.phase as string;
        if (phase === 'Succeeded' || phase === 'Failed') this.phase = phase;
        const body = JSON.stringify(status);
        if (body === this.lastWritten) continue;
        try {
          await this.ctx.api.request(
            'PATCH',
            p`/api/v1/namespaces/${this.namespace}/pods/${this.name}/status`,
            { status },
            'application/strategic-merge-patch+json',
          );
          this.lastWritten = body;
          failures = 0;
        } catch (e) {
          if (isNotFound(e)) {
            this.silent = true;
            this.goneFromApi = true;
            break;
          }
          failures++;
          this.ctx.log(`pod ${this.key}: status update failed (${failures}): ${(e as Error).message}`);
          this.statusDirty = true;
          await new Promise((r) => setTimeout(r, Math.min(200 * failures, 2000)));
          if (failures > 30) break;
        }
      }
    })().finally(() => {
      this.statusWriting = undefined;
      if (this.statusDirty && !this.silent) this.pushStatus();
    });
  }

  async flushStatus(): Promise<void> {
    while (this.statusWriting) await this.statusWriting;
  }
}
