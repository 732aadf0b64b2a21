/**
 * Issue 26, in-cluster deploys: a Program Stack whose Pulumi program creates a ConfigMap and a
 * Deployment in its own cluster with the workspace pod's ServiceAccount. The program names no
 * kubeconfig: the Kubernetes provider (installed in the pulumi/pulumi stand-in, as in a user's
 * image) falls back to the in-cluster config, the account's token and the `kubernetes` Service.
 *
 * The test applies examples/in-cluster/ as a user types `kubectl apply -f` (the documented
 * least-privilege ServiceAccount, Role and RoleBindings, docs/in-cluster-deploys.md); the one
 * change is the Deployment's image, which the test network cannot pull: the test bed's pause image
 * stands in for registry.k8s.io/pause. The state's claim gets a volume from the harness, as a
 * StorageClass's provisioner would provide one.
 */
import * as k8s from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { readRepoFile } from '../packaging/lib/repo';
import { defined, eventually, exists, type Operator } from './harness';
import { IMAGE_REFS } from './testbed/images/refs';
import { e2eSuite } from './suite';

let op: Operator;
const { recordTiming } = e2eSuite('in-cluster-deploy', undefined, (started) => (op = started));

const STACKS = 'stacks';
const APPS = 'apps';
const ACCOUNT = `system:serviceaccount:${STACKS}:app-deployer`;
const EXAMPLE_IMAGE = 'registry.k8s.io/pause:3.10';

/** The objects of examples/in-cluster/<file>, the Deployment's image swapped for the test bed's. */
function example(file: string): k8s.KubernetesObject[] {
  const text = readRepoFile(`examples/in-cluster/${file}`);
  return loadAll(text.replaceAll(EXAMPLE_IMAGE, IMAGE_REFS.pause)).filter(
    (o): o is k8s.KubernetesObject => typeof o === 'object' && o !== null,
  );
}

/** Whether the workspace's account may do `verb` on `resource`, as the API server's RBAC answers. */
async function accountMay(attrs: k8s.V1ResourceAttributes): Promise<boolean> {
  const authz = op.cp.kubeConfig.makeApiClient(k8s.AuthorizationV1Api);
  const review = await authz.createSubjectAccessReview({
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user: ACCOUNT, resourceAttributes: attrs },
    },
  });
  return review.status?.allowed === true;
}

describe('a Stack that deploys into its own cluster with its ServiceAccount', () => {
  it('applies the example: the Deployment becomes Available and the Stack Ready', async () => {
    const started = Date.now();
    // The one substitution: the image the test network cannot pull.
    expect(readRepoFile('examples/in-cluster/stack.yaml')).toContain(`image: ${EXAMPLE_IMAGE}`);
    // The test bed has no volume provisioner: a volume of the node's disk for the example's claim.
    await op.volumeForClaim(STACKS, 'pulumi-state');
    for (const file of ['namespaces.yaml', 'rbac.yaml', 'stack.yaml'])
      for (const obj of example(file)) await op.objects.create(obj);
    const stack = await op.readyStack(STACKS, 'hello-app', undefined, 480_000).catch(async (e: unknown) => {
      // What the update said: the Stack's status and the workspace's log (the Pulumi output).
      const now = await op.getStack(STACKS, 'hello-app');
      const log = await op.logs(STACKS, 'hello-app-workspace-0', 'pulumi').catch(() => '');
      console.log(`Stack status: ${JSON.stringify(now.status)}\nworkspace log (tail):\n${log.slice(-6000)}`);
      throw e;
    });
    recordTiming('apply to Ready', started);
    expect(stack.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });
    expect(stack.status?.outputs).toEqual({ deployment: 'hello', configMap: 'greeting' });

    // The provider waited for the rollout: the Deployment is Available when the update succeeds.
    const deployment = await op.apps.readNamespacedDeployment({ namespace: APPS, name: 'hello' });
    expect(deployment.status?.availableReplicas).toBe(1);
    expect(deployment.status?.conditions?.find((c) => c.type === 'Available')?.status).toBe('True');
    // Server-side apply by the provider, not by the test or the hooks.
    expect((deployment.metadata?.managedFields ?? []).map((f) => f.manager)).toContainEqual(
      expect.stringMatching(/^pulumi-kubernetes/),
    );
    const configMap = await op.core.readNamespacedConfigMap({ namespace: APPS, name: 'greeting' });
    expect(configMap.data).toEqual({ greeting: 'hello from a Stack' });
    const pods = await op.core.listNamespacedPod({ namespace: APPS, labelSelector: 'app=hello' });
    expect(pods.items.map((p) => [p.status?.phase, p.spec?.containers[0]?.image])).toEqual([
      ['Running', IMAGE_REFS.pause],
    ]);

    // The workspace ran as the example's account, which has no kubeconfig to use instead.
    const workspace = await op.core.readNamespacedPod({ namespace: STACKS, name: 'hello-app-workspace-0' });
    expect(workspace.spec?.serviceAccountName).toBe('app-deployer');
    const env = workspace.spec?.containers.find((c) => c.name === 'pulumi')?.env ?? [];
    expect(env.map((e) => e.name)).not.toContain('KUBECONFIG');
  }, 540_000);

  it("the example's account may do what the program does in its namespace, and nothing else", async () => {
    const may = (verb: string, resource: string, namespace: string, group = '') =>
      accountMay({ verb, resource, namespace, group });
    for (const verb of ['get', 'list', 'watch', 'create', 'patch', 'delete']) {
      expect(await may(verb, 'deployments', APPS, 'apps')).toBe(true);
      expect(await may(verb, 'configmaps', APPS)).toBe(true);
    }
    // Not update (server-side apply patches), not elsewhere, not other kinds.
    expect(await may('update', 'deployments', APPS, 'apps')).toBe(false);
    expect(await may('create', 'deployments', STACKS, 'apps')).toBe(false);
    expect(await may('create', 'configmaps', 'default')).toBe(false);
    expect(await may('get', 'secrets', APPS)).toBe(false);
    expect(await may('create', 'pods', APPS)).toBe(false);
    expect(await may('delete', 'replicasets', APPS, 'apps')).toBe(false);
    expect(await may('list', 'namespaces', '')).toBe(false);
  }, 60_000);

  it('deleting the Stack (destroyOnFinalize) deletes the Deployment and the ConfigMap', async () => {
    expect(await exists(() => op.apps.readNamespacedDeployment({ namespace: APPS, name: 'hello' }))).toBe(true);
    const started = Date.now();
    await op.custom.deleteNamespacedCustomObject({
      group: 'pulumi.com',
      version: 'v1',
      namespace: STACKS,
      plural: 'stacks',
      name: 'hello-app',
    });
    await eventually(
      'the Stack to be gone',
      async () => !(await exists(() => op.getStack(STACKS, 'hello-app'))),
      300_000,
      500,
    );
    recordTiming('delete with destroy', started);
    // pulumi destroy waited for both to be gone before the finalizer was removed.
    expect(await exists(() => op.apps.readNamespacedDeployment({ namespace: APPS, name: 'hello' }))).toBe(false);
    expect(await exists(() => op.core.readNamespacedConfigMap({ namespace: APPS, name: 'greeting' }))).toBe(false);
    // The garbage collector takes the Deployment's ReplicaSet and Pod.
    await eventually(
      'the Pods of the Deployment to be gone',
      async () => (await op.core.listNamespacedPod({ namespace: APPS, labelSelector: 'app=hello' })).items.length === 0,
      120_000,
      1000,
    );
    const rs = await op.apps.listNamespacedReplicaSet({ namespace: APPS });
    expect(rs.items.map((r) => defined(r.metadata?.name, 'name'))).toEqual([]);
  }, 480_000);
});
