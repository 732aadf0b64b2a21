import type * as k8s from '@kubernetes/client-node';
import { Annotations, type WorkspaceStatus } from '../../../contract';
import { annotationsPatch, apiErrorMessage, k8sModule, mergePatchOptions } from '../lib/kube';
import { logger } from '../lib/log';

export interface StatusTarget {
  kubeConfig: k8s.KubeConfig;
  namespace: string;
  /** The workspace StatefulSet (PULUMI_WORKSPACE_NAME). */
  name: string;
}

/**
 * Reports the workspace's state on its own StatefulSet (annotation pulumi.com/workspace-status,
 * JSON merge patch of that annotation only). Only the latest state matters: reports are
 * serialised, and a failed patch is retried with backoff until a newer state replaces it.
 */
export class StatusReporter {
  private desired: WorkspaceStatus | undefined;
  private written: string | undefined;
  private busy = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private delay = 1000;
  private readonly apps: k8s.AppsV1Api | undefined;
  private waiters: (() => void)[] = [];

  constructor(private readonly target: StatusTarget | undefined) {
    if (target) this.apps = target.kubeConfig.makeApiClient(k8sModule().AppsV1Api);
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
    if (!this.target || !this.apps || this.busy || this.desired === undefined) return;
    const body = JSON.stringify(this.desired);
    if (body === this.written) return;
    this.busy = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    let ok = false;
    try {
      await this.apps.patchNamespacedStatefulSet(
        {
          name: this.target.name,
          namespace: this.target.namespace,
          body: annotationsPatch({ [Annotations.workspaceStatus]: body }),
        },
        mergePatchOptions(),
      );
      this.written = body;
      this.delay = 1000;
      ok = true;
    } catch (e) {
      logger.warn('cannot report the workspace status on its StatefulSet; retrying', {
        statefulset: `${this.target.namespace}/${this.target.name}`,
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
