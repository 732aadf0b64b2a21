import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';

export interface RunOptions {
  args: string[];
  cwd: string;
  env?: NodeJS.ProcessEnv;
  /** Written to the CLI's stdin, which is then closed (values that must not be on a command line). */
  stdin?: string;
  onStdout?: (line: string) => void;
  onStderr?: (line: string) => void;
  /** Aborting sends SIGINT (Ctrl-C): Pulumi cancels gracefully and unlocks the stack. */
  signal?: AbortSignal;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Whether SIGINT was sent. */
  interrupted: boolean;
}

/** The CLI: PULUMI_CLI overrides `pulumi` on PATH (the Automation API's default too). */
export function pulumiBinary(env: NodeJS.ProcessEnv = process.env): string {
  return env.PULUMI_CLI || 'pulumi';
}

const running = new Set<ChildProcess>();

/** The processes below `pid` (Linux /proc), deepest last. Pulumi starts its plugins and language
 * host in process groups of their own, so a group kill would miss them. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return [];
  }
  for (const d of entries) {
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      // pid (comm) state ppid …: comm may hold spaces and parentheses.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid)!.push(Number(d));
    } catch {
      /* gone */
    }
  }
  const out: number[] = [];
  const walk = (p: number): void => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/**
 * Signals every running CLI. SIGINT is Ctrl-C (Pulumi cancels and stops its plugins itself);
 * SIGKILL also kills everything the CLI started (language host, plugins, their children), which a
 * killed CLI could not stop.
 */
export function killChildren(signal: NodeJS.Signals): void {
  for (const c of running) {
    if (c.pid === undefined) continue;
    const tree = signal === 'SIGKILL' ? descendants(c.pid) : [];
    for (const pid of [c.pid, ...tree]) {
      try {
        process.kill(pid, signal);
      } catch {
        /* already gone */
      }
    }
  }
}

function lineSplitter(onLine: ((line: string) => void) | undefined): { push(chunk: string): void; end(): void } {
  let buf = '';
  return {
    push(chunk) {
      if (!onLine) return;
      buf += chunk;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        onLine(buf.slice(0, i).replace(/\r$/, ''));
        buf = buf.slice(i + 1);
      }
    },
    end() {
      if (onLine && buf !== '') onLine(buf);
      buf = '';
    },
  };
}

/** Runs the pulumi CLI non-interactively, collecting and streaming its output. */
export function runPulumi(opts: RunOptions): Promise<RunResult> {
  return new Promise((resolve) => {
    const args = [...opts.args];
    if (!args.includes('--non-interactive')) {
      // Before a `--` separator: what follows it are positional arguments.
      const sep = args.indexOf('--');
      args.splice(sep >= 0 ? sep : args.length, 0, '--non-interactive');
    }
    const env = {
      ...process.env,
      ...opts.env,
      PULUMI_SKIP_UPDATE_CHECK: process.env.PULUMI_SKIP_UPDATE_CHECK ?? 'true',
    };
    const child = spawn(pulumiBinary(env), args, { cwd: opts.cwd, env, stdio: ['pipe', 'pipe', 'pipe'] });
    running.add(child);
    let interrupted = false;
    const out: string[] = [];
    const err: string[] = [];
    const outLines = lineSplitter(opts.onStdout);
    const errLines = lineSplitter(opts.onStderr);
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stdout.on('data', (c: string) => {
      out.push(c);
      outLines.push(c);
    });
    child.stderr.on('data', (c: string) => {
      err.push(c);
      errLines.push(c);
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.stdin ?? '');
    const onAbort = (): void => {
      if (child.exitCode === null && child.signalCode === null) {
        interrupted = true;
        child.kill('SIGINT');
      }
    };
    if (opts.signal) {
      if (opts.signal.aborted) onAbort();
      else opts.signal.addEventListener('abort', onAbort, { once: true });
    }
    let spawnError: Error | undefined;
    child.on('error', (e) => {
      spawnError = e;
    });
    child.on('close', (code, signal) => {
      running.delete(child);
      opts.signal?.removeEventListener('abort', onAbort);
      outLines.end();
      errLines.end();
      const stderr = err.join('') + (spawnError ? `\ncannot run ${pulumiBinary(env)}: ${spawnError.message}` : '');
      resolve({ code: spawnError ? 127 : code, signal, stdout: out.join(''), stderr, interrupted });
    });
  });
}
