/**
 * Flux's source-controller on the test bed: the toolchain's binary (e2e/toolchain/build.sh
 * component `source-controller`), run as a process on the node, with the CRDs and the ClusterRole
 * of the same module, under a ServiceAccount of its own (`flux-system/source-controller`, as Flux
 * installs it), watching every namespace.
 *
 * Its artifact server listens on the node's address, and the artifacts it advertises name
 * `source-controller.flux-system.svc.cluster.local.`, as a Flux install's do: a Service of that name
 * (no selector) has an EndpointSlice with the node's address and the server's port, so workspace
 * pods reach it through cluster DNS and kube-proxy, as they reach the `kubernetes` Service.
 * Why a process rather than a pod: docs/testbed.md ("Flux's source-controller").
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { eventually, serviceAccountKubeConfig, type Operator } from '../harness';
import { freePort, request, tail } from './control-plane/helpers';
import { installHooks, launchProcess, type Running, running, stopProcesses } from './control-plane/processes';
import { binDirOf, requireToolchain } from './toolchain';

const execFileAsync = promisify(execFile);

export const FLUX_SOURCE_GROUP = 'source.toolkit.fluxcd.io';
export const GIT_REPOSITORIES = { group: FLUX_SOURCE_GROUP, version: 'v1', plural: 'gitrepositories' } as const;
/** The host name in the artifacts' URLs: the Service a Flux install has (`--storage-adv-addr`). */
export const ARTIFACT_HOST = 'source-controller.flux-system.svc.cluster.local.';

const NAMESPACE = 'flux-system';
const NAME = 'source-controller';

export interface SourceControllerOptions {
  /** `--artifact-retention-ttl`: how long an artifact that is no longer advertised is kept (Flux: 60s). */
  artifactRetentionTtl?: string;
  /** `--artifact-retention-records`: how many artifacts of a source are kept at most (Flux: 2). */
  artifactRetentionRecords?: number;
  /** `--artifact-digest-algo`: sha256 (Flux's default), sha384, sha512 or blake3. */
  artifactDigestAlgo?: string;
}

export interface SourceController {
  /** `--storage-path`: an artifact's `path` (status.artifact.path) is relative to it. */
  storageDir: string;
  logFile: string;
  stop(): Promise<void>;
}

/** Where build.sh put the CRDs and the ClusterRole it took from the module zip. */
const moduleDir = (file: 'crds' | 'rbac'): string => path.join(path.dirname(binDirOf('source-controller')), file);

function moduleManifests(file: 'crds' | 'rbac'): k8s.KubernetesObject[] {
  const dir = moduleDir(file);
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .flatMap((f) => loadAll(fs.readFileSync(path.join(dir, f), 'utf8')) as k8s.KubernetesObject[])
    .filter((o) => o);
}

async function createAll(objects: k8s.KubernetesObjectApi, list: k8s.KubernetesObject[]): Promise<void> {
  for (const o of list) await objects.create(o);
}

/** Starts source-controller for the operator's control plane and node; stop() before the control plane stops. */
export async function startSourceController(
  op: Operator,
  options: SourceControllerOptions = {},
): Promise<SourceController> {
  const tc = requireToolchain(['kubernetes', 'source-controller']);
  const nodeIp = op.node.address;
  const { objects } = op;
  // kubectl, as Flux's install applies them: @kubernetes/client-node's typed serialization drops
  // a schema's `default` (its model calls the field `_default`), and source-controller relies on
  // the defaults (a GitRepository without `timeout` makes it panic).
  await execFileAsync(tc.binaries.kubectl, [
    `--kubeconfig=${op.cp.kubeconfigPath}`,
    'apply',
    '--server-side',
    `--filename=${moduleDir('crds')}`,
  ]);
  await eventually('the Flux source CRDs to be served', async () => {
    await op.custom.listClusterCustomObject({ ...GIT_REPOSITORIES });
    return true;
  });

  const [role] = moduleManifests('rbac') as [k8s.V1ClusterRole];
  await createAll(objects, [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: NAME, namespace: NAMESPACE } },
    role,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: NAME },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata!.name! },
      subjects: [{ kind: 'ServiceAccount', name: NAME, namespace: NAMESPACE }],
    } as k8s.V1ClusterRoleBinding,
  ]);

  const dir = fs.mkdtempSync(path.join(op.node.dir, 'source-controller-'));
  const storageDir = path.join(dir, 'data');
  fs.mkdirSync(storageDir);
  const kubeconfig = path.join(dir, 'kubeconfig');
  fs.writeFileSync(kubeconfig, (await serviceAccountKubeConfig(op.cp.kubeConfig, NAMESPACE, NAME)).exportConfig(), {
    mode: 0o600,
  });
  const [storagePort, healthPort] = [await freePort(), await freePort()];
  await createAll(objects, [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: NAME, namespace: NAMESPACE },
      spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: storagePort }] },
    } as k8s.V1Service,
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: `${NAME}-node`,
        namespace: NAMESPACE,
        labels: { 'kubernetes.io/service-name': NAME, 'endpointslice.kubernetes.io/managed-by': 'pko-e2e' },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [nodeIp], conditions: { ready: true } }],
      ports: [{ name: 'http', port: storagePort, protocol: 'TCP' }],
    } as k8s.V1EndpointSlice,
  ]);

  installHooks();
  const state: Running = { dir, keepDir: true, procs: [] };
  running.add(state);
  const stop = async (): Promise<void> => {
    if (!running.has(state)) return;
    running.delete(state);
    await stopProcesses(state);
  };
  // Flux's Deployment (config/manager/deployment.yaml of the module) but for leader election
  // (one process) and the addresses: metrics off, health on loopback.
  const proc = launchProcess(
    state,
    NAME,
    tc.binaries.sourceController,
    [
      '--watch-all-namespaces',
      '--log-level=info',
      '--log-encoding=json',
      '--enable-leader-election=false',
      `--storage-path=${storageDir}`,
      `--storage-addr=${nodeIp}:${storagePort}`,
      `--storage-adv-addr=${ARTIFACT_HOST}`,
      '--metrics-addr=0',
      `--health-addr=127.0.0.1:${healthPort}`,
      ...(options.artifactRetentionTtl ? [`--artifact-retention-ttl=${options.artifactRetentionTtl}`] : []),
      ...(options.artifactRetentionRecords !== undefined
        ? [`--artifact-retention-records=${options.artifactRetentionRecords}`]
        : []),
      ...(options.artifactDigestAlgo ? [`--artifact-digest-algo=${options.artifactDigestAlgo}`] : []),
    ],
    { KUBECONFIG: kubeconfig, RUNTIME_NAMESPACE: NAMESPACE, TMPDIR: dir, HOME: dir },
  );
  const outcome = await eventually(
    'source-controller to be ready (/readyz) and its artifact server to answer',
    async () => {
      if (proc.hasExited) return 'exited';
      const ready = await request(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined);
      const files = await request(`http://${nodeIp}:${storagePort}/`).catch(() => undefined);
      return ready?.status === 200 && files !== undefined ? 'ready' : undefined;
    },
    60_000,
    250,
  ).catch((e: Error) => e.message);
  if (outcome !== 'ready') {
    await stop();
    throw new Error(`source-controller did not start (${outcome}); last lines of its log:\n${tail(proc.info.logFile)}`);
  }
  return { storageDir, logFile: proc.info.logFile, stop };
}
