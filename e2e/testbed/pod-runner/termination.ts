/**
 * Stopping containers and pods the kubelet's way: preStop, SIGTERM, SIGKILL at the deadline;
 * regular containers before sidecars; the final delete with grace period 0.
 */
import type { ContainerRun } from './container-run';
import { type Api, isNotFound, p } from './api';
import { runHandler } from './probes';

/** Resolves once Date.now() passes deadline() (re-read every 100 ms, so it can move earlier). */
function waitUntil(deadline: () => number): Promise<void> {
  return new Promise((resolve) => {
    const check = (): void => {
      if (Date.now() >= deadline()) resolve();
      else setTimeout(check, Math.min(100, Math.max(1, deadline() - Date.now())));
    };
    check();
  });
}

/** preStop, SIGTERM, SIGKILL at deadline() (re-read: the pod's termination may move it earlier). */
export async function killContainer(c: ContainerRun, deadline: () => number, runPreStop: boolean): Promise<void> {
  const proc = c.proc;
  if (!proc || !proc.running) return;
  const exited = proc.exited.then(() => true);
  if (runPreStop && c.spec.lifecycle?.preStop && deadline() > Date.now()) {
    const budget = deadline() - Date.now();
    await Promise.race([runHandler(c.spec.lifecycle.preStop, c.target(proc), budget), exited, waitUntil(deadline)]);
  }
  if (!proc.running) return;
  if (deadline() > Date.now()) {
    proc.signal('SIGTERM');
    await Promise.race([exited, waitUntil(deadline)]);
  }
  if (proc.running) {
    proc.killAll();
    await proc.exited;
  }
}

/** Regular containers first (concurrently), then init containers and sidecars in reverse order (kubelet). */
export async function stopContainers(
  inits: ContainerRun[],
  mains: ContainerRun[],
  kill: (c: ContainerRun) => Promise<void>,
): Promise<void> {
  await Promise.all(mains.map(kill));
  for (const s of [...inits].reverse()) await kill(s);
}

/** The phase of a pod terminated before it reached one: Succeeded only if everything ran and exited 0. */
export function phaseAfterTermination(mains: ContainerRun[], initDone: boolean): 'Succeeded' | 'Failed' {
  const mainsDone = mains.filter((c) => c.terminated);
  return mainsDone.length === mains.length && mainsDone.every((c) => c.terminated!.exitCode === 0) && initDone
    ? 'Succeeded'
    : 'Failed';
}

/** The kubelet's last step: the pod's delete with grace period 0 (uid precondition). */
export async function finalDelete(
  api: Api,
  pod: { namespace: string; name: string; uid: string },
  log: (msg: string) => void,
): Promise<void> {
  try {
    await api.request('DELETE', p`/api/v1/namespaces/${pod.namespace}/pods/${pod.name}`, {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      gracePeriodSeconds: 0,
      preconditions: { uid: pod.uid },
    });
  } catch (e) {
    if (!isNotFound(e) && !(e instanceof Error && /HTTP 409/.test(e.message)))
      log(`pod ${pod.namespace}/${pod.name}: final delete: ${(e as Error).message}`);
  }
}
