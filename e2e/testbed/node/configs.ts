/**
 * The node's configuration files: kubelet's and kube-proxy's, CoreDNS's Corefile and the kube-dns
 * Service in front of it. Why each setting: docs/testbed.md ("The real node").
 */
import { dump } from 'js-yaml';
import type { V1Service } from '@kubernetes/client-node';
import { CLUSTER_DNS_IP, NODE_NAME } from '../control-plane';

export const POD_CIDR = '10.200.1.0/24';
export const CLUSTER_DOMAIN = 'cluster.local';

export interface KubeletPaths {
  containerdSocket: string;
  cgroupRoot: string;
  resolvConf: string;
  podLogsDir: string;
}

export function kubeletConfig(nodeIp: string, paths: KubeletPaths): string {
  return dump({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // The machine is a VM with cgroup v1, which kubelet 1.36 refuses unless told otherwise; no systemd.
    failCgroupV1: false,
    cgroupDriver: 'cgroupfs',
    cgroupRoot: paths.cgroupRoot,
    containerRuntimeEndpoint: `unix://${paths.containerdSocket}`,
    address: nodeIp,
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    // The API server calls kubelet for logs and exec without a client certificate: inside the
    // test network only, kubelet serves them to anyone.
    authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
    authorization: { mode: 'AlwaysAllow' },
    clusterDNS: [CLUSTER_DNS_IP],
    clusterDomain: CLUSTER_DOMAIN,
    // The host's resolver is unreachable from the test network: pods get cluster DNS only.
    resolvConf: paths.resolvConf,
    podLogsDir: paths.podLogsDir,
    failSwapOn: false,
    // kubelet would refuse to start where the host's kernel defaults differ from its own.
    protectKernelDefaults: false,
    // Imported images cannot be pulled again: never collect them.
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    // Disk pressure on a shared CI machine must not evict test pods.
    evictionHard: { 'memory.available': '100Mi' },
    serializeImagePulls: false,
    // ConfigMap and Secret volumes and pod status follow changes within seconds.
    syncFrequency: '10s',
    nodeStatusUpdateFrequency: '5s',
  });
}

export function kubeProxyConfig(nodeIp: string, kubeconfig: string): string {
  return dump({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    clientConnection: { kubeconfig },
    mode: 'iptables',
    bindAddress: nodeIp,
    healthzBindAddress: '127.0.0.1:10256',
    metricsBindAddress: '127.0.0.1:10249',
    clusterCIDR: POD_CIDR,
    hostnameOverride: NODE_NAME,
    // Zeros leave the host-wide conntrack sysctls alone.
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
  });
}

/** CoreDNS answers for the cluster's Services and pods, and nothing else (there is no upstream). */
export function corefile(nodeIp: string, kubeconfig: string): string {
  return [
    `.:53 {`,
    `  bind ${nodeIp}`,
    `  errors`,
    `  kubernetes ${CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {`,
    `    kubeconfig ${kubeconfig}`,
    `    pods insecure`,
    `    fallthrough in-addr.arpa ip6.arpa`,
    `  }`,
    `}`,
    '',
  ].join('\n');
}

/**
 * kube-system/kube-dns at the ClusterIP kubelet gives pods as their resolver; CoreDNS runs as a
 * process on the node's address, so the Service has no selector and the test bed writes its
 * EndpointSlice (managed-by names the test bed, so the EndpointSlice controller leaves it alone).
 */
export function kubeDnsObjects(nodeIp: string): [V1Service, Record<string, unknown>] {
  const ports = [
    { name: 'dns', port: 53, protocol: 'UDP' },
    { name: 'dns-tcp', port: 53, protocol: 'TCP' },
  ];
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'kube-dns', namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } },
      spec: { clusterIP: CLUSTER_DNS_IP, ports: ports.map((p) => ({ ...p, targetPort: 53 })) },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'kube-dns-node',
        namespace: 'kube-system',
        labels: { 'kubernetes.io/service-name': 'kube-dns', 'endpointslice.kubernetes.io/managed-by': 'pko-e2e' },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [nodeIp], conditions: { ready: true } }],
      ports,
    },
  ];
}
