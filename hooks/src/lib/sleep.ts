/**
 * Resolves after `ms`, or at once when `signal` aborts. The timer does not keep the process alive:
 * whoever waits (a watch's retry, an event waiting for the Stack watch) stops with the server.
 */
export function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    timer.unref();
    signal.addEventListener('abort', done, { once: true });
  });
}
