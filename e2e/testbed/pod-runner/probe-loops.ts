/**
 * A running container's probes the kubelet's way: the startup probe first; once it passes (or
 * without one) the container counts as started and the readiness and liveness probes begin.
 * Readiness sets the container's ready flag; a failed startup or liveness probe kills the container
 * (its restart policy decides what follows). The probe actions themselves: probes.ts.
 */
import type { V1Pod, V1Probe } from '@kubernetes/client-node';
import type { ContainerRun } from './container-run';
import { probeTimings, runProbe } from './probes';
import type { ContainerProcess } from './process';

/** What the probe loops need of the pod worker. */
export interface ProbeHost {
  /** The pod as last seen (grace periods). */
  pod(): V1Pod;
  event(type: 'Normal' | 'Warning', reason: string, message: string, fieldPath?: string): void;
  pushStatus(): void;
  /** Kills the container gracefully, SIGKILL at deadline (ms since the epoch). */
  killContainer(c: ContainerRun, deadline: number): void;
}

type ProbeKind = 'Startup' | 'Readiness' | 'Liveness';

/** Starts c's probes against proc; c.stopProbes ends them. */
export function startProbes(c: ContainerRun, proc: ContainerProcess, host: ProbeHost): void {
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
  const target = c.target(proc);
  const startup = c.spec.startupProbe;
  const readiness = c.spec.readinessProbe;
  const liveness = c.spec.livenessProbe;

  /** Runs probe every period; onResult gets each result and the new state when the thresholds flip it; false stops. */
  const loop = (probe: V1Probe, kind: ProbeKind, onResult: (ok: boolean, changedTo?: boolean) => boolean): void => {
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
        host.event('Warning', 'Unhealthy', `${kind} probe failed: ${r.message}`, c.fieldPath);
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

  /** A failed startup or liveness probe: the container is killed within the probe's grace period. */
  const restart = (probe: V1Probe, kind: 'startup' | 'liveness'): void => {
    host.event('Normal', 'Killing', `Container ${c.name} failed ${kind} probe, will be restarted`, c.fieldPath);
    const grace = probe.terminationGracePeriodSeconds ?? host.pod().spec?.terminationGracePeriodSeconds ?? 30;
    host.killContainer(c, Date.now() + grace * 1000);
  };

  const afterStartup = (): void => {
    c.started = true;
    if (!readiness) c.ready = true;
    host.pushStatus();
    if (readiness) {
      loop(readiness, 'Readiness', (_ok, changed) => {
        if (changed !== undefined && c.ready !== changed) {
          c.ready = changed;
          host.pushStatus();
        }
        return true;
      });
    }
    if (liveness) {
      loop(liveness, 'Liveness', (_ok, changed) => {
        if (changed !== false) return true;
        restart(liveness, 'liveness');
        return false;
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
        restart(startup, 'startup');
        return false;
      }
      return true;
    });
  } else {
    afterStartup();
  }
}
