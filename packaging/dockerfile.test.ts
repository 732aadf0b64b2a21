/**
 * The Dockerfile, checked without a Docker engine: every path it copies exists in the build
 * context or in the build output (the build stage is emulated: its COPYs, `npm ci`, `npm run
 * build`), every command its images start and every command the hooks put in pod specs resolves to
 * an executable in the image, the hooks image loads only production dependencies, and both images
 * run as non-root users.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { builtinModules } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { AGENT_COMMAND } from '../contract';
import { compareVersions } from '../agent/src/serve/config';
import { TEST_LANGUAGE_HOST_VERSION } from '../agent/testkit/language-nodejs';
import { configFromEnv } from '../hooks/src/config';
import { buildJob } from '../hooks/src/stack/job';
import type { WorkspaceSource } from '../hooks/src/stack/source';
import { desiredWorkspace, RESTRICTED_POD_SECURITY } from '../hooks/src/stack/workspace';
import type { CompositeSyncResponse, Stack } from '../schemas';
import { effectiveStage, imageLayout, numericUser, parseDockerfile, stageNamed, startCommand } from './lib/dockerfile';
import {
  emulateBuildStage,
  ImageFs,
  packageOf,
  productionPackages,
  pulumiBinaries,
  requiresOf,
  type BuildEmulation,
} from './lib/image-fs';
import { isExcluded, parseDockerignore } from './lib/dockerignore';
import { freePort, httpRequest as get } from './lib/http';
import { podSpecOf, readRepoFile, repoPath, required, ROOT } from './lib/repo';

const df = parseDockerfile(readRepoFile('Dockerfile'));
const dockerignore = readRepoFile('.dockerignore');
const pkg = JSON.parse(readRepoFile('package.json')) as {
  version: string;
  engines?: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies?: Record<string, string>;
  scripts: Record<string, string>;
};
let build: BuildEmulation;

beforeAll(async () => {
  build = await emulateBuildStage(df, dockerignore);
}, 300_000);

afterAll(() => build?.cleanup());

const BUILTINS = new Set(builtinModules);

/**
 * Every module reachable by `require` from the entry files, inside the image: relative requires
 * must resolve to files of the image, bare ones to production packages. Returns the problems.
 */
function requireGraphProblems(image: ImageFs, entries: string[]): { problems: string[]; visited: number } {
  const prod = productionPackages();
  const problems: string[] = [];
  const seen = new Set<string>();
  const queue = [...entries];
  while (queue.length > 0) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    const r = image.resolve(file);
    if (r.kind !== 'host') {
      problems.push(`${file}: ${r.kind === 'missing' ? r.why : 'not a file'}`);
      continue;
    }
    if (!file.endsWith('.js') && !fs.readFileSync(r.hostPath, 'utf8').startsWith('#!')) continue;
    for (const spec of requiresOf(fs.readFileSync(r.hostPath, 'utf8'))) {
      if (spec.startsWith('node:') || BUILTINS.has(spec)) continue;
      if (spec.startsWith('.') || spec.startsWith('/')) {
        const base = path.posix.resolve(path.posix.dirname(file), spec);
        const candidates = [base, `${base}.js`, `${base}.json`, `${base}/index.js`];
        const found = candidates.find((c) => {
          const x = image.resolve(c);
          return x.kind === 'host' && fs.statSync(x.hostPath).isFile();
        });
        if (!found)
          problems.push(
            `${file}: require("${spec}") finds nothing in the ${image.target} image (tried ${candidates.join(', ')})`,
          );
        else if (found.endsWith('.js')) queue.push(found);
        continue;
      }
      const name = packageOf(spec);
      if (!prod.has(name))
        problems.push(
          `${file}: require("${spec}") needs ${name}, which is not a production dependency (package.json "dependencies")`,
        );
    }
  }
  return { problems, visited: seen.size };
}

function listTree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isSymbolicLink()) out.push(`${p} -> ${fs.readlinkSync(p)}`);
      else if (e.isDirectory()) walk(p);
      else out.push(`${p} ${fs.statSync(p).mtimeMs}`);
    }
  };
  walk(dir);
  return out.sort();
}

describe('Dockerfile: stages and build arguments', () => {
  test('has the build, prod-deps, pulumi-release, pulumi, hooks and agent stages', () => {
    expect(df.stages.map((s) => s.name)).toEqual(['build', 'prod-deps', 'pulumi-release', 'pulumi', 'hooks', 'agent']);
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
    const sdk = pkg.dependencies['@pulumi/pulumi'] ?? '';
    expect(sdk).toMatch(exact);
    expect(compareVersions(sdk, cli)).toBeLessThanOrEqual(0);
  });

  test('the build stage installs with npm ci and builds with npm run build (tsc -p tsconfig.build.json)', () => {
    const runs = stageNamed(df, 'build').runs.map((r) => r.command);
    expect(runs).toEqual(['npm ci --no-audit --no-fund', 'npm run build']);
    expect(pkg.scripts.build).toBe('tsc -p tsconfig.build.json');
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
    const missing: string[] = [];
    for (const s of df.stages) {
      for (const c of s.copies.filter((x) => x.from === undefined)) {
        for (const src of c.sources) {
          const clean = src.replace(/\/+$/, '');
          if (!build.context.some((f) => f === clean || f.startsWith(`${clean}/`))) {
            const hint = clean === 'bin' ? ' (bin/pko-agent, the agent launcher, has not landed yet)' : '';
            missing.push(`stage ${s.name}, line ${c.line}: COPY ${src} — not in the build context${hint}`);
          }
        }
      }
    }
    expect(missing).toEqual([]);
  });
});

describe('build stage (emulated)', () => {
  test('npm run build succeeds on exactly what the build stage copies', () => {
    if (!build.buildOk) throw new Error(`npm run build failed in the emulated build stage:\n${build.buildOutput}`);
    expect(build.buildOk).toBe(true);
  });

  test('every path copied from another stage is produced by it', () => {
    const problems: string[] = [];
    for (const target of ['hooks', 'agent']) {
      const image = new ImageFs(df, target, build);
      for (const e of imageLayout(df, target).entries) {
        const r = image.resolve(e.imagePath);
        if (r.kind === 'missing') problems.push(`${target}, line ${e.line}: ${r.why}`);
      }
    }
    expect(problems).toEqual([]);
  });
});

describe('hooks image', () => {
  const hooks = stageNamed(df, 'hooks');
  const layout = imageLayout(df, 'hooks');
  const image = () => new ImageFs(df, 'hooks', build);

  test('runs as a numeric non-root user', () => {
    const user = numericUser(hooks.user);
    expect(user).toBeDefined();
    expect(user!.uid).toBeGreaterThan(0);
    expect(user!.gid).toBeGreaterThan(0);
  });

  test('starts node dist/hooks/src/main.js in /app, listening on the port it exposes', () => {
    expect(startCommand(hooks)).toEqual(['node', 'dist/hooks/src/main.js']);
    expect(layout.workingDir).toBe('/app');
    expect(hooks.expose).toEqual([String(configFromEnv({}).port)]);
    expect(image().which('node', layout.path).imagePath).toBe('/usr/local/bin/node');
    expect(image().resolve('/app/dist/hooks/src/main.js').kind).toBe('host');
  });

  test('has no package manager at run time', () => {
    for (const tool of ['npm', 'npx', 'corepack']) expect(image().which(tool, layout.path).imagePath).toBeUndefined();
  });

  test('every module the hook server loads is in the image, and only production dependencies are used', () => {
    const { problems, visited } = requireGraphProblems(image(), ['/app/dist/hooks/src/main.js']);
    expect(problems).toEqual([]);
    expect(visited).toBeGreaterThan(20);
  });

  test('its command serves the hooks, writes nothing, and shuts down cleanly on SIGTERM', async () => {
    // The image's /app: package.json and dist/ from the build, node_modules as installed.
    const app = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-hooks-app-'));
    try {
      fs.symlinkSync(path.join(build.root, 'src', 'dist'), path.join(app, 'dist'), 'dir');
      fs.copyFileSync(path.join(build.root, 'src', 'package.json'), path.join(app, 'package.json'));
      fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(app, 'node_modules'), 'dir');
      const before = [...listTree(app), ...listTree(path.join(build.root, 'src', 'dist'))];
      const port = await freePort();
      const [cmd, ...args] = startCommand(hooks);
      expect(cmd).toBe('node');
      const child = spawn(process.execPath, args, {
        cwd: app,
        env: {
          ...layout.env,
          PATH: process.env.PATH ?? '',
          HOME: '/nonexistent',
          PORT: String(port),
          HOST: '127.0.0.1',
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (c: Buffer) => (output += c.toString()));
      child.stderr.on('data', (c: Buffer) => (output += c.toString()));
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      try {
        const base = `http://127.0.0.1:${port}`;
        let health = { status: 0, text: '' };
        for (let i = 0; i < 100 && health.status !== 200; i++) {
          health = await get(`${base}/healthz`).catch(() => ({ status: 0, text: '' }));
          if (health.status !== 200) await new Promise((r) => setTimeout(r, 100));
        }
        expect({ health: health.status, output }).toEqual({ health: 200, output: '' });
        expect((await get(`${base}/readyz`)).status).toBe(200);
        const sync = await get(`${base}/stack/sync`, readRepoFile('examples/hooks/stack-sync-new.json'));
        expect(sync.status).toBe(200);
        expect((JSON.parse(sync.text) as CompositeSyncResponse).children?.length).toBeGreaterThan(0);
        const metrics = await get(`${base}/metrics`);
        expect(metrics.text).toContain('pulumi_hook_request_duration_seconds_count{hook="stack_sync"} 1');
      } finally {
        child.kill('SIGTERM');
      }
      expect(await exited).toBe(0);
      expect([...listTree(app), ...listTree(path.join(build.root, 'src', 'dist'))]).toEqual(before);
    } finally {
      fs.rmSync(app, { recursive: true, force: true });
    }
  }, 30_000);
});

describe('agent image', () => {
  const agent = stageNamed(df, 'agent');
  const layout = imageLayout(df, 'agent');
  const image = () => new ImageFs(df, 'agent', build);

  test("runs as uid/gid 1000, the ids of the workspace pods' restricted profile", () => {
    expect(numericUser(agent.user)).toEqual({
      uid: RESTRICTED_POD_SECURITY.runAsUser,
      gid: RESTRICTED_POD_SECURITY.runAsGroup,
    });
    expect(layout.env.HOME).toBe('/home/node');
    expect(image().resolve('/home/node').kind).toBe('known');
  });

  test('tini is PID 1 and forwards signals: the ENTRYPOINT, and the pko-agent launcher when a pod command replaces it', () => {
    expect(agent.entrypoint).toEqual(['/usr/bin/tini', '--']);
    expect(image().isExecutable('/usr/bin/tini')).toEqual({ ok: true, why: 'apt package tini' });
    const launcher = readRepoFile('packaging/docker/pko-agent');
    expect(launcher).toMatch(/^#!\/bin\/sh\n/);
    expect(launcher).toContain(
      'if [ "$$" = 1 ]; then\n  exec /usr/bin/tini -- /app/bin/pko-agent "$@"\nfi\nexec /app/bin/pko-agent "$@"',
    );
    for (const target of ['/bin/sh', '/usr/bin/tini', '/app/bin/pko-agent'])
      expect(image().isExecutable(target)).toMatchObject({ ok: true });
  });

  test('has git, ssh and the Pulumi CLI with its Node.js and YAML language hosts on PATH', () => {
    for (const tool of [
      'git',
      'ssh',
      'node',
      'npm',
      'pulumi',
      'pulumi-language-nodejs',
      'pulumi-language-yaml',
      'pulumi-resource-pulumi-nodejs',
    ]) {
      const found = image().which(tool, layout.path);
      expect({ tool, found: found.imagePath !== undefined }).toEqual({ tool, found: true });
    }
  });

  test('downloads the official Pulumi release for PULUMI_VERSION and verifies its checksum before use', () => {
    const pulumi = stageNamed(df, 'pulumi-release');
    const script = pulumi.runs.map((r) => r.command).join('\n');
    expect(script).toContain('https://github.com/pulumi/pulumi/releases/download/v${PULUMI_VERSION}');
    expect(script).toContain('tarball="pulumi-v${PULUMI_VERSION}-linux-${arch}.tar.gz"');
    expect(script).toContain('sums="pulumi-${PULUMI_VERSION}-checksums.txt"');
    const verify = script.indexOf('sha256sum -c');
    expect(verify).toBeGreaterThan(0);
    expect(verify).toBeLessThan(script.indexOf('tar -xzf'));
    expect(pulumiBinaries(pulumi)).toEqual([
      'pulumi',
      'pulumi-language-nodejs',
      'pulumi-language-yaml',
      'pulumi-resource-pulumi-nodejs',
      'pulumi-analyzer-policy',
    ]);
  });

  test('its default command is pko-agent serve, and pko-agent resolves to the launcher', () => {
    expect(startCommand(agent)).toEqual(['/usr/bin/tini', '--', AGENT_COMMAND, 'serve']);
    expect(image().which(AGENT_COMMAND, layout.path).imagePath).toBe('/usr/local/bin/pko-agent');
  });

  test("every command the hooks put in pod specs resolves to an executable on the image's PATH", () => {
    const config = configFromEnv({});
    const stack = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'app', namespace: 'team-a', uid: 'uid-1', generation: 1 },
      spec: { stack: 'dev' },
    } as Stack;
    const sources: WorkspaceSource[] = [
      { kind: 'git', url: 'https://example.com/repo.git', revision: 'a'.repeat(40), shallow: false, auth: [] },
      { kind: 'flux', url: 'http://source-controller/artifact.tar.gz', digest: 'sha256:00' },
      { kind: 'program', program: 'p', configMap: 'p-program', digest: 'sha256:00' },
      { kind: 'local', dir: '/src' },
      { kind: 'projectInfo', name: 'p', runtime: 'yaml' },
    ];
    const commands = new Map<string, string[]>();
    for (const source of sources) {
      const pod = podSpecOf(desiredWorkspace(stack, source, config).statefulSet.spec);
      for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
        const command = required(c.command, `${c.name} has a command`);
        commands.set(command.join(' '), command);
      }
    }
    for (const type of ['up', 'preview', 'refresh', 'destroy'] as const) {
      const job = buildJob(stack, type, 'm', { generation: 1, reconcileRequest: '', commit: '', previous: '' }, config);
      for (const c of podSpecOf(job.spec).containers) {
        const command = required(c.command, `${c.name} has a command`);
        commands.set(command.join(' '), command);
      }
    }
    expect([...commands.keys()].sort()).toEqual([
      'pko-agent fetch flux',
      'pko-agent fetch git',
      'pko-agent fetch local',
      'pko-agent fetch program',
      'pko-agent fetch project-info',
      'pko-agent serve',
      'pko-agent update',
    ]);
    for (const [line, argv] of commands) {
      const found = image().which(argv[0]!, layout.path);
      expect({ line, resolved: found.imagePath }).toEqual({ line, resolved: '/usr/local/bin/pko-agent' });
    }
  });

  test('bin/pko-agent, the agent launcher, exists in the repository and is executable', () => {
    const file = repoPath('bin', 'pko-agent');
    if (!fs.existsSync(file))
      throw new Error('bin/pko-agent does not exist: the agent (agent/**, bin/pko-agent) has not landed yet');
    expect((fs.statSync(file).mode & 0o111) !== 0).toBe(true);
    expect(image().isExecutable('/app/bin/pko-agent')).toMatchObject({ ok: true });
  });

  test('everything bin/pko-agent loads is in the image, from production dependencies only', () => {
    const file = repoPath('bin', 'pko-agent');
    if (!fs.existsSync(file))
      throw new Error('bin/pko-agent does not exist: the agent (agent/**, bin/pko-agent) has not landed yet');
    const text = fs.readFileSync(file, 'utf8');
    const shebang = /^#!(\S+)(?:\s+(\S+))?/.exec(text);
    expect(shebang).not.toBeNull();
    const interpreter = shebang![1] === '/usr/bin/env' ? shebang![2]! : shebang![1]!;
    expect(image().which(interpreter, layout.path).imagePath).toBeDefined();
    const { problems, visited } = requireGraphProblems(image(), ['/app/bin/pko-agent']);
    expect(problems).toEqual([]);
    // The launcher must reach the compiled agent, not stand alone.
    expect(visited).toBeGreaterThan(5);
  });
});
