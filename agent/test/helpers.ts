/**
 * Helpers for the agent's e2e tests: the built CLI (bin/pko-agent, rebuilt from agent/ and contract/
 * when stale), child processes with captured output, temp dirs, and the Pulumi environment
 * (toolchain first on PATH, file:// backend, passphrase, no update checks or plugin downloads).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  requireBinaries,
  toolchain,
  toolchainEnv,
  unavailableBinaries,
  versions,
  type ToolchainBinaries,
} from '../../e2e/testbed/toolchain';
import { installTestCommandProvider, TEST_COMMAND_PROVIDER_VERSION } from '../testkit/command-provider';
import { installTestLanguageHost, TEST_LANGUAGE_HOST_VERSION } from '../testkit/language-nodejs';
import { installTestProvider } from '../testkit/provider';
import { sleep } from '../src/lib/sleep';

export const REPO = path.resolve(__dirname, '..', '..');
export const AGENT_BIN = path.join(REPO, 'bin', 'pko-agent');
const DIST_MAIN = path.join(REPO, 'dist', 'agent', 'src', 'main.js');
const DIST_LANGUAGE_HOST = path.join(REPO, 'dist', 'agent', 'testkit', 'language-nodejs.js');
const DIST_COMMAND_PROVIDER = path.join(REPO, 'dist', 'agent', 'testkit', 'command-provider.js');

/** Every line any agent process printed in this test file (the secrets test greps it). */
export const capturedOutput: string[] = [];

function newest(dir: string): number {
  let t = 0;
  for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) t = Math.max(t, newest(p));
    else if (d.name.endsWith('.ts')) t = Math.max(t, fs.statSync(p).mtimeMs);
  }
  return t;
}

/** Compiles agent/src, agent/testkit and contract/ into dist/ unless dist is newer than every source. */
export function ensureBuilt(): void {
  const src = Math.max(
    newest(path.join(REPO, 'agent', 'src')),
    newest(path.join(REPO, 'agent', 'testkit')),
    newest(path.join(REPO, 'contract')),
  );
  const built = Math.min(
    ...[DIST_MAIN, DIST_LANGUAGE_HOST, DIST_COMMAND_PROVIDER].map((f) =>
      fs.existsSync(f) ? fs.statSync(f).mtimeMs : 0,
    ),
  );
  if (built >= src) return;
  execFileSync(
    process.execPath,
    [path.join(REPO, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', path.join(REPO, 'agent', 'tsconfig.json')],
    {
      cwd: REPO,
      stdio: 'inherit',
    },
  );
}

export function tmpDir(prefix: string): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), `pko-agent-test-${prefix}-`));
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Environment for the agent with nothing from this process that could leak in (GIT_*, KUBECONFIG…). */
export function cleanEnv(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ['PATH', 'HOME', 'TMPDIR', 'LANG', 'USER'])
    if (process.env[k] !== undefined) env[k] = process.env[k]!;
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) env[k] = v;
  return env;
}

export function runAgent(args: string[], env: Record<string, string>, timeoutMs = 120_000): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(AGENT_BIN, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: string[] = [];
    const err: string[] = [];
    child.stdout.setEncoding('utf8').on('data', (c: string) => out.push(c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => err.push(c));
    const t = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(t);
      const r = { code, signal, stdout: out.join(''), stderr: err.join('') };
      capturedOutput.push(r.stdout, r.stderr);
      resolve(r);
    });
  });
}

/** A long-running agent process (serve) whose output is captured as it comes. */
export interface AgentProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  waitForOutput(re: RegExp, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

export function startAgent(args: string[], env: Record<string, string>): AgentProcess {
  const child = spawn(AGENT_BIN, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  const chunks: string[] = [];
  const onData = (c: string): void => {
    chunks.push(c);
    if (process.env.PKO_AGENT_TEST_VERBOSE === '1') process.stderr.write(c);
  };
  child.stdout.setEncoding('utf8').on('data', onData);
  child.stderr.setEncoding('utf8').on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => {
      capturedOutput.push(chunks.join(''));
      resolve({ code, signal });
    }),
  );
  const output = (): string => chunks.join('');
  return {
    child,
    output,
    exited,
    async waitForOutput(re, timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      while (!re.test(output())) {
        if (child.exitCode !== null || child.signalCode !== null)
          throw new Error(`agent exited while waiting for ${re}:\n${output()}`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${re}:\n${output()}`);
        await sleep(100);
      }
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 30_000);
        await exited;
        clearTimeout(t);
      }
    },
  };
}

/** The toolchain binaries every Pulumi test needs (YAML programs). */
export const YAML_BINARIES: (keyof ToolchainBinaries)[] = ['pulumi', 'pulumiLanguageYaml'];

/**
 * The Pulumi environment: the toolchain's bin dirs first on PATH, its own PULUMI_HOME, a file://
 * backend and a passphrase, no update checks, no plugin downloads, no npm network chatter. The
 * test provider plugin (agenttest 1.0.0, agent/testkit/provider.ts) is installed into PULUMI_HOME, so
 * `pulumi install` finds it without a network (programs pin `version: 1.0.0`).
 */
export function pulumiEnv(
  root: string,
  extra: Record<string, string | undefined> = {},
  binaries: (keyof ToolchainBinaries)[] = YAML_BINARIES,
): Record<string, string> {
  requireBinaries(binaries);
  const home = path.join(root, 'pulumi-home');
  const backend = path.join(root, 'backend');
  fs.mkdirSync(backend, { recursive: true });
  const env = cleanEnv({
    ...toolchainEnv(toolchain),
    PULUMI_HOME: home,
    PULUMI_BACKEND_URL: `file://${backend}`,
    PULUMI_CONFIG_PASSPHRASE: 'test-passphrase',
    PULUMI_SKIP_UPDATE_CHECK: 'true',
    PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION: 'true',
    PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK: 'true',
    npm_config_audit: 'false',
    npm_config_fund: 'false',
    npm_config_update_notifier: 'false',
    npm_config_offline: 'true',
    ...extra,
  });
  if (!fs.existsSync(path.join(home, 'plugins', 'resource-agenttest-v1.0.0'))) {
    fs.mkdirSync(home, { recursive: true });
    const bin = installTestProvider(path.join(root, 'test-provider'));
    installPlugin(env, 'agenttest', '1.0.0', path.join(bin, 'pulumi-resource-agenttest'));
  }
  return env;
}

/** `pulumi plugin install <kind> <name> <version> --file <binary>` into the env's PULUMI_HOME. */
export function installPlugin(
  env: Record<string, string>,
  name: string,
  version: string,
  file: string,
  kind: 'resource' | 'language' = 'resource',
): void {
  execFileSync('pulumi', ['plugin', 'install', kind, name, version, '--file', file, '--non-interactive'], {
    env,
    stdio: 'pipe',
  });
}

/**
 * Makes `runtime: nodejs` projects runnable in the env: the toolchain's real pulumi-language-nodejs
 * when build.sh could build it (next to pulumi, where the CLI looks first), else the test-bed host
 * (agent/testkit/language-nodejs.ts, needs ensureBuilt()) put into the env's PULUMI_HOME plugin cache.
 * Not `pulumi plugin install` (it refuses the language hosts bundled with the CLI) and not PATH (the
 * CLI then warns "using pulumi-language-nodejs from $PATH" on every command). Returns which one, for
 * the test output.
 */
export function useNodejsLanguageHost(env: Record<string, string>): string {
  const real = toolchain.binaries.pulumiLanguageNodejs;
  try {
    fs.accessSync(real, fs.constants.X_OK);
    return `the toolchain's pulumi-language-nodejs (${real})`;
  } catch {
    /* not built here */
  }
  const dir = path.join(env.PULUMI_HOME!, 'plugins', `language-nodejs-v${TEST_LANGUAGE_HOST_VERSION}`);
  installTestLanguageHost(dir);
  const why = unavailableBinaries(['pulumi'])['pulumi-language-nodejs'] ?? `${real} is missing`;
  return `the test-bed pulumi-language-nodejs (agent/testkit/language-nodejs.ts, in ${dir}); the toolchain has none: ${why}`;
}

/**
 * Installs a `pulumi-resource-command` into the env's PULUMI_HOME as version `versions.pulumiCommand`
 * (programs pin it, so `pulumi install` needs no network): the toolchain's real one when build.sh could
 * build it, else the test-bed provider (agent/testkit/command-provider.ts, needs ensureBuilt()) through
 * a launcher. Returns which one, for the test output.
 */
export function useCommandProvider(env: Record<string, string>): string {
  const version = versions.pulumiCommand.replace(/^v/, '');
  const real = toolchain.binaries.pulumiResourceCommand;
  let built = true;
  try {
    fs.accessSync(real, fs.constants.X_OK);
  } catch {
    built = false;
  }
  if (built) {
    installPlugin(env, 'command', version, real);
    return `the toolchain's pulumi-resource-command ${version} (${real})`;
  }
  if (version !== TEST_COMMAND_PROVIDER_VERSION) {
    throw new Error(
      `e2e/toolchain/versions.env pins pulumi-command ${version}, the test-bed pulumi-resource-command follows ${TEST_COMMAND_PROVIDER_VERSION}: update agent/testkit/command-provider.ts`,
    );
  }
  const launcher = installTestCommandProvider(path.join(env.PULUMI_HOME!, '..', 'test-command-provider'));
  installPlugin(env, 'command', version, launcher);
  const why = unavailableBinaries(['command'])['pulumi-resource-command'] ?? `${real} is missing`;
  return `the test-bed pulumi-resource-command ${version} (agent/testkit/command-provider.ts); the toolchain has none: ${why}`;
}

/** YAML lines declaring a resource of the test provider (pinned to the installed version). */
export function testResource(name: string, type: 'Sleep' | 'Fail', props: Record<string, string | number>): string[] {
  return [
    `  ${name}:`,
    `    type: agenttest:index:${type}`,
    '    properties:',
    ...Object.entries(props).map(([k, v]) => `      ${k}: ${typeof v === 'string' ? JSON.stringify(v) : v}`),
    '    options:',
    '      version: 1.0.0',
  ];
}

/** Writes files (relative paths) under a directory. */
export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [p, content] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    fs.writeFileSync(path.join(dir, p), content);
  }
}
