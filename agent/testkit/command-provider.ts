/**
 * A test-bed `pulumi-resource-command`: the `command` provider plugin, written here because this
 * machine's Go module proxy refuses github.com/pulumi/pulumi-command/provider (403, see
 * docs/testbed.md), so e2e/toolchain/build.sh cannot build the real one. Tests use the toolchain's
 * real binary when build.sh built it, and this one otherwise (agent/test/helpers.ts,
 * useCommandProvider). Users' agent images get the real provider from Pulumi's plugin downloads, as
 * upstream's do; nothing here ships.
 *
 * It is a real resource provider plugin: the CLI starts it like the Go one (flags, then the engine's
 * address; it prints its port) and it serves Pulumi's ResourceProvider gRPC service with the stubs in
 * `@pulumi/pulumi/proto`. Behaviour follows pulumi-command v1.2.1 (pulumi-go-provider v1.3.0 `infer`):
 *
 * - GetSchema: package `command` with `command:local:Command`, `command:local:run` and the
 *   `command:local:Logging` enum, property names and types as upstream's schema (so
 *   pulumi-language-yaml type-checks programs and adds `replaceOnChanges: triggers` as it does for the
 *   real one).
 * - Command create runs `create` (none: nothing runs), update runs `update`, else `create`, delete runs
 *   `delete` with the stored inputs. `interpreter` (default `/bin/sh -c`) gets the command as its last
 *   argument; `dir` (default: the plugin's working directory, the program's), the plugin's environment
 *   plus `environment`, plus PULUMI_COMMAND_STDOUT/PULUMI_COMMAND_STDERR = the previous stdout/stderr
 *   when non-empty and `addPreviousOutputInEnv` is not false (so on update and delete); `stdin` when
 *   non-empty (else /dev/null). Outputs: every input as given (secrets kept where they were) plus
 *   `stdout`/`stderr` with one trailing newline removed. A failing command fails the step with
 *   `<exit status N | signal: killed | start error>: running "<command>":\n<stdout and stderr as they came>`.
 *   Output lines go to the engine as ephemeral info messages (stdout, stderr or both per `logging`,
 *   default both, `none` for neither).
 * - Diff: old inputs against new ones per property path; any change is an update except a change of
 *   `triggers` as a whole, which is a replacement (the YAML host's replaceOnChanges from the schema
 *   turns element changes into replacements too). Preview: create/update run nothing and report
 *   stdout/stderr unknown. Read (refresh) returns the state unchanged. `command:local:run` runs its
 *   `command` on every invoke.
 *
 * Left out: `assetPaths`/`archivePaths` and the `assets`/`archive` outputs (in the schema, refused by
 * Check), everything `command:remote:*` (Command, CopyToRemote, CopyFile: not in the schema), Windows'
 * `cmd /C` default, resource references inside `triggers` (the engine sends their IDs/URNs, we do not
 * accept references), the exact wording of type-check failures, and the pulumi-go-provider version
 * marker upstream adds to its provider's config.
 *
 * Built to dist/agent/testkit/command-provider.js (`npm run build`); installTestCommandProvider writes
 * the launcher that runs it.
 */
import * as grpc from '@grpc/grpc-js';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as engineGrpc from '@pulumi/pulumi/proto/engine_grpc_pb';
import * as engine from '@pulumi/pulumi/proto/engine_pb';
import * as plugin from '@pulumi/pulumi/proto/plugin_pb';
import * as providerGrpc from '@pulumi/pulumi/proto/provider_grpc_pb';
import * as prov from '@pulumi/pulumi/proto/provider_pb';
import { Empty } from 'google-protobuf/google/protobuf/empty_pb';
import { Struct } from 'google-protobuf/google/protobuf/struct_pb';
import { parseArgs } from './language-nodejs';

/** The pulumi-command release whose behaviour and schema this follows. */
export const TEST_COMMAND_PROVIDER_VERSION = '1.2.1';
const COMMAND = 'command:local:Command';
const RUN = 'command:local:run';
const MAX_MESSAGE = 400 * 1024 * 1024;

// ---- property values (google.protobuf.Struct as JSON, with Pulumi's special values) ----

export type Value = null | boolean | number | string | Value[] | { [k: string]: Value };
export type PropertyMap = Record<string, Value>;
const SIG = '4dabf18193072939515e22adb298388d';
const SECRET_SIG = '1b47061264138c4ac30d75fd1eb44270';
export const UNKNOWN = '04da6b54-80e4-46f7-96ec-b56ff0331ba9';

const isObject = (v: Value | undefined): v is { [k: string]: Value } =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
export const isSecret = (v: Value | undefined): boolean => isObject(v) && v[SIG] === SECRET_SIG;
const isUnknown = (v: Value | undefined): boolean => v === UNKNOWN;
/** A plain object (not a secret or another special value). */
const isPlainObject = (v: Value | undefined): v is { [k: string]: Value } => isObject(v) && !(SIG in v);

/** The value with every secret wrapper removed (what the command gets). */
export function reveal(v: Value): Value {
  if (Array.isArray(v)) return v.map(reveal);
  if (isSecret(v)) return reveal((v as { value: Value }).value);
  if (isObject(v)) return Object.fromEntries(Object.entries(v).map(([k, e]) => [k, reveal(e)]));
  return v;
}

/** Drops null properties, as the Go provider's unmarshalling does (SkipNulls). */
function dropNulls(v: Value): Value {
  if (Array.isArray(v)) return v.map(dropNulls);
  if (isObject(v))
    return Object.fromEntries(
      Object.entries(v)
        .filter(([, e]) => e !== null)
        .map(([k, e]) => [k, dropNulls(e)]),
    );
  return v;
}

function toMap(s: Struct | undefined): PropertyMap {
  return s ? (dropNulls(s.toJavaScript()) as PropertyMap) : {};
}

function toStruct(m: PropertyMap): Struct {
  return Struct.fromJavaScript(m);
}

/** Pulumi's PropertyValue.DeepEquals: secrets equal only secrets, unknowns equal unknowns. */
export function deepEquals(a: Value | undefined, b: Value | undefined): boolean {
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((e, i) => deepEquals(e, b[i]));
  if (isSecret(a)) return isSecret(b) && deepEquals((a as { value: Value }).value, (b as { value: Value }).value);
  if (isObject(a)) {
    if (!isObject(b) || isSecret(b)) return false;
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of keys) {
      const x = a[k] ?? null;
      const y = b[k] ?? null;
      if (x === null && y === null) continue;
      if (!deepEquals(x, y)) return false;
    }
    return true;
  }
  return (a ?? null) === (b ?? null);
}

// ---- diff (per property path, as Pulumi's NewDetailedDiffFromObjectDiff) ----

export type DiffKind = 'add' | 'add-replace' | 'delete' | 'delete-replace' | 'update' | 'update-replace';

/** A property path as Pulumi prints it: `a.b`, `a[0]`, `a["x-y"]`. */
function pathString(p: (string | number)[]): string {
  return p
    .map((k, i) => {
      if (typeof k === 'number') return `[${k}]`;
      if (/^[A-Za-z0-9_]+$/.test(k)) return i === 0 ? k : `.${k}`;
      return `["${k.replace(/"/g, '\\"')}"]`;
    })
    .join('');
}

function diffValue(prefix: (string | number)[], a: Value, b: Value, acc: Record<string, DiffKind>): boolean {
  if (Array.isArray(a) && Array.isArray(b)) {
    let changed = false;
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i >= a.length) acc[pathString([...prefix, i])] = 'add';
      else if (i >= b.length) acc[pathString([...prefix, i])] = 'delete';
      else if (!diffValue([...prefix, i], a[i]!, b[i]!, acc)) continue;
      changed = true;
    }
    return changed;
  }
  if (isPlainObject(a) && isPlainObject(b)) return diffObject(prefix, a, b, acc);
  if (deepEquals(a, b)) return false;
  acc[pathString(prefix)] = a === null ? 'add' : b === null ? 'delete' : 'update';
  return true;
}

function diffObject(
  prefix: (string | number)[],
  olds: PropertyMap,
  news: PropertyMap,
  acc: Record<string, DiffKind>,
): boolean {
  let changed = false;
  for (const [k, old] of Object.entries(olds)) {
    if (k in news) {
      const scratch: Record<string, DiffKind> = {};
      if (!diffValue([...prefix, k], old, news[k]!, scratch)) continue;
      if (old === null) acc[pathString([...prefix, k])] = 'add';
      else if (news[k] === null) acc[pathString([...prefix, k])] = 'delete';
      else Object.assign(acc, scratch);
      changed = true;
    } else if (old !== null) {
      acc[pathString([...prefix, k])] = 'delete';
      changed = true;
    }
  }
  for (const [k, v] of Object.entries(news)) {
    if (!(k in olds) && v !== null) {
      acc[pathString([...prefix, k])] = 'add';
      changed = true;
    }
  }
  return changed;
}

/** The top-level property a path starts with. */
function pathHead(p: string): string {
  const quoted = /^\["((?:[^"\\]|\\.)*)"\]/.exec(p);
  if (quoted) return quoted[1]!.replace(/\\"/g, '"');
  return /^[^.[]*/.exec(p)![0];
}

/**
 * The Command's diff: old inputs against new ones (without `version` and `__` keys); a change of a
 * property the schema marks replaceOnChanges (`triggers`, as a whole) replaces, anything else updates.
 */
export function diffCommand(
  oldInputs: PropertyMap,
  news: PropertyMap,
): { changes: boolean; detailed: Record<string, DiffKind>; replaces: string[]; diffs: string[] } {
  const inputs = Object.fromEntries(Object.entries(news).filter(([k]) => k !== 'version' && !k.startsWith('__')));
  const detailed: Record<string, DiffKind> = {};
  const changes = diffObject([], oldInputs, inputs, detailed);
  const replaces = new Set<string>();
  const diffs = new Set<string>();
  for (const [p, kind] of Object.entries(detailed)) {
    if (REPLACE_ON_CHANGES.has(p) && !kind.endsWith('-replace')) detailed[p] = `${kind}-replace` as DiffKind;
    const head = pathHead(p);
    diffs.add(head);
    if (detailed[p]!.endsWith('-replace')) replaces.add(head);
  }
  return { changes, detailed, replaces: [...replaces], diffs: [...diffs] };
}

// ---- schema ----

const str = { type: 'string' };
const strings = { type: 'array', items: str };
const BASE_INPUTS = {
  addPreviousOutputInEnv: { type: 'boolean' },
  archivePaths: strings,
  assetPaths: strings,
  dir: str,
  environment: { type: 'object', additionalProperties: str },
  interpreter: strings,
  logging: { $ref: '#/types/command:local:Logging' },
  stdin: str,
};
const BASE_OUTPUTS = {
  archive: { $ref: 'pulumi.json#/Archive' },
  assets: { type: 'object', additionalProperties: { $ref: 'pulumi.json#/Asset' } },
  stderr: str,
  stdout: str,
};
const COMMAND_INPUTS = {
  ...BASE_INPUTS,
  create: str,
  delete: str,
  triggers: { type: 'array', items: { $ref: 'pulumi.json#/Any' }, replaceOnChanges: true },
  update: str,
};
const REPLACE_ON_CHANGES = new Set(
  Object.entries(COMMAND_INPUTS)
    .filter(([, s]) => (s as { replaceOnChanges?: boolean }).replaceOnChanges)
    .map(([k]) => k),
);

export const SCHEMA = {
  name: 'command',
  displayName: 'Command',
  version: TEST_COMMAND_PROVIDER_VERSION,
  description:
    'Test-bed stand-in for the Pulumi Command provider (pko agent tests): command:local:Command and command:local:run only.',
  config: {},
  provider: {},
  types: {
    'command:local:Logging': {
      type: 'string',
      enum: ['stdout', 'stderr', 'stdoutAndStderr', 'none'].map((value) => ({ value })),
    },
  },
  resources: {
    [COMMAND]: {
      description: 'Runs commands on create, update and delete (test bed).',
      inputProperties: COMMAND_INPUTS,
      properties: { ...COMMAND_INPUTS, ...BASE_OUTPUTS },
      required: ['stdout', 'stderr'],
    },
  },
  functions: {
    [RUN]: {
      description: 'Runs a command on every invoke (test bed).',
      inputs: { type: 'object', properties: { ...BASE_INPUTS, command: str }, required: ['command'] },
      outputs: {
        type: 'object',
        properties: { ...BASE_INPUTS, ...BASE_OUTPUTS, command: str },
        required: ['command', 'stdout', 'stderr'],
      },
    },
  },
};

// ---- check ----

type Kind = 'string' | 'boolean' | 'strings' | 'stringMap' | 'array' | 'logging';
const BASE_KINDS: Record<string, Kind> = {
  addPreviousOutputInEnv: 'boolean',
  archivePaths: 'strings',
  assetPaths: 'strings',
  dir: 'string',
  environment: 'stringMap',
  interpreter: 'strings',
  logging: 'logging',
  stdin: 'string',
};
const COMMAND_KINDS: Record<string, Kind> = {
  ...BASE_KINDS,
  create: 'string',
  delete: 'string',
  triggers: 'array',
  update: 'string',
};
const RUN_KINDS: Record<string, Kind> = { ...BASE_KINDS, command: 'string' };

function typeName(v: Value): string {
  return Array.isArray(v) ? 'an array' : v === null ? 'null' : typeof v === 'object' ? 'an object' : `a ${typeof v}`;
}

/** Type failures (unknowns and secrets of the right type pass), and the inputs reduced to known properties. */
export function checkInputs(
  news: PropertyMap,
  kinds: Record<string, Kind>,
  required: string[] = [],
): { inputs: PropertyMap; failures: { property: string; reason: string }[] } {
  const failures: { property: string; reason: string }[] = [];
  const inputs: PropertyMap = {};
  const fail = (property: string, reason: string): void => {
    failures.push({ property, reason });
  };
  const check = (p: string, v: Value, want: 'string' | 'boolean'): void => {
    const x = isSecret(v) ? (v as { value: Value }).value : v;
    if (!isUnknown(x) && typeof x !== want) fail(p, `expected ${want}, got ${typeName(x)}`);
  };
  for (const [k, raw] of Object.entries(news)) {
    const kind = kinds[k];
    if (!kind) continue;
    inputs[k] = raw;
    const v = isSecret(raw) ? (raw as { value: Value }).value : raw;
    if (isUnknown(v)) continue;
    if (kind === 'string' || kind === 'boolean') check(k, v, kind);
    else if (kind === 'logging') {
      check(k, v, 'string');
      if (typeof v === 'string' && !['stdout', 'stderr', 'stdoutAndStderr', 'none'].includes(v))
        fail(k, `${JSON.stringify(v)} is not one of stdout, stderr, stdoutAndStderr, none`);
    } else if (kind === 'strings' || kind === 'array') {
      if (!Array.isArray(v)) fail(k, `expected an array, got ${typeName(v)}`);
      else if (kind === 'strings') v.forEach((e, i) => check(`${k}[${i}]`, e, 'string'));
    } else if (kind === 'stringMap') {
      if (!isPlainObject(v)) fail(k, `expected an object, got ${typeName(v)}`);
      else for (const [ek, e] of Object.entries(v)) check(`${k}.${ek}`, e, 'string');
    }
  }
  for (const k of required) if (!(k in inputs)) fail(k, 'missing required property');
  for (const k of ['assetPaths', 'archivePaths']) {
    if (k in inputs)
      fail(k, `not implemented by the test-bed pulumi-resource-command (agent/testkit/command-provider.ts)`);
  }
  return { inputs, failures };
}

// ---- running a command ----

export interface BaseInputs {
  stdin?: string;
  logging?: string;
  interpreter?: string[];
  dir?: string;
  environment?: Record<string, string>;
  addPreviousOutputInEnv?: boolean;
}

/** Go's %q (strconv.Quote), which upstream's error message uses for the command. */
export function goQuote(s: string): string {
  const named: Record<string, string> = {
    '\x07': '\\a',
    '\b': '\\b',
    '\f': '\\f',
    '\n': '\\n',
    '\r': '\\r',
    '\t': '\\t',
    '\v': '\\v',
    '\\': '\\\\',
    '"': '\\"',
  };
  let out = '"';
  for (const c of s) {
    const cp = c.codePointAt(0)!;
    if (named[c]) out += named[c];
    else if (cp < 0x20 || cp === 0x7f) out += `\\x${cp.toString(16).padStart(2, '0')}`;
    else if (/[\p{L}\p{M}\p{N}\p{P}\p{S} ]/u.test(c)) out += c;
    else if (cp < 0x10000) out += `\\u${cp.toString(16).padStart(4, '0')}`;
    else out += `\\U${cp.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

/** How Go's os/exec names a signal that ended a process. */
const SIGNAL_TEXT: Record<string, string> = {
  SIGHUP: 'hangup',
  SIGINT: 'interrupt',
  SIGQUIT: 'quit',
  SIGILL: 'illegal instruction',
  SIGTRAP: 'trace/breakpoint trap',
  SIGABRT: 'aborted',
  SIGBUS: 'bus error',
  SIGFPE: 'floating point exception',
  SIGKILL: 'killed',
  SIGUSR1: 'user defined signal 1',
  SIGSEGV: 'segmentation fault',
  SIGUSR2: 'user defined signal 2',
  SIGPIPE: 'broken pipe',
  SIGALRM: 'alarm clock',
  SIGTERM: 'terminated',
};

/** The error Go's exec would give for a program it cannot start (missing, not executable, bad dir). */
function startError(program: string, cwd: string, env: NodeJS.ProcessEnv): string | undefined {
  try {
    if (!fs.statSync(cwd).isDirectory()) return `chdir ${cwd}: not a directory`;
  } catch {
    return `chdir ${cwd}: no such file or directory`;
  }
  const executable = (f: string): boolean => {
    try {
      fs.accessSync(f, fs.constants.X_OK);
      return fs.statSync(f).isFile();
    } catch {
      return false;
    }
  };
  if (program.includes('/')) {
    const abs = path.resolve(cwd, program);
    if (!fs.existsSync(abs)) return `fork/exec ${program}: no such file or directory`;
    if (!executable(abs)) return `fork/exec ${program}: permission denied`;
    return undefined;
  }
  const found = (env.PATH ?? '').split(':').some((d) => d !== '' && executable(path.join(d, program)));
  return found ? undefined : `exec: ${goQuote(program)}: executable file not found in $PATH`;
}

export class CommandRunner {
  private readonly children = new Set<ChildProcess>();

  constructor(private readonly log: (urn: string, message: string) => Promise<void>) {}

  /** Kills every running command (Cancel). */
  cancelAll(): void {
    for (const c of this.children) c.kill('SIGKILL');
  }

  /**
   * Runs `command` with the base inputs; `previous` is the stdout/stderr from the last create/update
   * (for PULUMI_COMMAND_STDOUT/STDERR). Resolves to the new stdout/stderr, rejects with upstream's message.
   */
  run(
    urn: string,
    command: string,
    inputs: BaseInputs,
    previous: { stdout: string; stderr: string },
  ): Promise<{ stdout: string; stderr: string }> {
    const argv =
      inputs.interpreter && inputs.interpreter.length > 0
        ? [...inputs.interpreter, command]
        : ['/bin/sh', '-c', command];
    const cwd = inputs.dir ?? process.cwd();
    const env: NodeJS.ProcessEnv = { ...process.env, ...(inputs.environment ?? {}) };
    if (inputs.addPreviousOutputInEnv !== false) {
      if (previous.stdout !== '') env.PULUMI_COMMAND_STDOUT = previous.stdout;
      if (previous.stderr !== '') env.PULUMI_COMMAND_STDERR = previous.stderr;
    }
    const logStdout =
      inputs.logging === undefined || inputs.logging === 'stdout' || inputs.logging === 'stdoutAndStderr';
    const logStderr =
      inputs.logging === undefined || inputs.logging === 'stderr' || inputs.logging === 'stdoutAndStderr';
    const failure = (why: string, combined: string): Error =>
      new Error(`${why}: running ${goQuote(command)}:\n${combined}`);

    const notStartable = startError(argv[0]!, cwd, env);
    if (notStartable) return Promise.reject(failure(notStartable, ''));

    return new Promise((resolve, reject) => {
      const stdin = inputs.stdin !== undefined && inputs.stdin.length > 0;
      const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio: [stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
      this.children.add(child);
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      const both: Buffer[] = [];
      // Lines to the engine, in order, one message at a time (stdout and stderr share one line buffer).
      let pending = Buffer.alloc(0);
      let logging = Promise.resolve();
      const sendLine = (line: Buffer): void => {
        const text = line.toString('utf8').replace(/\r$/, '');
        logging = logging.then(() => this.log(urn, text));
      };
      const toLog = (chunk: Buffer): void => {
        pending = Buffer.concat([pending, chunk]);
        let i: number;
        while ((i = pending.indexOf(0x0a)) >= 0) {
          sendLine(pending.subarray(0, i));
          pending = pending.subarray(i + 1);
        }
      };
      child.stdout!.on('data', (c: Buffer) => {
        out.push(c);
        both.push(c);
        if (logStdout) toLog(c);
      });
      child.stderr!.on('data', (c: Buffer) => {
        err.push(c);
        both.push(c);
        if (logStderr) toLog(c);
      });
      if (stdin) {
        child.stdin!.on('error', () => {
          /* the command did not read all of it */
        });
        child.stdin!.end(inputs.stdin);
      }
      child.on('error', (e) => {
        this.children.delete(child);
        reject(failure(e.message, Buffer.concat(both).toString('utf8')));
      });
      child.on('close', (code, signal) => {
        this.children.delete(child);
        if (pending.length > 0) sendLine(pending);
        void logging.then(() => {
          if (code !== 0) {
            const why = signal ? `signal: ${SIGNAL_TEXT[signal] ?? signal}` : `exit status ${code}`;
            reject(failure(why, Buffer.concat(both).toString('utf8')));
            return;
          }
          const trim = (b: Buffer[]): string => Buffer.concat(b).toString('utf8').replace(/\n$/, '');
          resolve({ stdout: trim(out), stderr: trim(err) });
        });
      });
    });
  }
}

const asString = (v: Value | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

/** The base inputs of a property map, secrets revealed. */
export function baseInputs(m: PropertyMap): BaseInputs {
  const r = reveal(m) as Record<string, Value>;
  const b: BaseInputs = {};
  if (typeof r.stdin === 'string') b.stdin = r.stdin;
  if (typeof r.logging === 'string') b.logging = r.logging;
  if (Array.isArray(r.interpreter)) b.interpreter = r.interpreter.map(String);
  if (typeof r.dir === 'string') b.dir = r.dir;
  if (isPlainObject(r.environment))
    // check() let only strings through; JSON for anything else rather than "[object Object]".
    b.environment = Object.fromEntries(
      Object.entries(r.environment).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]),
    );
  if (typeof r.addPreviousOutputInEnv === 'boolean') b.addPreviousOutputInEnv = r.addPreviousOutputInEnv;
  return b;
}

// ---- the gRPC service ----

type Callback<T> = (err: grpc.ServiceError | Partial<grpc.StatusObject> | null, value?: T) => void;
type Call<T> = { request: T };

function failed(message: string, code: grpc.status = grpc.status.UNKNOWN): Partial<grpc.StatusObject> {
  return { code, details: message };
}

const DIFF_KIND: Record<DiffKind, prov.PropertyDiff.Kind> = {
  add: prov.PropertyDiff.Kind.ADD,
  'add-replace': prov.PropertyDiff.Kind.ADD_REPLACE,
  delete: prov.PropertyDiff.Kind.DELETE,
  'delete-replace': prov.PropertyDiff.Kind.DELETE_REPLACE,
  update: prov.PropertyDiff.Kind.UPDATE,
  'update-replace': prov.PropertyDiff.Kind.UPDATE_REPLACE,
};

export class CommandProvider {
  private engine?: engineGrpc.EngineClient;
  private sendsOldInputs = false;
  readonly runner: CommandRunner;

  constructor(engineAddress: string) {
    this.attachEngine(engineAddress);
    this.runner = new CommandRunner((urn, message) => this.logStatus(urn, message));
  }

  private attachEngine(address: string): void {
    if (!address) return;
    this.engine?.close();
    this.engine = new engineGrpc.EngineClient(address, grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': MAX_MESSAGE,
      'grpc.max_send_message_length': MAX_MESSAGE,
    });
  }

  /** An ephemeral info message for the resource (the progress display's Info column). */
  private logStatus(urn: string, message: string): Promise<void> {
    const engineClient = this.engine;
    if (!engineClient) return Promise.resolve();
    const req = new engine.LogRequest()
      .setSeverity(engine.LogSeverity.INFO)
      .setMessage(message)
      .setUrn(urn)
      .setEphemeral(true);
    return new Promise((resolve) => engineClient.log(req, () => resolve()));
  }

  private async runFor(
    urn: string,
    command: string,
    props: PropertyMap,
    previous: PropertyMap,
  ): Promise<{ stdout: string; stderr: string }> {
    const prev = reveal(previous) as Record<string, Value>;
    return this.runner.run(urn, command, baseInputs(props), {
      stdout: asString(prev.stdout) ?? '',
      stderr: asString(prev.stderr) ?? '',
    });
  }

  readonly impl: grpc.UntypedServiceImplementation = {
    getPluginInfo: (_call: Call<Empty>, cb: Callback<plugin.PluginInfo>) =>
      cb(null, new plugin.PluginInfo().setVersion(TEST_COMMAND_PROVIDER_VERSION)),
    getSchema: (_call: Call<prov.GetSchemaRequest>, cb: Callback<prov.GetSchemaResponse>) =>
      cb(null, new prov.GetSchemaResponse().setSchema(JSON.stringify(SCHEMA))),
    attach: (call: Call<plugin.PluginAttach>, cb: Callback<Empty>) => {
      this.attachEngine(call.request.getAddress());
      cb(null, new Empty());
    },
    cancel: (_call: Call<Empty>, cb: Callback<Empty>) => {
      this.runner.cancelAll();
      cb(null, new Empty());
    },
    checkConfig: (call: Call<prov.CheckRequest>, cb: Callback<prov.CheckResponse>) => {
      const resp = new prov.CheckResponse();
      if (call.request.hasNews()) resp.setInputs(call.request.getNews());
      cb(null, resp);
    },
    diffConfig: (call: Call<prov.DiffRequest>, cb: Callback<prov.DiffResponse>) => {
      // The provider has no configuration: only a changed version or plugin URL could differ, and
      // nothing depends on those.
      const strip = (m: PropertyMap): PropertyMap =>
        Object.fromEntries(
          Object.entries(m).filter(([k]) => k !== 'version' && k !== 'pluginDownloadURL' && !k.startsWith('__')),
        );
      const same = deepEquals(strip(toMap(call.request.getOlds())), strip(toMap(call.request.getNews())));
      cb(
        null,
        new prov.DiffResponse().setChanges(
          same ? prov.DiffResponse.DiffChanges.DIFF_NONE : prov.DiffResponse.DiffChanges.DIFF_SOME,
        ),
      );
    },
    configure: (call: Call<prov.ConfigureRequest>, cb: Callback<prov.ConfigureResponse>) => {
      this.sendsOldInputs = call.request.getSendsOldInputs() && call.request.getSendsOldInputsToDelete();
      cb(
        null,
        new prov.ConfigureResponse()
          .setAcceptsecrets(true)
          .setSupportspreview(true)
          .setAcceptresources(false)
          .setAcceptoutputs(false),
      );
    },
    check: (call: Call<prov.CheckRequest>, cb: Callback<prov.CheckResponse>) => {
      if (!call.request.getUrn().includes(`::${COMMAND}::`))
        return cb(failed(`unknown resource type in ${call.request.getUrn()}`, grpc.status.INVALID_ARGUMENT));
      const news = toMap(call.request.getNews());
      const { inputs, failures } = checkInputs(news, COMMAND_KINDS);
      const resp = new prov.CheckResponse().setInputs(toStruct(failures.length > 0 ? news : inputs));
      resp.setFailuresList(failures.map((f) => new prov.CheckFailure().setProperty(f.property).setReason(f.reason)));
      cb(null, resp);
    },
    diff: (call: Call<prov.DiffRequest>, cb: Callback<prov.DiffResponse>) => {
      const state = toMap(call.request.getOlds());
      const news = toMap(call.request.getNews());
      for (const k of call.request.getIgnorechangesList()) if (k in state) news[k] = state[k]!;
      const oldInputs =
        this.sendsOldInputs && call.request.hasOldInputs()
          ? toMap(call.request.getOldInputs())
          : Object.fromEntries(
              Object.keys(COMMAND_KINDS)
                .filter((k) => k in state)
                .map((k) => [k, state[k]!]),
            );
      const d = diffCommand(oldInputs, news);
      const resp = new prov.DiffResponse()
        .setChanges(d.changes ? prov.DiffResponse.DiffChanges.DIFF_SOME : prov.DiffResponse.DiffChanges.DIFF_NONE)
        .setHasdetaileddiff(true)
        .setDeletebeforereplace(false)
        .setReplacesList(d.replaces)
        .setDiffsList(d.diffs);
      for (const [p, kind] of Object.entries(d.detailed))
        resp.getDetaileddiffMap().set(p, new prov.PropertyDiff().setKind(DIFF_KIND[kind]).setInputdiff(false));
      cb(null, resp);
    },
    create: (call: Call<prov.CreateRequest>, cb: Callback<prov.CreateResponse>) => {
      const req = call.request;
      const urn = req.getUrn();
      const inputs = toMap(req.getProperties());
      const name = req.getName() || urn.split('::').slice(3).join('::');
      const id = `${name}${randomBytes(4).toString('hex')}`;
      const respond = (outs: PropertyMap): void =>
        cb(null, new prov.CreateResponse().setId(id).setProperties(toStruct(outs)));
      if (req.getPreview()) return respond({ ...inputs, stdout: UNKNOWN, stderr: UNKNOWN });
      const create = asString(reveal(inputs.create ?? null));
      if (create === undefined) return respond({ ...inputs, stdout: '', stderr: '' });
      this.runFor(urn, create, inputs, {}).then(
        (r) => respond({ ...inputs, ...r }),
        (e: Error) => cb(failed(e.message)),
      );
    },
    update: (call: Call<prov.UpdateRequest>, cb: Callback<prov.UpdateResponse>) => {
      const req = call.request;
      const olds = toMap(req.getOlds());
      const news = toMap(req.getNews());
      for (const k of req.getIgnorechangesList()) if (k in olds) news[k] = olds[k]!;
      const prev = reveal({ stdout: olds.stdout ?? '', stderr: olds.stderr ?? '' }) as { stdout: Value; stderr: Value };
      const state: PropertyMap = { ...news, stdout: asString(prev.stdout) ?? '', stderr: asString(prev.stderr) ?? '' };
      const respond = (outs: PropertyMap): void => cb(null, new prov.UpdateResponse().setProperties(toStruct(outs)));
      if (req.getPreview()) {
        // Upstream marks stdout/stderr unknown when an input is unknown or differs from the stored one.
        const changed = Object.keys(COMMAND_KINDS).some(
          (k) => isUnknown(news[k]) || (k in olds && !deepEquals(news[k] ?? null, olds[k])),
        );
        return respond(changed ? { ...state, stdout: UNKNOWN, stderr: UNKNOWN } : state);
      }
      const r = reveal(news) as Record<string, Value>;
      const command = asString(r.update) ?? asString(r.create);
      if (command === undefined) return respond(state);
      this.runFor(req.getUrn(), command, news, { stdout: state.stdout!, stderr: state.stderr! }).then(
        (out) => respond({ ...state, ...out }),
        (e: Error) => cb(failed(e.message)),
      );
    },
    delete: (call: Call<prov.DeleteRequest>, cb: Callback<Empty>) => {
      const props = toMap(call.request.getProperties());
      const del = asString(reveal(props.delete ?? null));
      if (del === undefined) return cb(null, new Empty());
      this.runFor(call.request.getUrn(), del, props, props).then(
        () => cb(null, new Empty()),
        (e: Error) => cb(failed(e.message)),
      );
    },
    read: (call: Call<prov.ReadRequest>, cb: Callback<prov.ReadResponse>) => {
      const resp = new prov.ReadResponse().setId(call.request.getId());
      if (call.request.hasProperties()) resp.setProperties(call.request.getProperties());
      if (call.request.hasInputs()) resp.setInputs(call.request.getInputs());
      cb(null, resp);
    },
    invoke: (call: Call<prov.InvokeRequest>, cb: Callback<prov.InvokeResponse>) => {
      if (call.request.getTok() !== RUN) return cb(failed(`unknown function ${call.request.getTok()}`));
      const args = toMap(call.request.getArgs());
      const { inputs, failures } = checkInputs(args, RUN_KINDS, ['command']);
      if (failures.length > 0) {
        return cb(
          null,
          new prov.InvokeResponse().setFailuresList(
            failures.map((f) => new prov.CheckFailure().setProperty(f.property).setReason(f.reason)),
          ),
        );
      }
      const command = asString(reveal(inputs.command ?? null)) ?? '';
      this.runFor('', command, inputs, {}).then(
        (r) => cb(null, new prov.InvokeResponse().setReturn(toStruct({ ...(reveal(inputs) as PropertyMap), ...r }))),
        (e: Error) => cb(failed(e.message)),
      );
    },
  };
}

export function main(argv: string[]): void {
  const { flags, positional } = parseArgs(argv);
  if (flags.version === 'true') {
    process.stdout.write(`${TEST_COMMAND_PROVIDER_VERSION}\n`);
    return;
  }
  const provider = new CommandProvider(positional[0] ?? '');
  const server = new grpc.Server({
    'grpc.max_receive_message_length': MAX_MESSAGE,
    'grpc.max_send_message_length': MAX_MESSAGE,
  });
  // RPCs not implemented here (Handshake, Construct, Call, Parameterize…) answer UNIMPLEMENTED (grpc-js).
  server.addService(providerGrpc.ResourceProviderService, provider.impl);
  const stop = (): void => {
    provider.runner.cancelAll();
    server.forceShutdown();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      process.stderr.write(`error: could not start the provider's RPC server: ${err.message}\n`);
      process.exit(1);
    }
    // The CLI reads this first stdout line to know where to connect.
    process.stdout.write(`${port}\n`);
  });
}

/**
 * Writes `<dir>/pulumi-resource-command`, a launcher for the built provider
 * (dist/agent/testkit/command-provider.js), and returns its path: for `pulumi plugin install resource
 * command <version> --file <path>`.
 */
export function installTestCommandProvider(dir: string): string {
  // From agent/testkit (sources) or dist/agent/testkit (built): the repository root holds node_modules.
  const repo = [path.resolve(__dirname, '..', '..'), path.resolve(__dirname, '..', '..', '..')].find((d) =>
    fs.existsSync(path.join(d, 'node_modules', '@pulumi', 'pulumi')),
  )!;
  const built = path.join(repo, 'dist', 'agent', 'testkit', 'command-provider.js');
  if (!fs.existsSync(built)) throw new Error(`${built} is missing: run npm run build`);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'pulumi-resource-command');
  const q = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;
  fs.writeFileSync(
    file,
    `#!/bin/sh\n# pulumi-resource-command (test bed): see agent/testkit/command-provider.ts\nexec ${q(process.execPath)} ${q(built)} "$@"\n`,
    { mode: 0o755 },
  );
  return file;
}

if (require.main === module) main(process.argv.slice(2));
