/**
 * A test-bed `pulumi-language-nodejs`: the language host the Pulumi CLI starts for `runtime: nodejs`
 * projects, written here because this machine's Go module proxy refuses the real one
 * (github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3, see docs/testbed.md). The agent
 * image ships the real host from the Pulumi CLI tarball; tests use the toolchain's real host when
 * e2e/toolchain/build.sh could build it, and this one otherwise.
 *
 * It follows the real host of Pulumi CLI v3.274.1 where the agent's tests can tell:
 * - Start: `pulumi-language-nodejs [--logtostderr] [-v=N] [--tracing URL] <engine address>`; serves the
 *   LanguageRuntime gRPC service on 127.0.0.1 and prints only its port on stdout.
 * - InstallDependencies (`pulumi install`): `npm install --loglevel=error` in the program directory,
 *   output streamed back.
 * - GetRequiredPackages: the packages under node_modules whose package.json says `pulumi.resource`.
 * - Run: `node <the program's own @pulumi/pulumi/cmd/run> --monitor … --engine … --project … <entry>`,
 *   config in PULUMI_CONFIG / PULUMI_CONFIG_SECRET_KEYS; exit code 32 means "already reported" (bail).
 * - GetPluginInfo, Handshake, About, GetProgramDependencies (package-lock.json), RuntimeOptionsPrompts,
 *   Template, Cancel.
 * Left out: npm only (no yarn/pnpm/bun, no npm workspaces), no fnm, no debugger, no RunPlugin (Node.js
 * plugins and policy packs), no code generation (GenerateProgram/Project/Package, Pack, Link). The
 * real host also puts a forwarding proxy between the program and the resource monitor and passes
 * FIFOs for synchronous invokes (`--sync`); @pulumi/pulumi 3.270 talks to the monitor directly and
 * never uses those FIFOs, so the program gets the engine's monitor address.
 *
 * Built to dist/agent/testkit/language-nodejs.js (`npm run build`); installTestLanguageHost writes the
 * executable that runs it.
 */
import * as grpc from '@grpc/grpc-js';
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as languageGrpc from '@pulumi/pulumi/proto/language_grpc_pb';
import * as lang from '@pulumi/pulumi/proto/language_pb';
import * as plugin from '@pulumi/pulumi/proto/plugin_pb';
import { Empty } from 'google-protobuf/google/protobuf/empty_pb';

/**
 * The version this host reports, as the real one does: the CLI release it ships with (the version of
 * the e2e toolchain's pulumi, which packaging/dockerfile.test.ts checks against the Dockerfile).
 */
const VERSION = '3.274.1';
/** cmd/run's exit code for "the error was already reported to the engine". */
const EXIT_ALREADY_REPORTED = 32;
/** Same bound as the CLI's gRPC clients (400 MiB). */
const MAX_MESSAGE = 400 * 1024 * 1024;

interface Options {
  typescript: boolean;
  tsconfig?: string;
  nodeargs?: string;
  packagemanager: string;
}

/** `runtime.options` of Pulumi.yaml, checked as the real host does. */
function parseOptions(info: lang.ProgramInfo | undefined): Options {
  const raw = (info?.getOptions()?.toJavaScript() ?? {}) as Record<string, unknown>;
  const opts: Options = { typescript: true, packagemanager: 'auto' };
  const want = (key: string, type: 'boolean' | 'string'): void => {
    if (raw[key] !== undefined && typeof raw[key] !== type) throw new Error(`${key} option must be a ${type}`);
  };
  want('typescript', 'boolean');
  want('tsconfig', 'string');
  want('nodeargs', 'string');
  want('packagemanager', 'string');
  if (raw.typescript !== undefined) opts.typescript = raw.typescript as boolean;
  if (raw.tsconfig !== undefined) opts.tsconfig = raw.tsconfig as string;
  if (raw.nodeargs !== undefined) opts.nodeargs = raw.nodeargs as string;
  if (raw.packagemanager !== undefined) opts.packagemanager = raw.packagemanager as string;
  if (!['auto', 'npm'].includes(opts.packagemanager)) {
    throw new Error(
      `packagemanager ${JSON.stringify(opts.packagemanager)}: the test-bed pulumi-language-nodejs supports npm only`,
    );
  }
  return opts;
}

/** Splits `nodeargs` like a shell would (quotes and backslashes, no expansion). */
export function splitArgs(s: string): string[] {
  const out: string[] = [];
  let cur: string | undefined;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (quote) {
      if (c === quote) quote = undefined;
      else if (c === '\\' && quote === '"' && i + 1 < s.length) cur = (cur ?? '') + s[++i];
      else cur = (cur ?? '') + c;
    } else if (c === '"' || c === "'") {
      quote = c;
      cur ??= '';
    } else if (c === '\\' && i + 1 < s.length) {
      cur = (cur ?? '') + s[++i];
    } else if (/\s/.test(c)) {
      if (cur !== undefined) out.push(cur);
      cur = undefined;
    } else {
      cur = (cur ?? '') + c;
    }
  }
  if (quote) throw new Error(`nodeargs: unterminated quote in ${JSON.stringify(s)}`);
  if (cur !== undefined) out.push(cur);
  return out;
}

/**
 * PULUMI_CONFIG: the engine's `<namespace>:<name>` keys in the older `<namespace>:config:<name>` form,
 * which every @pulumi/pulumi version reads.
 */
export function configEnv(config: [string, string][]): string {
  const out: Record<string, string> = {};
  for (const [key, value] of config) {
    const parts = key.split(':');
    if (parts.length === 2 || (parts.length === 3 && parts[1] === 'config'))
      out[`${parts[0]}:config:${parts[parts.length - 1]}`] = value;
    else
      throw new Error(
        `could not parse ${key} as a configuration key (configuration keys should be of the form \`<namespace>:<name>\`)`,
      );
  }
  return JSON.stringify(out);
}

function searchUp(dir: string, name: string): string | undefined {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, name))) return path.join(d, name);
    if (path.dirname(d) === d) return undefined;
  }
}

/** Packages with a resource plugin: every node_modules package whose package.json has `pulumi.resource: true`. */
function requiredPackages(programDir: string): plugin.PackageDependency[] {
  const found: plugin.PackageDependency[] = [];
  const seen = new Set<string>();
  const visit = (dir: string, inNodeModules: boolean): void => {
    let real: string;
    try {
      real = fs.realpathSync(dir);
    } catch {
      return;
    }
    if (seen.has(real)) return;
    seen.add(real);
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(real, { withFileTypes: true });
    } catch {
      return;
    }
    // A policy pack's plugins are not the program's.
    if (entries.some((e) => e.name === 'PulumiPolicy.yaml')) return;
    for (const e of entries) {
      const p = path.join(real, e.name);
      const isDir =
        e.isDirectory() || (e.isSymbolicLink() && fs.statSync(p, { throwIfNoEntry: false })?.isDirectory() === true);
      if (isDir) {
        if (e.name !== '.git') visit(p, inNodeModules || path.basename(real) === 'node_modules');
      } else if (inNodeModules && e.name === 'package.json') {
        const dep = pluginOf(p);
        if (dep) found.push(dep);
      }
    }
  };
  visit(programDir, false);
  return found;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const stringOf = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

function pluginOf(packageJson: string): plugin.PackageDependency | undefined {
  let pkg: unknown;
  try {
    pkg = JSON.parse(fs.readFileSync(packageJson, 'utf8'));
  } catch {
    return undefined;
  }
  if (!isRecord(pkg) || !isRecord(pkg.pulumi) || pkg.pulumi.resource !== true) return undefined;
  const pkgName = stringOf(pkg.name);
  const name =
    stringOf(pkg.pulumi.name) ?? (pkgName?.startsWith('@pulumi/') ? pkgName.slice('@pulumi/'.length) : undefined);
  const version = stringOf(pkg.pulumi.version) ?? stringOf(pkg.version);
  if (!name || !version) return undefined;
  const dep = new plugin.PackageDependency()
    .setName(name)
    .setKind('resource')
    .setVersion(version.startsWith('v') ? version : `v${version}`)
    .setServer(stringOf(pkg.pulumi.server) ?? '');
  const p = pkg.pulumi.parameterization;
  if (isRecord(p))
    dep.setParameterization(
      new plugin.PackageParameterization()
        .setName(stringOf(p.name) ?? '')
        .setVersion(stringOf(p.version) ?? '')
        .setValue(Buffer.from(stringOf(p.value) ?? '', 'base64')),
    );
  return dep;
}

/** Name and version of every package in package-lock.json (direct dependencies only unless `transitive`). */
function lockedDependencies(programDir: string, transitive: boolean): lang.DependencyInfo[] {
  const lockFile = searchUp(programDir, 'package-lock.json');
  if (!lockFile) throw new Error(`no package-lock.json found (searching upwards from ${programDir})`);
  const lock = JSON.parse(fs.readFileSync(lockFile, 'utf8')) as {
    packages?: Record<string, { version?: string; link?: boolean; resolved?: string }>;
  };
  const packages = lock.packages ?? {};
  const manifest = JSON.parse(fs.readFileSync(path.join(path.dirname(lockFile), 'package.json'), 'utf8')) as {
    dependencies?: object;
    devDependencies?: object;
  };
  const direct = new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.devDependencies ?? {})]);
  const out: lang.DependencyInfo[] = [];
  for (const [key, entry] of Object.entries(packages)) {
    const i = key.lastIndexOf('node_modules/');
    if (i < 0) continue;
    const name = key.slice(i + 'node_modules/'.length);
    const version = entry.link && entry.resolved ? packages[entry.resolved]?.version : entry.version;
    if (!transitive && (!direct.has(name) || key !== `node_modules/${name}`)) continue;
    out.push(new lang.DependencyInfo().setName(name).setVersion(version ?? ''));
  }
  return out;
}

function capture(cmd: string, args: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.on('error', () => resolve({ code: null, stdout }));
    child.on('close', (code) => resolve({ code, stdout }));
  });
}

function which(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const p = path.join(dir || '.', cmd);
    try {
      fs.accessSync(p, fs.constants.X_OK);
      if (fs.statSync(p).isFile()) return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}

type Impl = Partial<languageGrpc.ILanguageRuntimeServer>;
const fail = (message: string, code = grpc.status.UNKNOWN): Partial<grpc.StatusObject> => ({ code, details: message });

export class LanguageHost {
  /** The engine's address: from the command line, or from Handshake. */
  engineAddress: string;
  private readonly programs = new Set<ChildProcess>();

  constructor(
    engineAddress: string,
    private readonly tracing: string,
  ) {
    this.engineAddress = engineAddress;
  }

  /** Interrupts every running program (Cancel, or the host is shutting down); kills it after 5 s. */
  cancelAll(): void {
    for (const child of this.programs) interrupt(child);
  }

  get running(): number {
    return this.programs.size;
  }

  readonly impl: Impl = {
    handshake: (call, cb) => {
      this.engineAddress = call.request.getEngineAddress();
      cb(null, new lang.LanguageHandshakeResponse());
    },

    getPluginInfo: (_call, cb) => cb(null, new plugin.PluginInfo().setVersion(VERSION)),

    // Unimplemented, as in the real host: the CLI asks for packages and uses this only as a fallback.
    getRequiredPlugins: (_call, cb) =>
      cb(fail('method GetRequiredPlugins not implemented', grpc.status.UNIMPLEMENTED), null),

    getRequiredPackages: (call, cb) => {
      const dir = call.request.getInfo()?.getProgramDirectory() ?? '.';
      cb(null, new lang.GetRequiredPackagesResponse().setPackagesList(requiredPackages(dir)));
    },

    installDependencies: (call) => {
      const send = (stream: 'stdout' | 'stderr', chunk: Buffer | string): void => {
        const msg = new lang.InstallDependenciesResponse();
        if (stream === 'stdout') msg.setStdout(Buffer.from(chunk));
        else msg.setStderr(Buffer.from(chunk));
        call.write(msg);
      };
      const dir = call.request.getInfo()?.getProgramDirectory() || call.request.getDirectory();
      try {
        parseOptions(call.request.getInfo());
      } catch (e) {
        call.emit('error', fail(`failed to parse options: ${(e as Error).message}`));
        return;
      }
      send('stdout', 'Installing dependencies...\n\n');
      const npm = spawn('npm', ['install', '--loglevel=error'], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      npm.stdout.on('data', (c: Buffer) => send('stdout', c));
      npm.stderr.on('data', (c: Buffer) => send('stderr', c));
      call.on('cancelled', () => npm.kill('SIGINT'));
      let failed = false;
      npm.on('error', (e) => {
        failed = true;
        call.emit('error', fail(`npm install: ${e.message}`));
      });
      npm.on('close', (code, signal) => {
        if (failed) return;
        if (code !== 0) {
          call.emit(
            'error',
            fail(`npm install in ${dir} failed: ${signal ? `killed by ${signal}` : `exit status ${code}`}`),
          );
        } else if (!searchUp(dir, 'node_modules')) {
          call.emit('error', fail('npm install reported success, but node_modules directory is missing'));
        } else {
          send('stdout', 'Finished installing dependencies\n\n');
          call.end();
        }
      });
    },

    run: (call, cb) => {
      this.runProgram(call.request, call).then(
        (res) => cb(null, res),
        (e: Error) => cb(fail(e.message), null),
      );
    },

    about: (call, cb) => {
      void (async () => {
        try {
          parseOptions(call.request.getInfo());
        } catch (e) {
          return cb(fail(`failed to parse options: ${(e as Error).message}`), null);
        }
        const node = which('node');
        if (!node) return cb(fail('could not find executable "node"'), null);
        const [nodeVersion, npmVersion] = await Promise.all([
          capture('node', ['--version']),
          capture('npm', ['--version']),
        ]);
        const res = new lang.AboutResponse().setExecutable(node).setVersion(nodeVersion.stdout.trim());
        res.getMetadataMap().set('packagemanager', 'npm').set('packagemanagerVersion', npmVersion.stdout.trim());
        cb(null, res);
      })();
    },

    getProgramDependencies: (call, cb) => {
      try {
        const dir = call.request.getInfo()?.getProgramDirectory() || call.request.getPwd();
        cb(
          null,
          new lang.GetProgramDependenciesResponse().setDependenciesList(
            lockedDependencies(dir, call.request.getTransitivedependencies()),
          ),
        );
      } catch (e) {
        cb(fail(`failed to get node dependencies: ${(e as Error).message}`), null);
      }
    },

    runtimeOptionsPrompts: (call, cb) => {
      const res = new lang.RuntimeOptionsResponse();
      const raw = (call.request.getInfo()?.getOptions()?.toJavaScript() ?? {}) as Record<string, unknown>;
      if (raw.packagemanager === undefined) {
        const choice = new lang.RuntimeOptionPrompt.RuntimeOptionValue()
          .setPrompttype(lang.RuntimeOptionPrompt.RuntimeOptionType.STRING)
          .setStringvalue('npm');
        res.addPrompts(
          new lang.RuntimeOptionPrompt()
            .setKey('packagemanager')
            .setDescription('The package manager to use for installing dependencies')
            .setPrompttype(lang.RuntimeOptionPrompt.RuntimeOptionType.STRING)
            .setChoicesList([choice])
            .setDefault(choice),
        );
      }
      cb(null, res);
    },

    template: (_call, cb) => cb(null, new lang.TemplateResponse()),

    cancel: (_call, cb) => {
      this.cancelAll();
      cb(null, new Empty());
    },
  };

  /** Runs the program through @pulumi/pulumi's own runner (cmd/run) from the program's node_modules. */
  private async runProgram(
    req: lang.RunRequest,
    call: grpc.ServerUnaryCall<lang.RunRequest, lang.RunResponse>,
  ): Promise<lang.RunResponse> {
    const result = (error: string, bail = false): lang.RunResponse =>
      new lang.RunResponse().setError(error).setBail(bail);
    if (!this.engineAddress) throw new Error('when debugging or running explicitly, must call Handshake before Run');
    if (req.getAttachDebugger()) return result('the test-bed pulumi-language-nodejs cannot attach a debugger');
    const info = req.getInfo();
    const programDir = info?.getProgramDirectory() || req.getPwd();
    const entryPoint = info?.getEntryPoint() || req.getProgram() || '.';
    if (!which('node')) return result('could not find node on the $PATH');

    let runPath: string;
    const runModule = process.env.PULUMI_LANGUAGE_NODEJS_RUN_PATH || '@pulumi/pulumi/cmd/run';
    try {
      runPath = require.resolve(runModule, { paths: [programDir] });
    } catch (e) {
      return result(
        (e as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND'
          ? 'It looks like the Pulumi SDK has not been installed. Have you run pulumi install?'
          : (e as Error).message,
      );
    }

    let opts: Options;
    let config: string;
    let nodeArgs: string[];
    try {
      opts = parseOptions(info);
      config = configEnv(req.getConfigMap().toArray());
      nodeArgs = splitArgs(opts.nodeargs ?? '');
    } catch (e) {
      return result((e as Error).message);
    }

    const args = [...nodeArgs, runPath];
    const flag = (name: string, value: string | undefined): void => {
      if (value) args.push(`--${name}`, value);
    };
    flag('monitor', req.getMonitorAddress());
    flag('engine', this.engineAddress);
    flag('organization', req.getOrganization());
    flag('project', req.getProject());
    flag('root-directory', info?.getRootDirectory());
    flag('stack', req.getStack());
    flag('pwd', programDir);
    if (req.getDryrun()) args.push('--dry-run');
    flag('parallel', String(req.getParallel()));
    flag('tracing', this.tracing);
    args.push(entryPoint, ...req.getArgsList());

    const env: NodeJS.ProcessEnv = {
      ...process.env,
      PULUMI_CONFIG: config,
      PULUMI_CONFIG_SECRET_KEYS: JSON.stringify(req.getConfigsecretkeysList()),
    };
    if (opts.typescript) env.PULUMI_NODEJS_TYPESCRIPT = 'true';
    if (opts.tsconfig) env.PULUMI_NODEJS_TSCONFIG_PATH = opts.tsconfig;

    return new Promise((resolve) => {
      const child = spawn('node', args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
      this.programs.add(child);
      // Our own stdout/stderr are the CLI's; the program's output goes there unchanged.
      child.stdout.pipe(process.stdout, { end: false });
      child.stderr.pipe(process.stderr, { end: false });
      const onCancel = (): void => interrupt(child);
      call.on('cancelled', onCancel);
      child.on('error', (e) => {
        this.programs.delete(child);
        resolve(result(`Problem executing program (could not run language executor): ${e.message}`));
      });
      child.on('close', (code, signal) => {
        this.programs.delete(child);
        call.removeListener('cancelled', onCancel);
        if (code === 0) resolve(result(''));
        else if (code === EXIT_ALREADY_REPORTED) resolve(result('', true));
        else resolve(result(`Program exited with non-zero exit code: ${signal ? -1 : code}`));
      });
    });
  }
}

/** SIGINT (the program's runner stops cleanly on it), SIGKILL 5 s later if it is still there. */
function interrupt(child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGINT');
  const t = setTimeout(() => child.kill('SIGKILL'), 5000);
  t.unref();
  child.once('close', () => clearTimeout(t));
}

/** Command line: Go-style flags (`-x v`, `--x=v`, booleans alone), then the engine's address. */
export function parseArgs(argv: string[]): { flags: Record<string, string>; positional: string[] } {
  const booleans = new Set(['logtostderr', 'alsologtostderr', 'logflow', 'version']);
  const flags: Record<string, string> = {};
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      i++;
      break;
    }
    if (!a.startsWith('-') || a === '-') break;
    const body = a.replace(/^--?/, '');
    const eq = body.indexOf('=');
    if (eq >= 0) flags[body.slice(0, eq)] = body.slice(eq + 1);
    else if (booleans.has(body)) flags[body] = 'true';
    else flags[body] = argv[++i] ?? '';
  }
  return { flags, positional: argv.slice(i) };
}

/**
 * Every 5 minutes, as the real host: if the engine no longer answers (the CLI is gone), stop.
 * UNIMPLEMENTED counts as alive: only a dead connection matters.
 */
function watchEngine(address: string, onGone: () => void): void {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  const check = (): void => {
    client.makeUnaryRequest(
      '/grpc.health.v1.Health/Check',
      (b: Buffer) => b,
      (b: Buffer) => b,
      Buffer.alloc(0),
      { deadline: Date.now() + 60_000 },
      (err) => {
        if (err && err.code !== grpc.status.UNIMPLEMENTED) onGone();
        else setTimeout(check, 5 * 60_000).unref();
      },
    );
  };
  setTimeout(check, 5 * 60_000).unref();
}

export function main(argv: string[]): void {
  const { flags, positional } = parseArgs(argv);
  if (flags.version === 'true') {
    process.stdout.write(`v${VERSION}\n`);
    return;
  }
  const runtime = flags.runtime ?? 'nodejs';
  if (runtime !== 'nodejs') {
    process.stderr.write(
      `error: unsupported runtime: ${runtime} (the test-bed pulumi-language-nodejs runs node only)\n`,
    );
    process.exit(1);
  }
  const host = new LanguageHost(positional[0] ?? '', flags.tracing ?? '');
  const server = new grpc.Server({
    'grpc.max_receive_message_length': MAX_MESSAGE,
    'grpc.max_send_message_length': MAX_MESSAGE,
  });
  server.addService(languageGrpc.LanguageRuntimeService, host.impl as grpc.UntypedServiceImplementation);
  let stopping = false;
  const stop = (): void => {
    if (stopping) return;
    stopping = true;
    host.cancelAll();
    server.forceShutdown();
    const exitWhenIdle = setInterval(() => host.running === 0 && process.exit(0), 50);
    setTimeout(() => process.exit(0), 6000).unref();
    exitWhenIdle.unref();
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      process.stderr.write(`error: could not start language host RPC server: ${err.message}\n`);
      process.exit(1);
    }
    // The CLI reads this first stdout line to know where to connect.
    process.stdout.write(`${port}\n`);
    if (host.engineAddress) watchEngine(host.engineAddress, stop);
  });
}

/**
 * Writes `<dir>/pulumi-language-nodejs`, a launcher for the built host (dist/agent/testkit/language-nodejs.js,
 * see agent/test/helpers.ts ensureBuilt), and returns its path: for `pulumi plugin install language nodejs
 * <version> --file <path>`.
 */
export function installTestLanguageHost(dir: string): string {
  // From agent/testkit (sources) or dist/agent/testkit (built): the repository root holds node_modules.
  const repo = [path.resolve(__dirname, '..', '..'), path.resolve(__dirname, '..', '..', '..')].find((d) =>
    fs.existsSync(path.join(d, 'node_modules', '@pulumi', 'pulumi')),
  )!;
  const built = path.join(repo, 'dist', 'agent', 'testkit', 'language-nodejs.js');
  if (!fs.existsSync(built)) throw new Error(`${built} is missing: run npm run build`);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'pulumi-language-nodejs');
  const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
  fs.writeFileSync(
    file,
    `#!/bin/sh\n# pulumi-language-nodejs (test bed): see agent/testkit/language-nodejs.ts\nexec ${q(process.execPath)} ${q(built)} "$@"\n`,
    { mode: 0o755 },
  );
  return file;
}

export const TEST_LANGUAGE_HOST_VERSION = VERSION;

if (require.main === module) main(process.argv.slice(2));
