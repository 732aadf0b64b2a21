/**
 * A container as local processes:
 *
 *   setpriv --pdeathsig KILL -- unshare --mount --uts --pid --propagation private -- sh -c REAPER
 *     REAPER (new mount and UTS namespaces, host PID namespace): sets the hostname (a shell
 *       builtin: it must fork nothing before INIT), starts INIT, reports INIT's host pid, waits
 *       for it and exits with its status (128+signal when killed, as container runtimes report).
 *     INIT (the first child, hence PID 1 of the new PID namespace; parent-death signal KILL):
 *       bind-mounts the volumes at their mount paths (read-only ones remounted ro), mounts /proc,
 *       changes to the working dir, checks the command exists, then execs it through setpriv
 *       (uid/gid/groups, bounding set, no_new_privs, parent-death signal again).
 *
 * The command is PID 1 of its PID namespace, as in a container: signals without a handler are
 * ignored, killing it kills everything the container started, and SIGTERM goes to it alone.
 * If the test process dies, the reaper gets SIGKILL (parent-death signal), which kills INIT and
 * with it the whole PID namespace: nothing survives. Mounts live only in the container's mount
 * namespace and vanish with its last process.
 *
 * Errors before the command runs (mount, working dir, command not found) are reported on fd 3
 * as `start-error <message>`; the reaper reports INIT's host pid there as `pid <n>`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface HostTools {
  setpriv: string;
  unshare: string;
  nsenter: string;
  mount: string;
  mkdir: string;
  sh: string;
}

function which(name: string, dirs: string[]): string | undefined {
  for (const d of dirs) {
    const f = path.join(d, name);
    try {
      fs.accessSync(f, fs.constants.X_OK);
      return f;
    } catch {
      /* next */
    }
  }
  return undefined;
}

export function findHostTools(): HostTools {
  const dirs = [
    '/usr/bin',
    '/bin',
    '/usr/sbin',
    '/sbin',
    ...(process.env.PATH ?? '').split(':').filter((d) => d !== ''),
  ];
  const out: Partial<HostTools> = {};
  const missing: string[] = [];
  for (const t of ['setpriv', 'unshare', 'nsenter', 'mount', 'mkdir', 'sh'] as const) {
    const f = which(t, dirs);
    if (f === undefined) missing.push(t);
    else out[t] = f;
  }
  if (missing.length) throw new Error(`pod runner: missing host tools (util-linux, coreutils): ${missing.join(', ')}`);
  if (process.getuid?.() !== 0)
    throw new Error('pod runner: must run as root (mount namespaces, bind mounts, setpriv)');
  return out as HostTools;
}

/** Single-quotes a word for sh. */
export function shq(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export interface BindMount {
  /** Host path. */
  source: string;
  /** Path inside the container. */
  target: string;
  readOnly: boolean;
}

export interface Credentials {
  uid: number;
  gid: number;
  groups: number[];
  /** setpriv --bounding-set argument, e.g. "-all,+net_bind_service"; undefined: keep all. */
  boundingSet?: string;
  noNewPrivs: boolean;
}

export interface LaunchSpec {
  argv: string[];
  env: Record<string, string>;
  workingDir: string;
  mounts: BindMount[];
  hostname: string;
  creds: Credentials;
  logFile: string;
  /** Called with each chunk of output, when streaming. */
  onOutput?: (chunk: Buffer) => void;
}

export interface ExitInfo {
  exitCode: number;
  /** Set when the command never ran (kubelet: StartError / ContainerCannotRun). */
  startError?: string;
}

function setprivArgs(tools: HostTools, c: Credentials): string[] {
  const a = [tools.setpriv, '--pdeathsig', 'KILL'];
  if (c.uid !== 0 || c.gid !== 0 || c.groups.length > 0) {
    a.push(`--reuid=${c.uid}`, `--regid=${c.gid}`);
    if (c.groups.length) a.push(`--groups=${c.groups.join(',')}`);
    else a.push('--clear-groups');
  }
  if (c.boundingSet !== undefined) a.push(`--bounding-set=${c.boundingSet}`);
  if (c.noNewPrivs) a.push('--no-new-privs');
  a.push('--');
  return a;
}

function reaperScript(tools: HostTools, spec: LaunchSpec): string {
  // INIT is the first process forked after unshare(CLONE_NEWPID), so it is PID 1 of the new PID
  // namespace: the reaper itself must not fork anything before it (no external commands).
  const init: string[] = [`fail() { printf 'start-error %s\\n' "$1" >&3; exit 128; }`];
  for (const m of spec.mounts) {
    const t = shq(m.target);
    const s = shq(m.source);
    init.push(
      `if [ -d ${s} ]; then [ -d ${t} ] || ${shq(tools.mkdir)} -p ${t} 2>/dev/null; else [ -e ${t} ] || { ${shq(tools.mkdir)} -p "$(dirname ${t})" && : > ${t}; } 2>/dev/null; fi`,
      `${shq(tools.mount)} --bind ${s} ${t} 2>/dev/null || fail ${shq(`cannot bind-mount ${m.source} at ${m.target}`)}`,
    );
    if (m.readOnly)
      init.push(
        `${shq(tools.mount)} -o remount,bind,ro ${t} 2>/dev/null || fail ${shq(`cannot remount ${m.target} read-only`)}`,
      );
  }
  init.push(
    `${shq(tools.mount)} -t proc proc /proc 2>/dev/null || fail 'cannot mount /proc'`,
    // Like runc: a missing working directory is created (it lies inside a volume here; the
    // runner creates one outside every volume on the host beforehand).
    `[ -d ${shq(spec.workingDir)} ] || ${shq(tools.mkdir)} -p ${shq(spec.workingDir)} 2>/dev/null`,
    `cd ${shq(spec.workingDir)} 2>/dev/null || fail ${shq(`cannot change to the working directory ${spec.workingDir}`)}`,
    // Absolute and relative commands are checked as given; bare names through PATH.
    `case "$1" in */*) [ -x "$1" ] || fail "exec: \\"$1\\": stat $1: no such file or directory" ;; *) command -v "$1" >/dev/null 2>&1 || fail "exec: \\"$1\\": executable file not found in \\$PATH" ;; esac`,
    `exec ${setprivArgs(tools, spec.creds).map(shq).join(' ')} "$@" 3>&-`,
  );
  return [
    // One stream for stdout and stderr, in order (with a file they already share one fd).
    'exec 2>&1',
    `echo ${shq(spec.hostname)} > /proc/sys/kernel/hostname 2>/dev/null || { printf 'start-error cannot set the hostname\\n' >&3; exit 128; }`,
    `${shq(tools.setpriv)} --pdeathsig KILL -- ${shq(tools.sh)} -c ${shq(init.join('\n'))} pko-init "$@" &`,
    `printf 'pid %s\\n' "$!" >&3`,
    'exec 3>&-',
    'wait $!',
    'exit $?',
  ].join('\n');
}

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGSEGV: 11,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};

export class ContainerProcess {
  readonly reaper: ChildProcess;
  /** Host pid of the container's PID 1, once known. */
  initPid: number | undefined;
  readonly started: Promise<number | undefined>;
  readonly exited: Promise<ExitInfo>;
  private hasExited = false;
  private startError: string | undefined;

  constructor(
    readonly tools: HostTools,
    readonly spec: LaunchSpec,
  ) {
    const logFd = fs.openSync(spec.logFile, 'a');
    const stream = spec.onOutput !== undefined;
    this.reaper = spawn(
      tools.setpriv,
      [
        '--pdeathsig',
        'KILL',
        '--',
        tools.unshare,
        '--mount',
        '--uts',
        '--pid',
        '--propagation',
        'private',
        '--',
        tools.sh,
        '-c',
        reaperScript(tools, spec),
        'pko-reaper',
        ...spec.argv,
      ],
      {
        cwd: '/',
        env: spec.env,
        detached: true,
        stdio: ['ignore', stream ? 'pipe' : logFd, stream ? 'pipe' : logFd, 'pipe'],
      },
    );
    if (stream) {
      const onChunk = (c: Buffer): void => {
        fs.writeSync(logFd, c);
        spec.onOutput!(c);
      };
      this.reaper.stdout?.on('data', onChunk);
      this.reaper.stderr?.on('data', onChunk);
    }
    const control = this.reaper.stdio[3] as NodeJS.ReadableStream | null;
    let resolveStarted: (pid: number | undefined) => void = () => undefined;
    this.started = new Promise((r) => (resolveStarted = r));
    let buf = '';
    control?.on('data', (c: Buffer) => {
      buf += c.toString('utf8');
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.startsWith('pid ')) {
          this.initPid = Number(line.slice(4));
          resolveStarted(this.initPid);
        } else if (line.startsWith('start-error ')) {
          this.startError = line.slice('start-error '.length);
        }
      }
    });
    control?.on('error', () => undefined);
    this.exited = new Promise((resolve) => {
      let status: { code: number | null; signal: NodeJS.Signals | null } | undefined;
      let finished = false;
      const finish = (): void => {
        if (finished) return;
        finished = true;
        this.hasExited = true;
        resolveStarted(undefined);
        try {
          fs.closeSync(logFd);
        } catch {
          /* closed */
        }
        const code = status?.code ?? null;
        const signal = status?.signal ?? null;
        const exitCode = code ?? (signal !== null ? 128 + (SIGNALS[signal] ?? 9) : 255);
        resolve(this.startError !== undefined ? { exitCode, startError: this.startError } : { exitCode });
      };
      // 'close' comes after 'exit' once the output and control pipes are drained.
      this.reaper.once('exit', (code, signal) => {
        status = { code, signal };
        this.hasExited = true;
        setTimeout(finish, 2000).unref();
      });
      this.reaper.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
        status ??= { code, signal };
        finish();
      });
      this.reaper.once('error', (e) => {
        this.startError = `cannot start: ${e.message}`;
        status = { code: 128, signal: null };
        finish();
      });
    });
  }

  get running(): boolean {
    return !this.hasExited;
  }

  /** Sends a signal to the container's PID 1 (what a runtime's kill does). */
  signal(sig: NodeJS.Signals): void {
    if (this.hasExited) return;
    if (this.initPid !== undefined) {
      try {
        process.kill(this.initPid, sig);
        return;
      } catch {
        /* gone */
      }
    }
    if (sig === 'SIGKILL') this.killAll();
  }

  /** SIGKILL to PID 1 (which ends the PID namespace) and to the reaper's process group. */
  killAll(): void {
    if (this.initPid !== undefined) {
      try {
        process.kill(this.initPid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    if (this.reaper.pid !== undefined) {
      try {
        process.kill(-this.reaper.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }

  /** Runs a command inside the container's namespaces, as its user, with its env (exec probes, hooks). */
  exec(argv: string[], timeoutMs: number): Promise<{ exitCode: number; output: string; timedOut: boolean }> {
    return execIn(this.tools, this.initPid, this.spec, argv, timeoutMs);
  }
}

function execIn(
  tools: HostTools,
  initPid: number | undefined,
  spec: LaunchSpec,
  argv: string[],
  timeoutMs: number,
): Promise<{ exitCode: number; output: string; timedOut: boolean }> {
  if (initPid === undefined)
    return Promise.resolve({ exitCode: 126, output: 'container is not running', timedOut: false });
  const script = `cd ${shq(spec.workingDir)} 2>/dev/null || cd /; exec ${setprivArgs(tools, spec.creds).map(shq).join(' ')} "$@"`;
  return new Promise((resolve) => {
    const child = spawn(
      tools.nsenter,
      ['--target', String(initPid), '--mount', '--uts', '--pid', '--', tools.sh, '-c', script, 'pko-exec', ...argv],
      {
        env: spec.env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const chunks: Buffer[] = [];
    let size = 0;
    const collect = (c: Buffer): void => {
      if (size < 10240) chunks.push(c);
      size += c.length;
    };
    child.stdout?.on('data', collect);
    child.stderr?.on('data', collect);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      resolve({ exitCode: 126, output: e.message, timedOut: false });
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({
        exitCode: code ?? (signal !== null ? 128 + (SIGNALS[signal] ?? 9) : 255),
        output: Buffer.concat(chunks).toString('utf8'),
        timedOut,
      });
    });
  });
}
