/**
 * Self-tests of the local control plane (real etcd, kube-apiserver and kube-controller-manager
 * from e2e/toolchain/build.sh). Run: npm run test:e2e -- e2e/testbed/control-plane.e2e.ts
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import * as k8s from '@kubernetes/client-node';
import { exists } from './cluster';
import { type ControlPlane, startControlPlane } from './control-plane';
import { requireToolchain, resolveToolchain, versions } from './toolchain';
import { eventually, sleep } from './helpers';

let cp: ControlPlane;
let core: k8s.CoreV1Api;
let batch: k8s.BatchV1Api;

beforeAll(async () => {
  cp = await startControlPlane();
  console.log(`control plane ready in ${cp.startupMs} ms ${JSON.stringify(cp.timings)} (${cp.server})`);
  core = cp.kubeConfig.makeApiClient(k8s.CoreV1Api);
  batch = cp.kubeConfig.makeApiClient(k8s.BatchV1Api);
}, 120_000);

afterAll(async () => {
  await cp?.stop();
});

// ---------------------------------------------------------------------------------------------

async function apiError(p: Promise<unknown>): Promise<{ code: number; text: string }> {
  try {
    await p;
  } catch (e) {
    if (e instanceof k8s.ApiException) {
      // The body is the API server's Status, as JSON text or parsed: return its message.
      let body: unknown = e.body;
      if (typeof body === 'string') {
        try {
          body = JSON.parse(body);
        } catch {
          return { code: e.code, text: body as string };
        }
      }
      const message = (body as { message?: unknown } | null)?.message;
      return { code: e.code, text: typeof message === 'string' ? message : JSON.stringify(body) };
    }
    throw e;
  }
  throw new Error('expected the API call to fail, it succeeded');
}

/** For `eventually`: true once the object is gone (404). */
const isGone = async (read: () => Promise<unknown>): Promise<true | undefined> =>
  (await exists(read)) ? undefined : true;

let nsCounter = 0;
/** A fresh namespace, ready for pods (its default ServiceAccount exists). */
async function namespace(labels: Record<string, string> = {}): Promise<string> {
  const name = `t${process.pid}-${++nsCounter}`;
  await core.createNamespace({ body: { metadata: { name, labels } } });
  await eventually(`default ServiceAccount in ${name}`, () =>
    core.readNamespacedServiceAccount({ name: 'default', namespace: name }),
  );
  return name;
}

function pod(name: string, spec: Partial<k8s.V1PodSpec> & { containers: k8s.V1Container[] }): k8s.V1Pod {
  return { metadata: { name }, spec };
}

const restrictedContainer: k8s.V1Container = {
  name: 'main',
  image: 'busybox',
  command: ['sh', '-c', 'sleep 3600'],
  securityContext: {
    allowPrivilegeEscalation: false,
    runAsNonRoot: true,
    runAsUser: 1000,
    capabilities: { drop: ['ALL'] },
    seccompProfile: { type: 'RuntimeDefault' },
  },
};
const privilegedContainer: k8s.V1Container = {
  name: 'main',
  image: 'busybox',
  command: ['sh', '-c', 'sleep 3600'],
  securityContext: { privileged: true },
};

function jobManifest(
  name: string,
  extra: Partial<k8s.V1JobSpec> = {},
  meta: Partial<k8s.V1ObjectMeta> = {},
): k8s.V1Job {
  return {
    metadata: { name, ...meta },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'main', image: 'busybox', command: ['sh', '-c', 'exit 0'] }],
        },
      },
      ...extra,
    },
  };
}

async function jobPods(namespace: string, job: string): Promise<k8s.V1Pod[]> {
  const list = await core.listNamespacedPod({ namespace, labelSelector: `batch.kubernetes.io/job-name=${job}` });
  return list.items;
}

/** Whether a process runs (a zombie or a missing pid does not). */
function processRuns(pid: number): boolean {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  return state !== 'Z' && state !== 'X';
}

/** Pids of running processes whose command line mentions `needle` (our temp dir). */
function processesMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    let cmdline: string;
    try {
      cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmdline.includes(needle) && processRuns(pid)) out.push(pid);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

describe('kube-apiserver', () => {
  test(`reports version ${versions.kubernetes}`, async () => {
    const info = await cp.kubeConfig.makeApiClient(k8s.VersionApi).getCode();
    expect(info.gitVersion).toBe(versions.kubernetes);
    expect(info.major).toBe('1');
    expect(info.minor).toBe(versions.kubernetes.split('.')[1]);
    expect(info.buildDate).toMatch(/^\d{4}-\d\d-\d\dT/);
  });

  test('the kubeconfig file works, and authentication is enforced', async () => {
    const kc = new k8s.KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    expect(kc.getCurrentCluster()?.server).toBe(cp.server);
    const list = await kc.makeApiClient(k8s.CoreV1Api).listNamespace();
    expect(list.items.map((n) => n.metadata?.name)).toEqual(expect.arrayContaining(['default', 'kube-system']));

    // A wrong token is refused (401), an anonymous caller is forbidden to list (403).
    const get = (token?: string): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = https.request(`${cp.server}/api/v1/namespaces`, {
          ca: cp.caData,
          headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
        });
        req.on('response', (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        req.end();
      });
    expect(await get(cp.adminToken)).toBe(200);
    expect(await get('not-a-valid-token')).toBe(401);
    expect(await get(undefined)).toBe(403);
  });

  test('PodSecurity enforces a namespace labelled enforce=restricted', async () => {
    const restricted = await namespace({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/enforce-version': 'latest',
    });
    const rejected = await apiError(
      core.createNamespacedPod({
        namespace: restricted,
        body: pod('privileged', { containers: [privilegedContainer] }),
      }),
    );
    expect(rejected.code).toBe(403);
    expect(rejected.text).toContain('violates PodSecurity "restricted:latest"');
    expect(rejected.text).toContain('privileged');

    const admitted = await core.createNamespacedPod({
      namespace: restricted,
      body: pod('compliant', { containers: [restrictedContainer] }),
    });
    expect(admitted.metadata?.uid).toBeTruthy();

    // Control: the same privileged pod is admitted where no policy applies, so the rejection
    // above came from PodSecurity (and --allow-privileged is on).
    const open = await namespace();
    const privileged = await core.createNamespacedPod({
      namespace: open,
      body: pod('privileged', { containers: [privilegedContainer] }),
    });
    expect(privileged.spec?.containers[0]?.securityContext?.privileged).toBe(true);
  });

  test('TokenRequest issues audience-bound tokens that TokenReview checks', async () => {
    const ns = await namespace();
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'robot' } } });
    const audience = 'pko-e2e-audience';
    const tr = await core.createNamespacedServiceAccountToken({
      name: 'robot',
      namespace: ns,
      body: { spec: { audiences: [audience], expirationSeconds: 600 } },
    });
    const token = tr.status?.token;
    expect(token).toBeTruthy();

    const authn = cp.kubeConfig.makeApiClient(k8s.AuthenticationV1Api);
    const review = async (audiences?: string[]): Promise<k8s.V1TokenReviewStatus | undefined> =>
      (await authn.createTokenReview({ body: { spec: { token: token!, ...(audiences ? { audiences } : {}) } } }))
        .status;

    const ok = await review([audience]);
    expect(ok?.authenticated).toBe(true);
    expect(ok?.user?.username).toBe(`system:serviceaccount:${ns}:robot`);
    expect(ok?.audiences).toEqual([audience]);

    const other = await review(['some-other-audience']);
    expect(other?.authenticated).toBeFalsy();
    expect(other?.error).toMatch(/audience/i);

    // Without audiences the review checks the API server's own audiences, which this token lacks.
    expect((await review())?.authenticated).toBeFalsy();

    // A token for the default audience (the issuer) authenticates to the API server itself.
    const apiToken = (
      await core.createNamespacedServiceAccountToken({
        name: 'robot',
        namespace: ns,
        body: { spec: { audiences: [] } },
      })
    ).status?.token;
    const self = await eventually('self subject review', async () => {
      const kc = new k8s.KubeConfig();
      kc.loadFromOptions({
        clusters: [{ name: 'c', server: cp.server, caData: Buffer.from(cp.caData).toString('base64') }],
        users: [{ name: 'u', token: apiToken }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
      });
      return kc.makeApiClient(k8s.AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    });
    expect(self.status?.userInfo?.username).toBe(`system:serviceaccount:${ns}:robot`);
  });
});

describe('kube-controller-manager', () => {
  test("the job controller creates a Job's pods (they stay Pending: no kubelet)", async () => {
    const ns = await namespace();
    const job = await batch.createNamespacedJob({ namespace: ns, body: jobManifest('hello') });
    const pods = await eventually('the Job pod', async () => {
      const items = await jobPods(ns, 'hello');
      return items.length > 0 ? items : undefined;
    });
    expect(pods).toHaveLength(1);
    const p = pods[0]!;
    expect(p.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'Job',
      name: 'hello',
      uid: job.metadata?.uid,
      controller: true,
    });
    expect(p.status?.phase).toBe('Pending');
    expect(p.spec?.nodeName).toBeUndefined();
    // The ServiceAccount admission plugin mounted the API access volume.
    expect(p.spec?.volumes?.some((v) => v.name.startsWith('kube-api-access-'))).toBe(true);
    const active = await eventually('Job status.active', async () => {
      const j = await batch.readNamespacedJob({ name: 'hello', namespace: ns });
      return j.status?.active === 1 ? j : undefined;
    });
    expect(active.status?.succeeded ?? 0).toBe(0);
  });

  test("deleting a Job's owner deletes the Job and its pods (garbage collector)", async () => {
    const ns = await namespace();
    const owner = await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'owner' } } });
    await batch.createNamespacedJob({
      namespace: ns,
      body: jobManifest(
        'owned',
        {},
        { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata!.uid! }] },
      ),
    });
    await eventually('the owned Job pod', async () => ((await jobPods(ns, 'owned')).length > 0 ? true : undefined));
    await core.deleteNamespacedConfigMap({ name: 'owner', namespace: ns });
    await eventually('the owned Job to be deleted', () =>
      isGone(() => batch.readNamespacedJob({ name: 'owned', namespace: ns })),
    );
    await eventually('the owned Job pods to be deleted', async () =>
      (await jobPods(ns, 'owned')).length === 0 ? true : undefined,
    );
  });

  test('a finished Job with ttlSecondsAfterFinished is deleted (ttl-after-finished)', async () => {
    const ns = await namespace();
    // Without a kubelet the pod never runs: the deadline makes the Job finish (Failed).
    await batch.createNamespacedJob({
      namespace: ns,
      body: jobManifest('short-lived', { activeDeadlineSeconds: 1, ttlSecondsAfterFinished: 0 }),
    });
    await eventually(
      'the finished Job to be deleted',
      () => isGone(() => batch.readNamespacedJob({ name: 'short-lived', namespace: ns })),
      45_000,
    );
  });

  test('the statefulset controller creates ordinal 0 only (OrderedReady, pod not ready)', async () => {
    const ns = await namespace();
    const apps = cp.kubeConfig.makeApiClient(k8s.AppsV1Api);
    await apps.createNamespacedStatefulSet({
      namespace: ns,
      body: {
        metadata: { name: 'ws' },
        spec: {
          serviceName: 'ws',
          replicas: 2,
          selector: { matchLabels: { app: 'ws' } },
          template: { metadata: { labels: { app: 'ws' } }, spec: { containers: [restrictedContainer] } },
        },
      },
    });
    await eventually('pod ws-0', () => core.readNamespacedPod({ name: 'ws-0', namespace: ns }));
    await sleep(1000);
    expect(await isGone(() => core.readNamespacedPod({ name: 'ws-1', namespace: ns }))).toBe(true);
  });

  test('service accounts: default SA, root CA ConfigMap and legacy token Secrets', async () => {
    const ns = await namespace();
    const ca = await eventually('kube-root-ca.crt', () =>
      core.readNamespacedConfigMap({ name: 'kube-root-ca.crt', namespace: ns }),
    );
    expect(ca.data?.['ca.crt']).toBe(cp.caData);
    await core.createNamespacedSecret({
      namespace: ns,
      body: {
        metadata: { name: 'legacy-token', annotations: { 'kubernetes.io/service-account.name': 'default' } },
        type: 'kubernetes.io/service-account-token',
      },
    });
    const secret = await eventually('the token controller to fill the Secret', async () => {
      const s = await core.readNamespacedSecret({ name: 'legacy-token', namespace: ns });
      return s.data?.token ? s : undefined;
    });
    expect(Buffer.from(secret.data!.token!, 'base64').toString().split('.')).toHaveLength(3);
  });

  test('deleting a namespace finishes (namespace controller)', async () => {
    const ns = await namespace();
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'x' } } });
    await core.deleteNamespace({ name: ns });
    await eventually('the namespace to be deleted', () => isGone(() => core.readNamespace({ name: ns })), 45_000);
  });
});

describe('shutdown', () => {
  test('stop() kills every process and removes the temp dir', async () => {
    const own = await startControlPlane();
    const pids = own.processes.map((p) => p.pid);
    expect(own.processes.map((p) => p.name)).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
    expect(pids.every(processRuns)).toBe(true);
    expect(processesMentioning(own.dir).length).toBeGreaterThanOrEqual(3);
    await own.stop();
    expect(pids.filter(processRuns)).toEqual([]);
    expect(processesMentioning(own.dir)).toEqual([]);
    expect(fs.existsSync(own.dir)).toBe(false);
    await own.stop(); // idempotent
  });

  // A child Node.js process starts a control plane and then ends without calling stop().
  const childScript = `
    const ts = require('typescript');
    const fs = require('fs');
    require.extensions['.ts'] = (module, filename) => {
      const out = ts.transpileModule(fs.readFileSync(filename, 'utf8'), {
        fileName: filename,
        compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true },
      });
      module._compile(out.outputText, filename);
    };
    const [modulePath, parent, mode] = process.argv.slice(1);
    require(modulePath).startControlPlane({ dir: parent }).then((cp) => {
      process.stdout.write(JSON.stringify({ dir: cp.dir, pids: cp.processes.map((p) => p.pid) }) + '\\n');
      // mode exit: exit (without stop()) as soon as the parent writes a line; else wait for a signal.
      if (mode === 'exit') process.stdin.once('data', () => process.exit(0));
      setInterval(() => {}, 1000);
    }, (e) => { console.error(e); process.exit(2); });
  `;

  test.each(['exit', 'SIGTERM', 'SIGKILL'] as const)(
    'no process is left behind when the test process ends without stop() (%s)',
    async (mode) => {
      const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-cp-exit-'));
      try {
        const child = spawn(
          process.execPath,
          ['-e', childScript, path.join(__dirname, 'control-plane.ts'), parent, mode],
          {
            cwd: path.resolve(__dirname, '..', '..'),
            stdio: ['pipe', 'pipe', 'pipe'],
          },
        );
        let stderr = '';
        child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
        const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
        const line = await new Promise<string>((resolve, reject) => {
          const rl = readline.createInterface({ input: child.stdout });
          rl.once('line', resolve);
          child.once('exit', (code) => reject(new Error(`child exited with ${code}: ${stderr}`)));
        });
        const started = JSON.parse(line) as { dir: string; pids: number[] };
        expect(started.pids).toHaveLength(3);
        expect(started.pids.every(processRuns)).toBe(true);
        if (mode === 'exit') child.stdin.write('exit now\n');
        else child.kill(mode);
        await exited;
        // exit and SIGTERM: the hooks kill synchronously; SIGKILL: the watchdog polls every 0.5 s.
        await eventually(
          'the control plane processes to be gone',
          () => (started.pids.some(processRuns) || processesMentioning(started.dir).length > 0 ? undefined : true),
          10_000,
        );
        await eventually('the temp dir to be removed', () => (fs.existsSync(started.dir) ? undefined : true), 10_000);
      } finally {
        fs.rmSync(parent, { recursive: true, force: true });
      }
    },
    90_000,
  );

  test('the shared control plane stops cleanly', async () => {
    const pids = cp.processes.map((p) => p.pid);
    await cp.stop();
    expect(pids.filter(processRuns)).toEqual([]);
    expect(processesMentioning(cp.dir)).toEqual([]);
    expect(fs.existsSync(cp.dir)).toBe(false);
  });
});

describe('failures', () => {
  test('a start-up failure reports the failing process and the tail of its log', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-cp-fail-'));
    try {
      const err = await startControlPlane({ dir: parent, extraApiserverArgs: ['--no-such-flag=1'] }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err?.name).toBe('ControlPlaneStartError');
      expect(err?.message).toContain('kube-apiserver exited while waiting for kube-apiserver /readyz');
      expect(err?.message).toContain('unknown flag: --no-such-flag');
      expect(fs.readdirSync(parent)).toEqual([]); // nothing left behind
    } finally {
      fs.rmSync(parent, { recursive: true, force: true });
    }
  });

  test('a missing toolchain says how to build it', () => {
    const tc = resolveToolchain({ PKO_TOOLCHAIN_DIR: path.join(os.tmpdir(), 'pko-no-such-toolchain') });
    expect(() => requireToolchain(['etcd'], tc)).toThrow(/^toolchain not built: run e2e\/toolchain\/build.sh etcd/);
    expect(() => requireToolchain(['etcd', 'kubernetes'])).not.toThrow();
  });
});
