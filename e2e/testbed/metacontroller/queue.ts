/**
 * client-go's rate-limiting work queue, reduced to what Metacontroller uses (its default controller
 * rate limiter, newParentController in https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/composite/controller.go):
 * - add(key): de-duplicated; a key being processed is queued again once it is done (never
 *   processed by two workers at once);
 * - addAfter(key, ms): delayed add; of two pending delays for one key the earlier wins;
 * - addRateLimited(key): per-item exponential backoff 5 ms × 2^failures, capped at 1000 s;
 *   forget(key) resets it. (The overall 10 qps token bucket is not modelled.)
 * Event driven: workers start when keys arrive, nothing polls. shutdown() clears every timer.
 */
export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly waiting = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private active = 0;
  private started = false;
  private shutDown = false;
  private drained?: () => void;

  constructor(
    private readonly workers: number,
    private readonly process: (key: string) => Promise<void>,
  ) {}

  start(): void {
    this.started = true;
    this.pump();
  }

  add(key: string): void {
    if (this.shutDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.queue.push(key);
    this.pump();
  }

  addAfter(key: string, ms: number): void {
    if (this.shutDown) return;
    if (ms <= 0) return this.add(key);
    const at = Date.now() + ms;
    const pending = this.waiting.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.waiting.delete(key);
      this.add(key);
    }, ms);
    this.waiting.set(key, { at, timer });
  }

  addRateLimited(key: string): void {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    this.addAfter(key, Math.min(5 * 2 ** n, 1_000_000));
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  private pump(): void {
    while (this.started && !this.shutDown && this.active < this.workers && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.dirty.delete(key);
      this.processing.add(key);
      this.active++;
      void this.process(key)
        .catch(() => undefined)
        .finally(() => {
          this.active--;
          this.processing.delete(key);
          if (this.dirty.has(key) && !this.shutDown) this.queue.push(key);
          this.pump();
          if (this.active === 0) this.drained?.();
        });
    }
  }

  /** Stops handing out keys and clears every timer; resolves when running workers are done. */
  shutdown(): Promise<void> {
    this.shutDown = true;
    for (const { timer } of this.waiting.values()) clearTimeout(timer);
    this.waiting.clear();
    this.queue.length = 0;
    return this.active === 0 ? Promise.resolve() : new Promise((resolve) => (this.drained = resolve));
  }
}
