/**
 * The subset of kustomize our kustomizations use: `resources` (files and directories holding a
 * kustomization), nothing else. With no transformers, `kustomize build` outputs exactly the
 * objects of the listed files, so manifests/install.yaml can be written from the same list without
 * kustomize (packaging/build-install.ts), and a test can hold both to the same objects.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as yaml from 'js-yaml';
import { type KObject, loadObjects, ROOT } from './repo';

export interface ManifestDocument {
  /** The file it comes from, relative to the repository root. */
  source: string;
  /** The document's text as written (comments kept), without `---` separators. */
  text: string;
  object: KObject;
}

const ALLOWED_KEYS = new Set(['apiVersion', 'kind', 'resources']);

/** Splits a multi-document YAML file into documents, keeping each one's comments. */
export function splitDocuments(text: string): string[] {
  return text
    .split(/^---[ \t]*$/m)
    .map((d) => d.replace(/^\n+/, '').replace(/\s+$/, ''))
    .filter((d) => d.split('\n').some((l) => l.trim() !== '' && !l.trim().startsWith('#')));
}

/** Every document of a kustomization, in listing order (directories expanded in place). */
export function kustomizationDocuments(dir: string): ManifestDocument[] {
  const file = path.join(dir, 'kustomization.yaml');
  const k = yaml.load(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
  const rel = path.relative(ROOT, file);
  for (const key of Object.keys(k)) {
    if (!ALLOWED_KEYS.has(key))
      throw new Error(
        `${rel}: "${key}" is not supported (only resources: build-install.ts must produce what kustomize does)`,
      );
  }
  if (k.kind !== 'Kustomization') throw new Error(`${rel}: kind must be Kustomization`);
  const out: ManifestDocument[] = [];
  for (const entry of (k.resources as string[] | undefined) ?? []) {
    const target = path.resolve(dir, entry);
    if (!fs.existsSync(target)) throw new Error(`${rel}: resource ${entry} does not exist`);
    if (fs.statSync(target).isDirectory()) {
      out.push(...kustomizationDocuments(target));
      continue;
    }
    const source = path.relative(ROOT, target);
    for (const text of splitDocuments(fs.readFileSync(target, 'utf8'))) {
      const [object] = loadObjects(text, source);
      out.push({ source, text, object: object! });
    }
  }
  return out;
}

/** kustomize's "legacy" output order: kinds that others depend on first, webhooks last. */
const ORDER_FIRST = [
  'Namespace',
  'ResourceQuota',
  'StorageClass',
  'CustomResourceDefinition',
  'ServiceAccount',
  'PodSecurityPolicy',
  'Role',
  'ClusterRole',
  'RoleBinding',
  'ClusterRoleBinding',
  'ConfigMap',
  'Secret',
  'Endpoints',
  'Service',
  'LimitRange',
  'PriorityClass',
  'PersistentVolume',
  'PersistentVolumeClaim',
  'Deployment',
  'StatefulSet',
  'CronJob',
  'PodDisruptionBudget',
];
const ORDER_LAST = ['MutatingWebhookConfiguration', 'ValidatingWebhookConfiguration'];

function rank(kind: string): number {
  const first = ORDER_FIRST.indexOf(kind);
  if (first >= 0) return first;
  const last = ORDER_LAST.indexOf(kind);
  if (last >= 0) return ORDER_FIRST.length + 1 + last;
  return ORDER_FIRST.length;
}

/** Documents in apply order (stable within a kind). */
export function applyOrder(docs: ManifestDocument[]): ManifestDocument[] {
  return docs
    .map((d, i) => ({ d, i }))
    .sort((a, b) => rank(a.d.object.kind) - rank(b.d.object.kind) || a.i - b.i)
    .map((x) => x.d);
}
