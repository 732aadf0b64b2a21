/**
 * A pod's status written through pods/status as a strategic merge patch (as the kubelet does):
 * one write at a time, the latest status wins, unchanged statuses are skipped, failures retried.
 */
import { type Api, isNotFound, p } from './api';

export class StatusWriter {
  /** No status writes any more (the pod was deleted, or the runner stops). */
  silent = false;
  /** The API server answered 404: the pod is gone. */
  goneFromApi = false;
  private dirty = false;
  private writing: Promise<void> | undefined;
  private lastWritten = '';

  constructor(
    private readonly api: Api,
    private readonly pod: { namespace: string; name: string },
    /** The status to write now. */
    private readonly build: () => Record<string, unknown>,
    private readonly log: (msg: string) => void,
  ) {}

  /** Writes the current status (now, or after the write in flight). */
  push(): void {
    if (this.silent) return;
    this.dirty = true;
    if (this.writing) return;
    this.writing = this.writeLoop().finally(() => {
      this.writing = undefined;
      if (this.dirty && !this.silent) this.push();
    });
  }

  /** Resolves once no write is in flight. */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }

  private async writeLoop(): Promise<void> {
    const { namespace, name } = this.pod;
    let failures = 0;
    while (this.dirty && !this.silent) {
      this.dirty = false;
      const status = this.build();
      const body = JSON.stringify(status);
      if (body === this.lastWritten) continue;
      try {
        await this.api.request(
          'PATCH',
          p`/api/v1/namespaces/${namespace}/pods/${name}/status`,
          { status },
          'application/strategic-merge-patch+json',
        );
        this.lastWritten = body;
        failures = 0;
      } catch (e) {
        if (isNotFound(e)) {
          this.silent = true;
          this.goneFromApi = true;
          break;
        }
        failures++;
        this.log(`pod ${namespace}/${name}: status update failed (${failures}): ${(e as Error).message}`);
        this.dirty = true;
        await new Promise((r) => setTimeout(r, Math.min(200 * failures, 2000)));
        if (failures > 30) break;
      }
    }
  }
}
