/**
 * The named steps of startControlPlane (control-plane.ts): the files it writes (service account
 * keys, static tokens, kubeconfigs) and each component's command line. Flags and reasons:
 * docs/testbed.md.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { kubeconfigYaml } from './helpers';

/** Identities of the node's components, each with its own static token (see writeTokens). */
export type NodeIdentity = 'kubelet' | 'kube-proxy' | 'kube-scheduler' | 'coredns';

/** The service account signing key pair, as files in `pki`. */
export function writeServiceAccountKeys(pki: string): { saKey: string; saPub: string } {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const saKey = path.join(pki, 'sa.key');
  const saPub = path.join(pki, 'sa.pub');
  fs.writeFileSync(saKey, privateKey, { mode: 0o600 });
  fs.writeFileSync(saPub, publicKey);
  return { saKey, saPub };
}

interface Identity {
  user: string;
  groups: string;
  token: string;
}

export interface Tokens {
  /** --token-auth-file */
  file: string;
  admin: string;
  controllerManager: string;
  node: Record<NodeIdentity, Identity>;
}

/** Fresh static tokens (token,user,uid,"groups") for the admin, the controller manager and the node's components. */
export function writeTokens(pki: string, nodeName: string): Tokens {
  const newToken = (): string => crypto.randomBytes(24).toString('hex');
  const admin = newToken();
  const controllerManager = newToken();
  // The node's components as a cluster knows them: the kubelet in system:nodes (the Node
  // authorizer and NodeRestriction apply to it), the proxy and the scheduler under the users the
  // bootstrap RBAC binds; CoreDNS reads Services, EndpointSlices and Namespaces (a test-bed admin).
  const node: Record<NodeIdentity, Identity> = {
    kubelet: { user: `system:node:${nodeName}`, groups: 'system:nodes', token: newToken() },
    'kube-proxy': { user: 'system:kube-proxy', groups: '', token: newToken() },
    'kube-scheduler': { user: 'system:kube-scheduler', groups: '', token: newToken() },
    coredns: { user: 'pko-e2e-coredns', groups: 'system:masters', token: newToken() },
  };
  const file = path.join(pki, 'tokens.csv');
  fs.writeFileSync(
    file,
    [
      `${admin},admin,pko-e2e-admin,"system:masters"`,
      // With --use-service-account-credentials=false every controller shares this identity.
      `${controllerManager},system:kube-controller-manager,pko-e2e-kcm,"system:masters"`,
      ...Object.values(node).map((i) => `${i.token},${i.user},${i.user}${i.groups ? `,"${i.groups}"` : ''}`),
    ].join('\n') + '\n',
    { mode: 0o600 },
  );
  return { file, admin, controllerManager, node };
}

/** A kubeconfig file in `dir` for each identity: the admin's, the controller manager's, the node components'. */
export function writeKubeconfigs(
  dir: string,
  server: string,
  caData: string,
  tokens: Tokens,
): { admin: string; controllerManager: string; node: Record<NodeIdentity, string> } {
  const write = (name: string, user: string, token: string): string => {
    const file = path.join(dir, `${name}.kubeconfig`);
    fs.writeFileSync(file, kubeconfigYaml(server, caData, user, token), { mode: 0o600 });
    return file;
  };
  const node = {} as Record<NodeIdentity, string>;
  for (const [name, identity] of Object.entries(tokens.node) as [NodeIdentity, Identity][])
    node[name] = write(name, identity.user, identity.token);
  return {
    admin: write('admin', 'admin', tokens.admin),
    controllerManager: write('kube-controller-manager', 'system:kube-controller-manager', tokens.controllerManager),
    node,
  };
}

export function etcdArgs(dataDir: string, endpoint: string, peerPort: number): string[] {
  const peer = `http://127.0.0.1:${peerPort}`;
  return [
    '--name=default',
    `--data-dir=${dataDir}`,
    `--listen-client-urls=${endpoint}`,
    `--advertise-client-urls=${endpoint}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=default=${peer}`,
    '--unsafe-no-fsync=true',
    '--log-level=warn',
  ];
}

export interface ApiserverSettings {
  etcdEndpoint: string;
  port: number;
  pki: string;
  tokensFile: string;
  saKey: string;
  saPub: string;
  issuer: string;
  audiences: string[];
  /** With a real node: the address it advertises and the Service range kube-proxy serves. */
  node?: { address: string; serviceCidr: string };
}

export function apiserverArgs(s: ApiserverSettings): string[] {
  return [
    `--etcd-servers=${s.etcdEndpoint}`,
    ...(s.node
      ? [
          '--bind-address=0.0.0.0',
          `--advertise-address=${s.node.address}`,
          `--service-cluster-ip-range=${s.node.serviceCidr}`,
          '--endpoint-reconciler-type=lease',
          // Nothing resolves the node's name inside the test network: logs and exec go by address.
          '--kubelet-preferred-address-types=InternalIP',
        ]
      : [
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
          '--service-cluster-ip-range=10.0.0.0/24',
          '--endpoint-reconciler-type=none',
        ]),
    `--secure-port=${s.port}`,
    `--cert-dir=${s.pki}`,
    `--token-auth-file=${s.tokensFile}`,
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction,PodSecurity,ServiceAccount',
    // PodSecurity must be what rejects privileged pods in restricted namespaces, not this flag.
    '--allow-privileged=true',
    `--service-account-issuer=${s.issuer}`,
    `--service-account-key-file=${s.saPub}`,
    `--service-account-signing-key-file=${s.saKey}`,
    `--api-audiences=${s.audiences.join(',')}`,
    '--profiling=false',
  ];
}

export function controllerManagerArgs(
  kubeconfig: string,
  controllers: string[],
  saKey: string,
  caFile: string,
): string[] {
  return [
    `--kubeconfig=${kubeconfig}`,
    '--leader-elect=false',
    '--secure-port=0',
    `--controllers=${controllers.join(',')}`,
    '--use-service-account-credentials=false',
    `--service-account-private-key-file=${saKey}`,
    `--root-ca-file=${caFile}`,
    '--kube-api-qps=100',
    '--kube-api-burst=200',
  ];
}
