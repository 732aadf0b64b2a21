/**
 * docs/: the generated API reference is fresh, links between documents resolve, and what the
 * documents list matches the code: the hook server's metrics, the kube-state-metrics config, the
 * condition reasons, the image versions.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as yaml from 'js-yaml';
import { HookMetrics } from '../hooks/src/http/metrics';
import { ObjectGauges } from '../hooks/src/objects/gauges';
import type { ListWatch } from '../hooks/src/objects/reflector';
import { Reasons } from '../hooks/src/stack/conditions';
import { EventReasons } from '../hooks/src/stack/events';
import { API_REFERENCE_FILE, renderApiReference } from './build-api-reference';
import { loadObjects, readRepoFile, repoPath } from './lib/repo';

const OURS = [
  'quickstart.md',
  'migration.md',
  'gitops.md',
  'render.md',
  'workspaces-and-updates.md',
  'approval.md',
  'design.md',
  'install-with-pulumi.md',
  'api-reference.md',
  'troubleshooting.md',
  'security.md',
  'observability.md',
  'contributing.md',
];
const pkg = JSON.parse(readRepoFile('package.json')) as { version: string };

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, '')
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replace(/ /g, '-');
}

function anchorsOf(file: string): Set<string> {
  const text = fs.readFileSync(file, 'utf8').replace(/```[\s\S]*?```/g, '');
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6} (.+)$/gm)) out.add(slug(m[1]!));
  for (const m of text.matchAll(/<a id="([^"]+)"><\/a>/g)) out.add(m[1]!);
  return out;
}

test('docs/api-reference.md is up to date with schemas/ (npm run generate)', () => {
  if (renderApiReference() !== readRepoFile(API_REFERENCE_FILE))
    throw new Error(`${API_REFERENCE_FILE} is stale: run npm run generate`);
});

test.each(OURS)('the links of docs/%s resolve (files and anchors)', (doc) => {
  const file = repoPath('docs', doc);
  // Code blocks and inline code hold no links (but may hold brackets and parentheses).
  const text = fs
    .readFileSync(file, 'utf8')
    .replace(/```[\s\S]*?```/g, '')
    .replace(/`[^`\n]*`/g, 'code');
  const broken: string[] = [];
  for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
    const target = m[1]!;
    if (/^[a-z]+:/.test(target)) continue;
    const [rel, anchor] = target.split('#') as [string, string | undefined];
    const dest = rel === '' ? file : path.resolve(path.dirname(file), rel);
    if (!fs.existsSync(dest)) {
      broken.push(`${target}: no such file`);
      continue;
    }
    if (anchor !== undefined && dest.endsWith('.md') && !anchorsOf(dest).has(anchor))
      broken.push(`${target}: no such heading`);
  }
  expect(broken).toEqual([]);
});

test('observability.md describes every metric the hook server exports', async () => {
  const metrics = new HookMetrics();
  const noApi: ListWatch = { list: () => new Promise(() => undefined), watch: () => new Promise(() => undefined) };
  const fromObjects = new ObjectGauges({ stacks: noApi, programs: noApi }, { log: { warn: () => undefined } });
  const names = [
    ...(await metrics.registry.getMetricsAsJSON()).map((m) => m.name),
    ...(await fromObjects.metricNames()),
  ].filter((n) => !n.startsWith('process_') && !n.startsWith('nodejs_'));
  expect(names.sort()).toEqual([
    'programs_active',
    'pulumi_hook_cache_bytes',
    'pulumi_hook_cache_requests_total',
    'pulumi_hook_errors_total',
    'pulumi_hook_object_watch_failures_total',
    'pulumi_hook_objects_synced',
    'pulumi_hook_request_duration_seconds',
    'stacks_active',
    'stacks_drifted',
    'stacks_failing',
  ]);
  const doc = readRepoFile('docs/observability.md');
  for (const n of names) expect(doc).toContain(`| \`${n}\` |`);
});

test('observability.md lists exactly the metrics of manifests/kube-state-metrics.yaml', () => {
  const cm = loadObjects(readRepoFile('manifests/kube-state-metrics.yaml')).find(
    (o) => o.kind === 'ConfigMap',
  ) as unknown as { data: Record<string, string> };
  const config = yaml.load(cm.data['stacks.yaml']!) as {
    spec: { resources: { metricNamePrefix: string; metrics: { name: string }[] }[] };
  };
  const configured = config.spec.resources
    .flatMap((r) => r.metrics.map((m) => `${r.metricNamePrefix}_${m.name}`))
    .sort();
  const doc = readRepoFile('docs/observability.md');
  const documented = [...doc.matchAll(/`(pulumi_(?:stack|program)_[a-z_]+)`/g)].map((m) => m[1]!);
  expect([...new Set(documented)].sort()).toEqual(configured);
});

test('troubleshooting.md explains every Reconciling and Stalled reason', () => {
  const doc = readRepoFile('docs/troubleshooting.md');
  const reasons = Object.values(Reasons).filter(
    (r) => !['ProcessingCompleted', 'NotReadyInProgress', 'NotReadyStalled'].includes(r),
  );
  for (const r of reasons) expect({ r, documented: doc.includes(`| \`${r}\` |`) }).toEqual({ r, documented: true });
});

test('troubleshooting.md lists every event reason the hooks write', () => {
  const doc = readRepoFile('docs/troubleshooting.md');
  const events = doc.slice(doc.indexOf('## Events'), doc.indexOf('## Where things run'));
  for (const r of Object.values(EventReasons))
    expect({ r, documented: events.includes(`| \`${r}\` |`) }).toEqual({ r, documented: true });
});

test('image tags in the docs are the package version', () => {
  for (const doc of OURS) {
    for (const m of readRepoFile(`docs/${doc}`).matchAll(/ghcr\.io\/pulumi-mc-operator\/(?:hooks|agent):(v[\w.-]+)/g))
      expect({ doc, tag: m[1] }).toEqual({ doc, tag: `v${pkg.version}` });
  }
});

test('migration.md says which pulumi.com Stack versions the CRD serves', () => {
  const crd = yaml.load(readRepoFile('manifests/crds/pulumi.com_stacks.yaml')) as {
    spec: { versions: { name: string; served: boolean }[] };
  };
  const migration = readRepoFile('docs/migration.md');
  const storedVersions = migration.slice(migration.indexOf('### 3. Check the Stack CRD'), migration.indexOf('### 4.'));
  for (const v of crd.spec.versions.filter((version) => version.name !== 'v1')) {
    // The comparison table's row: upstream's answer, then ours.
    const row = migration.split('\n').find((line) => line.startsWith(`| \`pulumi.com/${v.name}\` Stack |`));
    expect(
      row
        ?.split('|')[3]
        ?.trim()
        .startsWith(v.served ? 'served' : 'not served'),
    ).toBe(true);
    expect(storedVersions.includes(`\`${v.name}\``)).toBe(v.served);
  }
  // And the other way: every version the guide's table speaks of is one the CRD has.
  const rows = [...migration.matchAll(/^\| `pulumi\.com\/(\w+)` Stack \|/gm)].map((m) => m[1]);
  expect(rows.length).toBeGreaterThan(0);
  for (const name of rows)
    expect({ name, inCrd: crd.spec.versions.some((v) => v.name === name) }).toEqual({ name, inCrd: true });
});
