/**
 * docs/: the generated API reference is fresh, the links and the repository paths every document
 * names resolve, and what the documents list matches the code: the hook server's metrics, the
 * kube-state-metrics config, the condition reasons, the image versions, the README's hook table,
 * the counts of controllers and images.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as yaml from 'js-yaml';
import * as ts from 'typescript';
import { HookMetrics } from '../hooks/src/http/metrics';
import { ObjectGauges } from '../hooks/src/objects/gauges';
import type { ListWatch } from '../hooks/src/objects/reflector';
import { Reasons } from '../hooks/src/stack/conditions';
import { EventReasons } from '../hooks/src/stack/events';
import { UpdateEventReasons } from '../hooks/src/update/events';
import { WorkspaceEventReasons } from '../hooks/src/workspace/events';
import { MULTIPLE_STACKS } from '../hooks/src/workspace/sync';
import { IMAGE_NAMES, NODE_IMAGES } from '../e2e/testbed/images/refs';
import { API_REFERENCE_FILE, renderApiReference } from './build-api-reference';
import { INSTALL_FILE } from './build-install';
import { isKind, loadObjects, readRepoFile, repoPath, ROOT, type KindOf } from './lib/repo';

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

/** The repository's folders (not dependencies, builds or dot folders). */
const FOLDERS = fs
  .readdirSync(ROOT, { withFileTypes: true })
  .filter((e) => e.isDirectory() && !e.name.startsWith('.') && !['node_modules', 'dist'].includes(e.name))
  .map((e) => e.name);

/** Every document: the README, docs/, and the READMEs of the folders and of their subfolders (the chart's). */
const ALL_DOCS = [
  'README.md',
  ...fs
    .readdirSync(repoPath('docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
  ...FOLDERS.flatMap((folder) => [
    `${folder}/README.md`,
    ...fs
      .readdirSync(repoPath(folder), { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => `${folder}/${e.name}/README.md`),
  ]).filter((doc) => fs.existsSync(repoPath(doc))),
];

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

test.each(ALL_DOCS)('the links of %s resolve (files and anchors)', (doc) => {
  const file = repoPath(doc);
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
  const fromObjects = new ObjectGauges(
    { stacks: noApi, programs: noApi, workspaces: noApi, updates: noApi },
    { log: { warn: () => undefined } },
  );
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
    'pulumi_hook_request_body_bytes_in_flight',
    'pulumi_hook_request_duration_seconds',
    'pulumi_operations_queued',
    'pulumi_operations_running',
    'pulumi_workspace_wake_seconds',
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
  for (const r of [EventReasons, WorkspaceEventReasons, UpdateEventReasons].flatMap((reasons) =>
    Object.values(reasons),
  ))
    expect({ r, documented: events.includes(`| \`${r}\` |`) }).toEqual({ r, documented: true });
});

test('the Stalled reason of a Workspace with more than one stack is in the docs that say what to do', () => {
  for (const doc of ['workspaces-and-updates.md', 'migration.md', 'troubleshooting.md'])
    expect({ doc, named: readRepoFile(`docs/${doc}`).includes(`\`${MULTIPLE_STACKS}\``) }).toEqual({
      doc,
      named: true,
    });
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
    // The comparison's row (either table): its last cell is ours.
    const row = migration.split('\n').find((line) => line.startsWith(`| \`pulumi.com/${v.name}\` Stack |`));
    expect(
      row
        ?.split('|')
        .at(-2)
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

/**
 * Paths that start like ours but are not: Pulumi's GitHub organisation and Docker Hub namespace
 * (`pulumi/pulumi:3.274.1-nonroot`, `pulumi/examples`; our pulumi/ folder is the package export),
 * and the folders of the upstream operator's repository that upstream-manifests.md discusses.
 */
const NOT_OURS: { doc?: string; path: RegExp }[] = [
  { path: /^pulumi\/(pulumi|pulumi-base|pulumi-kubernetes-operator|examples|fixtures|pkg|nosuchimage)(?![\w.-])/ },
  { doc: 'docs/upstream-manifests.md', path: /^examples\/(git-source|\*)$/ },
  // Upstream's chart values, as upstream names the file (vendored under e2e/testdata/upstream/).
  { doc: 'docs/upstream-manifests.md', path: /^deploy\/helm\/pulumi-operator\/values\.yaml$/ },
];

/**
 * Whether `pattern`, a path under `dir` as documents write them, names what is there: `*` stands for
 * any characters of one name, `<a|b>` (`<a\|b>` in a table) for each of a and b, `<name>` for any
 * one name, and `<a few words>` for anything below.
 */
function resolves(dir: string, pattern: string): boolean {
  const alternatives = /<([^<>]*\|[^<>]*)>/.exec(pattern);
  if (alternatives)
    return alternatives[1]!.split(/\\?\|/).every((a) => resolves(dir, pattern.replace(alternatives[0], a)));
  let here = [dir];
  for (const segment of pattern.split('/').filter((s) => s !== '')) {
    if (/<[^<>]* [^<>]*>/.test(segment)) break;
    if (!/[*<]/.test(segment)) {
      here = here.map((d) => path.join(d, segment)).filter((p) => fs.existsSync(p));
      continue;
    }
    const name = new RegExp(
      `^${segment
        .split(/(\*|<[^<>]*>)/)
        .map((part, i) => (i % 2 ? '.+' : part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')))
        .join('')}$`,
    );
    here = here.flatMap((d) =>
      fs.statSync(d).isDirectory()
        ? fs
            .readdirSync(d)
            .filter((n) => name.test(n))
            .map((n) => path.join(d, n))
        : [],
    );
  }
  return here.length > 0;
}

test.each(ALL_DOCS)('every repository path %s names exists', (doc) => {
  // A link's text whose target is a URL names the URL's files, not ours.
  const text = readRepoFile(doc).replace(/\[[^\]]*\]\([a-z]+:[^)]*\)/g, '');
  // A path starts with one of our folders, not inside a URL or another path; `<…>` are placeholders.
  const paths = new RegExp(String.raw`(?<![\w./@:$~<-])((?:${FOLDERS.join('|')})/(?:[\w.*@+-]|<[^<>\n]*>|/)*)`, 'g');
  const missing: string[] = [];
  for (const m of text.matchAll(paths)) {
    const named = m[1]!.replace(/\.+$/, '');
    if (NOT_OURS.some((n) => (n.doc ?? doc) === doc && n.path.test(named))) continue;
    if (!resolves(ROOT, named) && !resolves(path.dirname(repoPath(doc)), named)) missing.push(named);
  }
  expect(missing).toEqual([]);
});

const controllers = fs
  .readdirSync(repoPath('manifests', 'metacontroller'))
  .filter((f) => f.endsWith('.yaml'))
  .flatMap((f) => loadObjects(readRepoFile(`manifests/metacontroller/${f}`), f))
  .filter(
    (o): o is KindOf<'CompositeController'> => isKind(o, 'CompositeController') || isKind(o, 'DecoratorController'),
  );

/** The kind a controller's hooks are called for (its parent's): `stacks` → `Stack`. */
function parentKind(controller: KindOf<'CompositeController'>): string {
  const resource = controller.spec?.parentResource?.resource ?? controller.spec?.resources?.[0]?.resource ?? '';
  return `${resource.charAt(0).toUpperCase()}${resource.slice(1).replace(/s$/, '')}`;
}

test("the README's hook table names every hook of manifests/metacontroller/: its path and its controller", () => {
  const fromManifests = controllers.flatMap((c) =>
    Object.entries(c.spec?.hooks ?? {}).map(
      ([hook, h]) => `${parentKind(c)} ${hook} | POST ${h.webhook?.path} | ${c.kind} ${c.metadata.name}`,
    ),
  );
  const rows = readRepoFile('README.md')
    .split('\n')
    .filter((line) => line.startsWith('|') && line.includes('`POST '))
    .map((line) => {
      const row = /^\| ([\w ]+) \| `POST ([^`]+)` \| (\w+) `([\w-]+)` \|$/.exec(line);
      return row ? `${row[1]} | POST ${row[2]} | ${row[3]} ${row[4]}` : `not a hook row: ${line}`;
    });
  expect(rows.sort()).toEqual(fromManifests.sort());
});

/** The numbers the documents write as words. */
const NUMBERS = 'zero one two three four five six seven eight nine ten eleven twelve'.split(' ');
const install = loadObjects(readRepoFile(INSTALL_FILE), INSTALL_FILE);
const installed = install.filter((o) => isKind(o, 'CompositeController') || isKind(o, 'DecoratorController'));
const composite = controllers.filter((c) => c.kind === 'CompositeController');
const stackController = composite.find((c) => c.spec?.parentResource?.resource === 'stacks');
/** Controllers whose parents are children of the Stack controller (the Workspace and Update controllers). */
const ofStackChildren = composite.filter((c) =>
  stackController?.spec?.childResources?.some(
    (r) => r.apiVersion === c.spec?.parentResource?.apiVersion && r.resource === c.spec?.parentResource?.resource,
  ),
);

/**
 * Each count of controllers or images a document states (the phrase's first group: the number as
 * the document writes it, a word or digits) and the code's count. A count of controllers or images
 * in a document that no entry here covers fails the test: add it, with what it counts.
 */
const COUNTS: { doc: string; phrase: RegExp; count: number }[] = [
  // manifests/install.yaml's controllers (those of manifests/metacontroller/, the kustomization's).
  { doc: 'docs/quickstart.md', phrase: /the (\w+) Metacontroller controllers/, count: installed.length },
  { doc: 'docs/install-with-pulumi.md', phrase: /the (\w+) Metacontroller controllers/, count: installed.length },
  { doc: 'docs/security.md', phrase: /our (\w+) controllers/, count: controllers.length },
  { doc: 'docs/benchmarks.md', phrase: /all (\w+) controllers/, count: controllers.length },
  // The Stack, Workspace and Update controllers (the Program one is a DecoratorController).
  { doc: 'docs/design.md', phrase: /(\w+) controllers are composed/, count: composite.length },
  { doc: 'docs/design.md', phrase: /(\w+) CompositeControllers/, count: composite.length },
  { doc: 'docs/design.md', phrase: /every answer\*\* of the (\w+) controllers/, count: controllers.length },
  { doc: 'docs/approval.md', phrase: /the (\w+) composed controllers/, count: composite.length },
  { doc: 'docs/benchmarks.md', phrase: /the (\w+) controllers' parents/, count: composite.length },
  { doc: 'docs/benchmarks.md', phrase: /(\w+) more controllers turn/, count: ofStackChildren.length },
  // The test bed's images: those a node imports (importImages()'s default) and all it builds.
  { doc: 'docs/testbed.md', phrase: /(\w+) images a node needs/, count: NODE_IMAGES.length },
  { doc: 'docs/testbed.md', phrase: /all (\w+) images\b/, count: IMAGE_NAMES.length },
];

test.each(ALL_DOCS)('the counts of controllers and images %s states are those of the code', (doc) => {
  // One space between words, as a phrase may be wrapped over lines.
  const text = readRepoFile(doc).replace(/\s+/g, ' ');
  const stated = new Set<number>();
  const wrong: string[] = [];
  for (const { phrase, count } of COUNTS.filter((c) => c.doc === doc)) {
    const found = [...text.matchAll(new RegExp(phrase.source, 'dg'))];
    if (found.length === 0) wrong.push(`${phrase}: no longer in ${doc}`);
    for (const m of found) {
      stated.add(m.indices![1]![0]);
      const n = /^\d+$/.test(m[1]!) ? Number(m[1]) : NUMBERS.indexOf(m[1]!.toLowerCase());
      if (n !== count) wrong.push(`"${m[0]}": the code has ${NUMBERS[count] ?? count}`);
    }
  }
  const counts = new RegExp(
    String.raw`\b(${NUMBERS.join('|')}|\d+)(?: [\w'-]+){0,2} (?:controllers|CompositeControllers|DecoratorControllers|images)\b`,
    'gi',
  );
  for (const m of text.matchAll(counts))
    if (!stated.has(m.index)) wrong.push(`"${m[0]}": a count that COUNTS does not cover`);
  expect(wrong).toEqual([]);
});

/** Type assertions (not `as const`), non-null assertions and double casts in the TypeScript files under `dir`. */
function castsIn(dir: string): { as: number; nonNull: number; double: number } {
  const counts = { as: 0, nonNull: 0, double: 0 };
  const files = fs
    .readdirSync(repoPath(dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts'))
    .map((f) => repoPath(dir, f));
  for (const file of files) {
    const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const walk = (node: ts.Node): void => {
      if (ts.isAsExpression(node) && node.type.getText(source) !== 'const') {
        counts.as++;
        if (ts.isAsExpression(node.expression) && node.expression.type.getText(source) === 'unknown') counts.double++;
      }
      if (ts.isNonNullExpression(node)) counts.nonNull++;
      ts.forEachChild(node, walk);
    };
    walk(source);
  }
  return counts;
}

test.each(['hooks/src', 'agent/src'])('%s has no more casts than contributing.md states', (dir) => {
  // The last column of the tree's row (Prettier pads the table's cells).
  const row = new RegExp(`^\\| ${dir} \\|.*\\| as (\\d+), ! (\\d+), as unknown as (\\d+) *\\|$`, 'm').exec(
    readRepoFile('docs/contributing.md'),
  );
  const [, as = '', nonNull = '', double = ''] = row ?? [];
  expect(row).not.toBeNull();
  const found = castsIn(dir);
  expect(found.as).toBeLessThanOrEqual(Number(as));
  expect(found.nonNull).toBeLessThanOrEqual(Number(nonNull));
  expect(found.double).toBeLessThanOrEqual(Number(double));
});
