/** A pod worker's waits: sleeps that end early once the pod stops, timers cleared when it is done. */
export class PodTimers {
  /** Set once: no more container starts, sleeps return at once. */
  stopping = false;
  private readonly stopWaiters = new Set<() => void>();
  private readonly timers = new Set<NodeJS.Timeout>();

  /** Resolves after ms, or as soon as the pod stops. */
  sleep(ms: number): Promise<void> {
    if (this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.timers.delete(t);
        this.stopWaiters.delete(wake);
        resolve();
      }, ms);
      const wake = (): void => {
        clearTimeout(t);
        this.timers.delete(t);
        resolve();
      };
      this.timers.add(t);
      this.stopWaiters.add(wake);
    });
  }

  /** Runs fn after ms unless clear() comes first. */
  after(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    this.timers.add(t);
  }

  /** The pod stops: every sleep ends now. */
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    for (const w of this.stopWaiters) w();
    this.stopWaiters.clear();
  }

  /** Cancels every pending timer and sleep timer. */
  clear(): void {
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
  }
}
