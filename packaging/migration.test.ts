/**
 * docs/migration.md's comparison with PKO v2, tied to the code: each row of "What differs" names a
 * difference, and ROWS holds, per row, the check that finds it in the code (a manifest rule, a CRD
 * field, a reason, label or default). A row stays in "What differs" only while its check finds the
 * difference; once the code does what upstream does (a branch that serves Programs over HTTP, say)
 * the test fails until the row moves to "What carries over", with `differs: false` here.
 */
import * as fs from 'node:fs';
import { DEFAULT_WORKSPACE_IMAGE } from '../hooks/src/config';
import { Reasons } from '../hooks/src/stack/conditions';
import { OUTPUTS_TRUNCATED } from '../hooks/src/stack/outputs';
import { REFRESH_LABEL } from '../hooks/src/stack/prerequisites';
import { WorkspaceEventReasons } from '../hooks/src/workspace/events';
import { MULTIPLE_STACKS } from '../hooks/src/workspace/sync';
import { MAX_OUTPUTS_ANNOTATION_BYTES, WORKSPACE_PORT } from '../contract';
import { PULUMI_CLI_VERSIONS } from '../agent/src/serve/cli-version';
import { INSTALL_FILE } from './build-install';
import { isKind, loadObjects, readRepoFile, repoPath, type KObject } from './lib/repo';

const migration = readRepoFile('docs/migration.md');

/** The first cells of the rows of the table under `## <heading>` (up to the next heading). */
function rowsUnder(heading: string): string[] {
  const start = migration.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`docs/migration.md has no "## ${heading}"`);
  const rest = migration.slice(start + heading.length + 5);
  const end = rest.search(/\n#{2,3} /);
  return (end < 0 ? rest : rest.slice(0, end))
    .split('\n')
    .filter((l) => l.startsWith('| ') && !l.startsWith('| |'))
    .map((l) => l.split('|')[1]!.trim());
}

type Obj = { [key: string]: unknown };
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
/** `obj.a.b.c`, undefined when any step is missing. */
function at(obj: unknown, ...keys: string[]): unknown {
  return keys.reduce<unknown>((o, k) => (isObj(o) ? o[k] : undefined), obj);
}

/** A controller of manifests/metacontroller/ by its parent resource (`stacks`, `programs`, …). */
function controller(resource: string): KObject {
  const all = fs
    .readdirSync(repoPath('manifests', 'metacontroller'))
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => loadObjects(readRepoFile(`manifests/metacontroller/${f}`), f));
  const found = all.find(
    (o) =>
      at(o, 'spec', 'parentResource', 'resource') === resource ||
      (Array.isArray(at(o, 'spec', 'resources')) &&
        (at(o, 'spec', 'resources') as Obj[]).some((r) => r.resource === resource)),
  );
  if (!found) throw new Error(`no controller in manifests/metacontroller/ for ${resource}`);
  return found;
}

/** The resources a controller makes or reads besides its parent: childResources, or a DecoratorController's attachments. */
function children(resource: string): string[] {
  const c = controller(resource);
  const list = at(c, 'spec', 'childResources') ?? at(c, 'spec', 'attachments') ?? [];
  return (list as Obj[]).map((r) => String(r.resource));
}

/** The v1 (or only) version's schema of a generated CRD. */
function crdSchema(file: string): unknown {
  const [crd] = loadObjects(readRepoFile(`manifests/crds/${file}`), file);
  const versions = (at(crd, 'spec', 'versions') ?? []) as Obj[];
  const version = versions.find((v) => v.name === 'v1') ?? versions[0];
  return at(version, 'schema', 'openAPIV3Schema');
}
const stackSpec = at(crdSchema('pulumi.com_stacks.yaml'), 'properties', 'spec', 'properties');
const updateSchema = crdSchema('auto.pulumi.com_updates.yaml');

const install = loadObjects(readRepoFile(INSTALL_FILE), INSTALL_FILE);

/**
 * Whether a ServiceAccount of install.yaml may create TokenReviews: bound to `system:auth-delegator`,
 * or to a role of install.yaml with a rule for `tokenreviews`.
 */
function installGrantsTokenReviews(): boolean {
  const grants = (roleName: string): boolean =>
    roleName === 'system:auth-delegator' ||
    install.some(
      (o) =>
        (isKind(o, 'ClusterRole') || isKind(o, 'Role')) &&
        o.metadata.name === roleName &&
        ((at(o, 'rules') ?? []) as Obj[]).some((r) => ((r.resources ?? []) as string[]).includes('tokenreviews')),
    );
  return install.some(
    (o) =>
      (isKind(o, 'ClusterRoleBinding') || isKind(o, 'RoleBinding')) &&
      ((at(o, 'subjects') ?? []) as Obj[]).some((s) => s.kind === 'ServiceAccount') &&
      grants(String(at(o, 'roleRef', 'name'))),
  );
}

const dependencies = (): string[] => {
  const pkg = JSON.parse(readRepoFile('package.json')) as { dependencies?: Record<string, string> };
  return Object.keys(pkg.dependencies ?? {});
};

/**
 * Per row of the comparison (its first cell, as the document writes it): where it belongs
 * (`differs`: in "What differs"), what in the code shows the difference, and the check, true while
 * the code has it.
 */
const ROWS: Record<string, { differs: boolean; evidence: string; check: () => boolean }> = {
  Controller: {
    differs: true,
    evidence: 'the Stack controller is a Metacontroller CompositeController calling our hooks',
    check: () =>
      controller('stacks').kind === 'CompositeController' &&
      at(controller('stacks'), 'spec', 'hooks', 'sync') !== undefined,
  },
  'Workspaces and Updates': {
    differs: true,
    evidence: 'the Stack owns its Updates; Update status has outputValues; a Workspace with two stacks is Stalled',
    check: () =>
      children('stacks').includes('updates') &&
      at(updateSchema, 'properties', 'status', 'properties', 'outputValues') !== undefined &&
      MULTIPLE_STACKS === 'MultipleStacksUnsupported',
  },
  'Large outputs': {
    differs: true,
    evidence: 'status.outputs holds what fits in the 64 KiB of a Job result, with the OutputsTruncated condition',
    check: () => MAX_OUTPUTS_ANNOTATION_BYTES === 64 * 1024 && OUTPUTS_TRUNCATED === 'OutputsTruncated',
  },
  'Finalizer on Stacks': {
    differs: true,
    evidence: "the Stack controller has a finalize hook (Metacontroller's finalizer)",
    check: () => at(controller('stacks'), 'spec', 'hooks', 'finalize') !== undefined,
  },
  Events: {
    differs: true,
    evidence: "upstream's Workspace event reasons, without `Migrated`",
    check: () => !(Object.values(WorkspaceEventReasons) as string[]).includes('Migrated'),
  },
  'Workspace image': {
    differs: true,
    evidence: 'the default workspace image is pinned to a Pulumi release, not `latest`',
    check: () => /^pulumi\/pulumi:3\.\d+\.\d+-nonroot$/.test(DEFAULT_WORKSPACE_IMAGE.restricted),
  },
  'Who calls the workspace': {
    differs: true,
    evidence: 'an Update is run by a Job with a ServiceAccount and Role of its own',
    check: () => ['jobs', 'serviceaccounts', 'roles'].every((r) => children('updates').includes(r)),
  },
  'Workspace ServiceAccount without `system:auth-delegator`': {
    differs: true,
    evidence: 'the Stack reason `Unauthenticated`',
    check: () => (Reasons as Record<string, string>).Unauthenticated === 'Unauthenticated',
  },
  'Workspace protocol': {
    differs: true,
    evidence: 'the agent serves HTTP on port 50051; no gRPC library among the dependencies',
    check: () =>
      WORKSPACE_PORT === 50051 &&
      readRepoFile('agent/src/serve/server.ts').includes('http.createServer(') &&
      !dependencies().some((d) => d.includes('grpc')),
  },
  'Pulumi CLI too old': {
    differs: true,
    evidence: 'the agent requires 3.160.0 of any CLI',
    check: () => PULUMI_CLI_VERSIONS.minimum === '3.160.0',
  },
  'SSH login and host keys': {
    differs: true,
    evidence: "host keys from the hooks' SSH_KNOWN_HOSTS",
    check: () => readRepoFile('hooks/src/config.ts').includes('env.SSH_KNOWN_HOSTS'),
  },
  'Out-of-date prerequisites': {
    differs: true,
    evidence: 'a refresh ConfigMap labelled `pulumi.com/refresh-requested-for`',
    check: () => REFRESH_LABEL === 'pulumi.com/refresh-requested-for' && children('stacks').includes('configmaps'),
  },
  'More than one program source': {
    differs: true,
    evidence: 'the Stalled reason `SpecInvalid` (hooks/src/stack/validate.ts names the sources)',
    check: () =>
      Reasons.SpecInvalid === 'SpecInvalid' &&
      readRepoFile('hooks/src/stack/validate.ts').includes("'spec.programRef'"),
  },
  'Empty names and pull policies': {
    differs: true,
    evidence: 'the Stack CRD: `stack` has minLength 1, imagePullPolicy an enum',
    check: () =>
      at(stackSpec, 'stack', 'minLength') === 1 &&
      JSON.stringify(at(stackSpec, 'workspaceTemplate')).includes('"enum":["Always","IfNotPresent","Never"]'),
  },
  'Status writes': {
    differs: true,
    evidence: "Metacontroller writes the status the Stack's sync hook answers",
    check: () => controller('stacks').kind === 'CompositeController',
  },
  '`observedGeneration` after one edit': {
    differs: true,
    evidence: 'Metacontroller adds its finalizer to the metadata alone (the finalize hook), never rewriting the spec',
    check: () => at(controller('stacks'), 'spec', 'hooks', 'finalize') !== undefined,
  },
  Metrics: {
    differs: true,
    evidence: 'the gauges are derived per hook server replica (hooks/src/objects/gauges.ts)',
    check: () => fs.existsSync(repoPath('hooks', 'src', 'objects', 'gauges.ts')),
  },
  'Periodic re-check': {
    differs: true,
    evidence: 'the Stack and Program controllers resync every 600 s',
    check: () =>
      at(controller('stacks'), 'spec', 'resyncPeriodSeconds') === 600 &&
      at(controller('programs'), 'spec', 'resyncPeriodSeconds') === 600,
  },
  'Drift detection': {
    differs: true,
    evidence: 'the Stack CRD has spec.driftDetection',
    check: () => at(stackSpec, 'driftDetection') !== undefined,
  },
  // Rows that moved to "What carries over": the check is what makes them the same.
  'Who may read `/metrics`': {
    differs: false,
    evidence: 'install.yaml lets the hook server create TokenReviews (it authenticates scrapers)',
    check: () => !installGrantsTokenReviews(),
  },
  Programs: {
    differs: false,
    evidence:
      'the Program controller attaches the rendered Pulumi.yaml (a ConfigMap) instead of the hooks serving it over HTTP',
    check: () =>
      children('programs').length > 0 ||
      !readRepoFile('hooks/src/http/program-routes.ts').includes("'/programs/:namespace/:name'"),
  },
  'Operation results': {
    differs: false,
    evidence: "the Update's status has upstream's message, outputs, startTime and endTime",
    check: () =>
      !['message', 'outputs', 'startTime', 'endTime'].every(
        (f) => at(updateSchema, 'properties', 'status', 'properties', f) !== undefined,
      ),
  },
  'Completed operations': {
    differs: false,
    evidence: 'updateTemplate.spec.ttlAfterCompleted is in the Stack CRD',
    check: () => at(stackSpec, 'updateTemplate', 'properties', 'spec', 'properties', 'ttlAfterCompleted') === undefined,
  },
};

test('every row of "What differs" has a check here, and every check names a row of the document', () => {
  const documented = [...rowsUnder('What differs'), ...rowsUnder('What carries over')];
  expect(rowsUnder('What differs').filter((row) => !(row in ROWS))).toEqual([]);
  expect(Object.keys(ROWS).filter((row) => !documented.includes(row))).toEqual([]);
});

test.each(Object.entries(ROWS))('%s: in the table its check says', (row, { differs, evidence, check }) => {
  const table = rowsUnder('What differs').includes(row) ? 'What differs' : 'What carries over';
  const stillDiffers = check();
  // When this fails, the code changed: move the row (and `differs`) to the table the code now says.
  expect({ row, evidence, table }).toEqual({
    row,
    evidence,
    table: stillDiffers ? 'What differs' : 'What carries over',
  });
  expect(differs).toBe(stillDiffers);
});
