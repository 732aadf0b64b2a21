/**
 * Records the benchmark's request from a real cluster, so that the sync hook is measured on what
 * Metacontroller actually sends: children as the API server stores them (uid, resourceVersion,
 * managedFields, defaulted pod templates, status written by the Job and StatefulSet controllers,
 * Metacontroller's last-applied annotation), not on objects built by the unit tests' helpers.
 *
 * It starts the e2e test bed (real etcd, kube-apiserver, kube-controller-manager, the hooks behind
 * the Metacontroller driver, or the real Metacontroller when METACONTROLLER_BIN is set, and the agent
 * with the real Pulumi CLI), applies a Stack with envRefs (a literal and Secrets), config, secretsRef
 * and a workspaceTemplate (image, resources, an extra volume), runs three updates, then reads the
 * Stack, its children and its related Program from the API server and writes the sync request
 * Metacontroller builds from them (hook version v2: objects by `<Kind>.<apiVersion>`, then by
 * `<namespace>/<name>`) to bench/requests/steady-state-sync.json. A Stack at rest costs more than
 * its own sync on every resync: its Workspace and each kept Update are parents of their own
 * controllers, so their sync requests are written next to it, read the same way (children by the
 * controller manifest's kinds and owner, related objects by the customize hook's rules):
 * steady-state-workspace-sync.json and steady-state-update-sync-<n>.json (oldest Update first).
 *
 * Run: e2e/toolchain/build.sh (once), then npm run build && npm run testbed:images &&
 *   bash e2e/testbed/node/run-in-testbed.sh node dist/bench/capture-sync-request.js (the real node, as the e2e suite)
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { load } from 'js-yaml';
import { Agent, request } from 'undici';
import * as k8s from '@kubernetes/client-node';
import { AGENT_IMAGE, startOperator, type Operator } from '../e2e/harness';
import { REPO_ROOT } from '../e2e/testbed/toolchain';
import { customizeStack } from '../hooks/src/stack/customize';
import { customizeUpdate } from '../hooks/src/update/customize';
import type { Stack, Update } from '../schemas/generated/types';
import type { RelatedResourceRule } from '../hooks/src/lib/k8s';

const REQUESTS_DIR = join(REPO_ROOT, 'bench', 'requests');
const NS = 'team-a';
const STACK = 'my-stack';

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    labels?: Record<string, string>;
    creationTimestamp?: string;
    ownerReferences?: { uid: string; controller?: boolean }[];
  };
} & Record<string, unknown>;

/** The parts of a controller manifest of manifests/metacontroller/ this script reads. */
interface ControllerManifest {
  spec: { childResources: { apiVersion: string; resource: string }[] };
}

/**
 * The API server's own JSON (no client-side model: dates and key order stay as stored), typed as
 * what the API server returns for that path.
 */
async function apiGet<T>(op: Operator, path: string): Promise<T> {
  const res = await request(`${op.cp.server}${path}`, {
    headers: { authorization: `Bearer ${op.cp.adminToken}`, accept: 'application/json' },
    dispatcher: new Agent({ connect: { ca: op.cp.caData } }),
  });
  if (res.statusCode !== 200) throw new Error(`GET ${path}: ${res.statusCode} ${await res.body.text()}`);
  return (await res.body.json()) as T;
}

const apiPath = (apiVersion: string) => (apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`);

/** Every object of a kind in the namespace; list items carry no apiVersion/kind, so they are set as client-go does. */
async function list(op: Operator, apiVersion: string, kind: string, resource: string): Promise<Obj[]> {
  const body = await apiGet<{ items: Obj[] }>(op, `${apiPath(apiVersion)}/namespaces/${NS}/${resource}`);
  return body.items.map((item) => ({ ...item, apiVersion, kind }));
}

const typeKey = (o: { apiVersion: string; kind: string }) => `${o.kind}.${o.apiVersion}`;
const objectKey = (o: Obj) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const byKey = (objects: Obj[]) => Object.fromEntries(objects.map((o) => [objectKey(o), o]));

/** Kinds of the resources the Stack controller's children and the customize hook's rules name. */
const KINDS: Record<string, string> = {
  statefulsets: 'StatefulSet',
  services: 'Service',
  jobs: 'Job',
  configmaps: 'ConfigMap',
  serviceaccounts: 'ServiceAccount',
  roles: 'Role',
  rolebindings: 'RoleBinding',
  programs: 'Program',
  workspaces: 'Workspace',
  updates: 'Update',
};

function kindOf(resource: string): string {
  const kind = KINDS[resource];
  if (!kind) throw new Error(`no kind known for resource ${resource}`);
  return kind;
}

interface SyncRequest {
  controller: ControllerManifest;
  parent: Obj;
  children: Record<string, Record<string, Obj>>;
  related: Record<string, Record<string, Obj>>;
  finalizing: false;
}

/**
 * The sync request Metacontroller sends `parent`'s controller (manifests/metacontroller/`file`):
 * every object of its child kinds that `parent` controls, and the related objects `rules` select.
 */
async function syncRequestOf(
  op: Operator,
  file: string,
  parent: Obj,
  rules: RelatedResourceRule[],
): Promise<SyncRequest> {
  const controller = load(
    readFileSync(join(REPO_ROOT, 'manifests', 'metacontroller', file), 'utf8'),
  ) as ControllerManifest;
  const children: Record<string, Record<string, Obj>> = {};
  for (const rule of controller.spec.childResources) {
    const kind = kindOf(rule.resource);
    const owned = (await list(op, rule.apiVersion, kind, rule.resource)).filter((o) =>
      (o.metadata.ownerReferences ?? []).some((r) => r.controller === true && r.uid === parent.metadata.uid),
    );
    children[typeKey({ apiVersion: rule.apiVersion, kind })] = byKey(owned);
  }
  const related: Record<string, Record<string, Obj>> = {};
  for (const rule of rules) {
    const kind = kindOf(rule.resource);
    const all = await list(op, rule.apiVersion, kind, rule.resource);
    const selected = all.filter(
      (o) =>
        (!rule.names || rule.names.includes(o.metadata.name)) &&
        Object.entries(rule.labelSelector?.matchLabels ?? {}).every(([k, v]) => o.metadata.labels?.[k] === v),
    );
    Object.assign((related[typeKey({ apiVersion: rule.apiVersion, kind })] ??= {}), byKey(selected));
  }
  return { controller, parent, children, related, finalizing: false };
}

/** Writes one recorded request to bench/requests/, with the agent image and program server the hooks answering it need. */
function write(file: string, requestBody: SyncRequest, programServer: Operator['programServer']): void {
  mkdirSync(REQUESTS_DIR, { recursive: true });
  const out = join(REQUESTS_DIR, file);
  writeFileSync(
    out,
    `${JSON.stringify(
      {
        note: 'Written by bench/capture-sync-request.ts from a real kube-apiserver; the hook server answering it needs AGENT_IMAGE and the program server below.',
        capturedWith: process.env.METACONTROLLER_BIN ? 'Metacontroller binary' : 'the test bed Metacontroller driver',
        agentImage: AGENT_IMAGE,
        programServer,
        request: requestBody,
      },
      null,
      1,
    )}\n`,
  );
  console.log(`wrote ${out}: ${Buffer.byteLength(JSON.stringify(requestBody))} bytes of request`);
}

async function main(): Promise<void> {
  const op = await startOperator();
  try {
    await op.namespace(NS);
    await op.core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: 'aws' }, stringData: { id: 'AKIAEXAMPLE', secret: 'example-secret' } },
    });
    await op.core.createNamespacedSecret({
      namespace: NS,
      body: { metadata: { name: 'db' }, stringData: { password: 'example-password' } },
    });
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: 'my-program', namespace: NS },
      program: { outputs: { url: 'https://example.test', password: { 'fn::secret': 'example' } } },
    } as k8s.KubernetesObject);
    const spec = (replicas: number) => ({
      stack: 'dev',
      programRef: { name: 'my-program' },
      serviceAccountName: 'pulumi',
      backend: 'file:///state',
      envRefs: {
        PULUMI_CONFIG_PASSPHRASE: { type: 'Literal', literal: { value: 'bench-passphrase' } },
        AWS_REGION: { type: 'Literal', literal: { value: 'us-west-2' } },
        AWS_ACCESS_KEY_ID: { type: 'Secret', secret: { name: 'aws', key: 'id' } },
        AWS_SECRET_ACCESS_KEY: { type: 'Secret', secret: { name: 'aws', key: 'secret' } },
      },
      config: {
        'aws:region': 'us-west-2',
        'app:replicas': String(replicas),
        'app:domain': 'example.test',
        'app:debug': 'false',
      },
      secretsRef: { 'app:dbPassword': { type: 'Secret', secret: { name: 'db', key: 'password' } } },
      workspaceTemplate: {
        spec: {
          image: AGENT_IMAGE,
          resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '2Gi' } },
          podTemplate: {
            spec: {
              volumes: [
                { name: 'state', persistentVolumeClaim: { claimName: 'pulumi-state' } },
                { name: 'cache', emptyDir: {} },
              ],
              containers: [
                {
                  name: 'pulumi',
                  volumeMounts: [
                    { name: 'state', mountPath: '/state' },
                    { name: 'cache', mountPath: '/cache' },
                  ],
                },
              ],
            },
          },
        },
      },
    });
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: STACK, namespace: NS },
      spec: spec(1),
    } as k8s.KubernetesObject);
    const stackPath = `/apis/pulumi.com/v1/namespaces/${NS}/stacks/${STACK}`;
    await op.readyStack(NS, STACK);
    // Three updates, as in the unit tests' steady state: each edit is a new generation and a new Job.
    for (const replicas of [2, 3]) {
      const before = (await apiGet<Stack>(op, stackPath)).status?.lastUpdate?.name;
      await op.custom.patchNamespacedCustomObject(
        {
          group: 'pulumi.com',
          version: 'v1',
          namespace: NS,
          plural: 'stacks',
          name: STACK,
          body: { spec: { config: { 'app:replicas': String(replicas) } } },
        },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
      );
      await op.readyStack(NS, STACK, (s: Stack) => s.status?.lastUpdate?.name !== before);
    }

    const parent = await apiGet<Stack & Obj>(op, stackPath);
    const stackRequest = await syncRequestOf(
      op,
      'stack-controller.yaml',
      parent,
      customizeStack(parent).relatedResources,
    );
    const updates = Object.values(stackRequest.children['Update.auto.pulumi.com/v1alpha1'] ?? {}).sort((a, b) =>
      (a.metadata.creationTimestamp ?? '').localeCompare(b.metadata.creationTimestamp ?? ''),
    );
    if (updates.length !== 3) throw new Error(`expected the three Updates kept, found ${updates.length}`);
    const workspaces = Object.values(stackRequest.children['Workspace.auto.pulumi.com/v1alpha1'] ?? {});
    if (workspaces.length !== 1) throw new Error(`expected the Stack's Workspace, found ${workspaces.length}`);
    write('steady-state-sync.json', stackRequest, op.programServer);
    write(
      'steady-state-workspace-sync.json',
      await syncRequestOf(op, 'workspace-controller.yaml', workspaces[0]!, []),
      op.programServer,
    );
    for (const [i, update] of updates.entries()) {
      const request = await syncRequestOf(
        op,
        'update-controller.yaml',
        update,
        customizeUpdate(update as Update).relatedResources,
      );
      const jobs = Object.keys(request.children['Job.batch/v1'] ?? {});
      if (jobs.length !== 1) throw new Error(`expected the Job of ${update.metadata.name}, found ${jobs.length}`);
      write(`steady-state-update-sync-${i + 1}.json`, request, op.programServer);
    }
  } finally {
    await op.stop();
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
