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
 * control-plane/processes.ts). Its steps (keys, tokens, kubeconfigs, command lines):
 * control-plane/setup.ts; probes and kubeconfigs: control-plane/helpers.ts.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig, request } from './control-plane/helpers';
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
import {
  apiserverArgs,
  controllerManagerArgs,
  etcdArgs,
  type NodeIdentity,
  writeKubeconfigs,
  writeServiceAccountKeys,
  writeTokens,
} from './control-plane/setup';
import { distinctFreePorts, eventually, GiveUp, tail } from './helpers';
import { requireToolchain, toolchain } from './toolchain';

export type { ProcessInfo } from './control-plane/processes';
export type { NodeIdentity } from './control-plane/setup';

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
  const bins = binariesOf(options);
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

  const { saKey, saPub } = writeServiceAccountKeys(pki);
  const tokens = writeTokens(pki, NODE_NAME);
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
  /** Polls check() until it holds, giving up at once if a watched process died. */
  const waitFor = (what: string, watched: Managed[], check: () => Promise<boolean>): Promise<true> =>
    eventually(
      what,
      async () => {
        const dead = watched.find((p) => p.hasExited);
        if (dead) {
          throw new GiveUp(
            `${dead.info.name} exited while waiting for ${what} (exit ${String(dead.child.exitCode)}, signal ${String(dead.child.signalCode)})`,
          );
        }
        return (await check()) || undefined;
      },
      Math.max(0, deadline - Date.now()),
      100,
    );
  /** Milliseconds since the previous lap (or the start of the steps). */
  let mark = Date.now();
  const lap = (): number => {
    const ms = Date.now() - mark;
    mark += ms;
    return ms;
  };

  try {
    const etcd = launch('etcd', bins.etcd, etcdArgs(path.join(dir, 'etcd'), etcdEndpoint, peerPort));
    await waitFor('etcd /health', [etcd], async () => {
      const r = await request(`${etcdEndpoint}/health`);
      return r.status === 200 && /"health":\s*"true"/.test(r.body);
    });
    const etcdMs = lap();

    const apiserver = launch('kube-apiserver', bins.apiserver, [
      ...apiserverArgs({
        etcdEndpoint,
        port: apiPort,
        pki,
        tokensFile: tokens.file,
        saKey,
        saPub,
        issuer: SERVICE_ACCOUNT_ISSUER,
        audiences: apiAudiences,
        node: options.nodeAddress ? { address: options.nodeAddress, serviceCidr: SERVICE_CIDR } : undefined,
      }),
      ...(options.extraApiserverArgs ?? []),
    ]);
    await waitFor('kube-apiserver /readyz', [etcd, apiserver], async () => {
      const r = await request(`${server}/readyz`, { token: tokens.admin, insecure: true });
      return r.status === 200;
    });
    const caFile = path.join(pki, 'apiserver.crt');
    const caData = fs.readFileSync(caFile, 'utf8');
    const kubeconfigs = writeKubeconfigs(dir, server, caData, tokens);
    const apiserverMs = lap();

    const kcm = launch('kube-controller-manager', bins.controllerManager, [
      ...controllerManagerArgs(
        kubeconfigs.controllerManager,
        options.controllers ?? DEFAULT_CONTROLLERS,
        saKey,
        caFile,
      ),
      ...(options.extraControllerManagerArgs ?? []),
    ]);
    const controllerManagerMs = lap();

    // Ready for pods: the serviceaccount controller has created default/default (the
    // ServiceAccount admission plugin rejects pods until their namespace has it). This request
    // also checks the CA and the admin token for real.
    await waitFor('the default ServiceAccount in namespace default', [etcd, apiserver, kcm], async () => {
      const r = await request(`${server}/api/v1/namespaces/default/serviceaccounts/default`, {
        token: tokens.admin,
        ca: caData,
      });
      if (r.status !== 200 && r.status !== 404) throw new Error(`HTTP ${r.status}: ${r.body.slice(0, 200)}`);
      return r.status === 200;
    });
    const defaultServiceAccountMs = lap();

    return {
      dir,
      kubeconfigPath: kubeconfigs.admin,
      server,
      caData,
      caFile,
      adminToken: tokens.admin,
      kubeConfig: loadKubeConfig(kubeconfigs.admin),
      etcdEndpoint,
      serviceAccountIssuer: SERVICE_ACCOUNT_ISSUER,
      apiAudiences,
      serviceAccountKeyFile: saKey,
      nodeAddress: options.nodeAddress,
      nodeKubeconfigs: kubeconfigs.node,
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

/** The binaries to run: the options', or the toolchain's (which must then be built). */
function binariesOf(options: ControlPlaneOptions): { etcd: string; apiserver: string; controllerManager: string } {
  if (
    options.etcdBin === undefined ||
    options.kubeApiserverBin === undefined ||
    options.kubeControllerManagerBin === undefined
  )
    requireToolchain(['etcd', 'kubernetes']);
  return {
    etcd: options.etcdBin ?? toolchain.binaries.etcd,
    apiserver: options.kubeApiserverBin ?? toolchain.binaries.kubeApiserver,
    controllerManager: options.kubeControllerManagerBin ?? toolchain.binaries.kubeControllerManager,
  };
}
