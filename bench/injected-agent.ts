/**
 * The injected agent's size and start time (docs/benchmarks.md, "The injected agent").
 *
 *   npm run build && node dist/bench/injected-agent.js [--runs N]
 *
 * Lays out /share/agent as the Dockerfile's `injected-agent` stage does (node stripped, RUNPATH
 * $ORIGIN/lib with patchelf, libstdc++ and libgcc_s beside it, the esbuild bundle) in a temp dir,
 * from this checkout's Node.js (the `node` devDependency) and dist/bundles/pko-agent.js, then times
 * `agent.js version` (process start to exit) and `agent.js serve` (process start to listening)
 * N times each. Needs strip (binutils) and patchelf on PATH.
 */
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '..', '..');
const BUNDLE = path.join(ROOT, 'dist', 'bundles', 'pko-agent.js');
const NODE = fs.realpathSync(path.join(ROOT, 'node_modules', '.bin', 'node'));

function layOut(dir: string): { node: string; bundle: string } {
  const agent = path.join(dir, 'agent');
  fs.mkdirSync(path.join(agent, 'lib'), { recursive: true });
  const node = path.join(agent, 'node');
  fs.copyFileSync(NODE, node);
  execFileSync('strip', [node]);
  const ldd = execFileSync('ldd', [NODE], { encoding: 'utf8' });
  for (const lib of ['libstdc++.so.6', 'libgcc_s.so.1']) {
    const found = new RegExp(`^\\s*${lib.replace(/[.+]/g, '\\$&')} => (\\S+)`, 'm').exec(ldd)?.[1];
    if (!found) throw new Error(`${NODE} does not link ${lib}`);
    fs.copyFileSync(found, path.join(agent, 'lib', lib));
  }
  execFileSync('patchelf', ['--set-rpath', '$ORIGIN/lib', node]);
  const bundle = path.join(agent, 'agent.js');
  fs.copyFileSync(BUNDLE, bundle);
  return { node, bundle };
}

function sizeMB(file: string): number {
  return fs.statSync(file).size / 1e6;
}

function dirMB(dir: string): number {
  let total = 0;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) total += fs.statSync(path.join(entry.parentPath, entry.name)).size;
  return total / 1e6;
}

function timeVersion(node: string, bundle: string): number {
  const started = process.hrtime.bigint();
  execFileSync(node, [bundle, 'version'], { env: {} });
  return Number(process.hrtime.bigint() - started) / 1e6;
}

/** Process start until `serve` has bound its port (it writes the port file then). */
async function timeServe(node: string, bundle: string, dir: string): Promise<number> {
  const portFile = path.join(dir, 'port');
  fs.rmSync(portFile, { force: true });
  const started = process.hrtime.bigint();
  const child = spawn(node, [bundle, 'serve', '--auth-mode', 'none', '--port', '0', '--host', '127.0.0.1'], {
    env: { PULUMI_WORKSPACE_STACK: '{"name":"dev"}', PKO_AGENT_PORT_FILE: portFile, HOME: dir, PATH: '/usr/bin:/bin' },
    stdio: 'ignore',
  });
  try {
    while (!fs.existsSync(portFile)) await new Promise((r) => setTimeout(r, 2));
    return Number(process.hrtime.bigint() - started) / 1e6;
  } finally {
    child.kill('SIGKILL');
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main(): Promise<void> {
  const runsFlag = process.argv.indexOf('--runs');
  const runs = runsFlag >= 0 ? Number(process.argv[runsFlag + 1]) : 10;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-injected-agent-'));
  try {
    const { node, bundle } = layOut(dir);
    const version: number[] = [];
    const serve: number[] = [];
    for (let i = 0; i < runs; i++) {
      version.push(timeVersion(node, bundle));
      serve.push(await timeServe(node, bundle, dir));
    }
    console.log(
      JSON.stringify(
        {
          node: process.versions.node,
          sizesMB: {
            node: +sizeMB(node).toFixed(1),
            lib: +dirMB(path.join(dir, 'agent', 'lib')).toFixed(1),
            bundle: +sizeMB(bundle).toFixed(1),
            total: +dirMB(path.join(dir, 'agent')).toFixed(1),
          },
          runs,
          versionMs: { median: +median(version).toFixed(0), min: +Math.min(...version).toFixed(0) },
          serveListeningMs: { median: +median(serve).toFixed(0), min: +Math.min(...serve).toFixed(0) },
        },
        null,
        1,
      ),
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

void main();
