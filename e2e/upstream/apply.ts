/**
 * `kubectl apply -f <vendored upstream folder>` on the test bed, with the objects exactly as the
 * files have them (no substitution: see docs/upstream-manifests.md). What the test bed adds is
 * what a cluster has around them: a volume for each claim (there is no provisioner), and the
 * images they name, which must have stand-ins under those exact names (e2e/testbed/images).
 */
import * as k8s from '@kubernetes/client-node';
import { exists, type Operator } from '../harness';
import { ensureImages } from '../testbed/images/containerd';
import { IMAGE_REFS, type ImageName, normalizeRef } from '../testbed/images/refs';
import { imagesNamed, type Manifest, manifestsIn } from './manifests';

const FIELD_MANAGER = 'pko-e2e-upstream';

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
  const manifests = manifestsIn(dir);
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
