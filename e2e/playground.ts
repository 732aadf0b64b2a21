/**
 * `npm run playground`: the e2e test bed as a local cluster to try the operator by hand. Starts
 * what every e2e file starts (harness.ts's startOperator: control plane, real node, our CRDs,
 * Metacontroller — the in-process driver, or the real binary when METACONTROLLER_BIN is set — and
 * the hooks), applies examples/stacks/program-stack.yaml in namespace `playground`, writes an admin
 * kubeconfig and prints how to use it, then stays up until Ctrl-C (SIGINT) or SIGTERM.
 *
 * Runs inside run-in-testbed.sh (root, the test bed lock, the test network), which puts the host
 * back as it found it when this ends, as after an e2e run. The API server is reachable only inside
 * the test network: kubectl runs there through nsenter (the command printed).
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { startOperator, type Operator } from './harness';
import { REPO_ROOT, requireBinaries } from './testbed/toolchain';

const NAMESPACE = 'playground';
const EXAMPLE = join('examples', 'stacks', 'program-stack.yaml');

async function main(): Promise<void> {
  const { kubectl } = requireBinaries(['kubectl']);
  const started = Date.now();
  console.log('playground: starting the control plane, the node, Metacontroller and the hooks…');
  const op = await startOperator();
  // In the run's directory, which run-in-testbed.sh removes however this ends.
  const dir = mkdtempSync(join(process.env.PKO_TESTBED_DIR ?? tmpdir(), 'playground-'));
  let stopping: Promise<void> | undefined;
  const stop = (signal: string): Promise<void> =>
    (stopping ??= (async () => {
      console.log(`playground: ${signal}: stopping…`);
      await op.stop().catch((e: unknown) => console.error(`playground: stop: ${(e as Error).message}`));
      rmSync(dir, { recursive: true, force: true });
      console.log('playground: stopped');
    })());
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
    process.once(signal, () => void stop(signal).then(() => process.exit(0)));
  try {
    await applyExample(op);
    const kubeconfig = join(dir, 'kubeconfig');
    copyFileSync(op.cp.kubeconfigPath, kubeconfig);
    const inNetwork = `nsenter --net=/run/netns/${process.env.PKO_TESTBED_NETNS ?? '<test network>'}`;
    const k = `${inNetwork} ${kubectl} --kubeconfig ${kubeconfig}`;
    console.log(
      [
        `playground: up after ${Math.round((Date.now() - started) / 1000)} s (Metacontroller: ${
          process.env.METACONTROLLER_BIN ? `the binary ${process.env.METACONTROLLER_BIN}` : 'the in-process driver'
        }); ${EXAMPLE} applied in namespace ${NAMESPACE}.`,
        `  kubeconfig (admin): ${kubeconfig}; the API server (${op.cp.server}) is reachable in the test network only:`,
        `  ${k} -n ${NAMESPACE} get stacks,workspaces,updates`,
        `  ${k} -n ${NAMESPACE} describe stack hello`,
        `  ${k} apply -f <your Stack>.yaml -n ${NAMESPACE}   (the namespace has the Stack RBAC, ServiceAccount pulumi, PVC pulumi-state)`,
        'Waiting for the example to be Ready (a first run pulls nothing: the images are in the node already)…',
      ].join('\n'),
    );
    const ready = await op.readyStack(NAMESPACE, 'hello');
    console.log(
      `playground: Stack ${NAMESPACE}/hello is Ready (outputs: ${JSON.stringify(ready.status?.outputs ?? {})}). Ctrl-C stops everything.`,
    );
  } catch (e) {
    console.error(`playground: ${(e as Error).stack ?? String(e)}`);
    await stop('error');
    process.exit(1);
  }
  // Stays up: the servers and watches keep the event loop alive until a signal stops them.
}

/** examples/stacks/program-stack.yaml (a Program and the Stack that deploys it) in the playground's namespace. */
async function applyExample(op: Operator): Promise<void> {
  await op.namespace(NAMESPACE);
  for (const doc of loadAll(readFileSync(join(REPO_ROOT, EXAMPLE), 'utf8')) as k8s.KubernetesObject[]) {
    await op.objects.create({ ...doc, metadata: { ...doc.metadata, namespace: NAMESPACE } });
  }
}

void main();
