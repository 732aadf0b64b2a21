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
import { request } from './control-plane/helpers';
import { freePort } from './helpers';
import { startUntilReady } from './control-plane/processes';
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
  /** `<node address>:<port>` of the artifact server, where ARTIFACT_HOST's Service leads. */
  artifactAddress: string;
  logFile: string;
  stop(): Promise<void>;
}

type FluxController = 'source-controller' | 'kustomize-controller';

/** The namespace Flux installs its controllers in. */
export const FLUX_NAMESPACE = NAMESPACE;

/** Where build.sh put the CRDs and the RBAC it took from a controller's module zip. */
const moduleDir = (controller: FluxController, file: 'crds' | 'rbac'): string =>
  path.join(path.dirname(binDirOf(controller)), file);

export function moduleManifests(controller: FluxController, file: 'crds' | 'rbac'): k8s.KubernetesObject[] {
  const dir = moduleDir(controller, file);
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .flatMap((f) => loadAll(fs.readFileSync(path.join(dir, f), 'utf8')) as k8s.KubernetesObject[])
    .filter((o) => o);
}

export async function createAll(objects: k8s.KubernetesObjectApi, list: k8s.KubernetesObject[]): Promise<void> {
  for (const o of list) await objects.create(o);
}

/**
 * `kubectl apply --server-side` of a controller's CRDs, as Flux's install applies them:
 * @kubernetes/client-node's typed serialization drops a schema's `default` (its model calls the
 * field `_default`), and the controllers rely on the defaults (a GitRepository without `timeout`
 * makes source-controller panic). Resolves once `served` succeeds.
 */
export async function applyModuleCrds(
  op: Operator,
  controller: FluxController,
  served: () => Promise<unknown>,
): Promise<void> {
  const tc = requireToolchain(['kubernetes', controller]);
  await execFileAsync(tc.binaries.kubectl, [
    `--kubeconfig=${op.cp.kubeconfigPath}`,
    'apply',
    '--server-side',
    `--filename=${moduleDir(controller, 'crds')}`,
  ]);
  await eventually(`the CRDs of ${controller} to be served`, async () => {
    await served();
    return true;
  });
}

/** A running controller process: its directory (its log, kubeconfig and TMPDIR) and how to stop it. */
export interface ControllerProcess {
  dir: string;
  logFile: string;
  stop(): Promise<void>;
}

/**
 * Runs a Flux controller as a process on the node, as its Deployment does (config/manager of its
 * module) but for leader election (one process) and the addresses (metrics off, health on
 * loopback), as the ServiceAccount `flux-system/<controller>`, until /readyz answers 200 and
 * `ready` (if given) says so.
 */
export async function launchFluxController(
  op: Operator,
  controller: FluxController,
  binary: string,
  args: (dir: string) => string[],
  env: Record<string, string> = {},
  ready: () => Promise<boolean> = () => Promise.resolve(true),
): Promise<ControllerProcess> {
  const dir = fs.mkdtempSync(path.join(op.node.dir, `${controller}-`));
  const kubeconfig = path.join(dir, 'kubeconfig');
  fs.writeFileSync(
    kubeconfig,
    (await serviceAccountKubeConfig(op.cp.kubeConfig, NAMESPACE, controller)).exportConfig(),
    { mode: 0o600 },
  );
  const healthPort = await freePort();
  const started = await startUntilReady(
    dir,
    controller,
    binary,
    [
      '--watch-all-namespaces',
      '--log-level=info',
      '--log-encoding=json',
      '--enable-leader-election=false',
      '--metrics-addr=0',
      `--health-addr=127.0.0.1:${healthPort}`,
      ...args(dir),
    ],
    { KUBECONFIG: kubeconfig, RUNTIME_NAMESPACE: NAMESPACE, TMPDIR: dir, HOME: dir, ...env },
    {
      what: `${controller} to be ready (/readyz)`,
      check: async () => (await request(`http://127.0.0.1:${healthPort}/readyz`)).status === 200 && (await ready()),
    },
  );
  return { dir, ...started };
}

/** The namespace and ServiceAccount of a Flux controller, as Flux installs them (once per namespace). */
export async function createControllerAccount(op: Operator, controller: FluxController): Promise<void> {
  const namespaces = await op.core.listNamespace({ fieldSelector: `metadata.name=${NAMESPACE}` });
  if (namespaces.items.length === 0)
    await op.objects.create({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE } });
  await op.objects.create({
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: controller, namespace: NAMESPACE },
  });
}

/** Starts source-controller for the operator's control plane and node; stop() before the control plane stops. */
export async function startSourceController(
  op: Operator,
  options: SourceControllerOptions = {},
): Promise<SourceController> {
  const tc = requireToolchain(['kubernetes', 'source-controller']);
  const nodeIp = op.node.address;
  const { objects } = op;
  await applyModuleCrds(op, 'source-controller', () => op.custom.listClusterCustomObject({ ...GIT_REPOSITORIES }));

  await createControllerAccount(op, NAME);
  const [role] = moduleManifests('source-controller', 'rbac') as [k8s.V1ClusterRole];
  await createAll(objects, [
    role,
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: NAME },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata!.name! },
      subjects: [{ kind: 'ServiceAccount', name: NAME, namespace: NAMESPACE }],
    } as k8s.V1ClusterRoleBinding,
  ]);

  const storagePort = await freePort();
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

  let storageDir = '';
  const artifactAddress = `${nodeIp}:${storagePort}`;
  const proc = await launchFluxController(
    op,
    NAME,
    tc.binaries.sourceController,
    (dir) => {
      storageDir = path.join(dir, 'data');
      fs.mkdirSync(storageDir);
      return [
        `--storage-path=${storageDir}`,
        `--storage-addr=${artifactAddress}`,
        `--storage-adv-addr=${ARTIFACT_HOST}`,
        ...(options.artifactRetentionTtl ? [`--artifact-retention-ttl=${options.artifactRetentionTtl}`] : []),
        ...(options.artifactRetentionRecords !== undefined
          ? [`--artifact-retention-records=${options.artifactRetentionRecords}`]
          : []),
        ...(options.artifactDigestAlgo ? [`--artifact-digest-algo=${options.artifactDigestAlgo}`] : []),
      ];
    },
    {},
    // Its artifact server answers too.
    async () => (await request(`http://${artifactAddress}/`).catch(() => undefined)) !== undefined,
  );
  return { storageDir, artifactAddress, logFile: proc.logFile, stop: () => proc.stop() };
}
