/**
 * Self-healing of interrupted operations (docs/self-healing.md), asked for per operation
 * (`selfHealing` in the OperationRequest, from a Stack's or an Update's `spec.selfHealing`):
 *
 * - A stale lock: an operation of this workspace that was killed (the pod deleted or evicted, the
 *   node lost, the CLI OOM-killed) leaves its lock in a DIY backend, and every later operation
 *   fails with "the stack is currently locked". Pulumi 3.274 does not clear it by itself. The lock
 *   names the host and pid of the CLI that took it: when every lock on the stack was taken on
 *   this host (the workspace pod's hostname, which a StatefulSet keeps across pods) by a process
 *   that is no `pulumi` running here, and this workspace runs no other operation (the caller
 *   holds the workspace's one operation slot), `pulumi cancel` removes it and the operation runs
 *   once more. A lock of another host or of a live `pulumi` (say, one started with `kubectl exec`)
 *   is kept, and the operation fails as before.
 * - Pending operations: a CLI killed while a resource operation was in flight leaves it in the
 *   checkpoint's `pending_operations`. `pulumi up` warns and keeps them (a pending create stays
 *   forever); `pulumi refresh --clear-pending-creates` resolves pending updates and deletes by
 *   reading the resources, and drops pending creates, whose URNs the result names, since such a
 *   resource may exist in the provider without being in the state.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { OperationType } from '../../../contract';
import type { OperationResult, StreamLine } from '../api';
import { oneLine } from '../lib/errors';
import { isRecord } from '../lib/json';
import type { RunResult } from './pulumi';

/** One lock the CLI listed in its "the stack is currently locked" error (DIY backends). */
export interface StackLock {
  /** Where the lock file is (the backend URL and key). */
  file: string;
  user: string;
  host: string;
  pid: number;
  /** When it was taken, as the CLI printed it (RFC 3339). */
  time: string;
}

const LOCKED = /the stack is currently locked by (\d+) lock\(s\)/;
const LOCK_LINE = /^\s*(\S+): created by (.*)@([^@\s]+) \(pid (\d+)\) at (\S+)\s*$/;

/**
 * The locks a DIY backend's "currently locked" error lists, or undefined when the text is no such
 * error, or lists fewer locks than it counts (then nothing is known about the others).
 */
export function parseStackLocks(text: string): StackLock[] | undefined {
  const counted = LOCKED.exec(text);
  if (!counted) return undefined;
  const locks: StackLock[] = [];
  for (const line of text.split('\n')) {
    const [, file, user, host, pid, time] = LOCK_LINE.exec(line) ?? [];
    if (file !== undefined && user !== undefined && host !== undefined && time !== undefined)
      locks.push({ file, user, host, pid: Number(pid), time });
  }
  const unique = new Map(locks.map((l) => [l.file, l]));
  return unique.size === Number(counted[1]) ? [...unique.values()] : undefined;
}

export interface LockOwnerProbe {
  /** This host's name, as Pulumi records it (os.Hostname). */
  hostname: string;
  /** Whether a `pulumi` CLI runs here with that pid. */
  pulumiRunning: (pid: number) => boolean;
}

/** Why the locks are not stale (undefined: every one is a stale lock of this host). */
export function whyNotStale(locks: StackLock[], probe: LockOwnerProbe): string | undefined {
  if (locks.length === 0) return 'no lock is listed';
  for (const l of locks) {
    if (l.host !== probe.hostname)
      return `${l.file} was taken on host ${l.host}, not on this workspace (${probe.hostname})`;
    if (!Number.isInteger(l.pid) || l.pid <= 0) return `${l.file} names no valid pid`;
    if (probe.pulumiRunning(l.pid)) return `${l.file} belongs to pulumi process ${l.pid}, which is still running here`;
  }
  return undefined;
}

/** Whether /proc/<pid> is a process whose program is `pulumi` (the CLI, not its plugins). */
export function pulumiProcessRunning(pid: number, procRoot = '/proc'): boolean {
  let cmdline: string;
  try {
    cmdline = fs.readFileSync(path.join(procRoot, String(pid), 'cmdline'), 'utf8');
  } catch {
    return false;
  }
  const argv0 = cmdline.split('\0')[0] ?? '';
  return path.basename(argv0) === 'pulumi';
}

export const localLockProbe = (): LockOwnerProbe => ({ hostname: os.hostname(), pulumiRunning: pulumiProcessRunning });

/** A pending operation of the checkpoint: the resource's URN and what was being done to it. */
export interface PendingOperation {
  urn: string;
  type: string;
}

/** The pending operations of `pulumi stack export` output; undefined when it is not a deployment. */
export function pendingOperations(exported: string): PendingOperation[] | undefined {
  let doc: unknown;
  try {
    doc = JSON.parse(exported);
  } catch {
    return undefined;
  }
  const deployment = isRecord(doc) ? doc.deployment : undefined;
  if (typeof deployment !== 'object' || deployment === null) return undefined;
  const pending = isRecord(deployment) ? deployment.pending_operations : undefined;
  if (!Array.isArray(pending)) return [];
  return pending.map((p: unknown) => {
    const resource = isRecord(p) && isRecord(p.resource) ? p.resource : undefined;
    const type = isRecord(p) ? p.type : undefined;
    return {
      urn: typeof resource?.urn === 'string' ? resource.urn : '(unknown)',
      type: typeof type === 'string' ? type : 'unknown',
    };
  });
}

/** One sentence about the stale locks that were removed. */
export function describeClearedLocks(locks: StackLock[]): string {
  const owners = locks.map((l) => `pid ${l.pid} on ${l.host} since ${l.time}`).join(', ');
  return `removed the stale lock of an interrupted operation (${owners}) with pulumi cancel`;
}

/** One sentence about the pending operations a refresh resolved. */
export function describeResolvedPending(pending: PendingOperation[]): string {
  const creates = pending.filter((p) => p.type === 'creating').map((p) => p.urn);
  const others = pending.length - creates.length;
  const parts: string[] = [];
  if (others > 0) parts.push(`${others} pending update(s) or delete(s) refreshed`);
  if (creates.length > 0)
    parts.push(
      `${creates.length} pending create(s) dropped from the state (the resource may exist without being in the state: check and import or delete it): ${creates.join(', ')}`,
    );
  return `resolved the pending operations of an interrupted operation: ${parts.join('; ')}`;
}

export interface SelfHealingContext {
  stack: string;
  /** Runs the CLI in the workspace's project directory. */
  cli: (args: string[], signal: AbortSignal) => Promise<RunResult>;
  emit: (line: StreamLine) => void;
  probe: LockOwnerProbe;
  signal: AbortSignal;
}

/** The last lines of a failed CLI call, on one line. */
function cliFailure(r: RunResult): string {
  const text = `${r.stderr}\n${r.stdout}`.trim().split('\n').slice(-3).join(' ');
  return oneLine(text) || `exit code ${String(r.code)}`;
}

/**
 * Runs one operation (`run`, given where its stream goes) with self-healing: pending operations of
 * an interrupted run resolved first (not for a preview, which changes nothing), and once, when the
 * operation fails because of a stale lock of this workspace, the lock removed, pending operations
 * resolved, and the operation run again. What was done is appended to the result's message and
 * written to the operation's output.
 */
export async function runWithSelfHealing(
  ctx: SelfHealingContext,
  type: OperationType,
  run: (emit: (line: StreamLine) => void) => Promise<OperationResult>,
): Promise<OperationResult> {
  const notes: string[] = [];
  const say = (text: string): void =>
    ctx.emit({ kind: 'output', stream: 'stderr', line: `[pko-agent] self-healing: ${text}` });
  let cleared = false;

  /** Removes the locks `text` lists if they are stale (once per operation); whether it did. */
  const clearStaleLock = async (text: string): Promise<boolean> => {
    if (cleared || ctx.signal.aborted) return false;
    const locks = parseStackLocks(text);
    if (!locks) return false;
    const why = whyNotStale(locks, ctx.probe);
    if (why !== undefined) {
      say(`the stack's lock is kept: ${why}`);
      notes.push(`the lock was kept: ${why}`);
      return false;
    }
    const r = await ctx.cli(['cancel', '--yes', '--stack', ctx.stack], ctx.signal);
    if (r.code !== 0) {
      say(`pulumi cancel failed: ${cliFailure(r)}`);
      notes.push(`the stale lock could not be removed: ${cliFailure(r)}`);
      return false;
    }
    cleared = true;
    const done = describeClearedLocks(locks);
    say(done);
    notes.push(done);
    return true;
  };

  const resolvePending = async (): Promise<void> => {
    if (type === 'preview' || ctx.signal.aborted) return;
    const exported = await ctx.cli(['stack', 'export', '--stack', ctx.stack], ctx.signal);
    // No stack yet, or no state to read: the operation itself reports what is wrong.
    if (exported.code !== 0) return;
    const pending = pendingOperations(exported.stdout);
    if (!pending || pending.length === 0) return;
    say(`${pending.length} pending operation(s) in the state: pulumi refresh --clear-pending-creates`);
    const args = ['refresh', '--yes', '--skip-preview', '--clear-pending-creates', '--stack', ctx.stack];
    let r = await ctx.cli(args, ctx.signal);
    if (r.code !== 0 && (await clearStaleLock(`${r.stderr}\n${r.stdout}`))) r = await ctx.cli(args, ctx.signal);
    if (r.code !== 0) {
      say(`the refresh failed: ${cliFailure(r)}`);
      notes.push(`the pending operations could not be resolved: ${cliFailure(r)}`);
      return;
    }
    const done = describeResolvedPending(pending);
    say(done);
    notes.push(done);
  };

  await resolvePending();
  // The CLI's output, where a lock error lists the locks (the result's message has only its first line).
  const output: string[] = [];
  let result = await run((line) => {
    if (line.kind === 'output' && output.length < 500) output.push(line.line);
    ctx.emit(line);
  });
  if (result.state === 'failed' && result.reason === 'UpdateConflict' && (await clearStaleLock(output.join('\n')))) {
    await resolvePending();
    say(`running the ${type} again`);
    result = await run(ctx.emit);
  }
  if (notes.length > 0) result = { ...result, message: `${result.message} (self-healing: ${notes.join('; ')})` };
  return result;
}
