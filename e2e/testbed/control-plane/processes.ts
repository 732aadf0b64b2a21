/**
 * The control plane's process registry and exit hooks: whatever happens to the test process, no
 * child survives it (exit hook, SIGINT/SIGTERM/SIGHUP hooks, and a watchdog shell for the deaths
 * that run no hook).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { eventually, tail } from '../helpers';

export interface ProcessInfo {
  /** etcd, kube-apiserver, kube-controller-manager; kubelet, kube-proxy, kube-scheduler, coredns. */
  name: string;
  pid: number;
  args: string[];
  logFile: string;
}

export interface Managed {
  info: ProcessInfo;
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  hasExited: boolean;
}

export interface Running {
  dir: string;
  keepDir: boolean;
  procs: Managed[];
  watchdog?: ChildProcess;
}

export const running = new Set<Running>();
let hooksInstalled = false;

function killAllSync(): void {
  for (const r of running) {
    for (const p of r.procs) {
      if (!p.hasExited) {
        try {
          p.child.kill('SIGKILL');
        } catch {
          /* already gone */
        }
      }
    }
    try {
      r.watchdog?.kill('SIGKILL');
    } catch {
      /* already gone */
    }
    if (!r.keepDir) fs.rmSync(r.dir, { recursive: true, force: true });
  }
  running.clear();
}

export function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', killAllSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      killAllSync();
      process.removeListener(sig, onSignal);
      // Nobody else handles it: die of the signal as we would have without this hook.
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}

/**
 * A shell that polls this process and, if it disappears without running its exit hooks (SIGKILL,
 * crash), SIGKILLs the control plane's processes and removes the dir. The pid list is read from
 * <dir>/pids at that moment.
 */
export function startWatchdog(dir: string, keepDir: boolean): ChildProcess {
  const script = [
    'while kill -0 "$1" 2>/dev/null; do sleep 0.5; done',
    'if [ -f "$2/pids" ]; then for p in $(cat "$2/pids"); do kill -9 "$p" 2>/dev/null; done; fi',
    keepDir ? ':' : 'rm -rf "$2"',
  ].join('\n');
  const child = spawn('/bin/sh', ['-c', script, 'pko-control-plane-watchdog', String(process.pid), dir], {
    stdio: 'ignore',
    detached: true, // its own process group: a Ctrl-C for the tests does not kill it first
  });
  child.unref();
  return child;
}

/**
 * Starts `bin` in the group's dir with stdout and stderr appended to `<dir>/<name>.log` (and `env`
 * added to this process's environment), and registers it, so that stopProcesses() and the exit
 * hooks stop it.
 */
export function launchProcess(
  state: Running,
  name: string,
  bin: string,
  args: string[],
  env: Record<string, string> = {},
): Managed {
  const logFile = path.join(state.dir, `${name}.log`);
  const fd = fs.openSync(logFile, 'a');
  const child = spawn(bin, args, { stdio: ['ignore', fd, fd], cwd: state.dir, env: { ...process.env, ...env } });
  fs.closeSync(fd);
  if (child.pid === undefined) throw new Error(`cannot start ${bin}`);
  const m: Managed = {
    info: { name, pid: child.pid, args, logFile },
    child,
    hasExited: false,
    exited: new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        m.hasExited = true;
        resolve({ code, signal });
      });
    }),
  };
  child.once('error', () => {
    /* reported through 'exit' or the caller's start-up timeout */
  });
  state.procs.push(m);
  fs.appendFileSync(path.join(state.dir, 'pids'), `${child.pid}\n`);
  return m;
}

/** SIGTERM to each process in reverse start order, one at a time; SIGKILL after `graceMs`. */
export async function stopProcesses(state: Running, graceMs = 5000): Promise<void> {
  for (const p of [...state.procs].reverse()) {
    if (p.hasExited) continue;
    p.child.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const exited = await Promise.race([
      p.exited.then(() => true),
      new Promise<false>((r) => (timer = setTimeout(() => r(false), graceMs))),
    ]);
    clearTimeout(timer);
    if (!exited) {
      p.child.kill('SIGKILL');
      await p.exited;
    }
  }
}

/** A process of its own group, started by startUntilReady(): its log, and how to stop it. */
export interface StartedProcess {
  logFile: string;
  stop(): Promise<void>;
}

/**
 * Starts `bin` in `dir` as a group of its own (launchProcess; the exit hooks stop it too) and waits
 * up to 60 s for `ready`; if the process exits first or is not ready by then, stops it and throws
 * with the last lines of its log.
 */
export async function startUntilReady(
  dir: string,
  name: string,
  bin: string,
  args: string[],
  env: Record<string, string>,
  ready: { what: string; check: () => Promise<boolean> },
): Promise<StartedProcess> {
  installHooks();
  const state: Running = { dir, keepDir: true, procs: [] };
  running.add(state);
  const stop = async (): Promise<void> => {
    if (!running.has(state)) return;
    running.delete(state);
    await stopProcesses(state);
  };
  const proc = launchProcess(state, name, bin, args, env);
  const outcome = await eventually(
    ready.what,
    async () => (proc.hasExited ? 'exited' : (await ready.check().catch(() => false)) ? 'ready' : undefined),
    60_000,
    250,
  ).catch((e: Error) => e.message);
  if (outcome !== 'ready') {
    await stop();
    throw new Error(`${name} did not start (${outcome}); last lines of its log:\n${tail(proc.info.logFile)}`);
  }
  return { logFile: proc.info.logFile, stop };
}
