/** A pod's status as the kubelet writes it: phase, conditions, container statuses. */
import type { V1Pod } from '@kubernetes/client-node';
import { type ContainerRun, now, sha } from './container-run';
import { POD_IP } from './env';
import { imageID } from './images';

export type PodPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

/** What the status is computed from: the pod worker's state. */
export interface PodState {
  pod: V1Pod;
  restartPolicy: string;
  phase: PodPhase;
  initDone: boolean;
  sandboxReady: boolean;
  inits: ContainerRun[];
  mains: ContainerRun[];
  startTime: string | undefined;
  podReason: string | undefined;
  podMessage: string | undefined;
  /** When each condition last changed: kept across calls, updated by them. */
  conditionTimes: Map<string, { status: string; time: string }>;
}

export function computePhase(s: PodState): PodPhase {
  if (s.phase === 'Succeeded' || s.phase === 'Failed') return s.phase;
  if (!s.initDone) return 'Pending';
  let running = 0;
  let waiting = 0;
  let stopped = 0;
  let succeeded = 0;
  for (const c of s.mains) {
    if (c.running) running++;
    else if (c.terminated) {
      stopped++;
      if (c.terminated.exitCode === 0) succeeded++;
    } else if (c.lastState) stopped++;
    else waiting++;
  }
  if (waiting > 0) return 'Pending';
  if (running > 0) return 'Running';
  if (stopped > 0) {
    if (s.restartPolicy === 'Always') return 'Running';
    if (stopped === succeeded) return 'Succeeded';
    if (s.restartPolicy === 'Never') return 'Failed';
    return 'Running';
  }
  return 'Pending';
}

function condition(
  times: PodState['conditionTimes'],
  type: string,
  status: boolean,
  reason?: string,
  message?: string,
): Record<string, unknown> {
  const s = status ? 'True' : 'False';
  const prev = times.get(type);
  let time = prev?.time;
  if (!prev || prev.status !== s) {
    time = now();
    times.set(type, { status: s, time });
  }
  const c: Record<string, unknown> = { type, status: s, lastProbeTime: null, lastTransitionTime: time };
  if (!status && reason) c.reason = reason;
  if (!status && message) c.message = message;
  return c;
}

function containerStatus(c: ContainerRun): Record<string, unknown> {
  const image = c.spec.image ?? '';
  const st: Record<string, unknown> = {
    name: c.name,
    image,
    imageID: c.everStarted ? imageID(image, sha) : '',
    ready: c.ready && c.running,
    started: c.started && c.running,
    restartCount: c.restartCount,
    state: c.state,
    lastState: c.lastState ?? {},
  };
  if (c.containerID && c.everStarted) st.containerID = c.containerID;
  return st;
}

export function buildPodStatus(s: PodState): Record<string, unknown> {
  const phase = computePhase(s);
  const terminal = phase === 'Succeeded' || phase === 'Failed';
  const sidecars = s.inits.filter((c) => c.kind === 'sidecar');
  const incompleteInit = s.inits
    .filter((c) => (c.kind === 'sidecar' ? !c.started : c.terminated?.exitCode !== 0))
    .map((c) => c.name);
  const initialized = s.initDone || incompleteInit.length === 0;
  const unready = [...sidecars, ...s.mains].filter((c) => !(c.ready && c.running)).map((c) => c.name);
  const containersReady = !terminal && s.initDone && unready.length === 0;
  const gates = (s.pod.spec?.readinessGates ?? []).map((g) => g.conditionType);
  const podConditions = (s.pod.status?.conditions ?? []) as { type: string; status: string }[];
  const missingGates = gates.filter((g) => !podConditions.some((c) => c.type === g && c.status === 'True'));
  const unreadyMsg = `containers with unready status: [${unready.join(' ')}]`;
  const conditions = [
    condition(s.conditionTimes, 'PodReadyToStartContainers', s.sandboxReady && !terminal),
    condition(
      s.conditionTimes,
      'Initialized',
      initialized,
      'ContainersNotInitialized',
      `containers with incomplete status: [${incompleteInit.join(' ')}]`,
    ),
    condition(
      s.conditionTimes,
      'Ready',
      containersReady && missingGates.length === 0,
      terminal ? 'PodCompleted' : !containersReady ? 'ContainersNotReady' : 'ReadinessGatesNotReady',
      terminal
        ? undefined
        : !containersReady
          ? unreadyMsg
          : `corresponding condition of pod readiness gate "${missingGates.join('", "')}" does not exist.`,
    ),
    condition(
      s.conditionTimes,
      'ContainersReady',
      containersReady,
      terminal ? 'PodCompleted' : 'ContainersNotReady',
      terminal ? undefined : unreadyMsg,
    ),
  ];
  // The binding sets PodScheduled; the kubelet only adds it when missing (a pod created with nodeName).
  if (!podConditions.some((c) => c.type === 'PodScheduled' && c.status === 'True'))
    conditions.push(condition(s.conditionTimes, 'PodScheduled', true));
  const status: Record<string, unknown> = {
    phase,
    conditions,
    hostIP: POD_IP,
    hostIPs: [{ ip: POD_IP }],
    podIP: POD_IP,
    podIPs: [{ ip: POD_IP }],
    startTime: s.startTime,
    containerStatuses: s.mains.map(containerStatus),
  };
  if (s.inits.length) status.initContainerStatuses = s.inits.map(containerStatus);
  if (s.podReason) status.reason = s.podReason;
  if (s.podMessage) status.message = s.podMessage;
  return status;
}
