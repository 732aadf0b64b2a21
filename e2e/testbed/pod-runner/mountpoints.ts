/**
 * Mount points on the host. Containers see volumes at their real mount paths through bind mounts
 * in a private mount namespace, but a bind mount needs an existing target, which lives in the
 * host's file system: missing targets are created here, remembered, and removed (only if still
 * empty) when the last pod runner of this process stops or the process exits.
 *
 * Paths that must never be mount targets: system directories, their ancestors, anything under
 * /proc, /sys or /dev, and the runner's own directories.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

export const DEFAULT_PROTECTED_PATHS: readonly string[] = [
  '/',
  '/bin',
  '/boot',
  '/dev',
  '/etc',
  '/home',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
  '/opt',
  '/proc',
  '/root',
  '/run',
  '/sbin',
  '/srv',
  '/sys',
  '/tmp',
  '/usr',
  '/usr/bin',
  '/usr/lib',
  '/usr/local',
  '/usr/local/bin',
  '/usr/sbin',
  '/var',
  '/var/lib',
  '/var/run',
  '/var/tmp',
  '/work',
];

const FORBIDDEN_TREES = ['/proc', '/sys', '/dev'];

const isWithin = (child: string, parent: string): boolean =>
  child === parent || (parent === '/' ? child.startsWith('/') : child.startsWith(`${parent}/`));

/** The path with its longest existing prefix resolved through symlinks. */
export function resolveExistingPrefix(p: string): string {
  let head = path.resolve(p);
  const tail: string[] = [];
  for (;;) {
    try {
      const real = fs.realpathSync(head);
      return tail.length ? path.join(real, ...tail.reverse()) : real;
    } catch {
      const parent = path.dirname(head);
      if (parent === head) return path.resolve(p);
      tail.push(path.basename(head));
      head = parent;
    }
  }
}

/** Why `target` may not be a mount target, or undefined when it may. */
export function mountTargetProblem(
  target: string,
  protectedPaths: readonly string[],
  ownDirs: readonly string[],
): string | undefined {
  if (!path.isAbsolute(target)) return `mount path ${target} is not absolute`;
  const candidates = [...new Set([path.resolve(target), resolveExistingPrefix(target)])];
  for (const c of candidates) {
    for (const t of FORBIDDEN_TREES) if (isWithin(c, t)) return `mount path ${target} is inside ${t}`;
    for (const prot of protectedPaths) {
      const pr = path.resolve(prot);
      if (isWithin(pr, c)) return `mount path ${target} would cover the host directory ${pr}`;
    }
    for (const own of ownDirs) {
      if (isWithin(c, own) || isWithin(own, c))
        return `mount path ${target} overlaps the pod runner's directory ${own}`;
    }
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Process-wide registry of what we created on the host (mount points, the runners' temp dirs).
// A watchdog shell removes them if this process dies without running its hooks (SIGKILL): it
// reads a state file kept up to date here.

interface Created {
  path: string;
  kind: 'dir' | 'file';
}

const created = new Map<string, Created>();
const owners = new Map<object, { workDir: string; keep: boolean }>();
const stateFile = path.join(os.tmpdir(), `pko-pod-runner-${process.pid}.cleanup`);
let watchdog: ChildProcess | undefined;

function persist(): void {
  const lines: string[] = [];
  for (const o of owners.values()) if (!o.keep) lines.push(`workdir ${o.workDir}`);
  for (const c of [...created.values()].sort((a, b) => b.path.length - a.path.length))
    lines.push(`${c.kind} ${c.path}`);
  try {
    fs.writeFileSync(stateFile, lines.length ? `${lines.join('\n')}\n` : '');
  } catch {
    /* best effort */
  }
}

const WATCHDOG = [
  'while kill -0 "$1" 2>/dev/null; do sleep 0.5; done',
  // The containers die with the test process (parent-death signals); let them go first.
  'sleep 1',
  '[ -f "$2" ] || exit 0',
  'while IFS= read -r line; do',
  '  kind=${line%% *}; p=${line#* }',
  '  case "$kind" in',
  '    workdir) rm -rf -- "$p" ;;',
  '    dir) grep -qsF " $p" /proc/[0-9]*/mountinfo || find "$p" -depth -type d -exec rmdir {} \\; 2>/dev/null ;;',
  '    file) grep -qsF " $p" /proc/[0-9]*/mountinfo || { [ -s "$p" ] || rm -f -- "$p"; } ;;',
  '  esac',
  'done < "$2"',
  'rm -f -- "$2"',
].join('\n');

function startWatchdog(): void {
  if (watchdog) return;
  watchdog = spawn('/bin/sh', ['-c', WATCHDOG, 'pko-pod-runner-watchdog', String(process.pid), stateFile], {
    stdio: 'ignore',
    detached: true,
  });
  watchdog.unref();
}

/**
 * Mount points in use in any mount namespace (every process's mountinfo). Removing a directory
 * that is a mount point in another namespace would detach that mount (Linux >= 3.18), which
 * would break a container of another test process that uses the same path.
 */
function mountPointsInUse(): Set<string> {
  const out = new Set<string>();
  const seen = new Set<string>();
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    let ns: string;
    try {
      ns = fs.readlinkSync(`/proc/${e}/ns/mnt`);
    } catch {
      continue;
    }
    if (seen.has(ns)) continue;
    seen.add(ns);
    try {
      for (const line of fs.readFileSync(`/proc/${e}/mountinfo`, 'utf8').split('\n')) {
        const mp = line.split(' ')[4];
        if (mp) out.add(mp.replace(/\\(\d{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8))));
      }
    } catch {
      /* gone */
    }
  }
  return out;
}

function removeCreated(): void {
  // Deepest first; nothing that is (or contains) a mount point in some namespace.
  const entries = [...created.values()].sort((a, b) => b.path.length - a.path.length);
  const inUse = entries.length ? [...mountPointsInUse()] : [];
  for (const c of entries) {
    created.delete(c.path);
    if (inUse.some((mp) => isWithin(mp, c.path))) continue;
    try {
      if (c.kind === 'file') {
        const st = fs.lstatSync(c.path);
        if (st.isFile() && st.size === 0) fs.unlinkSync(c.path);
      } else {
        removeEmptyTree(c.path);
      }
    } catch {
      /* gone or busy: leave it */
    }
  }
}

function removeEmptyTree(dir: string): boolean {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(dir);
  } catch {
    return true;
  }
  if (!st.isDirectory()) return false;
  let empty = true;
  for (const e of fs.readdirSync(dir)) {
    if (!removeEmptyTree(path.join(dir, e))) empty = false;
  }
  if (!empty) return false;
  try {
    fs.rmdirSync(dir);
    return true;
  } catch {
    return false;
  }
}

function stopWatchdog(): void {
  try {
    fs.rmSync(stateFile, { force: true });
  } catch {
    /* gone */
  }
  if (watchdog) {
    try {
      watchdog.kill('SIGKILL');
    } catch {
      /* gone */
    }
    watchdog = undefined;
  }
}

/** A runner starts: its temp dir is removed with it (unless kept). */
export function registerOwner(owner: object, workDir: string, keep: boolean): void {
  owners.set(owner, { workDir, keep });
  startWatchdog();
  persist();
}

/** A runner stopped (and removed its temp dir): created mount points go once no runner is left. */
export function releaseOwner(owner: object): void {
  owners.delete(owner);
  if (owners.size === 0) {
    removeCreated();
    stopWatchdog();
  } else {
    persist();
  }
}

/** Exit/signal hooks, after the containers are dead: removes everything, synchronously. */
export function cleanupAllSync(): void {
  for (const o of owners.values()) {
    if (!o.keep) fs.rmSync(o.workDir, { recursive: true, force: true });
  }
  owners.clear();
  removeCreated();
  stopWatchdog();
}

/**
 * Makes `target` exist on the host as a directory or an (empty) file, creating missing parents.
 * What did not exist before is remembered for removal.
 */
export function ensureHostMountPoint(target: string, kind: 'dir' | 'file'): void {
  const abs = path.resolve(target);
  let exists: fs.Stats | undefined;
  try {
    exists = fs.statSync(abs);
  } catch {
    exists = undefined;
  }
  if (exists) {
    if (kind === 'dir' && !exists.isDirectory()) throw new Error(`mount point ${abs} exists and is not a directory`);
    if (kind === 'file' && exists.isDirectory()) throw new Error(`mount point ${abs} exists and is a directory`);
    return;
  }
  // The first missing ancestor is what we create (and later remove).
  let first = abs;
  for (let p = path.dirname(abs); p !== path.dirname(p); p = path.dirname(p)) {
    if (fs.existsSync(p)) break;
    first = p;
  }
  if (kind === 'dir') {
    fs.mkdirSync(abs, { recursive: true, mode: 0o755 });
  } else {
    fs.mkdirSync(path.dirname(abs), { recursive: true, mode: 0o755 });
    fs.writeFileSync(abs, '', { flag: 'a', mode: 0o644 });
  }
  if (!created.has(first)) {
    created.set(first, { path: first, kind: first === abs ? kind : 'dir' });
    persist();
  }
}
