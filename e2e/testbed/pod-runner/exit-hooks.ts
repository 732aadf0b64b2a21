/**
 * The pod runner's process-wide safety net: whatever happens to the test, no container survives
 * it (exit and signal hooks SIGKILL every container and remove the mount points created).
 */
import * as fs from 'node:fs';
import { cleanupAllSync } from './mountpoints';

export const liveRunners = new Set<{ killSync(): number[] }>();
let exitHookInstalled = false;

function isGoneSync(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return true;
  }
}

/** SIGKILLs every container, waits (at most 2 s) until they are gone, removes what we created. */
function killAndCleanupSync(): void {
  const pids: number[] = [];
  for (const r of liveRunners) pids.push(...r.killSync());
  liveRunners.clear();
  const deadline = Date.now() + 2000;
  const tick = new Int32Array(new SharedArrayBuffer(4));
  while (pids.some((pid) => !isGoneSync(pid)) && Date.now() < deadline) Atomics.wait(tick, 0, 0, 20);
  cleanupAllSync();
}

export function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', killAndCleanupSync);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      killAndCleanupSync();
      process.removeListener(sig, onSignal);
      // Nobody else handles it: die of the signal as we would have without this hook.
      if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}
