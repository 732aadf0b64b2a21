/**
 * The Dockerfile, read without building it: its stages and build arguments, what its build
 * context holds (.dockerignore), the versions it pins, the checksum-verified Pulumi download and
 * the agent launcher. The built images themselves are checked by packaging/images.e2e.ts, which
 * runs them as pods on the e2e test bed's node.
 */
import * as fs from 'node:fs';
import { compareVersions } from '../agent/src/serve/config';
import { HOOKS_NODE_FLAGS, PULUMI_VERSION } from '../hooks/src/config';
import { TEST_LANGUAGE_HOST_VERSION } from '../agent/testkit/language-nodejs';
import { effectiveStage, parseDockerfile, stageNamed } from './lib/dockerfile';
import { contextFiles, isExcluded, parseDockerignore } from './lib/dockerignore';
import { readRepoFile, repoPath, ROOT } from './lib/repo';

const df = parseDockerfile(readRepoFile('Dockerfile'));
const dockerignore = readRepoFile('.dockerignore');
const pkg = JSON.parse(readRepoFile('package.json')) as {
  engines?: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies?: Record<string, string>;
  scripts: Record<string, string>;
};

describe('Dockerfile: stages and build arguments', () => {
  test('has the build, prod-deps, pulumi-release, pulumi, injected-agent, hooks and agent stages', () => {
    expect(df.stages.map((s) => s.name)).toEqual([
      'build',
      'prod-deps',
      'pulumi-release',
      'pulumi',
      'injected-agent',
      'hooks',
      'agent',
    ]);
  });

  test('the hooks image runs node with HOOKS_NODE_FLAGS, as the scale bench runs its replicas', () => {
    expect(stageNamed(df, 'hooks').cmd).toEqual(['node', ...HOOKS_NODE_FLAGS, 'dist/hooks/src/main.js']);
  });

  test('PULUMI_STAGE picks where /pulumi/bin comes from, by default the release download', () => {
    // `FROM ${PULUMI_STAGE} AS pulumi` and nothing else: with the default it is the pulumi-release
    // stage; the e2e test bed passes an image of its own Pulumi build (e2e/testbed/images/pulumi.ts).
    expect(df.globalArgs.PULUMI_STAGE).toBe('pulumi-release');
    expect(readRepoFile('Dockerfile')).toMatch(/^FROM \$\{PULUMI_STAGE\} AS pulumi$/m);
    const alias = stageNamed(df, 'pulumi');
    expect({ base: alias.base, instructions: alias.instructions.length }).toEqual({
      base: 'pulumi-release',
      instructions: 0,
    });
    expect(effectiveStage(df, 'pulumi').name).toBe('pulumi-release');
    const agentCopies = stageNamed(df, 'agent').copies.filter(
      (c) => c.from !== undefined && c.from.startsWith('pulumi'),
    );
    expect(agentCopies.map((c) => [c.from, c.sources, c.dest])).toEqual([['pulumi', ['/pulumi/bin'], '/pulumi/bin']]);
  });

  test('NODE_VERSION defaults to the Node.js major the package runs on, and every Node stage uses it', () => {
    const major = (range: string | undefined) => /(\d+)/.exec(range ?? '')?.[1];
    expect(df.globalArgs.NODE_VERSION).toBe('24');
    expect(major(pkg.engines?.node)).toBe(df.globalArgs.NODE_VERSION);
    expect(major(pkg.devDependencies?.node)).toBe(df.globalArgs.NODE_VERSION);
    for (const s of df.stages.filter((x) => x.base.startsWith('node:'))) {
      expect(s.base).toBe(`node:${df.globalArgs.NODE_VERSION}-${df.globalArgs.DEBIAN_RELEASE}-slim`);
    }
    expect(readRepoFile('Dockerfile')).toMatch(/^FROM node:\$\{NODE_VERSION\}-/m);
  });

  test("PULUMI_VERSION defaults to the e2e toolchain's CLI; @pulumi/pulumi is pinned to a release not newer than it", () => {
    // CLI and SDK are released together, but the newest CLI the Go proxy serves can be newer than
    // the newest SDK on npm (docs/testbed.md#what-this-machines-go-module-proxy-serves).
    const exact = /^\d+\.\d+\.\d+$/;
    const cli = df.globalArgs.PULUMI_VERSION ?? '';
    expect(cli).toMatch(exact);
    expect(stageNamed(df, 'pulumi-release').args.PULUMI_VERSION).toBe(cli);
    expect(/^PULUMI_VERSION=v(\S+)$/m.exec(readRepoFile('e2e/toolchain/versions.env'))?.[1]).toBe(cli);
    expect(TEST_LANGUAGE_HOST_VERSION).toBe(cli);
    // …and the default workspace image is that release's official image.
    expect(PULUMI_VERSION).toBe(cli);
    const sdk = pkg.dependencies['@pulumi/pulumi'] ?? '';
    expect(sdk).toMatch(exact);
    expect(compareVersions(sdk, cli)).toBeLessThanOrEqual(0);
  });

  test('the build stage installs with npm ci and builds with npm run build (tsc, then the bundles)', () => {
    const runs = stageNamed(df, 'build').runs.map((r) => r.command);
    expect(runs).toEqual(['npm ci --no-audit --no-fund', 'npm run build']);
    expect(pkg.scripts.build).toBe('tsc -p tsconfig.build.json && npm run build:bundles --silent');
    expect(pkg.scripts['build:bundles']).toContain('pko-agent=agent/src/main.ts');
  });

  test('the injected agent: the bundle, a stripped node finding its C++ runtime in its own lib/, static tini', () => {
    const stage = stageNamed(df, 'injected-agent');
    expect(stage.copies).toEqual([
      expect.objectContaining({
        from: 'build',
        sources: ['/src/dist/bundles/pko-agent.js'],
        dest: '/opt/pko-agent/agent/agent.js',
      }),
    ]);
    const script = stage.runs.map((r) => r.command).join('\n');
    expect(script).toContain('strip "$dir/node"');
    expect(script).toContain(`patchelf --set-rpath '$ORIGIN/lib' "$dir/node"`);
    expect(script).toContain('for lib in libstdc++.so.6 libgcc_s.so.1; do');
    expect(script).toContain('install -m 0755 /usr/bin/tini-static /opt/pko-agent/tini');
    // The build fails unless node then loads libstdc++ from lib/ and runs the bundle.
    expect(script).toContain('ldd "$dir/node" | grep -q "libstdc++.so.6 => $dir/lib/"');
    expect(script).toContain('"$dir/node" "$dir/agent.js" version');
    expect(stageNamed(df, 'agent').copies).toContainEqual(
      expect.objectContaining({ from: 'injected-agent', sources: ['/opt/pko-agent'], dest: '/opt/pko-agent' }),
    );
  });

  test('prod-deps installs production dependencies only', () => {
    expect(stageNamed(df, 'prod-deps').runs.map((r) => r.command)).toEqual([
      'npm ci --omit=dev --no-audit --no-fund && npm cache clean --force',
    ]);
  });
});

describe('build context (.dockerignore)', () => {
  const patterns = parseDockerignore(dockerignore);

  test.each([
    'node_modules/jest/package.json',
    'dist/hooks/src/main.js',
    '.git/HEAD',
    'e2e/testbed/toolchain.ts',
    'docs/design.md',
    'hooks/test/server.test.ts',
    'agent/test/helpers.ts',
    'schemas/testdata/stack-full.yaml',
    'charts/pulumi-operator/Chart.yaml',
    'README.md',
  ])('keeps %s out', (file) => {
    expect(isExcluded(patterns, file)).toBe(true);
  });

  test.each([
    'package.json',
    'package-lock.json',
    'hooks/src/main.ts',
    'schemas/stack.schema.json',
    'contract/index.ts',
    'packaging/docker/pko-agent',
    'bin/pko-agent',
  ])('sends %s', (file) => {
    expect(isExcluded(patterns, file)).toBe(false);
  });

  test('every path copied from the build context is in it', () => {
    const context = contextFiles(ROOT, dockerignore);
    const missing: string[] = [];
    for (const s of df.stages) {
      for (const c of s.copies.filter((x) => x.from === undefined)) {
        for (const src of c.sources) {
          const clean = src.replace(/\/+$/, '');
          if (!context.some((f) => f === clean || f.startsWith(`${clean}/`))) {
            missing.push(`stage ${s.name}, line ${c.line}: COPY ${src} — not in the build context`);
          }
        }
      }
    }
    expect(missing).toEqual([]);
  });
});

describe('the Pulumi release and the agent launcher', () => {
  test('downloads the official Pulumi release for PULUMI_VERSION and verifies its checksum before use', () => {
    const script = stageNamed(df, 'pulumi-release')
      .runs.map((r) => r.command)
      .join('\n');
    expect(script).toContain('https://github.com/pulumi/pulumi/releases/download/v${PULUMI_VERSION}');
    expect(script).toContain('tarball="pulumi-v${PULUMI_VERSION}-linux-${arch}.tar.gz"');
    expect(script).toContain('sums="pulumi-${PULUMI_VERSION}-checksums.txt"');
    const verify = script.indexOf('sha256sum -c');
    expect(verify).toBeGreaterThan(0);
    expect(verify).toBeLessThan(script.indexOf('tar -xzf'));
    const installed = /for f in ([^;]+); do\s+install -m 0755 "pulumi\/\$\{f\}" \/pulumi\/bin\//.exec(script);
    expect(installed?.[1]?.trim().split(/\s+/)).toEqual([
      'pulumi',
      'pulumi-language-nodejs',
      'pulumi-language-yaml',
      'pulumi-resource-pulumi-nodejs',
      'pulumi-analyzer-policy',
    ]);
  });

  test('tini forwards signals: the ENTRYPOINT, and the pko-agent launcher when a pod command replaces it', () => {
    expect(stageNamed(df, 'agent').entrypoint).toEqual(['/usr/bin/tini', '--']);
    const launcher = readRepoFile('packaging/docker/pko-agent');
    expect(launcher).toMatch(/^#!\/bin\/sh\n/);
    expect(launcher).toContain(
      'if [ "$$" = 1 ]; then\n  exec /usr/bin/tini -- /app/bin/pko-agent "$@"\nfi\nexec /app/bin/pko-agent "$@"',
    );
  });

  test('bin/pko-agent, the agent launcher, is executable', () => {
    expect(fs.statSync(repoPath('bin', 'pko-agent')).mode & 0o111).not.toBe(0);
  });
});
