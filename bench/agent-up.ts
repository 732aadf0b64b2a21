/**
 * Bench: an `up` through the workspace server (`pko-agent serve`, HTTP API) versus a bare
 * `pulumi up` of the same program on the same machine, both warm; and cold versus warm for the
 * server (process start → Ready, first operation; Node.js: dependency install included).
 *
 *   npm run build && node dist/bench/agent-up.js [--runs N]
 *
 * BENCH_PULUMI_ENV='K=V …' adds Pulumi settings to both sides (e.g. PULUMI_DIY_BACKEND_ZSTD=true:
 * zstd state, which the server reads through `pulumi stack export` rather than the state file).
 *
 * Needs the e2e toolchain's pulumi and pulumi-language-yaml (e2e/toolchain/build.sh pulumi); the
 * Node.js program also pulumi-language-nodejs (skipped, and said so, where it is not built). The
 * resources come from the test provider plugin (agent/testkit/provider.ts). File backend,
 * passphrase, no network.
 * Prints a JSON summary and a Markdown table (docs/agent.md, "Speed").
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { request } from 'undici';
import { installTestProvider } from '../agent/testkit/provider';

const REPO = path.resolve(__dirname, '..', '..');

/**
 * The toolchain's environment as `e2e/toolchain/build.sh --print-env` prints it (`export K=V`
 * lines): PATH with the toolchain first, PKO_TOOLCHAIN_<COMPONENT>_BIN.
 */
function toolchainEnv(): Record<string, string> {
  const r = spawnSync('bash', [path.join(REPO, 'e2e', 'toolchain', 'build.sh'), '--print-env'], {
    encoding: 'utf8',
    env: process.env,
  });
  const env: Record<string, string> = {};
  for (const line of r.stdout.split('\n')) {
    const m = /^export ([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (!m) continue;
    // PATH ends with "${PATH:+:$PATH}": expand it like the shell.
    env[m[1]!] = m[2]!
      .split('"${PATH:+:$PATH}"')
      .join(process.env.PATH ? `:${process.env.PATH}` : '')
      .replace(/^"|"$/g, '');
  }
  if (!env.PKO_TOOLCHAIN_PULUMI_BIN) throw new Error(`cannot read the toolchain environment: ${r.stderr}`);
  return env;
}

const TOOLCHAIN = toolchainEnv();
const BINARIES = {
  pulumi: 'PKO_TOOLCHAIN_PULUMI_BIN',
  'pulumi-language-yaml': 'PKO_TOOLCHAIN_PULUMI_BIN',
  'pulumi-language-nodejs': 'PKO_TOOLCHAIN_PULUMI_BIN',
  'pulumi-resource-pulumi-nodejs': 'PKO_TOOLCHAIN_PULUMI_BIN',
} as const;
type Binary = keyof typeof BINARIES;

function missing(needs: Binary[]): string[] {
  return needs.filter((b) => {
    try {
      fs.accessSync(path.join(TOOLCHAIN[BINARIES[b]] ?? '', b), fs.constants.X_OK);
      return false;
    } catch {
      return true;
    }
  });
}
const AGENT = path.join(REPO, 'bin', 'pko-agent');

interface Program {
  name: string;
  files: Record<string, string>;
  env?: Record<string, string>;
  needs: Binary[];
  /** Outputs every server `up` must return (value and secret flag): the bench measures a correct result. */
  outputs?: Record<string, { value: unknown; secret: boolean }>;
}

const sleepResource = (name: string, message: string): string[] => [
  `  ${name}:`,
  '    type: agenttest:index:Sleep',
  '    properties:',
  '      seconds: 0',
  `      message: ${message}`,
  '    options:',
  '      version: 1.0.0',
];

const PROGRAMS: Program[] = [
  {
    name: 'yaml, 3 resources',
    needs: ['pulumi', 'pulumi-language-yaml'],
    files: {
      'Pulumi.yaml': [
        'name: benchyaml',
        'runtime: yaml',
        'resources:',
        ...sleepResource('a', 'one'),
        ...sleepResource('b', '${a.result}'),
        ...sleepResource('c', '${b.result}'),
        'outputs:',
        '  last: ${c.result}',
        '',
      ].join('\n'),
    },
  },
  {
    name: 'yaml, 3 resources + a secret output',
    needs: ['pulumi', 'pulumi-language-yaml'],
    files: {
      'Pulumi.yaml': [
        'name: benchyamlsecret',
        'runtime: yaml',
        'resources:',
        ...sleepResource('a', 'one'),
        ...sleepResource('b', '${a.result}'),
        ...sleepResource('c', '${b.result}'),
        'outputs:',
        '  last: ${c.result}',
        '  token:',
        '    fn::secret: s3cr3t-value',
        '',
      ].join('\n'),
    },
    outputs: { token: { value: 's3cr3t-value', secret: true } },
  },
  {
    name: 'nodejs, dynamic provider',
    needs: ['pulumi', 'pulumi-language-nodejs', 'pulumi-resource-pulumi-nodejs'],
    files: {
      'Pulumi.yaml': 'name: benchnode\nruntime: nodejs\n',
      'package.json': JSON.stringify({ name: 'benchnode', version: '1.0.0', main: 'index.js' }),
      'index.js': [
        "const pulumi = require('@pulumi/pulumi');",
        'const provider = { async create(inputs) { return { id: `x-${inputs.n}`, outs: inputs }; } };',
        'class Thing extends pulumi.dynamic.Resource { constructor(n, a) { super(provider, n, a, {}); } }',
        "exports.n = new Thing('thing', { n: 1 }).n;",
        '',
      ].join('\n'),
    },
    env: { NODE_PATH: path.join(REPO, 'node_modules') },
  },
];

const EXTRA_PULUMI_ENV: Record<string, string> = Object.fromEntries(
  (process.env.BENCH_PULUMI_ENV ?? '')
    .split(/\s+/)
    .filter((kv) => kv.includes('='))
    .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
);

function baseEnv(root: string, extra: Record<string, string> = {}): Record<string, string> {
  fs.mkdirSync(path.join(root, 'home'), { recursive: true });
  fs.mkdirSync(path.join(root, 'backend'), { recursive: true });
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? os.homedir(),
    ...TOOLCHAIN,
    PULUMI_HOME: path.join(root, 'home'),
    PULUMI_BACKEND_URL: `file://${path.join(root, 'backend')}`,
    PULUMI_CONFIG_PASSPHRASE: 'bench',
    PULUMI_SKIP_UPDATE_CHECK: 'true',
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_offline: 'true',
    npm_config_update_notifier: 'false',
    ...EXTRA_PULUMI_ENV,
    ...extra,
  };
  // The test provider, installed as a plugin so that `pulumi install` needs no network.
  const bin = installTestProvider(path.join(root, 'provider'));
  pulumi(
    ['plugin', 'install', 'resource', 'agenttest', '1.0.0', '--file', path.join(bin, 'pulumi-resource-agenttest')],
    root,
    env,
  );
  return env;
}

function write(dir: string, files: Record<string, string>): void {
  for (const [p, c] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    fs.writeFileSync(path.join(dir, p), c);
  }
}

function pulumi(args: string[], cwd: string, env: Record<string, string>): number {
  const t0 = performance.now();
  const r = spawnSync('pulumi', [...args, '--non-interactive'], { cwd, env, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`pulumi ${args.join(' ')} failed:\n${r.stdout}\n${r.stderr}`);
  return performance.now() - t0;
}

async function serverUp(base: string, stack: string, p: Program): Promise<number> {
  const t0 = performance.now();
  const res = await request(`${base}/v1/operations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'up', stack }),
    bodyTimeout: 600_000,
  });
  const text = await res.body.text();
  const ms = performance.now() - t0;
  const last = JSON.parse(text.trim().split('\n').pop()!) as {
    kind: string;
    result?: { state: string; message: string; outputs?: Record<string, unknown> };
  };
  if (res.statusCode !== 200 || last.result?.state !== 'succeeded')
    throw new Error(`server up failed: ${res.statusCode} ${text.slice(-2000)}`);
  for (const [k, want] of Object.entries(p.outputs ?? {})) {
    if (JSON.stringify(last.result.outputs?.[k]) !== JSON.stringify(want))
      throw new Error(
        `server up: output ${k} is ${JSON.stringify(last.result.outputs?.[k])}, expected ${JSON.stringify(want)}`,
      );
  }
  return ms;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const round = (x: number): number => Math.round(x);

async function bench(p: Program, runs: number) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), `pko-bench-${p.name}-`));
  try {
    // Bare CLI.
    const bareDir = path.join(root, 'bare');
    write(bareDir, p.files);
    const bareEnv = baseEnv(path.join(root, 'bare-state'), p.env);
    if (fs.existsSync(path.join(bareDir, 'package.json'))) pulumi(['install'], bareDir, bareEnv);
    pulumi(['stack', 'init', 'bench'], bareDir, bareEnv);
    const bareCold = pulumi(['up', '--yes', '--skip-preview', '--stack', 'bench'], bareDir, bareEnv);
    const bare: number[] = [];
    // Server.
    const srvRoot = path.join(root, 'server');
    write(path.join(srvRoot, 'share', 'workspace'), p.files);
    const portFile = path.join(root, 'port');
    const t0 = performance.now();
    const child = spawn(AGENT, ['serve', '--port', '0', '--host', '127.0.0.1', '--auth-mode', 'none'], {
      env: {
        ...baseEnv(path.join(root, 'server-state'), p.env),
        PKO_AGENT_ROOT: srvRoot,
        PKO_AGENT_PORT_FILE: portFile,
        PULUMI_WORKSPACE_STACK: JSON.stringify({ name: 'bench', create: true, config: [] }),
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    try {
      while (!fs.existsSync(portFile) || fs.readFileSync(portFile, 'utf8') === '')
        await new Promise((r) => setTimeout(r, 20));
      const base = `http://127.0.0.1:${fs.readFileSync(portFile, 'utf8')}`;
      for (;;) {
        const r = await request(`${base}/readyz`);
        const body = (await r.body.json()) as { state: string; message?: string };
        if (r.statusCode === 200) break;
        if (body.state === 'Failed') throw new Error(`workspace failed: ${body.message}`);
        await new Promise((res) => setTimeout(res, 20));
      }
      const readyMs = performance.now() - t0;
      const serverFirst = await serverUp(base, 'bench', p);
      const server: number[] = [];
      // Interleave the warm runs so that machine noise hits both sides alike.
      for (let i = 0; i < runs; i++) {
        bare.push(pulumi(['up', '--yes', '--skip-preview', '--stack', 'bench'], bareDir, bareEnv));
        server.push(await serverUp(base, 'bench', p));
      }
      return {
        program: p.name,
        runs,
        bareColdFirstUpMs: round(bareCold),
        bareWarmMedianMs: round(median(bare)),
        serverStartToReadyMs: round(readyMs),
        serverFirstUpMs: round(serverFirst),
        serverColdTotalMs: round(readyMs + serverFirst),
        serverWarmMedianMs: round(median(server)),
        warmRatio: Math.round((median(server) / median(bare)) * 1000) / 1000,
        bareWarmMs: bare.map(round),
        serverWarmMs: server.map(round),
      };
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('close', r));
    }
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const i = process.argv.indexOf('--runs');
  const runs = i >= 0 ? Number(process.argv[i + 1]) : 7;
  const results = [];
  const skipped: string[] = [];
  for (const p of PROGRAMS) {
    const absent = missing(p.needs);
    if (absent.length) {
      skipped.push(`${p.name}: the toolchain has no ${absent.join(', ')} (e2e/toolchain/build.sh pulumi)`);
      continue;
    }
    results.push(await bench(p, runs));
  }
  console.log(
    JSON.stringify(
      { machine: { cpus: os.cpus().length, node: process.version }, pulumiEnv: EXTRA_PULUMI_ENV, results, skipped },
      null,
      2,
    ),
  );
  console.log(
    '\n| program | bare `pulumi up` warm (median) | server `up` warm (median) | ratio | server start → Ready | server first `up` | bare first `up` |',
  );
  console.log('|---|---|---|---|---|---|---|');
  for (const r of results) {
    console.log(
      `| ${r.program} | ${r.bareWarmMedianMs} ms | ${r.serverWarmMedianMs} ms | ${r.warmRatio} | ${r.serverStartToReadyMs} ms | ${r.serverFirstUpMs} ms | ${r.bareColdFirstUpMs} ms |`,
    );
  }
  for (const s of skipped) console.log(`\nnot measured: ${s}`);
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
