/**
 * A local Kubernetes control plane for tests: etcd + kube-apiserver + kube-controller-manager,
 * real binaries from e2e/toolchain/build.sh, on loopback with free ports chosen at start.
 *
 *   const cp = await startControlPlane();
 *   const core = cp.kubeConfig.makeApiClient(k8s.CoreV1Api);
 *   ...
 *   await cp.stop();
 *
 * What runs (flags and reasons: docs/testbed.md):
 * - etcd with --unsafe-no-fsync, data in the temp dir.
 * - kube-apiserver: TLS with the certificate it generates itself in <dir>/pki (apiserver.crt holds
 *   the serving certificate and its CA), token authentication (--token-auth-file: an admin and a
 *   controller-manager identity, both in system:masters), Node,RBAC authorization, admission
 *   plugins incl. PodSecurity (namespace labels pod-security.kubernetes.io/* are enforced) and
 *   ServiceAccount, service account keys so TokenRequest and TokenReview work.
 * - kube-controller-manager with its own kubeconfig and the job, statefulset, garbage collector,
 *   namespace, serviceaccount, serviceaccount-token, ttl-after-finished and root CA publisher
 *   controllers, and with a node (option nodeAddress) those a node needs. kube-scheduler and kubelet
 *   belong to the node (e2e/testbed/node.ts): without one, pods stay Pending.
 *
 * Every process is killed by stop(), and also when the Node.js process exits (exit hook, SIGINT/
 * SIGTERM/SIGHUP hooks, and a watchdog shell that kills them if Node.js dies without running hooks:
 * control-plane/processes.ts). Ports, probes and kubeconfigs: control-plane/helpers.ts.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { distinctFreePorts, kubeconfigYaml, loadKubeConfig, request, tail } from './control-plane/helpers';
import {
  installHooks,
  launchProcess,
  type Managed,
  type ProcessInfo,
  type Running,
  running,
  startWatchdog,
  stopProcesses,
} from './control-plane/processes';
import { sleep } from './eventually';
import { requireToolchain, toolchain } from './toolchain';

export { freePort } from './control-plane/helpers';
export type { ProcessInfo } from './control-plane/processes';

export interface ControlPlaneOptions {
  /** Parent directory of the control plane's temp dir (default: os.tmpdir()). */
  dir?: string;
  /** Binaries to run (default: the toolchain's). */
  etcdBin?: string;
  kubeApiserverBin?: string;
  kubeControllerManagerBin?: string;
  /** kube-controller-manager --controllers (default: DEFAULT_CONTROLLERS). */
  controllers?: string[];
  /** Extra flags appended to each command line. */
  extraApiserverArgs?: string[];
  extraControllerManagerArgs?: string[];
  /** Give up starting after this long (default 60 s). */
  startTimeoutMs?: number;
  /** Keep the temp dir (logs, etcd data) after stop(); also set by PKO_KEEP_CONTROL_PLANE_DIR=1. */
  keepDir?: boolean;
  /**
   * For a cluster with a real node (e2e/testbed/node): the API server listens on this address too
   * and advertises it, so that pods reach it through the `kubernetes` Service, whose endpoints it
   * then keeps (lease reconciler). Default: loopback only, no Service endpoints.
   */
  nodeAddress?: string;
}

export const DEFAULT_CONTROLLERS = [
  'job-controller',
  'statefulset-controller',
  'garbage-collector-controller',
  'namespace-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'ttl-after-finished-controller',
  // publishes the kube-root-ca.crt ConfigMap that projected kube-api-access volumes refer to
  'root-ca-certificate-publisher-controller',
  // with a real node: Services route to pods, claims bind, Deployments run, pods of gone nodes go
  'endpointslice-controller',
  'persistentvolume-binder-controller',
  'deployment-controller',
  'replicaset-controller',
  'pod-garbage-collector-controller',
  // kubelet registers its node tainted not-ready; this controller lifts the taint once it is Ready
  'node-lifecycle-controller',
  // fills in the built-in admin, edit and view ClusterRoles from the roles aggregated to them
  // (ours too: pulumi-operator:stacks-editor), so a test can act as a user with `edit`
  'clusterrole-aggregation-controller',
];

/** Service addresses of a cluster with a real node (kube-proxy and CoreDNS serve them). */
export const SERVICE_CIDR = '10.200.128.0/24';
/** The ClusterIP of kube-system/kube-dns. */
export const CLUSTER_DNS_IP = '10.200.128.10';
/** The name the node registers under. */
export const NODE_NAME = 'pko-e2e-node';

/** Identities of the node's components, each with its own static token (see tokens.csv below). */
export type NodeIdentity = 'kubelet' | 'kube-proxy' | 'kube-scheduler' | 'coredns';

/** The issuer of service account tokens; also the default API audience. */
export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';

export interface ControlPlane {
  /** The temp dir holding certificates, tokens, kubeconfigs, etcd data and logs. */
  dir: string;
  /** Admin kubeconfig (token of `admin`, group system:masters; CA data embedded). */
  kubeconfigPath: string;
  /** https://127.0.0.1:<port>, or https://<nodeAddress>:<port> */
  server: string;
  /** PEM of the API server's certificate chain (serving cert + its self-signed CA). */
  caData: string;
  caFile: string;
  adminToken: string;
  kubeConfig: KubeConfig;
  etcdEndpoint: string;
  serviceAccountIssuer: string;
  /** Audiences the API server accepts for its own tokens (--api-audiences). */
  apiAudiences: string[];
  /** Private key (PEM) that signs service account tokens. */
  serviceAccountKeyFile: string;
  /** The address the API server advertises to pods (options.nodeAddress), if any. */
  nodeAddress?: string;
  /** A kubeconfig file for each node component's identity. */
  nodeKubeconfigs: Record<NodeIdentity, string>;
  processes: ProcessInfo[];
  /** Milliseconds from the call to ready, in total and per phase. */
  startupMs: number;
  timings: { etcdMs: number; apiserverMs: number; controllerManagerMs: number; defaultServiceAccountMs: number };
  /** Kills every process (SIGTERM, SIGKILL after 5 s) and removes the temp dir. Idempotent. */
  stop(): Promise<void>;
}

export class ControlPlaneStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ControlPlaneStartError';
  }
}

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const t0 = Date.now();
  const needToolchain =
    options.etcdBin === undefined ||
    options.kubeApiserverBin === undefined ||
    options.kubeControllerManagerBin === undefined;
  if (needToolchain) requireToolchain(['etcd', 'kubernetes']);
  const etcdBin = options.etcdBin ?? toolchain.binaries.etcd;
  const apiserverBin = options.kubeApiserverBin ?? toolchain.binaries.kubeApiserver;
  const kcmBin = options.kubeControllerManagerBin ?? toolchain.binaries.kubeControllerManager;
  const timeoutMs = options.startTimeoutMs ?? 60_000;
  const deadline = t0 + timeoutMs;
  const keepDir = options.keepDir ?? process.env.PKO_KEEP_CONTROL_PLANE_DIR === '1';

  const parent = options.dir ?? os.tmpdir();
  fs.mkdirSync(parent, { recursive: true });
  const dir = fs.mkdtempSync(path.join(parent, 'pko-cp-'));
  const pki = path.join(dir, 'pki');
  fs.mkdirSync(pki, { mode: 0o700 });

  installHooks();
  const state: Running = { dir, keepDir, procs: [] };
  running.add(state);
  state.watchdog = startWatchdog(dir, keepDir);

  // Service account signing key pair.
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const saKey = path.join(pki, 'sa.key');
  const saPub = path.join(pki, 'sa.pub');
  fs.writeFileSync(saKey, privateKey, { mode: 0o600 });
  fs.writeFileSync(saPub, publicKey);

  // Static tokens: token,user,uid,"groups".
  const newToken = (): string => crypto.randomBytes(24).toString('hex');
  const adminToken = newToken();
  const kcmToken = newToken();
  // The node's components as a cluster knows them: the kubelet in system:nodes (the Node
  // authorizer and NodeRestriction apply to it), the proxy and the scheduler under the users the
  // bootstrap RBAC binds; CoreDNS reads Services, EndpointSlices and Namespaces (a test-bed admin).
  const nodeIdentities: Record<NodeIdentity, { user: string; groups: string; token: string }> = {
    kubelet: { user: `system:node:${NODE_NAME}`, groups: 'system:nodes', token: newToken() },
    'kube-proxy': { user: 'system:kube-proxy', groups: '', token: newToken() },
    'kube-scheduler': { user: 'system:kube-scheduler', groups: '', token: newToken() },
    coredns: { user: 'pko-e2e-coredns', groups: 'system:masters', token: newToken() },
  };
  const tokensFile = path.join(pki, 'tokens.csv');
  fs.writeFileSync(
    tokensFile,
    [
      `${adminToken},admin,pko-e2e-admin,"system:masters"`,
      // With --use-service-account-credentials=false every controller shares this identity.
      `${kcmToken},system:kube-controller-manager,pko-e2e-kcm,"system:masters"`,
      ...Object.values(nodeIdentities).map((i) => `${i.token},${i.user},${i.user}${i.groups ? `,"${i.groups}"` : ''}`),
    ].join('\n') + '\n',
    { mode: 0o600 },
  );

  const [etcdPort, peerPort, apiPort] = (await distinctFreePorts(3)) as [number, number, number];
  const etcdEndpoint = `http://127.0.0.1:${etcdPort}`;
  // The certificate the API server makes itself names the address it advertises (and the
  // `kubernetes` Service's), not loopback, once that is the node's.
  const server = `https://${options.nodeAddress ?? '127.0.0.1'}:${apiPort}`;
  const apiAudiences = [SERVICE_ACCOUNT_ISSUER];

  const launch = (name: string, bin: string, args: string[]): Managed => {
    try {
      return launchProcess(state, name, bin, args);
    } catch (e) {
      throw new ControlPlaneStartError((e as Error).message);
    }
  };

  const stop = async (): Promise<void> => {
    if (!running.has(state)) return;
    running.delete(state);
    // One at a time, in reverse start order: kube-apiserver shuts down gracefully (about 1 s)
    // only while etcd is still there.
    await stopProcesses(state);
    state.watchdog?.kill('SIGKILL');
    if (!keepDir) fs.rmSync(dir, { recursive: true, force: true });
  };

  /** Polls check() until it returns a value, failing early if a process died. */
  const waitFor = async <T>(what: string, watched: Managed[], check: () => Promise<T | undefined>): Promise<T> => {
    let last = '';
    for (;;) {
      for (const p of watched) {
        if (p.hasExited) {
          throw new ControlPlaneStartError(
            `${p.info.name} exited while waiting for ${what} (exit ${String(p.child.exitCode)}, signal ${String(p.child.signalCode)})`,
          );
        }
      }
      try {
        const v = await check();
        if (v !== undefined) return v;
      } catch (e) {
        last = (e as Error).message;
      }
      if (Date.now() > deadline) {
        throw new ControlPlaneStartError(
          `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last})` : ''}`,
        );
      }
      await sleep(100);
    }
  };

  try {
    // etcd
    let tPhase = Date.now();
    const etcd = launch('etcd', etcdBin, [
      '--name=default',
      `--data-dir=${path.join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdEndpoint}`,
      `--advertise-client-urls=${etcdEndpoint}`,
      `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${peerPort}`,
      `--initial-cluster=default=http://127.0.0.1:${peerPort}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ]);
    await waitFor('etcd /health', [etcd], async () => {
      const r = await request(`${etcdEndpoint}/health`);
      return r.status === 200 && /"health":\s*"true"/.test(r.body) ? true : undefined;
    });
    const etcdMs = Date.now() - tPhase;

    // kube-apiserver
    tPhase = Date.now();
    const apiserver = launch('kube-apiserver', apiserverBin, [
      `--etcd-servers=${etcdEndpoint}`,
      ...(options.nodeAddress
        ? [
            '--bind-address=0.0.0.0',
            `--advertise-address=${options.nodeAddress}`,
            `--service-cluster-ip-range=${SERVICE_CIDR}`,
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
      `--secure-port=${apiPort}`,
      `--cert-dir=${pki}`,
      `--token-auth-file=${tokensFile}`,
      '--authorization-mode=Node,RBAC',
      '--enable-admission-plugins=NodeRestriction,PodSecurity,ServiceAccount',
      // PodSecurity must be what rejects privileged pods in restricted namespaces, not this flag.
      '--allow-privileged=true',
      `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      `--api-audiences=${apiAudiences.join(',')}`,
      '--profiling=false',
      ...(options.extraApiserverArgs ?? []),
    ]);
    await waitFor('kube-apiserver /readyz', [etcd, apiserver], async () => {
      const r = await request(`${server}/readyz`, { token: adminToken, insecure: true });
      return r.status === 200 ? true : undefined;
    });
    const caFile = path.join(pki, 'apiserver.crt');
    const caData = fs.readFileSync(caFile, 'utf8');
    const apiserverMs = Date.now() - tPhase;

    const kubeconfigPath = path.join(dir, 'admin.kubeconfig');
    fs.writeFileSync(kubeconfigPath, kubeconfigYaml(server, caData, 'admin', adminToken), { mode: 0o600 });
    const kcmKubeconfig = path.join(dir, 'kube-controller-manager.kubeconfig');
    fs.writeFileSync(kcmKubeconfig, kubeconfigYaml(server, caData, 'system:kube-controller-manager', kcmToken), {
      mode: 0o600,
    });
    const nodeKubeconfigs = {} as Record<NodeIdentity, string>;
    for (const [name, identity] of Object.entries(nodeIdentities) as [
      NodeIdentity,
      { user: string; token: string },
    ][]) {
      nodeKubeconfigs[name] = path.join(dir, `${name}.kubeconfig`);
      fs.writeFileSync(nodeKubeconfigs[name], kubeconfigYaml(server, caData, identity.user, identity.token), {
        mode: 0o600,
      });
    }

    // kube-controller-manager
    tPhase = Date.now();
    const kcm = launch('kube-controller-manager', kcmBin, [
      `--kubeconfig=${kcmKubeconfig}`,
      '--leader-elect=false',
      '--secure-port=0',
      `--controllers=${(options.controllers ?? DEFAULT_CONTROLLERS).join(',')}`,
      '--use-service-account-credentials=false',
      `--service-account-private-key-file=${saKey}`,
      `--root-ca-file=${caFile}`,
      '--kube-api-qps=100',
      '--kube-api-burst=200',
      ...(options.extraControllerManagerArgs ?? []),
    ]);
    const controllerManagerMs = Date.now() - tPhase;

    // Ready for pods: the serviceaccount controller has created default/default (the
    // ServiceAccount admission plugin rejects pods until their namespace has it). This request
    // also checks the CA and the admin token for real.
    tPhase = Date.now();
    await waitFor('the default ServiceAccount in namespace default', [etcd, apiserver, kcm], async () => {
      const r = await request(`${server}/api/v1/namespaces/default/serviceaccounts/default`, {
        token: adminToken,
        ca: caData,
      });
      if (r.status === 200) return true;
      if (r.status !== 404) throw new Error(`HTTP ${r.status}: ${r.body.slice(0, 200)}`);
      return undefined;
    });
    const defaultServiceAccountMs = Date.now() - tPhase;

    return {
      dir,
      kubeconfigPath,
      server,
      caData,
      caFile,
      adminToken,
      kubeConfig: loadKubeConfig(kubeconfigPath),
      etcdEndpoint,
      serviceAccountIssuer: SERVICE_ACCOUNT_ISSUER,
      apiAudiences,
      serviceAccountKeyFile: saKey,
      nodeAddress: options.nodeAddress,
      nodeKubeconfigs,
      processes: state.procs.map((p) => p.info),
      startupMs: Date.now() - t0,
      timings: { etcdMs, apiserverMs, controllerManagerMs, defaultServiceAccountMs },
      stop,
    };
  } catch (e) {
    const logs = state.procs
      .map((p) => `--- ${p.info.name} (${p.info.logFile}), last lines:\n${tail(p.info.logFile)}`)
      .join('\n');
    await stop().catch(() => undefined);
    throw new ControlPlaneStartError(
      `control plane did not start: ${(e as Error).message}\n${logs}${keepDir ? `\n(dir kept: ${dir})` : ''}`,
    );
  }
}
