/**
 * Runs our Metacontroller controllers for the e2e suite, against a control plane from
 * control-plane.ts and hooks served at `hooksBaseUrl`:
 *
 *   const mc = await startControllers({ kubeConfig: cp.kubeConfig, kubeconfigPath: cp.kubeconfigPath, hooksBaseUrl: 'https://127.0.0.1:8080' });
 *   ...
 *   await mc.stop();
 *
 * The controllers are manifests/metacontroller/*.yaml (or `controllers`), each webhook rewritten
 * to `url: <hooksBaseUrl><path>`; its `caBundle` and `authorization` stay as they are, so the
 * Secrets they name must exist before the controllers start (Metacontroller reads them then:
 * e2e/harness.ts makes them). By default they are run by the in-process driver
 * (metacontroller.ts). When METACONTROLLER_BIN is set, a real Metacontroller binary runs them
 * instead: its CRDs are installed from METACONTROLLER_CRDS (required then), the rewritten
 * controller objects are applied, and the binary is started with --kubeconfig; extra flags can be
 * given in METACONTROLLER_ARGS. How to build the binary: docs/metacontroller-local.md.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import * as yaml from 'js-yaml';
import { eventually, GiveUp, tail } from './helpers';
import { type Metacontroller, startMetacontroller } from './metacontroller';
import { clone } from './metacontroller/apply';
import { isAlreadyExists, type KObject, Kube, type Resource } from './metacontroller/kube';
import { REPO_ROOT } from './toolchain';

export const MANIFESTS_DIR = path.join(REPO_ROOT, 'manifests', 'metacontroller');

export interface ControllersOptions {
  kubeConfig: KubeConfig;
  /** The same cluster as a kubeconfig file (the real binary reads it). */
  kubeconfigPath: string;
  /** Where the hooks are served, e.g. http://127.0.0.1:8080 (no trailing slash needed). */
  hooksBaseUrl: string;
  /** Controller objects to run instead of manifests/metacontroller/*.yaml. */
  controllers?: object[];
  /** Driver mode: forwarded to startMetacontroller. */
  log?: (line: string) => void;
  /** Real-binary mode: give up waiting for the controllers to start after this long (60 s). */
  startTimeoutMs?: number;
}

export interface Controllers {
  mode: 'driver' | 'binary';
  /** The rewritten controller objects that run. */
  controllers: object[];
  /** Driver mode only: the in-process Metacontroller (syncNow). */
  driver?: Metacontroller;
  /** Binary mode only: the binary's log file (kept after stop()). */
  logFile?: string;
  stop(): Promise<void>;
}

/** All CompositeController/DecoratorController objects of the manifests dir, in file order. */
export function loadControllerManifests(dir = MANIFESTS_DIR): object[] {
  const out: object[] = [];
  for (const f of fs
    .readdirSync(dir)
    .filter((x) => /\.ya?ml$/.test(x))
    .sort()) {
    for (const doc of yaml.loadAll(fs.readFileSync(path.join(dir, f), 'utf8'))) {
      const kind = (doc as { kind?: string } | null)?.kind;
      if (kind === 'CompositeController' || kind === 'DecoratorController') out.push(doc as object);
    }
  }
  return out;
}

/**
 * Every hook's webhook becomes `url: <base><path>`; service and path are dropped, the rest (TLS and
 * auth settings) kept. The base's scheme must be the service's protocol (http by default).
 */
export function rewriteWebhooks(controller: object, hooksBaseUrl: string): object {
  const c = clone(controller) as { spec?: { hooks?: Record<string, { webhook?: Record<string, unknown> }> } };
  const base = hooksBaseUrl.replace(/\/$/, '');
  const scheme = new URL(base).protocol.replace(/:$/, '');
  for (const hook of Object.values(c.spec?.hooks ?? {})) {
    const w = hook?.webhook;
    if (!w || w.url !== undefined) continue;
    if (typeof w.path !== 'string') throw new Error(`webhook without url or path: ${JSON.stringify(w)}`);
    const protocol = (w.service as { protocol?: string } | undefined)?.protocol ?? 'http';
    if (protocol !== scheme) throw new Error(`webhook ${w.path} calls its service over ${protocol}, not ${base}`);
    hook.webhook = { ...w, url: `${base}${w.path}` };
    delete hook.webhook.service;
    delete hook.webhook.path;
  }
  return c;
}

export async function startControllers(options: ControllersOptions): Promise<Controllers> {
  const controllers = (options.controllers ?? loadControllerManifests()).map((c) =>
    rewriteWebhooks(c, options.hooksBaseUrl),
  );
  const bin = process.env.METACONTROLLER_BIN;
  if (bin === undefined || bin === '') {
    const driver = await startMetacontroller({ kubeConfig: options.kubeConfig, controllers, log: options.log });
    return { mode: 'driver', controllers, driver, stop: () => driver.stop() };
  }
  return startBinary(bin, controllers, options);
}

// ---------------------------------------------------------------------------------------------
// Real-binary mode

const MC = 'metacontroller.k8s.io/v1alpha1';
const crdResource: Resource = {
  apiVersion: 'apiextensions.k8s.io/v1',
  group: 'apiextensions.k8s.io',
  resource: 'customresourcedefinitions',
  kind: 'CustomResourceDefinition',
  namespaced: false,
  hasStatus: true,
};
const controllerResource = (kind: string): Resource => ({
  apiVersion: MC,
  group: 'metacontroller.k8s.io',
  resource: kind === 'CompositeController' ? 'compositecontrollers' : 'decoratorcontrollers',
  kind,
  namespaced: false,
  hasStatus: true,
});

/** Create, or replace (PUT with the live resourceVersion) when it exists. */
async function apply(kube: Kube, r: Resource, obj: KObject): Promise<void> {
  try {
    await kube.create(r, obj);
  } catch (e) {
    if (!isAlreadyExists(e)) throw e;
    const live = await kube.get(r, undefined, obj.metadata.name);
    await kube.update(r, { ...obj, metadata: { ...obj.metadata, resourceVersion: live.metadata.resourceVersion } });
  }
}

async function startBinary(bin: string, controllers: object[], options: ControllersOptions): Promise<Controllers> {
  const crdsFile = process.env.METACONTROLLER_CRDS;
  if (crdsFile === undefined || crdsFile === '') {
    throw new Error(
      'METACONTROLLER_BIN is set but METACONTROLLER_CRDS is not: set it to the CRD file of the same Metacontroller ' +
        'checkout (manifests/production/metacontroller-crds-v1.yaml); see docs/metacontroller-local.md',
    );
  }
  if (!fs.existsSync(crdsFile)) throw new Error(`METACONTROLLER_CRDS=${crdsFile}: no such file`);
  if (!fs.existsSync(bin)) throw new Error(`METACONTROLLER_BIN=${bin}: no such file`);
  const timeoutMs = options.startTimeoutMs ?? 60_000;
  const kube = new Kube(options.kubeConfig);
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const applied: KObject[] = [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-metacontroller-'));
  const logFile = path.join(dir, 'metacontroller.log');

  const stop = async (): Promise<void> => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const proc = child;
      proc.kill('SIGTERM');
      const kill = setTimeout(() => proc.kill('SIGKILL'), 5000); // cleared at once when it exits
      await exited;
      clearTimeout(kill);
    }
    child = undefined;
    for (const o of applied.splice(0)) {
      await kube.delete(controllerResource(o.kind), undefined, o.metadata.name).catch(() => undefined);
    }
    await kube.close();
  };

  try {
    // 1. Metacontroller's CRDs, Established.
    const crds = yaml
      .loadAll(fs.readFileSync(crdsFile, 'utf8'))
      .filter((d) => (d as KObject | null)?.kind === 'CustomResourceDefinition') as KObject[];
    if (crds.length === 0) throw new Error(`${crdsFile}: no CustomResourceDefinition in it`);
    for (const crd of crds) await apply(kube, crdResource, crd);
    const deadline = Date.now() + timeoutMs;
    for (const crd of crds) {
      await eventually(
        `CRD ${crd.metadata.name} to be Established`,
        async () => {
          const live = (await kube.get(crdResource, undefined, crd.metadata.name)) as KObject & {
            status?: { conditions?: { type: string; status: string }[] };
          };
          return live.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
        },
        deadline - Date.now(),
        100,
      );
    }
    // 2. Our controllers (webhooks already rewritten to URLs).
    for (const c of controllers as KObject[]) {
      await apply(kube, controllerResource(c.kind), c);
      applied.push(c);
    }
    // 3. The binary (flags: https://metacontroller.github.io/metacontroller/guide/configuration.html#command-line-flags).
    // Metrics and probes off: no fixed ports taken.
    const args = [
      `--kubeconfig=${options.kubeconfigPath}`,
      '--discovery-interval=2s',
      '--zap-log-level=4',
      '--metrics-address=0',
      '--health-probe-bind-address=0',
      ...(process.env.METACONTROLLER_ARGS ?? '').split(/\s+/).filter((a) => a !== ''),
    ];
    const startedAt = Date.now();
    const fd = fs.openSync(logFile, 'a');
    child = spawn(bin, args, {
      stdio: ['ignore', fd, fd],
      env: { ...process.env, KUBECONFIG: options.kubeconfigPath },
    });
    fs.closeSync(fd);
    const proc = child;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    proc.once('error', () => undefined);
    // 4. Started: the "Started controller: <name>" event of each controller (they go to default).
    //    A CreateError (e.g. discovery has not caught up yet) is retried by Metacontroller.
    for (const c of controllers as KObject[]) {
      await eventually(
        `${c.kind} ${c.metadata.name} to start (log ${logFile})`,
        async () => {
          if (proc.exitCode !== null || proc.signalCode !== null) {
            throw new GiveUp(
              `metacontroller exited (${proc.exitCode ?? proc.signalCode}); log ${logFile}:\n${tail(logFile, 30)}`,
            );
          }
          const selector = encodeURIComponent(`involvedObject.name=${c.metadata.name}`);
          const evs = await kube.request<{ items: { reason: string; message: string; lastTimestamp?: string }[] }>(
            'GET',
            `/api/v1/namespaces/default/events?fieldSelector=${selector}`,
          );
          // Timestamps have a 1 s resolution; an event of an earlier run does not count.
          const recent = evs.items.filter((e) => Date.parse(e.lastTimestamp ?? '') >= startedAt - 1000);
          if (recent.some((e) => e.reason === 'Started')) return true;
          // Its message is what the timeout error says.
          const createError = recent.find((e) => e.reason === 'CreateError');
          if (createError) throw new Error(createError.message);
          return undefined;
        },
        deadline - Date.now(),
        200,
      ).catch((e: unknown) => {
        if (e instanceof GiveUp) throw e;
        throw new Error(`${(e as Error).message}; log ${logFile}:\n${tail(logFile, 30)}`);
      });
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { mode: 'binary', controllers, logFile, stop };
}
