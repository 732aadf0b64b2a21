/**
 * e2e/toolchain/build.sh and e2e/testbed/toolchain.ts describe the same toolchain: the same
 * components in the same order, the same bin dirs, the same environment for child processes. Runs
 * build.sh's `--list` and `--print-env` against an empty cache dir: nothing is built.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PULUMI_CLI_VERSIONS } from '../agent/src/serve/cli-version';
import { compareVersions } from '../agent/src/serve/config';
import { olderClis } from '../e2e/testbed/older-clis';
import {
  binaryPath,
  binDirOf,
  COMPONENTS,
  oldPulumiComponent,
  REPO_ROOT,
  readVersions,
  resolveToolchain,
  toolchainEnv,
  type ToolchainBinaries,
} from '../e2e/testbed/toolchain';

const BUILD_SH = path.join(REPO_ROOT, 'e2e', 'toolchain', 'build.sh');

describe('e2e toolchain: build.sh and toolchain.ts agree', () => {
  let dir: string;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-toolchain-test-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const buildSh = (...args: string[]): { stdout: string; stderr: string } => {
    const r = spawnSync('bash', [BUILD_SH, ...args], {
      encoding: 'utf8',
      env: { ...process.env, PKO_TOOLCHAIN_DIR: dir },
    });
    expect(r.status).toBe(0);
    return { stdout: r.stdout, stderr: r.stderr };
  };

  test('--list names the components of COMPONENTS, in order, with the bin dirs toolchain.ts resolves', () => {
    const tc = resolveToolchain({ PKO_TOOLCHAIN_DIR: dir });
    const rows = buildSh('--list')
      .stdout.trim()
      .split('\n')
      .map((line) => line.split(/\s+/));
    expect(rows.map((r) => r[0])).toEqual([...COMPONENTS]);
    for (const [c, state, bin] of rows) {
      expect(state).toBe('missing');
      expect(bin).toBe(binDirOf(c as (typeof COMPONENTS)[number], tc));
    }
  });

  test('--print-env exports what toolchainEnv() sets', () => {
    const tc = resolveToolchain({ PKO_TOOLCHAIN_DIR: dir });
    const { stdout, stderr } = buildSh('--print-env');
    const exported: Record<string, string> = {};
    for (const line of stdout.trim().split('\n')) {
      const m = /^export ([A-Z0-9_]+)=(.*)$/.exec(line);
      expect(m).not.toBeNull();
      exported[m![1]!] = m![2]!;
    }
    // PATH is printed as `<dirs>"${PATH:+:$PATH}"`: compare the dirs without the caller's PATH.
    expect(exported.PATH).toBe(`${toolchainEnv(tc, '').PATH}"\${PATH:+:$PATH}"`);
    const expected = toolchainEnv(tc, '');
    delete exported.PATH;
    delete expected.PATH;
    expect(exported).toEqual(expected);
    for (const c of COMPONENTS) expect(stderr).toContain(`${c} is not built yet`);
  });

  test("the older pulumis are exported, each its own component, but not on PATH, where they would hide the toolchain's pulumi", () => {
    const tc = resolveToolchain({ PKO_TOOLCHAIN_DIR: dir });
    const env = toolchainEnv(tc, '');
    const onPath = env.PATH!.split(path.delimiter);
    expect(tc.versions.oldPulumi.length).toBeGreaterThan(1);
    for (const v of tc.versions.oldPulumi) {
      const c = oldPulumiComponent(v);
      expect(COMPONENTS).toContain(c);
      expect(binDirOf(c, tc)).toBe(path.join(dir, `oldpulumi-${v}`, 'bin'));
      expect(env[`PKO_TOOLCHAIN_OLDPULUMI_${v.toUpperCase().replace(/\./g, '_')}_BIN`]).toBe(binDirOf(c, tc));
      expect(onPath).not.toContain(binDirOf(c, tc));
    }
    expect(onPath[0]).toBe(tc.binDirs.pulumi);
  });

  test('--list names every older CLI; a version OLD_PULUMI_VERSIONS does not list is refused', () => {
    const tc = resolveToolchain({ PKO_TOOLCHAIN_DIR: dir });
    const listed = buildSh('--list').stdout;
    for (const v of tc.versions.oldPulumi) expect(listed).toContain(`oldpulumi-${v} `);
    const r = spawnSync('bash', [BUILD_SH, 'oldpulumi-v0.0.1'], {
      encoding: 'utf8',
      env: { ...process.env, PKO_TOOLCHAIN_DIR: dir },
    });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("unknown component 'oldpulumi-v0.0.1'");
  });

  test('the older CLIs cover both sides of the structured-config floor', () => {
    const v = readVersions();
    const roles = olderClis(v.oldPulumi);
    expect(v.oldPulumi).toEqual(expect.arrayContaining([roles.tooOld, roles.structured]));
    expect(compareVersions(roles.tooOld, PULUMI_CLI_VERSIONS.structuredConfig)).toBeLessThan(0);
    expect(compareVersions(roles.structured, PULUMI_CLI_VERSIONS.structuredConfig)).toBeGreaterThanOrEqual(0);
    expect(() => olderClis(['v3.197.0'])).toThrow(/OLD_PULUMI_VERSIONS/);
  });

  test("the kubernetes component's binaries are the commands build.sh builds", () => {
    const tc = resolveToolchain({ PKO_TOOLCHAIN_DIR: dir });
    const m = /^KUBERNETES_BINARIES="([^"]+)"$/m.exec(fs.readFileSync(BUILD_SH, 'utf8'));
    const fromToolchainTs = (Object.keys(tc.binaries) as (keyof ToolchainBinaries)[])
      .filter((b) => tc.componentOf[b] === 'kubernetes')
      .map((b) => path.basename(binaryPath(b, tc)));
    expect(m?.[1]?.split(' ').sort()).toEqual(fromToolchainTs.sort());
  });

  test("every binary lies in its component's bin dir", () => {
    const tc = resolveToolchain({ PKO_TOOLCHAIN_DIR: dir });
    for (const [b, file] of Object.entries(tc.binaries) as [keyof ToolchainBinaries, string][]) {
      expect(path.dirname(file)).toBe(binDirOf(tc.componentOf[b]!, tc));
    }
  });

  test('the Kubernetes provider is named by its release and built from the pseudo-version of its source commit', () => {
    const tc = resolveToolchain({ PKO_TOOLCHAIN_DIR: dir });
    // provider/v4 has no tags of its own: a release's commit is reachable only as a pseudo-version.
    expect(tc.versions.pulumiKubernetes).toMatch(/^v4\.\d+\.\d+$/);
    expect(tc.versions.pulumiKubernetesModule).toMatch(/^v4\.0\.0-\d{14}-[0-9a-f]{12}$/);
    expect(binaryPath('pulumiResourceKubernetes', tc)).toBe(
      path.join(dir, `pulumi-kubernetes-${tc.versions.pulumiKubernetes}`, 'bin', 'pulumi-resource-kubernetes'),
    );
    expect(toolchainEnv(tc, '').PKO_TOOLCHAIN_KUBERNETES_PROVIDER_BIN).toBe(binDirOf('kubernetes-provider', tc));
  });

  test("crictl has kubelet's minor version (cri-tools follows Kubernetes' minors)", () => {
    const v = readVersions();
    const minor = (s: string): string => s.split('.').slice(0, 2).join('.');
    expect(minor(v.crictl)).toBe(minor(v.kubernetes));
  });
});

describe('e2e phases: .ci/run builds the older CLIs beside the suite and runs the files that need them last', () => {
  const listTests = (phase: string | undefined): string[] => {
    const env: NodeJS.ProcessEnv = { ...process.env };
    if (phase === undefined) delete env.PKO_E2E_PHASE;
    else env.PKO_E2E_PHASE = phase;
    const jest = path.join(REPO_ROOT, 'node_modules', 'jest', 'bin', 'jest.js');
    const r = spawnSync(process.execPath, [jest, '--config', 'e2e/jest.config.js', '--listTests'], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env,
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    return r.stdout
      .trim()
      .split('\n')
      .map((f) => path.relative(REPO_ROOT, f))
      .sort();
  };

  test('the late phase holds the files that use the older CLIs, Flux and its stores, the early one every other file', () => {
    const all = listTests(undefined);
    const early = listTests('early');
    const late = listTests('late');
    expect(late).toEqual(
      expect.arrayContaining([
        'agent/test/pulumi-version.e2e.ts',
        'e2e/flux-oci-bucket.e2e.ts',
        'e2e/pulumi-version.e2e.ts',
        'e2e/testbed/images.e2e.ts',
      ]),
    );
    // Flux's controllers: testbed/<name>-controller.ts for the component <name>-controller; the
    // stores of OCIRepository and Bucket: testbed/flux-stores.ts.
    for (const f of late)
      expect(fs.readFileSync(path.join(REPO_ROOT, f), 'utf8')).toMatch(
        /\/(older-clis|flux-stores|[\w-]+-controller)';/,
      );
    expect(early).toEqual(all.filter((f) => !late.includes(f)));
    expect(early).toContain('e2e/program-stack.e2e.ts');
  }, 60_000);

  test('.ci/run builds in the background the components that only late files use, and no other', () => {
    const run = fs.readFileSync(path.join(REPO_ROOT, '.ci', 'run'), 'utf8');
    const late = new RegExp(/^LATE_COMPONENT='(.+)'$/m.exec(run)?.[1] ?? 'no LATE_COMPONENT in .ci/run');
    expect(COMPONENTS.filter((c) => late.test(c))).toEqual([
      'source-controller',
      'kustomize-controller',
      'distribution',
      'gofakes3',
      ...readVersions().oldPulumi.map(oldPulumiComponent),
    ]);
  });

  test('an unknown phase is refused', () => {
    const bad = spawnSync(
      process.execPath,
      [
        '-e',
        `process.env.PKO_E2E_PHASE = 'middle'; require(${JSON.stringify(path.join(REPO_ROOT, 'e2e', 'jest.config.js'))})`,
      ],
      { encoding: 'utf8' },
    );
    expect(bad.status).not.toBe(0);
    expect(bad.stderr).toContain("PKO_E2E_PHASE is 'middle', expected early or late");
  });
});
