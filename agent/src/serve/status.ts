import type * as k8s from '@kubernetes/client-node';
import { WORKSPACE_STATUS_KEY, type WorkspaceStatus } from '../../../contract';
import { apiErrorMessage, k8sModule, mergePatchOptions } from '../lib/kube';
import { logger } from '../lib/log';

export interface StatusTarget {
  kubeConfig: k8s.KubeConfig;
  namespace: string;
  /** The workspace's status ConfigMap (PULUMI_WORKSPACE_STATUS_CONFIGMAP). */
  name: string;
}

/**
 * Reports the workspace's state in its status ConfigMap (key WORKSPACE_STATUS_KEY, JSON merge
 * patch of that key only), the one object its account may write: the hooks make the ConfigMap, so
 * a patch before it exists fails and is retried. Only the latest state matters: reports are
 * serialised, and a failed patch is retried with backoff until a newer state replaces it.
 */
export class StatusReporter {
  private desired: WorkspaceStatus | undefined;
  private written: string | undefined;
  private busy = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private delay = 1000;
  private readonly core: k8s.CoreV1Api | undefined;
  private waiters: (() => void)[] = [];

  constructor(private readonly target: StatusTarget | undefined) {
    if (target) this.core = target.kubeConfig.makeApiClient(k8sModule().CoreV1Api);
  }

  get enabled(): boolean {
    return this.target !== undefined;
  }

  report(status: WorkspaceStatus): void {
    this.desired = status;
    logger.info('workspace status', { state: status.state, reason: status.reason, message: status.message });
    void this.flush();
  }

  /** Resolves once the latest report is written (or immediately when reporting is off). */
  settled(timeoutMs = 10_000): Promise<void> {
    if (!this.target || JSON.stringify(this.desired) === this.written) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, timeoutMs);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }

  private async flush(): Promise<void> {
    if (!this.target || !this.core || this.busy || this.desired === undefined) return;
    const body = JSON.stringify(this.desired);
    if (body === this.written) return;
    this.busy = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    let ok = false;
    try {
      await this.core.patchNamespacedConfigMap(
        {
          name: this.target.name,
          namespace: this.target.namespace,
          body: { data: { [WORKSPACE_STATUS_KEY]: body } },
        },
        mergePatchOptions(),
      );
      this.written = body;
      this.delay = 1000;
      ok = true;
    } catch (e) {
      logger.warn('cannot report the workspace status in its ConfigMap; retrying', {
        configmap: `${this.target.namespace}/${this.target.name}`,
        error: apiErrorMessage(e),
        retryInMs: this.delay,
      });
      this.retryTimer = setTimeout(() => void this.flush(), this.delay);
      this.retryTimer.unref();
      this.delay = Math.min(this.delay * 2, 30_000);
    } finally {
      this.busy = false;
    }
    if (!ok) return;
    if (JSON.stringify(this.desired) !== this.written) {
      void this.flush();
    } else {
      const w = this.waiters;
      this.waiters = [];
      for (const f of w) f();
    }
  }
}
