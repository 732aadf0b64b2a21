/**
 * deploy/yaml run by the Pulumi CLI (`pulumi up`, a local file backend) against the test bed's
 * cluster, as docs/install-with-pulumi.md tells users to: with `installMetacontroller: false` (the
 * test bed runs the Metacontroller driver, and Metacontroller's CRDs are the stand-ins of
 * packaging/testdata/), it creates every object of manifests/install.yaml, the token Secret, the
 * Stack's ServiceAccount and its binding, and a Stack that the hooks pick up.
 *
 * Needs the toolchain's `kubernetes-provider` component (pulumi-resource-kubernetes); fails saying
 * so when it is not built. The hook
 * server's pods of install.yaml cannot start here (config skipAwait: the node has the image under
 * the test bed's name); the in-process hooks of the harness pick the Stack up.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { defined, eventually, exists, type Operator, condition } from './harness';
import { e2eSuite } from './suite';
import { loadControllerManifests, rewriteWebhooks } from './testbed/metacontroller-harness';
import { REPO_ROOT, binDirOf, binaryPath, requireBinaries, toolchainEnv } from './testbed/toolchain';

const NS = 'install-with-pulumi';
let op: Operator;
const { recordTiming, getStack } = e2eSuite('install-with-pulumi', NS, (started) => (op = started));

/** Not a real token: the Stack's source is unreachable from the test bed, so it is never used. */
const ACCESS_TOKEN = 'pul-install-with-pulumi-e2e';

const objectsOf = (file: string): k8s.KubernetesObject[] =>
  (loadAll(fs.readFileSync(file, 'utf8')) as (k8s.KubernetesObject | null)[]).filter(
    (o): o is k8s.KubernetesObject => o !== null && o !== undefined,
  );

/** What KubernetesObjectApi.read needs of an object: apiVersion, kind, name, namespace. */
const headerOf = (o: k8s.KubernetesObject) => ({
  apiVersion: defined(o.apiVersion, 'apiVersion'),
  kind: defined(o.kind, 'kind'),
  metadata: { name: defined(o.metadata?.name, 'metadata.name'), namespace: o.metadata?.namespace },
});

describe('deploy/yaml with pulumi up', () => {
  let work: string;
  let program: string;
  let env: NodeJS.ProcessEnv;

  /** Runs the Pulumi CLI in the program's copy; its output (secrets masked by Pulumi) on failure. */
  const pulumi = async (...args: string[]): Promise<string> => {
    try {
      const { stdout } = await promisify(execFile)(binaryPath('pulumi'), [...args, '--non-interactive'], {
        cwd: program,
        env,
        maxBuffer: 64 * 1024 * 1024,
        timeout: 600_000,
      });
      return stdout;
    } catch (e) {
      const { stdout, stderr } = e as { stdout?: string; stderr?: string };
      throw new Error(`pulumi ${args[0] ?? ''} failed: ${stdout ?? ''}\n${stderr ?? ''}`, { cause: e });
    }
  };

  beforeAll(async () => {
    requireBinaries(['pulumi', 'pulumiLanguageYaml', 'pulumiResourceKubernetes']);
    const providerDir = binDirOf('kubernetes-provider');
    // A copy keeps Pulumi.<stack>.yaml out of the repository; deploy/metacontroller stays beside it.
    work = fs.mkdtempSync(path.join(os.tmpdir(), 'install-with-pulumi-'));
    for (const dir of ['yaml', 'metacontroller'])
      fs.cpSync(path.join(REPO_ROOT, 'deploy', dir), path.join(work, 'deploy', dir), { recursive: true });
    program = path.join(work, 'deploy', 'yaml');
    const tc = toolchainEnv();
    env = {
      ...process.env,
      ...tc,
      PATH: [providerDir, tc.PATH].join(path.delimiter),
      PULUMI_HOME: path.join(work, 'pulumi-home'),
      PULUMI_BACKEND_URL: `file://${path.join(work, 'state')}`,
      PULUMI_CONFIG_PASSPHRASE: 'install-with-pulumi',
      PULUMI_SKIP_UPDATE_CHECK: 'true',
      PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
      KUBECONFIG: op.cp.kubeconfigPath,
      // The test bed created the CRDs and the hooks' account of install.yaml already (with another
      // field manager, which owns .spec.versions of the CRDs): adopt them.
      PULUMI_K8S_UPSERT_EXISTING_OBJECTS: 'true',
      PULUMI_K8S_ENABLE_PATCH_FORCE: 'true',
    };
    fs.mkdirSync(path.join(work, 'state'));
    // installMetacontroller false: the cluster "has" Metacontroller, so its CRDs exist (the real
    // ones already, when the harness runs the real binary).
    for (const crd of objectsOf(path.join(REPO_ROOT, 'packaging', 'testdata', 'metacontroller-crds.yaml')))
      if (!(await exists(() => op.objects.read(headerOf(crd))))) await op.objects.create(crd);
    await eventually('the Metacontroller CRDs to be served', async () => {
      await op.custom.listClusterCustomObject({
        group: 'metacontroller.k8s.io',
        version: 'v1alpha1',
        plural: 'compositecontrollers',
      });
      return true;
    });
  }, 180_000);

  afterAll(() => {
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('creates the operator, the token Secret and a Stack that the hooks pick up', async () => {
    let started = Date.now();
    await pulumi('stack', 'init', 'e2e');
    const config: Record<string, string> = {
      installMetacontroller: 'false',
      namespace: NS,
      operatorManifest: path.join(REPO_ROOT, 'manifests', 'install.yaml'),
      // The node has the hook server's image under the test bed's name: its pods never start.
      skipAwait: 'true',
    };
    for (const [key, value] of Object.entries(config)) await pulumi('config', 'set', key, value);
    await pulumi('config', 'set', '--secret', 'pulumiAccessToken', ACCESS_TOKEN);
    await pulumi('up', '--yes', '--skip-preview');
    recordTiming('pulumi up', started);
    // install.yaml's controllers call the hooks through their Service, whose pods cannot run here:
    // put back the harness's, which call the test's hook server by URL (the real binary follows
    // its controller objects; the driver reads them once at start).
    for (const c of loadControllerManifests()) {
      const rewritten = rewriteWebhooks(c, op.hooksUrl) as k8s.KubernetesObject;
      const live = await op.objects.read(headerOf(rewritten));
      await op.objects.replace({
        ...rewritten,
        metadata: { ...rewritten.metadata, resourceVersion: live.metadata?.resourceVersion },
      });
    }

    const outputs = JSON.parse(await pulumi('stack', 'output', '--json')) as Record<string, string>;
    expect(outputs).toEqual({ stackObjectName: 'app', stackNamespace: NS });

    // Every object of the operator's manifest.
    const missing: string[] = [];
    for (const o of objectsOf(path.join(REPO_ROOT, 'manifests', 'install.yaml'))) {
      if (!(await exists(() => op.objects.read(headerOf(o)))))
        missing.push(`${o.kind}/${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`);
    }
    expect(missing).toEqual([]);

    // The Stack, its token Secret, its ServiceAccount with system:auth-delegator.
    const stack = await getStack('app');
    expect(stack.spec).toMatchObject({
      stack: 'dev',
      projectRepo: 'https://github.com/pulumi/examples',
      repoDir: 'random-yaml',
      branch: 'refs/heads/master',
      destroyOnFinalize: true,
    });
    const secretName = defined(stack.spec.envRefs?.PULUMI_ACCESS_TOKEN?.secret?.name, 'the envRef names the Secret');
    expect(stack.spec.envRefs?.PULUMI_ACCESS_TOKEN).toEqual({
      type: 'Secret',
      secret: { name: secretName, key: 'accessToken' },
    });
    const secret = await op.core.readNamespacedSecret({ namespace: NS, name: secretName });
    expect(Buffer.from(secret.data?.accessToken ?? '', 'base64').toString('utf8')).toBe(ACCESS_TOKEN);
    const account = defined(stack.spec.serviceAccountName, 'spec.serviceAccountName');
    await op.core.readNamespacedServiceAccount({ namespace: NS, name: account });
    const bindings = await op.cp.kubeConfig.makeApiClient(k8s.RbacAuthorizationV1Api).listClusterRoleBinding();
    expect(
      bindings.items.some(
        (b) =>
          b.roleRef.name === 'system:auth-delegator' &&
          (b.subjects ?? []).some((s) => s.kind === 'ServiceAccount' && s.name === account && s.namespace === NS),
      ),
    ).toBe(true);

    // Picked up: the hooks (through the Metacontroller driver) wrote its status for this generation.
    started = Date.now();
    const seen = await eventually(
      'the hooks to write the Stack status',
      async () => {
        const s = await getStack('app');
        return s.status?.observedGeneration === s.metadata.generation && condition(s, 'Ready') ? s : undefined;
      },
      120_000,
      500,
    );
    recordTiming('created to status written', started);
    // The token never shows in the Stack (status, annotations).
    expect(JSON.stringify(seen)).not.toContain(ACCESS_TOKEN);
  }, 900_000);
});
