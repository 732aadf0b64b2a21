/**
 * A small, faithful Metacontroller for the e2e suite: it hosts our CompositeController and
 * DecoratorController objects and speaks Metacontroller's hook protocol against a real API
 * server. It follows Metacontroller's documentation (https://metacontroller.github.io/metacontroller/)
 * and v4.17.2's code (https://github.com/metacontroller/metacontroller/tree/v4.17.2/pkg:
 * controller/composite, controller/decorator, controller/common, dynamic/apply, hooks), default
 * `--apply-strategy=dynamic-apply`. The pieces are in metacontroller/: composite.ts and
 * decorator.ts (the two controller kinds), hosted.ts (what they share), common.ts (children,
 * finalizer, customize), apply.ts, informer.ts, kube.ts, queue.ts, webhook.ts.
 *
 *   const mc = await startMetacontroller({ kubeConfig, controllers: [cc, dc], hookUrl: (h) => `http://127.0.0.1:${port}${h.path}` });
 *   ...
 *   await mc.stop();
 *
 * Not modelled (none is used by manifests/metacontroller): Rolling* update strategies with
 * ControllerRevisions (refused at start), server-side apply, webhook TLS/auth/endpointConfigs
 * (refused), namespaceSelector related rules (refused), ETag caching (ignored: it is only a
 * cache), the 10 qps overall rate limit, event rate limiting, metrics and leader election.
 * docs/metacontroller-local.md lists these and how to run the suite with the real binary. The
 * CompositeController/DecoratorController objects are not read from the API server: they are given
 * to startMetacontroller (the real binary is run by metacontroller-harness.ts).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { Agent } from 'undici';
import { clone } from './metacontroller/apply';
import type { Env } from './metacontroller/common';
import { Composite } from './metacontroller/composite';
import { Decorator } from './metacontroller/decorator';
import type { ControllerObject, Hosted } from './metacontroller/hosted';
import { Informer } from './metacontroller/informer';
import { Kube } from './metacontroller/kube';
import type { HookUrl } from './metacontroller/webhook';

export type { HookUrl } from './metacontroller/webhook';

export interface MetacontrollerOptions {
  kubeConfig: KubeConfig;
  /** Parsed CompositeController / DecoratorController objects (metacontroller.k8s.io/v1alpha1). */
  controllers: unknown[];
  /** Maps a `service`+`path` webhook to a reachable URL (e.g. http://127.0.0.1:<port><path>). */
  hookUrl?: HookUrl;
  /** Floor of `resyncPeriodSeconds` (Metacontroller: 1 s). */
  resyncFloorMs?: number;
  /** Log lines (default: stderr when PKO_METACONTROLLER_LOG=1, else nothing). */
  log?: (line: string) => void;
  /** Give up waiting for the informers' first list after this long (default 30 s). */
  startTimeoutMs?: number;
}

export interface Metacontroller {
  /** Stops every controller, informer, timer and connection. Idempotent. */
  stop(): Promise<void>;
  /** Enqueues matching parents/targets now (all when no argument is given). */
  syncNow(kind?: string, namespace?: string, name?: string): void;
}

export async function startMetacontroller(options: MetacontrollerOptions): Promise<Metacontroller> {
  const toStderr = (line: string): void =>
    void process.stderr.write(`${new Date().toISOString()} [metacontroller] ${line}\n`);
  const log = options.log ?? (process.env.PKO_METACONTROLLER_LOG === '1' ? toStderr : () => undefined);
  const kube = new Kube(options.kubeConfig);
  const hookAgent = new Agent({ keepAliveTimeout: 4_000 });
  const informers = new Map<string, Informer>();
  const env: Env = {
    kube,
    hookAgent,
    hookUrl: options.hookUrl,
    log,
    informer(r) {
      const key = `${r.apiVersion}/${r.resource}`;
      let inf = informers.get(key);
      if (!inf) informers.set(key, (inf = new Informer(kube, r, log)));
      return inf;
    },
  };
  const hosted: Hosted[] = [];
  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    const drained = Promise.all(hosted.map((h) => h.stop()));
    for (const inf of informers.values()) inf.stop();
    // Closing the clients makes in-flight API and hook calls fail at once (no SyncError events
    // are written once stopped), so the drain below does not wait for hook timeouts.
    await kube.close();
    await hookAgent.destroy().catch(() => undefined);
    await drained;
  };

  try {
    const workers = 5; // Metacontroller's --workers default
    for (const raw of options.controllers) {
      const cc = clone(raw) as ControllerObject;
      const Kind =
        cc.kind === 'CompositeController' ? Composite : cc.kind === 'DecoratorController' ? Decorator : undefined;
      if (!Kind)
        throw new Error(`not a CompositeController or DecoratorController: ${JSON.stringify(cc).slice(0, 200)}`);
      const h = new Kind(env, cc, workers);
      hosted.push(h);
      await h.init();
    }
    // Wait for caches to sync before any worker runs (WaitForNamedCacheSync).
    const timeoutMs = options.startTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([...informers.values()].map((i) => i.synced)),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`informers did not sync within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]).finally(() => clearTimeout(timer));
    for (const h of hosted) h.start(options.resyncFloorMs ?? 1000);
  } catch (e) {
    await stop();
    throw e;
  }

  return {
    stop,
    syncNow: (kind, namespace, name) => hosted.forEach((h) => h.syncNow(kind, namespace, name)),
  };
}
