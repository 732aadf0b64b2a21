import type * as k8s from '@kubernetes/client-node';
import { AUTH_DELEGATOR_CLUSTER_ROLE } from '../../../contract';
import { apiErrorMessage, apiStatus, k8sModule } from '../lib/kube';
import { logger } from '../lib/log';
import { sleep } from '../lib/sleep';
import { RPC_ACCESS } from './auth';

/** One review request's answer: accepted, or refused (`forbidden`: RBAC said no) with the API's words. */
export type ReviewAnswer = { ok: true } | { ok: false; forbidden: boolean; detail: string };

/** The two reviews every caller's request needs, made with harmless arguments. */
export interface ReviewApi {
  tokenReview(): Promise<ReviewAnswer>;
  subjectAccessReview(): Promise<ReviewAnswer>;
}

/** Whether this workspace may verify its callers: not known yet, yes, or no and why. */
export type CallerVerification = { state: 'checking' } | { state: 'verified' } | { state: 'refused'; message: string };

async function answerOf(call: () => Promise<unknown>): Promise<ReviewAnswer> {
  try {
    await call();
    return { ok: true };
  } catch (e) {
    return { ok: false, forbidden: apiStatus(e) === 403, detail: apiErrorMessage(e) };
  }
}

/**
 * The real reviews, each of which the API server refuses with 403 before looking at it when the
 * account lacks the right: a TokenReview of a token that is no token (never a real one: nothing
 * secret is sent) for the workspace's audience, and a SubjectAccessReview of the anonymous user's
 * right to use this workspace. Both are answered, not stored; a refusal is exactly what a caller's
 * request would meet.
 */
export function kubeReviewApi(
  kubeConfig: k8s.KubeConfig,
  target: { audiences: string[]; namespace: string; name: string },
): ReviewApi {
  const k = k8sModule();
  const authn = kubeConfig.makeApiClient(k.AuthenticationV1Api);
  const authz = kubeConfig.makeApiClient(k.AuthorizationV1Api);
  return {
    tokenReview: () =>
      answerOf(() =>
        authn.createTokenReview({
          body: {
            apiVersion: 'authentication.k8s.io/v1',
            kind: 'TokenReview',
            spec: { token: 'pko-agent-access-check', audiences: target.audiences },
          },
        }),
      ),
    subjectAccessReview: () =>
      answerOf(() =>
        authz.createSubjectAccessReview({
          body: {
            apiVersion: 'authorization.k8s.io/v1',
            kind: 'SubjectAccessReview',
            spec: {
              user: 'system:anonymous',
              resourceAttributes: { namespace: target.namespace, name: target.name, ...RPC_ACCESS },
            },
          },
        }),
      ),
  };
}

/** The account a Forbidden answer names ("User \"system:serviceaccount:ns:sa\" cannot …"), if any. */
function refusedUser(detail: string): string | undefined {
  return /User "(system:serviceaccount:[^"]+)"/.exec(detail)?.[1];
}

/** What the workspace reports when a review is refused: what failed and the fix. */
export function refusalMessage(token: ReviewAnswer, access: ReviewAnswer, recheckSeconds: number): string {
  const failed = [
    ...(token.ok ? [] : [{ api: 'TokenReview', resource: 'tokenreviews.authentication.k8s.io', answer: token }]),
    ...(access.ok
      ? []
      : [{ api: 'SubjectAccessReview', resource: 'subjectaccessreviews.authorization.k8s.io', answer: access }]),
  ];
  const forbidden = failed.filter((f) => !f.answer.ok && f.answer.forbidden);
  const again = `checked again within ${recheckSeconds} s, no restart needed`;
  if (forbidden.length) {
    const user = forbidden.map((f) => (f.answer.ok ? undefined : refusedUser(f.answer.detail))).find((u) => u);
    const who = user ? `its ServiceAccount (${user})` : 'its ServiceAccount';
    return (
      `the workspace cannot verify its callers: ${who} may not create ${forbidden.map((f) => f.resource).join(' or ')}, ` +
      `which the ClusterRole ${AUTH_DELEGATOR_CLUSTER_ROLE} grants (${again})`
    );
  }
  const unavailable = failed.map((f) => `${f.api} API is unavailable (${f.answer.ok ? '' : f.answer.detail})`);
  return `the workspace cannot verify its callers: ${unavailable.join('; ')} (${again})`;
}

export interface AuthCheckOptions {
  api: ReviewApi;
  /** Called on every change of the verification state. */
  onChange: (state: CallerVerification) => void;
  /** First and largest delay between checks while refused. */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
}

/**
 * Checks, before the workspace is reported Ready, that it can do what every caller's request
 * needs: create TokenReviews and SubjectAccessReviews (the ClusterRole system:auth-delegator).
 * While refused it checks again, 30 s then doubling up to 2 min, so a binding granted later is
 * noticed without restarting the pod; once verified it waits until a caller's review is refused
 * ({@link recheck}), as happens when the binding is removed.
 */
export class AuthCheck {
  private current: CallerVerification = { state: 'checking' };
  private wake: (() => void) | undefined;

  constructor(private readonly options: AuthCheckOptions) {}

  get state(): CallerVerification {
    return this.current;
  }

  /** A caller's review was refused with 403: check again now (if verified; while refused it does anyway). */
  recheck(): void {
    this.wake?.();
  }

  /** Checks until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const first = this.options.retryDelayMs ?? 30_000;
    const max = this.options.maxRetryDelayMs ?? 120_000;
    let delay = first;
    while (!signal.aborted) {
      const [token, access] = await Promise.all([
        this.options.api.tokenReview(),
        this.options.api.subjectAccessReview(),
      ]);
      if (signal.aborted) return;
      if (token.ok && access.ok) {
        if (this.current.state !== 'verified')
          logger.info('this workspace may verify its callers (TokenReview, SubjectAccessReview)');
        this.set({ state: 'verified' });
        delay = first;
        await this.until(signal);
        continue;
      }
      const message = refusalMessage(token, access, Math.round(max / 1000));
      const news = this.current.state !== 'refused' || this.current.message !== message;
      // The API's own words name the account; they carry no secret (the reviewed token is none).
      (news ? logger.error : logger.debug)(
        `cannot verify callers: bind the ClusterRole ${AUTH_DELEGATOR_CLUSTER_ROLE} to this pod's ServiceAccount`,
        {
          tokenReview: token.ok ? 'allowed' : token.detail,
          subjectAccessReview: access.ok ? 'allowed' : access.detail,
          retryInSeconds: Math.round(delay / 1000),
        },
      );
      this.set({ state: 'refused', message });
      await sleep(delay, signal);
      delay = Math.min(delay * 2, max);
    }
  }

  private set(next: CallerVerification): void {
    const same =
      next.state === this.current.state &&
      (next.state !== 'refused' || (this.current.state === 'refused' && this.current.message === next.message));
    this.current = next;
    if (!same) this.options.onChange(next);
  }

  /** Resolves on {@link recheck} or when `signal` aborts. */
  private until(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.wake = undefined;
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.wake = done;
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
