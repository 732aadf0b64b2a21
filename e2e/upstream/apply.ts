/**
 * `kubectl apply -f <vendored upstream folder>` on the test bed, with the objects as the files have
 * them but for one substitution (docs/upstream-manifests.md): an image this machine's Go module
 * proxy cannot build (IMAGE_SUBSTITUTES). What the test bed adds is what a cluster has around
 * them: a volume for each claim (there is no provisioner), and the images they name, which must
 * have stand-ins under those exact names (e2e/testbed/images).
 */
import * as k8s from '@kubernetes/client-node';
import { exists, type Operator } from '../harness';
import { ensureImages } from '../testbed/images/containerd';
import { IMAGE_REFS, type ImageName, normalizeRef } from '../testbed/images/refs';
import { imagesNamed, type Manifest, manifestsIn } from './manifests';

const FIELD_MANAGER = 'pko-e2e-upstream';

/**
 * Images named by upstream's manifests that the test bed cannot stand in for, and the nearest it
 * can: the Go module proxy here refuses github.com/pulumi/pulumi/pkg/v3@v3.202.0 (403), so
 * 3.202.0-nonroot becomes 3.203.0-nonroot, the oldest release served that has structured config
 * (docs/testbed.md, "older CLIs"). Only Stacks' workspace images are rewritten.
 */
export const IMAGE_SUBSTITUTES: Readonly<Record<string, string>> = {
  'pulumi/pulumi:3.202.0-nonroot': 'pulumi/pulumi:3.203.0-nonroot',
};

function substituteImages(m: Manifest): Manifest {
  const ws = (m as { spec?: { workspaceTemplate?: { spec?: { image?: string } } } }).spec?.workspaceTemplate?.spec;
  if (m.kind !== 'Stack' || !ws?.image || !(ws.image in IMAGE_SUBSTITUTES)) return m;
  const copy = structuredClone(m) as Manifest & { spec: { workspaceTemplate: { spec: { image: string } } } };
  copy.spec.workspaceTemplate.spec.image = IMAGE_SUBSTITUTES[ws.image]!;
  return copy;
}

/** The test bed's image for each reference, or an error naming those without a stand-in. */
function standIns(refs: string[]): ImageName[] {
  const byRef = new Map(Object.entries(IMAGE_REFS).map(([name, ref]) => [ref, name as ImageName]));
  const missing = refs.filter((r) => !byRef.has(normalizeRef(r)));
  if (missing.length > 0)
    throw new Error(
      `no stand-in image in the test bed for ${missing.map((r) => `${r} (${normalizeRef(r)})`).join(', ')}: ` +
        'add one to e2e/testbed/images (refs.ts)',
    );
  return refs.map((r) => byRef.get(normalizeRef(r))!);
}

async function applyOne(op: Operator, m: Manifest): Promise<void> {
  // Server-side apply: creates what is missing and updates what exists, as `kubectl apply` does.
  await op.objects.patch(m, undefined, undefined, FIELD_MANAGER, true, k8s.PatchStrategy.ServerSideApply);
}

/**
 * Applies the vendored folder `dir` (upstream's path, e.g. `operator/e2e/testdata/targets`) and
 * returns its objects. A claim gets its volume before it is applied; a claim that already exists
 * (a second step of a scenario) keeps the one it has.
 */
export async function applyUpstream(op: Operator, dir: string): Promise<Manifest[]> {
  const manifests = manifestsIn(dir).map(substituteImages);
  await ensureImages(op.node.env.containerdSocket, { images: standIns(imagesNamed(manifests)) });
  for (const m of manifests) {
    if (m.kind === 'PersistentVolumeClaim' && m.apiVersion === 'v1') {
      const namespace = m.metadata.namespace ?? 'default';
      const name = m.metadata.name;
      if (!(await exists(() => op.core.readNamespacedPersistentVolumeClaim({ namespace, name }))))
        await op.volumeForClaim(namespace, name);
    }
    await applyOne(op, m);
  }
  return manifests;
}
