/**
 * A real node for a control plane of the test bed: kubelet, kube-proxy, kube-scheduler and CoreDNS
 * against the containerd that e2e/testbed/node/run-in-testbed.sh runs in the test network.
 *
 *   const cp = await startControlPlane({ nodeAddress: testbedEnvironment().nodeIp });
 *   const node = await startNode(cp);     // Node pko-e2e-node Ready, kube-dns served
 *   ...                                   // pods run as containers of images in containerd
 *   await node.stop();                    // kubelet and friends stopped, every pod removed
 *   await cp.stop();
 *
 * Each control plane gets its own node processes (their files in a directory of the run's);
 * containerd, the images in it, the bridge and the cgroup root belong to the whole run.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { NODE_NAME, type ControlPlane } from './control-plane';
import { installHooks, launchProcess, type Running, running, stopProcesses } from './control-plane/processes';
import { corefile, kubeDnsObjects, kubeletConfig, kubeProxyConfig } from './node/configs';
import { requireTestbedEnvironment, type TestbedEnvironment } from './node/environment';
import { eventually, tail } from './helpers';
import { requireToolchain } from './toolchain';

const execFileAsync = promisify(execFile);

export interface RealNode {
  name: string;
  /** The node's address: API server, kubelet, CoreDNS and the test's own servers listen there. */
  address: string;
  /** This node's directory: kubelet's root, pod logs, configs, process logs. */
  dir: string;
  /** kubelet's pod log files: `<podLogsDir>/<ns>_<pod>_<uid>/<container>/<restart>.log` (CRI format). */
  podLogsDir: string;
  env: TestbedEnvironment;
  /** `crictl` against the run's containerd, for tests and debugging; returns stdout. */
  crictl(...args: string[]): Promise<string>;
  /** Stops kubelet, kube-proxy, kube-scheduler and CoreDNS and removes every pod. Idempotent. */
  stop(): Promise<void>;
}

let nodeCount = 0;

export async function startNode(cp: ControlPlane, options: { startTimeoutMs?: number } = {}): Promise<RealNode> {
  const env = requireTestbedEnvironment();
  if (cp.nodeAddress !== env.nodeIp) {
    throw new Error(
      `the control plane must advertise the node's address: startControlPlane({ nodeAddress: '${env.nodeIp}' })`,
    );
  }
  const tc = requireToolchain(['kubernetes', 'coredns', 'crictl']);
  const dir = path.join(env.dir, `node-${process.pid}-${++nodeCount}`);
  const podLogsDir = path.join(dir, 'pod-logs');
  fs.mkdirSync(podLogsDir, { recursive: true });
  const file = (name: string, content: string): string => {
    const p = path.join(dir, name);
    fs.writeFileSync(p, content);
    return p;
  };

  installHooks();
  const state: Running = { dir, keepDir: true, procs: [] };
  running.add(state);
  const crictl = async (...args: string[]): Promise<string> =>
    (
      await execFileAsync(tc.binaries.crictl, ['--runtime-endpoint', `unix://${env.containerdSocket}`, ...args], {
        maxBuffer: 64 * 1024 * 1024,
      })
    ).stdout;

  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    running.delete(state);
    await stopProcesses(state);
    // kubelet does not stop pods when it stops: remove them, so that the next node starts empty.
    await crictl('--timeout', '30s', 'rmp', '--force', '--all').catch(() => undefined);
    for (const m of fs
      .readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .filter((m) => m.startsWith(`${dir}/`))
      .sort()
      .reverse()) {
      await execFileAsync('umount', ['-l', m]).catch(() => undefined);
    }
  };

  try {
    const kubelet = launchProcess(state, 'kubelet', tc.binaries.kubelet, [
      `--config=${file(
        'kubelet.yaml',
        kubeletConfig(env.nodeIp, {
          containerdSocket: env.containerdSocket,
          cgroupRoot: env.cgroupRoot,
          resolvConf: file('resolv.conf', '# the test network has no upstream DNS\n'),
          podLogsDir,
        }),
      )}`,
      `--kubeconfig=${cp.nodeKubeconfigs.kubelet}`,
      `--root-dir=${path.join(dir, 'kubelet')}`,
      `--node-ip=${env.nodeIp}`,
      `--hostname-override=${NODE_NAME}`,
      '--v=1',
    ]);
    const proxy = launchProcess(state, 'kube-proxy', tc.binaries.kubeProxy, [
      `--config=${file('kube-proxy.yaml', kubeProxyConfig(env.nodeIp, cp.nodeKubeconfigs['kube-proxy']))}`,
    ]);
    const scheduler = launchProcess(state, 'kube-scheduler', tc.binaries.kubeScheduler, [
      `--kubeconfig=${cp.nodeKubeconfigs['kube-scheduler']}`,
      '--leader-elect=false',
      '--secure-port=0',
    ]);
    const coredns = launchProcess(state, 'coredns', tc.binaries.coredns, [
      '-conf',
      file('Corefile', corefile(env.nodeIp, cp.nodeKubeconfigs.coredns)),
    ]);

    const objects = k8s.KubernetesObjectApi.makeApiClient(cp.kubeConfig);
    for (const o of kubeDnsObjects(env.nodeIp)) await objects.create(o);

    const core = cp.kubeConfig.makeApiClient(k8s.CoreV1Api);
    const outcome = await eventually(
      `Node ${NODE_NAME} to be Ready`,
      async () => {
        const dead = [kubelet, proxy, scheduler, coredns].find((p) => p.hasExited);
        if (dead) return `${dead.info.name} exited`;
        const node = await core.readNode({ name: NODE_NAME }).catch(() => undefined);
        return node?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? 'ready' : undefined;
      },
      options.startTimeoutMs ?? 90_000,
      250,
    );
    if (outcome !== 'ready') throw new Error(outcome);
    return { name: NODE_NAME, address: env.nodeIp, dir, podLogsDir, env, crictl, stop };
  } catch (e) {
    await stop();
    const logs = state.procs.map((p) => `--- ${p.info.name}, last lines:\n${tail(p.info.logFile)}`).join('\n');
    throw new Error(`the node did not start: ${(e as Error).message}\n${logs}`, { cause: e });
  }
}
