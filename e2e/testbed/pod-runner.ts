/**
 * The pod runner: the e2e test bed's stand-in for a kubelet (and a trivial scheduler).
 *
 *   const runner = await startPodRunner({ kubeConfig: cp.kubeConfig, images: { ... } });
 *   ...                       // create Jobs, StatefulSets, Pods: they run as local processes
 *   runner.logs('ns', 'pod', 'container');
 *   await runner.stop();      // kills every process, removes mount points and temp dirs
 *
 * It registers a Node (`pko-e2e-node`, Ready), binds unscheduled pods to it through the
 * pods/binding subresource, and runs each bound pod's init containers and containers as local
 * processes from the pod spec (command/args, env, volumes at their real mount paths in a private
 * mount namespace, user/group, probes), writing status through pods/status so the real Job and
 * StatefulSet controllers see pods start, complete, fail and become ready. Deleting a pod sends
 * SIGTERM and honours the grace period. What it emulates and what it cannot: docs/pod-runner.md.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import { Api, ApiError, type KObject, type ObjectList, p, type WatchEvent } from './pod-runner/api';
import { kubernetesServiceEnv, nodeCapacity, POD_IP } from './pod-runner/env';
import { type ImageConfig, type ImageRegistry, resolveImage } from './pod-runner/images';
import { DEFAULT_PROTECTED_PATHS, registerOwner, releaseOwner } from './pod-runner/mountpoints';
import { PodWorker } from './pod-runner/pod-worker';
import type { RunnerContext } from './pod-runner/runner-context';
import { findHostTools } from './pod-runner/process';
import { installExitHook, liveRunners } from './pod-runner/exit-hooks';
import { registerNode } from './pod-runner/node';

export type { ImageRegistry } from './pod-runner/images';

export const DEFAULT_NODE_NAME = 'pko-e2e-node';

export interface PodRunnerOptions {
  kubeConfig: KubeConfig;
  /** Image pattern → what the container sees (see ImageConfig). Unmatched images: `unknownImages`. */
  images?: ImageRegistry;
  /**
   * What an image that matches no pattern gets: 'host' (default) runs it with the host's PATH
   * and nothing else; 'reject' leaves the container waiting with ErrImageNeverPull.
   */
  unknownImages?: 'host' | 'reject';
  /** Namespaces to watch (default: all). */
  namespaces?: string[];
  /** Parent directory of the runner's temp dir (default: os.tmpdir()). */
  workDir?: string;
  /** Name of the Node the runner registers and binds pods to. */
  nodeName?: string;
  /** Bind pods that have no nodeName to our Node (default true). */
  schedule?: boolean;
  /**
   * Copy container output to the test's output as it comes, each line prefixed with
   * `ns/pod/container`. true → process.stderr; a function receives each line. Default: the
   * PKO_POD_RUNNER_STREAM=1 environment variable.
   */
  streamLogs?: boolean | ((line: string) => void);
  /** More host paths no volume may be mounted over (added to DEFAULT_PROTECTED_PATHS). */
  protectedPaths?: string[];
  /** Container restart back-off: first delay and cap (kubelet: 10 s and 300 s). */
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  /** How often ConfigMap/Secret/downwardAPI/projected volumes are re-read (default 2000 ms). */
  volumeRefreshMs?: number;
  /** Extra /etc/hosts entries for every container: IP → names. */
  extraHosts?: Record<string, string[]>;
  /**
   * Rewrites a pod's spec before it runs (the API object is not changed). The place for per-pod
   * port overrides, since every pod shares the host's network: see docs/pod-runner.md.
   */
  transformPod?: (pod: V1Pod) => V1Pod;
  /** Keep the temp dir (logs, volumes) after stop(); also PKO_KEEP_POD_RUNNER_DIR=1. */
  keepWorkDir?: boolean;
  /** Runner diagnostics (default: appended to <workDir>/runner.log, and stderr when PKO_POD_RUNNER_DEBUG=1). */
  log?: (msg: string) => void;
}

export interface RunningProcess {
  namespace: string;
  pod: string;
  uid: string;
  container: string;
  /** The reaper (parent of the container's PID 1, host PID namespace). */
  reaperPid?: number;
  /** The container's PID 1, as a host pid. */
  initPid?: number;
}

export interface PodRunner {
  nodeName: string;
  /** The runner's temp dir: pods/<uid> (volumes), logs/<ns>_<pod>_<uid>/<container>/<n>.log. */
  workDir: string;
  /** Output of the container's current (or, with previous, the one before) run; '' if none. */
  logs(namespace: string, pod: string, container: string, opts?: { previous?: boolean }): string;
  /** Path of that log file, if any. */
  logFile(namespace: string, pod: string, container: string, opts?: { previous?: boolean }): string | undefined;
  /** Containers currently running. */
  processes(): RunningProcess[];
  /** Kills every process the runner started, removes created mount points and the temp dir. Idempotent. */
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------

function hostsLine(ip: string, names: string[]): string {
  return `${ip}\t${names.join(' ')}`;
}

interface ServiceObject extends KObject {
  spec?: { clusterIP?: string };
}

export async function startPodRunner(options: PodRunnerOptions): Promise<PodRunner> {
  const tools = findHostTools();
  const api = new Api(options.kubeConfig);
  const nodeName = options.nodeName ?? DEFAULT_NODE_NAME;
  const parent = options.workDir ?? os.tmpdir();
  fs.mkdirSync(parent, { recursive: true });
  const workDir = fs.mkdtempSync(path.join(parent, 'pko-pods-'));
  const keepWorkDir = options.keepWorkDir ?? process.env.PKO_KEEP_POD_RUNNER_DIR === '1';
  const podsDir = path.join(workDir, 'pods');
  const logsDir = path.join(workDir, 'logs');
  const claimsDir = path.join(workDir, 'claims');
  for (const d of [podsDir, logsDir, claimsDir]) fs.mkdirSync(d, { recursive: true });
  const runnerLog = path.join(workDir, 'runner.log');
  const debug = process.env.PKO_POD_RUNNER_DEBUG === '1';
  const log =
    options.log ??
    ((msg: string): void => {
      const line = `${new Date().toISOString()} ${msg}\n`;
      try {
        fs.appendFileSync(runnerLog, line);
      } catch {
        /* dir removed */
      }
      if (debug) process.stderr.write(`[pod-runner] ${line}`);
    });

  const apiPort = Number(api.server.port || (api.server.protocol === 'https:' ? 443 : 80));
  const capacity = nodeCapacity();
  const registry = options.images ?? {};
  const unknownImages = options.unknownImages ?? 'host';
  const image = (ref: string): ImageConfig | string => {
    const cfg = resolveImage(registry, ref);
    if (cfg) return cfg;
    if (unknownImages === 'reject') return `image "${ref}" is not in the pod runner's image registry`;
    return {};
  };

  const streamOpt = options.streamLogs ?? process.env.PKO_POD_RUNNER_STREAM === '1';
  let stream: RunnerContext['stream'];
  if (streamOpt) {
    const sink =
      typeof streamOpt === 'function' ? streamOpt : (line: string): void => void process.stderr.write(`${line}\n`);
    const partial = new Map<string, string>();
    stream = (prefix, chunk) => {
      const text = (partial.get(prefix) ?? '') + chunk.toString('utf8');
      const lines = text.split('\n');
      partial.set(prefix, lines.pop() ?? '');
      for (const l of lines) sink(`[${prefix}] ${l}`);
    };
  }

  const event = (pod: V1Pod, type: 'Normal' | 'Warning', reason: string, message: string, fieldPath?: string): void => {
    const ns = pod.metadata?.namespace ?? 'default';
    const t = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const involvedObject: Record<string, unknown> = {
      apiVersion: 'v1',
      kind: 'Pod',
      namespace: ns,
      name: pod.metadata?.name,
      uid: pod.metadata?.uid,
    };
    if (fieldPath) involvedObject.fieldPath = fieldPath;
    api
      .request('POST', p`/api/v1/namespaces/${ns}/events`, {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { generateName: `${pod.metadata?.name ?? 'pod'}.`, namespace: ns },
        involvedObject,
        reason,
        message: message.slice(0, 1024),
        type,
        source: { component: 'kubelet', host: nodeName },
        reportingComponent: 'kubelet',
        reportingInstance: nodeName,
        firstTimestamp: t,
        lastTimestamp: t,
        count: 1,
      })
      .catch((e: unknown) => {
        if (!stopped) log(`event ${reason} for ${ns}/${pod.metadata?.name ?? ''}: ${(e as Error).message}`);
      });
  };

  const knownPods = new Map<string, V1Pod>();
  const hostsFile = async (pod: V1Pod): Promise<string> => {
    const ns = pod.metadata?.namespace ?? 'default';
    const hostname = pod.spec?.hostname || pod.metadata?.name || 'pod';
    const lines = [
      '# Kubernetes-managed hosts file (pko e2e pod runner).',
      '127.0.0.1\tlocalhost',
      '::1\tlocalhost ip6-localhost ip6-loopback',
    ];
    if (pod.spec?.subdomain)
      lines.push(hostsLine(POD_IP, [`${hostname}.${pod.spec.subdomain}.${ns}.svc.cluster.local`, hostname]));
    else lines.push(hostsLine(POD_IP, [hostname]));
    for (const a of pod.spec?.hostAliases ?? [])
      if (a.ip && a.hostnames?.length) lines.push(hostsLine(a.ip, a.hostnames));
    for (const [ip, names] of Object.entries(options.extraHosts ?? {}))
      if (names.length) lines.push(hostsLine(ip, names));
    // No DNS and no kube-proxy: every Service name resolves to loopback, where pods listen.
    lines.push('# Services: every Service resolves to 127.0.0.1 (pko e2e pod runner)');
    try {
      const svcs = await api.get<ObjectList<ServiceObject>>('/api/v1/services');
      for (const s of svcs.items ?? []) {
        const n = s.metadata?.name ?? '';
        const sns = s.metadata?.namespace ?? '';
        const names = [`${n}.${sns}.svc.cluster.local`, `${n}.${sns}.svc`, `${n}.${sns}`];
        if (sns === ns) names.push(n);
        lines.push(hostsLine(POD_IP, names));
      }
    } catch (e) {
      log(`hosts file: cannot list services: ${(e as Error).message}`);
    }
    for (const other of knownPods.values()) {
      const sub = other.spec?.subdomain;
      if (!sub || other.metadata?.uid === pod.metadata?.uid) continue;
      const h = other.spec?.hostname || other.metadata?.name || '';
      const ons = other.metadata?.namespace ?? '';
      lines.push(
        hostsLine(POD_IP, [`${h}.${sub}.${ons}.svc.cluster.local`, `${h}.${sub}.${ons}.svc`, `${h}.${sub}.${ons}`]),
      );
    }
    return `${lines.join('\n')}\n`;
  };

  const ctx: RunnerContext = {
    api,
    tools,
    nodeName,
    podsDir,
    logsDir,
    claimsDir,
    ownDirs: [workDir],
    protectedPaths: [...DEFAULT_PROTECTED_PATHS, ...(options.protectedPaths ?? [])],
    capacity,
    serviceEnv: kubernetesServiceEnv(POD_IP, apiPort),
    backoffInitialMs: options.backoffInitialMs ?? 10_000,
    backoffMaxMs: options.backoffMaxMs ?? 300_000,
    volumeRefreshMs: options.volumeRefreshMs ?? 2000,
    image,
    hostsFile,
    log,
    event,
    ...(stream ? { stream } : {}),
    ...(options.transformPod ? { transformPod: options.transformPod } : {}),
  };

  // -------------------------------------------------------------------------------------------
  // State

  const workers = new Map<string, PodWorker>(); // by uid
  const byName = new Map<string, PodWorker>(); // ns/name → latest worker (for logs)
  const binding = new Set<string>();
  let stopped = false;
  const self = {
    killSync(): number[] {
      const pids: number[] = [];
      for (const w of workers.values()) {
        for (const pr of w.processes())
          pids.push(...[pr.reaperPid, pr.initPid].filter((x): x is number => x !== undefined));
        w.killSync();
      }
      return pids;
    },
  };
  installExitHook();
  liveRunners.add(self);
  registerOwner(self, workDir, keepWorkDir);

  // -------------------------------------------------------------------------------------------
  // Node

  const ensureNode = (): Promise<void> => registerNode(api, nodeName, capacity);
  try {
    await ensureNode();
  } catch (e) {
    liveRunners.delete(self);
    api.close();
    if (!keepWorkDir) fs.rmSync(workDir, { recursive: true, force: true });
    releaseOwner(self);
    throw new Error(`pod runner: cannot register node ${nodeName}: ${(e as Error).message}`, { cause: e });
  }

  // -------------------------------------------------------------------------------------------
  // Pods

  const bind = async (pod: V1Pod): Promise<void> => {
    const uid = pod.metadata?.uid ?? '';
    if (binding.has(uid)) return;
    binding.add(uid);
    const ns = pod.metadata?.namespace ?? 'default';
    const name = pod.metadata?.name ?? '';
    try {
      await api.request('POST', p`/api/v1/namespaces/${ns}/pods/${name}/binding`, {
        apiVersion: 'v1',
        kind: 'Binding',
        metadata: { name, namespace: ns, uid },
        target: { apiVersion: 'v1', kind: 'Node', name: nodeName },
      });
      event(pod, 'Normal', 'Scheduled', `Successfully assigned ${ns}/${name} to ${nodeName}`);
    } catch (e) {
      if (!(e instanceof ApiError && (e.code === 409 || e.code === 404))) {
        log(`bind ${ns}/${name}: ${(e as Error).message}`);
        binding.delete(uid);
      }
    }
  };

  const onPod = (pod: V1Pod): void => {
    if (stopped) return;
    const uid = pod.metadata?.uid;
    if (!uid) return;
    const spec = pod.spec;
    const phase = pod.status?.phase;
    const terminal = phase === 'Succeeded' || phase === 'Failed';
    if (!spec?.nodeName) {
      if (options.schedule === false || terminal || pod.metadata?.deletionTimestamp) return;
      if ((spec?.schedulingGates ?? []).length > 0) return;
      void bind(pod);
      return;
    }
    if (spec.nodeName !== nodeName) return;
    knownPods.set(uid, pod);
    let w = workers.get(uid);
    if (!w) {
      if (terminal) {
        // Finished before we saw it (e.g. an earlier runner): only finalize a deletion.
        if (pod.metadata?.deletionTimestamp && (pod.metadata.deletionGracePeriodSeconds ?? 0) > 0) {
          const ns = pod.metadata.namespace ?? 'default';
          api
            .request('DELETE', p`/api/v1/namespaces/${ns}/pods/${pod.metadata.name ?? ''}`, {
              gracePeriodSeconds: 0,
              preconditions: { uid },
            })
            .catch(() => undefined);
        }
        return;
      }
      w = new PodWorker(ctx, pod);
      workers.set(uid, w);
      byName.set(`${w.namespace}/${w.name}`, w);
      w.start();
    }
    w.update(pod);
  };

  const onPodDeleted = (pod: V1Pod): void => {
    const uid = pod.metadata?.uid;
    if (!uid) return;
    knownPods.delete(uid);
    binding.delete(uid);
    workers.get(uid)?.gone();
  };

  // List + watch, relisting when the watch's resourceVersion is too old.
  const watches: { abort: () => void }[] = [];
  const reflect = async (listPath: string): Promise<void> => {
    let seen = new Map<string, V1Pod>();
    while (!stopped) {
      try {
        const list = await api.get<ObjectList<V1Pod>>(listPath);
        const now = new Map<string, V1Pod>();
        for (const pod of list.items ?? []) now.set(pod.metadata!.uid!, pod);
        for (const [uid, pod] of seen) if (!now.has(uid)) onPodDeleted(pod);
        seen = now;
        for (const pod of now.values()) onPod(pod);
        let rv = list.metadata?.resourceVersion ?? '';
        let expired = false;
        while (!stopped && !expired) {
          const sep = listPath.includes('?') ? '&' : '?';
          const w = api.watch<V1Pod & { code?: number }>(
            `${listPath}${sep}watch=true&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion=${encodeURIComponent(rv)}`,
            (ev: WatchEvent<V1Pod & { code?: number }>) => {
              if (ev.type === 'ERROR') {
                if (ev.object.code === 410) expired = true;
                else log(`watch ${listPath}: ${JSON.stringify(ev.object)}`);
                return;
              }
              const pod = ev.object;
              if (pod.metadata?.resourceVersion) rv = pod.metadata.resourceVersion;
              if (ev.type === 'BOOKMARK') return;
              const uid = pod.metadata?.uid ?? '';
              if (ev.type === 'DELETED') {
                seen.delete(uid);
                onPodDeleted(pod);
              } else {
                seen.set(uid, pod);
                onPod(pod);
              }
            },
          );
          watches.push(w);
          try {
            await w.done;
          } finally {
            watches.splice(watches.indexOf(w), 1);
          }
          if (expired) break;
        }
      } catch (e) {
        if (stopped) return;
        log(`pods ${listPath}: ${(e as Error).message}; relisting`);
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  };
  const listPaths = options.namespaces?.length
    ? options.namespaces.map((ns) => p`/api/v1/namespaces/${ns}/pods`)
    : ['/api/v1/pods'];
  const reflectors = listPaths.map((lp) => reflect(lp));

  // -------------------------------------------------------------------------------------------

  const findWorker = (ns: string, pod: string): PodWorker | undefined => byName.get(`${ns}/${pod}`);

  const runner: PodRunner = {
    nodeName,
    workDir,
    logFile(ns, pod, container, opts) {
      return findWorker(ns, pod)?.logFile(container, opts?.previous ?? false);
    },
    logs(ns, pod, container, opts) {
      const f = runner.logFile(ns, pod, container, opts);
      if (!f) return '';
      try {
        return fs.readFileSync(f, 'utf8');
      } catch {
        return '';
      }
    },
    processes() {
      const out: RunningProcess[] = [];
      for (const w of workers.values()) {
        for (const pr of w.processes()) out.push({ namespace: w.namespace, pod: w.name, uid: w.uid, ...pr });
      }
      return out;
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      for (const w of watches) w.abort();
      await Promise.all([...workers.values()].map((w) => w.kill()));
      await Promise.all(reflectors.map((r) => r.catch(() => undefined)));
      api.close();
      liveRunners.delete(self);
      if (!keepWorkDir) fs.rmSync(workDir, { recursive: true, force: true });
      releaseOwner(self);
    },
  };
  return runner;
}
