/** The pod runner's Node object: registered (or taken over) at start, reported Ready. */
import * as os from 'node:os';
import { type Api, isConflict, p } from './api';
import { POD_IP } from './env';

/** Creates the Node (a conflict means it exists: taken over) and writes a Ready status with the capacity. */
export async function registerNode(api: Api, nodeName: string, capacity: Record<string, string>): Promise<void> {
  try {
    await api.request('POST', '/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: nodeName,
        labels: {
          'kubernetes.io/hostname': nodeName,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': process.arch === 'x64' ? 'amd64' : process.arch,
        },
      },
      spec: {},
    });
  } catch (e) {
    if (!isConflict(e)) throw e;
  }
  const t = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  await api.request(
    'PATCH',
    p`/api/v1/nodes/${nodeName}/status`,
    {
      status: {
        capacity,
        allocatable: capacity,
        addresses: [
          { type: 'InternalIP', address: POD_IP },
          { type: 'Hostname', address: nodeName },
        ],
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'pko e2e pod runner is posting ready status',
            lastHeartbeatTime: t,
            lastTransitionTime: t,
          },
          {
            type: 'MemoryPressure',
            status: 'False',
            reason: 'KubeletHasSufficientMemory',
            message: '',
            lastHeartbeatTime: t,
            lastTransitionTime: t,
          },
          {
            type: 'DiskPressure',
            status: 'False',
            reason: 'KubeletHasNoDiskPressure',
            message: '',
            lastHeartbeatTime: t,
            lastTransitionTime: t,
          },
          {
            type: 'PIDPressure',
            status: 'False',
            reason: 'KubeletHasSufficientPID',
            message: '',
            lastHeartbeatTime: t,
            lastTransitionTime: t,
          },
        ],
        nodeInfo: {
          machineID: '',
          systemUUID: '',
          bootID: '',
          kernelVersion: os.release(),
          osImage: 'pko e2e pod runner',
          containerRuntimeVersion: 'pko-pod-runner://1',
          kubeletVersion: 'v0.0.0-pko-pod-runner',
          kubeProxyVersion: '',
          operatingSystem: 'linux',
          architecture: process.arch === 'x64' ? 'amd64' : process.arch,
        },
        daemonEndpoints: { kubeletEndpoint: { Port: 0 } },
      },
    },
    'application/merge-patch+json',
  );
}
