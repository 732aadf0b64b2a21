/**
 * Preloaded into the hook replicas of ./scale-resync.ts (`node --expose-gc -r`): on the message
 * `gc` from the bench, two full collections, then the process's memory as Node.js reports it.
 * What the replica keeps (its caches, its code) is the heap left after them; the RSS before them
 * also holds garbage V8 had not yet collected, its choice on a machine without a memory limit.
 */
process.on('message', (m) => {
  if (m !== 'gc' || typeof globalThis.gc !== 'function') return;
  globalThis.gc();
  globalThis.gc();
  process.send!({ memory: process.memoryUsage() });
});
