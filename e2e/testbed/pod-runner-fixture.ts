/**
 * The set-up the pod runner's self-tests share (pod-runner-*.e2e.ts): a control plane, a runner
 * with a test image, host directories for hostPath volumes and image binds, and helpers to create
 * namespaces, wait for pods and look at the host's processes. Each test file calls
 * usePodRunnerBed() once, then bed() in its tests.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, jest } from '@jest/globals';
import * as k8s from '@kubernetes/client-node';
import { type ControlPlane, startControlPlane } from './control-plane';
import { type PodRunner, startPodRunner } from './pod-runner';
import { eventually } from './eventually';

export interface PodRunnerBed {
  cp: ControlPlane;
  runner: PodRunner;
  core: k8s.CoreV1Api;
  batch: k8s.BatchV1Api;
  apps: k8s.AppsV1Api;
  authn: k8s.AuthenticationV1Api;
  /** Host dir for hostPath volumes and image binds. */
  hostDir: string;
  /** The test image's tools; their parent is mode 0700 (only root may walk it). */
  privateToolsDir: string;
}

let started: PodRunnerBed | undefined;

/** Marks the processes of this file's pods (in their command lines). */
export const marker = `pko${process.pid}x${Date.now() % 100000}`;

/** Starts the control plane and the runner before the file's tests, stops them after. */
export function usePodRunnerBed(): void {
  jest.setTimeout(180_000);
  let cp: ControlPlane | undefined;
  let runner: PodRunner | undefined;
  let hostDir: string | undefined;
  let privateToolsDir: string | undefined;
  beforeAll(async () => {
    cp = await startControlPlane();
    hostDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-pod-runner-test-'));
    fs.chmodSync(hostDir, 0o755);
    const privateParent = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-pod-runner-private-'));
    fs.chmodSync(privateParent, 0o700);
    privateToolsDir = path.join(privateParent, 'bin');
    fs.mkdirSync(privateToolsDir, { mode: 0o755 });
    fs.writeFileSync(
      path.join(privateToolsDir, 'pko-hello'),
      '#!/bin/sh\necho "hello from the image, uid $(id -u), args: $*"\n',
      { mode: 0o755 },
    );
    runner = await startPodRunner({
      kubeConfig: cp.kubeConfig,
      backoffInitialMs: 1000,
      backoffMaxMs: 4000,
      images: {
        'example.test/tools:*': {
          path: ['/opt/pko-e2e-tools/bin'],
          binds: { '/opt/pko-e2e-tools/bin': privateToolsDir },
          writableDirs: { '/home/pko': {} },
          env: { HOME: '/home/pko', IMAGE_ENV: 'from-image' },
          user: 1000,
          group: 1000,
        },
      },
    });
    started = {
      cp,
      runner,
      core: cp.kubeConfig.makeApiClient(k8s.CoreV1Api),
      batch: cp.kubeConfig.makeApiClient(k8s.BatchV1Api),
      apps: cp.kubeConfig.makeApiClient(k8s.AppsV1Api),
      authn: cp.kubeConfig.makeApiClient(k8s.AuthenticationV1Api),
      hostDir,
      privateToolsDir,
    };
  }, 180_000);
  afterAll(async () => {
    started = undefined;
    await runner?.stop();
    await cp?.stop();
    if (hostDir) fs.rmSync(hostDir, { recursive: true, force: true });
    if (privateToolsDir) fs.rmSync(path.dirname(privateToolsDir), { recursive: true, force: true });
  });
}

/** The running test bed (inside a test of a file that called usePodRunnerBed()). */
export function bed(): PodRunnerBed {
  if (!started)
    throw new Error('the pod runner test bed is not running (usePodRunnerBed() not called, or its set-up failed)');
  return started;
}

// ---------------------------------------------------------------------------------------------

let nsCounter = 0;
/** A new namespace, once its default ServiceAccount exists. */
export async function namespace(labels: Record<string, string> = {}): Promise<string> {
  const name = `pr${process.pid}-${++nsCounter}`;
  const { core } = bed();
  await core.createNamespace({ body: { metadata: { name, labels } } });
  await eventually(`default ServiceAccount in ${name}`, () =>
    core.readNamespacedServiceAccount({ name: 'default', namespace: name }),
  );
  return name;
}

export const readPod = (namespace: string, name: string): Promise<k8s.V1Pod> =>
  bed().core.readNamespacedPod({ name, namespace });

export async function podInPhase(
  namespace: string,
  name: string,
  phases: string[],
  timeoutMs = 60_000,
): Promise<k8s.V1Pod> {
  return eventually(
    `pod ${namespace}/${name} in phase ${phases.join('|')}`,
    async () => {
      const p = await readPod(namespace, name);
      return phases.includes(p.status?.phase ?? '') ? p : undefined;
    },
    timeoutMs,
  );
}

export function condition(
  obj: { status?: { conditions?: { type: string; status: string }[] } },
  type: string,
): string | undefined {
  return obj.status?.conditions?.find((c) => c.type === type)?.status;
}

export async function isGone(read: () => Promise<unknown>): Promise<true | undefined> {
  try {
    await read();
    return undefined;
  } catch (e) {
    if (e instanceof k8s.ApiException && e.code === 404) return true;
    throw e;
  }
}

/** Lines KEY=VALUE of a log as a map. */
export function parseKV(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const i = line.indexOf('=');
    if (i > 0) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

/** Running (non-zombie) processes whose command line contains needle. */
export function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (cmdline.includes(needle) && state !== 'Z' && state !== 'X') out.push(Number(entry));
    } catch {
      /* gone */
    }
  }
  return out;
}

export function pidAlive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

export const restrictedSecurity: k8s.V1SecurityContext = {
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
};
export const restrictedPodSecurity: k8s.V1PodSecurityContext = {
  runAsNonRoot: true,
  runAsUser: 1000,
  runAsGroup: 1000,
  fsGroup: 2000,
  seccompProfile: { type: 'RuntimeDefault' },
};
