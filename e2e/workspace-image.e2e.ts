/**
 * Issue 20: the workspace runs in the user's choice of Pulumi image. The `bootstrap` init container
 * copies the self-contained agent (tini, Node.js and the bundled agent) from our agent image into
 * /share, and the `pulumi` container runs it in: the default image (the stand-in of
 * pulumi/pulumi:<version>-nonroot), the stand-in of pulumi/pulumi-base (no Node.js at all), and a
 * user's image built FROM the first with buildah (e2e/testdata/user-image). A user's init
 * container can write the project itself, and `kubectl exec` runs `pulumi` by hand in the pod.
 */
import * as k8s from '@kubernetes/client-node';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { StackSpec } from '../schemas/generated/types';
import { e2eStackSpec, type Operator } from './harness';
import { e2eSuite } from './suite';
import { ensureImages } from './testbed/images/containerd';
import { IMAGE_REFS } from './testbed/images/refs';
import { requireTestbedEnvironment } from './testbed/node/environment';
import { requireBinaries } from './testbed/toolchain';

let op: Operator;
const { recordTiming } = e2eSuite('workspace-image', undefined, (started) => (op = started));

const DEFAULT_IMAGE = 'pulumi/pulumi:3.274.1-nonroot';
const BASE_IMAGE = 'pulumi/pulumi-base:3.274.1-nonroot';

beforeAll(async () => {
  // The default image is on every test node; pulumi-base's stand-in and the user's image are not.
  await ensureImages(requireTestbedEnvironment().containerdSocket, { images: ['pulumiBase', 'userPulumi'] });
}, 120_000);

/** `kubectl exec <pod> -c pulumi -- <argv>`, as a user types it; resolves with stdout. */
async function kubectlExec(ns: string, pod: string, argv: string[]): Promise<string> {
  const { kubectl } = requireBinaries(['kubectl']);
  const { stdout } = await promisify(execFile)(
    kubectl,
    ['--kubeconfig', op.cp.kubeconfigPath, '-n', ns, 'exec', pod, '-c', 'pulumi', '--', ...argv],
    { timeout: 60_000 },
  );
  return stdout;
}

function program(ns: string, name: string, outputs: Record<string, unknown>): k8s.KubernetesObject {
  const obj = { apiVersion: 'pulumi.com/v1', kind: 'Program', metadata: { name, namespace: ns }, program: { outputs } };
  return obj;
}

interface WorkspaceChoice {
  image?: string;
  imagePullPolicy?: 'IfNotPresent';
  /** Init containers of the user's pod template (they run after bootstrap and fetch). */
  initContainers?: k8s.V1Container[];
}

/** e2eStackSpec, with the workspace image and init containers of a test merged into its template. */
function stackIn(ns: string, name: string, spec: Partial<StackSpec>, ws: WorkspaceChoice = {}): k8s.KubernetesObject {
  const base = e2eStackSpec({ stack: 'dev', destroyOnFinalize: true, ...spec });
  const template = structuredClone(base.workspaceTemplate!.spec!) as unknown as Record<string, unknown> & {
    podTemplate: { spec: Record<string, unknown> };
  };
  if (ws.image) template.image = ws.image;
  if (ws.imagePullPolicy) template.imagePullPolicy = ws.imagePullPolicy;
  if (ws.initContainers) template.podTemplate.spec.initContainers = ws.initContainers;
  const stack = {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: ns },
    spec: { ...base, workspaceTemplate: { spec: template } },
  };
  return stack;
}

async function workspacePod(ns: string, stack: string): Promise<k8s.V1Pod> {
  return op.core.readNamespacedPod({ namespace: ns, name: `${stack}-workspace-0` });
}

describe('the workspace image', () => {
  it('is pulumi/pulumi:<version>-nonroot by default: the agent runs there as uid 1000 with its HOME', async () => {
    const ns = await op.namespace('ws-default');
    const started = Date.now();
    await op.objects.create(program(ns, 'hello', { greeting: 'hello' }));
    await op.objects.create(stackIn(ns, 'hello', { programRef: { name: 'hello' } }));
    const stack = await op.readyStack(ns, 'hello');
    recordTiming('default image: apply to Ready', started);
    expect(stack.status?.outputs).toEqual({ greeting: 'hello' });

    const pod = await workspacePod(ns, 'hello');
    expect(pod.spec?.initContainers?.map((c) => c.name)).toEqual(['bootstrap', 'fetch']);
    expect(pod.spec?.initContainers?.[0]?.image).toBe(IMAGE_REFS.agent);
    const pulumi = pod.spec?.containers.find((c) => c.name === 'pulumi');
    expect(pulumi?.image).toBe(DEFAULT_IMAGE);
    expect(pulumi?.command).toEqual(['/share/tini', '--', '/share/agent/node', '/share/agent/agent.js', 'serve']);
    // The restricted profile is intact (the namespace enforces it; the pod was admitted).
    expect(pod.spec?.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: 1000 });

    const [uid, home, pulumiPath] = (
      await kubectlExec(ns, pod.metadata!.name!, ['sh', '-c', 'id -u; echo $HOME; command -v pulumi'])
    )
      .trim()
      .split('\n');
    expect({ uid, home, pulumiPath }).toEqual({ uid: '1000', home: '/home/pulumi', pulumiPath: '/pulumi/bin/pulumi' });
    // The agent ran Pulumi from the image with HOME writable: its workspace settings are there.
    expect(
      await kubectlExec(ns, pod.metadata!.name!, ['sh', '-c', 'test -w "$HOME" && ls -A "$HOME/.pulumi"']),
    ).toMatch(/workspaces/);
  });

  it('lets a user run pulumi by hand in /share/workspace with kubectl exec', async () => {
    const ns = 'ws-default';
    const out = await kubectlExec(ns, 'hello-workspace-0', ['pulumi', 'stack', 'output', 'greeting', '--stack', 'dev']);
    expect(out.trim()).toBe('hello');
    const cwd = await kubectlExec(ns, 'hello-workspace-0', ['sh', '-c', 'pwd; ls']);
    expect(cwd).toContain('/share/workspace');
    expect(cwd).toContain('Pulumi.yaml');
  });

  it('may be pulumi/pulumi-base, which has no Node.js: the injected agent brings its own', async () => {
    const ns = await op.namespace('ws-base');
    const started = Date.now();
    await op.objects.create(program(ns, 'base', { where: 'pulumi-base' }));
    await op.objects.create(stackIn(ns, 'base', { programRef: { name: 'base' } }, { image: BASE_IMAGE }));
    const stack = await op.readyStack(ns, 'base');
    recordTiming('pulumi-base: apply to Ready', started);
    expect(stack.status?.outputs).toEqual({ where: 'pulumi-base' });
    const pod = await workspacePod(ns, 'base');
    expect(pod.spec?.containers.find((c) => c.name === 'pulumi')?.image).toBe(BASE_IMAGE);
    const probe = 'command -v node || echo no-node; command -v git || echo no-git; id -u';
    expect((await kubectlExec(ns, pod.metadata!.name!, ['sh', '-c', probe])).trim().split('\n')).toEqual([
      'no-node',
      'no-git',
      '1000',
    ]);
  });

  it("may be a user's image built FROM pulumi/pulumi: the program reads the file it added", async () => {
    const ns = await op.namespace('ws-user-image');
    await op.objects.create(program(ns, 'mine', { greeting: { 'fn::readFile': '/home/pulumi/greeting.txt' } }));
    await op.objects.create(
      stackIn(
        ns,
        'mine',
        { programRef: { name: 'mine' } },
        { image: IMAGE_REFS.userPulumi, imagePullPolicy: 'IfNotPresent' },
      ),
    );
    const stack = await op.readyStack(ns, 'mine');
    expect(String(stack.status?.outputs?.greeting).trim()).toBe("hello from the user's image");
    const pod = await workspacePod(ns, 'mine');
    expect(pod.spec?.containers.find((c) => c.name === 'pulumi')?.image).toBe(IMAGE_REFS.userPulumi);
  });

  it('runs a project that a custom init container wrote into /share/workspace', async () => {
    const ns = await op.namespace('ws-init-container');
    const project = ['name: custom', 'runtime: yaml', 'outputs:', '  origin: init-container', ''].join('\\n');
    const init = {
      name: 'project',
      image: DEFAULT_IMAGE,
      command: ['sh', '-c', `mkdir -p /share/workspace && printf '${project}' > /share/workspace/Pulumi.yaml`],
      volumeMounts: [{ name: 'share', mountPath: '/share' }],
      // The namespace enforces the restricted profile, which the hooks give only their own containers
      // (as upstream, whose custom-workspace example sets the same on its init container).
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
    };
    await op.objects.create(stackIn(ns, 'custom', {}, { initContainers: [init] }));
    const stack = await op.readyStack(ns, 'custom');
    expect(stack.status?.outputs).toEqual({ origin: 'init-container' });
    expect(stack.status?.projectInfo).toEqual({ name: 'custom', runtime: 'yaml' });
    const pod = await workspacePod(ns, 'custom');
    expect(pod.spec?.initContainers?.map((c) => c.name)).toEqual(['bootstrap', 'project']);
  });
});
