/**
 * Cluster helpers of the e2e tests, as a user or a pod meets the cluster: kubectl, identities
 * (a ServiceAccount's token, impersonation, the hooks' own account) and small typed reads.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import * as k8s from '@kubernetes/client-node';
import type { ControlPlane } from './control-plane';
import { REPO_ROOT, requireBinaries } from './toolchain';

/** The real kubectl (e2e/toolchain), as the test bed's admin, in `namespace`: its stdout. */
export async function kubectl(
  op: { cp: Pick<ControlPlane, 'kubeconfigPath'> },
  namespace: string,
  ...args: string[]
): Promise<string> {
  const { kubectl: bin } = requireBinaries(['kubectl']);
  const { stdout } = await promisify(execFile)(
    bin,
    ['--kubeconfig', op.cp.kubeconfigPath, '--namespace', namespace, ...args],
    { timeout: 30_000 },
  );
  return stdout;
}

/** A row of the Events table of `kubectl describe`. */
export interface DescribedEvent {
  type: string;
  reason: string;
  age: string;
  from: string;
  message: string;
}

/** `kubectl describe <kind> <name>`, as a user runs it: the rows of its Events table. */
export async function describedEvents(
  op: { cp: Pick<ControlPlane, 'kubeconfigPath'> },
  namespace: string,
  kind: string,
  name: string,
): Promise<DescribedEvent[]> {
  const stdout = await kubectl(op, namespace, 'describe', kind, name);
  const lines = stdout.split('\n');
  const start = lines.findIndex((l) => l.startsWith('Events:'));
  if (start < 0) throw new Error(`kubectl describe printed no Events section:\n${stdout}`);
  // `Events:  <none>`, or a header, a dashes line and one row per event (columns: 2+ spaces apart).
  return lines
    .slice(start + 3)
    .filter((l) => l.startsWith('  ') && l.trim() !== '')
    .map((l) => {
      const [type = '', reason = '', age = '', from = '', ...message] = l.trim().split(/\s{2,}/);
      return { type, reason, age, from, message: message.join('  ') };
    });
}

/** Whether an object exists: `read` is a typed client call; a 404 means no, any other error is thrown. */
export async function exists(read: () => Promise<unknown>): Promise<boolean> {
  try {
    await read();
    return true;
  } catch (e) {
    if (e instanceof k8s.ApiException && e.code === 404) return false;
    throw e;
  }
}

/** `value`, or an error naming `what` when it is missing (a failed expectation, typed). */
export function defined<T>(value: T | null | undefined, what: string): T {
  if (value === undefined || value === null) throw new Error(`${what} is missing`);
  return value;
}

/**
 * A kubeconfig of the hooks' ServiceAccount `pulumi-system/pulumi-mc-hooks`, created with its
 * ClusterRole and binding from manifests/install.yaml: the identity the hooks have in a cluster.
 */
export async function hooksKubeConfig(admin: k8s.KubeConfig): Promise<k8s.KubeConfig> {
  const objects = k8s.KubernetesObjectApi.makeApiClient(admin);
  const install = loadAll(readFileSync(join(REPO_ROOT, 'manifests', 'install.yaml'), 'utf8')) as k8s.KubernetesObject[];
  const wanted = new Set([
    'Namespace/pulumi-system',
    'ServiceAccount/pulumi-mc-hooks',
    'ClusterRole/pulumi-operator:hooks',
    'ClusterRoleBinding/pulumi-operator:hooks',
  ]);
  for (const o of install.filter((x) => x && wanted.has(`${x.kind}/${x.metadata?.name}`))) await objects.create(o);
  return serviceAccountKubeConfig(admin, 'pulumi-system', 'pulumi-mc-hooks');
}

/**
 * A kubeconfig of the ServiceAccount `namespace/name`, through a token from the TokenRequest API
 * (the API server's audience, 12 hours): the identity a pod running as that account has.
 */
export async function serviceAccountKubeConfig(
  admin: k8s.KubeConfig,
  namespace: string,
  name: string,
): Promise<k8s.KubeConfig> {
  const { status } = await admin.makeApiClient(k8s.CoreV1Api).createNamespacedServiceAccountToken({
    name,
    namespace,
    body: { spec: { audiences: [], expirationSeconds: 12 * 3600 } },
  });
  return kubeConfigAs(admin, { name, token: defined(status?.token, 'the TokenRequest returns a token') });
}

/**
 * A kubeconfig of the admin's credentials that acts as `user` (the `Impersonate-User` header, as
 * `kubectl --as=<user>`): the API server authorizes every request as that user, with no groups
 * but system:authenticated.
 */
export function impersonating(admin: k8s.KubeConfig, user: string): k8s.KubeConfig {
  const self = defined(admin.getCurrentUser(), 'the admin kubeconfig names its user');
  return kubeConfigAs(admin, { ...self, name: user, impersonateUser: user });
}

function kubeConfigAs(admin: k8s.KubeConfig, user: k8s.User): k8s.KubeConfig {
  const cluster = defined(admin.getCurrentCluster(), 'the admin kubeconfig names its cluster');
  const kc = new k8s.KubeConfig();
  kc.loadFromOptions({
    clusters: [{ ...cluster, name: 'testbed' }],
    users: [user],
    contexts: [{ name: user.name, cluster: 'testbed', user: user.name }],
    currentContext: user.name,
  });
  return kc;
}
