import * as crypto from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import { apiErrorMessage, apiStatus, k8sModule } from '../lib/kube';
import { logger } from '../lib/log';
import { sleep } from '../lib/sleep';

/** Upstream's rule: verb `use` on `workspaces/rpc` in group auto.pulumi.com. */
export const RPC_ACCESS = {
  verb: 'use',
  group: 'auto.pulumi.com',
  version: 'v1alpha1',
  resource: 'workspaces',
  subresource: 'rpc',
} as const;

export type AuthDecision =
  { ok: true; user: string } | { ok: false; status: 401 | 403; reason: string; message: string };

export interface Authorizer {
  check(authorization: string | undefined): Promise<AuthDecision>;
}

/** --auth-mode none: every caller is let in (local use, tests). */
export const allowAll: Authorizer = { check: () => Promise.resolve({ ok: true, user: 'anonymous' }) };

interface Cached<T> {
  value: T;
  expires: number;
}

class TtlCache<T> {
  private readonly map = new Map<string, Cached<T>>();
  constructor(private readonly max = 1000) {}
  get(key: string): T | undefined {
    const c = this.map.get(key);
    if (!c) return undefined;
    if (c.expires < Date.now()) {
      this.map.delete(key);
      return undefined;
    }
    return c.value;
  }
  set(key: string, value: T, ttlMs: number): void {
    if (this.map.size >= this.max) {
      const now = Date.now();
      for (const [k, v] of this.map) if (v.expires < now) this.map.delete(k);
      if (this.map.size >= this.max) this.map.delete(this.map.keys().next().value as string);
    }
    this.map.set(key, { value, expires: Date.now() + ttlMs });
  }
}

type UserInfo = { username: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> };
type TokenOutcome = { ok: true; user: UserInfo } | { ok: false; message: string };

/** Upstream's retry: 500 ms × 1.5, 5 steps, within 10 s, for API errors other than 4xx. */
async function retry<T>(fn: () => Promise<T>): Promise<T> {
  let delay = 500;
  const deadline = Date.now() + 10_000;
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (e) {
      const code = apiStatus(e);
      if ((code !== undefined && code < 500 && code !== 429) || i >= 5 || Date.now() + delay > deadline) throw e;
      await sleep(delay);
      delay *= 1.5;
    }
  }
}

export interface KubeAuthOptions {
  kubeConfig: k8s.KubeConfig;
  audiences: string[];
  namespace: string;
  /** The resource name callers need `use workspaces/rpc` on: the Stack's name. */
  name: string;
  /** A review was refused with 403 (the account lost system:auth-delegator): auth-check.ts checks again. */
  onForbidden?: () => void;
}

/**
 * Upstream's `--auth-mode kube`: the bearer token is checked with a TokenReview for the workspace's
 * audience (cached: success 1 h, failure 1 min), then the caller's right to `use` the workspace's
 * `rpc` subresource with a SubjectAccessReview (cached: allowed 5 min, denied 5 s).
 */
export class KubeAuthorizer implements Authorizer {
  private readonly tokens = new TtlCache<TokenOutcome>();
  private readonly access = new TtlCache<{ allowed: boolean; reason: string }>();
  private readonly authn: k8s.AuthenticationV1Api;
  private readonly authz: k8s.AuthorizationV1Api;

  constructor(private readonly options: KubeAuthOptions) {
    const k = k8sModule();
    this.authn = options.kubeConfig.makeApiClient(k.AuthenticationV1Api);
    this.authz = options.kubeConfig.makeApiClient(k.AuthorizationV1Api);
  }

  async check(authorization: string | undefined): Promise<AuthDecision> {
    const [, token] = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '') ?? [];
    if (token === undefined)
      return {
        ok: false,
        status: 401,
        reason: 'Unauthenticated',
        message: 'unauthenticated: a bearer token is required',
      };
    const key = crypto.createHash('sha256').update(token).digest('hex');
    let outcome = this.tokens.get(key);
    if (!outcome) {
      try {
        outcome = await this.review(token);
      } catch (e) {
        const code = apiStatus(e);
        if (code === 403) {
          this.options.onForbidden?.();
          logger.error(
            'TokenReview is forbidden for this pod: bind the ClusterRole system:auth-delegator to its ServiceAccount',
            { error: apiErrorMessage(e) },
          );
        } else {
          logger.error('TokenReview failed', { error: apiErrorMessage(e) });
        }
        return {
          ok: false,
          status: 401,
          reason: 'Unauthenticated',
          message: 'unauthenticated: TokenReview API is unavailable',
        };
      }
      this.tokens.set(key, outcome, outcome.ok ? 3600_000 : 60_000);
    }
    if (!outcome.ok)
      return { ok: false, status: 401, reason: 'Unauthenticated', message: `unauthenticated: ${outcome.message}` };
    const user = outcome.user;
    let decision = this.access.get(key);
    if (!decision) {
      try {
        decision = await this.authorize(user);
      } catch (e) {
        if (apiStatus(e) === 403) {
          this.options.onForbidden?.();
          logger.error(
            'SubjectAccessReview is forbidden for this pod: bind the ClusterRole system:auth-delegator to its ServiceAccount',
            { error: apiErrorMessage(e) },
          );
        } else {
          logger.error('SubjectAccessReview failed', { error: apiErrorMessage(e) });
        }
        return {
          ok: false,
          status: 401,
          reason: 'Unauthenticated',
          message: 'unauthenticated: SubjectAccessReview API is unavailable',
        };
      }
      this.access.set(key, decision, decision.allowed ? 300_000 : 5_000);
    }
    if (!decision.allowed) {
      const what = `${RPC_ACCESS.verb} ${RPC_ACCESS.resource}/${RPC_ACCESS.subresource} "${this.options.name}" in namespace "${this.options.namespace}" (group ${RPC_ACCESS.group})`;
      return {
        ok: false,
        status: 403,
        reason: 'PermissionDenied',
        message: `forbidden: ${user.username} may not ${what}${decision.reason ? `: ${decision.reason}` : ''}`,
      };
    }
    return { ok: true, user: user.username };
  }

  private async review(token: string): Promise<TokenOutcome> {
    const res = await retry(() =>
      this.authn.createTokenReview({
        body: {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenReview',
          spec: { token, audiences: this.options.audiences },
        },
      }),
    );
    const st = res.status;
    if (!st?.authenticated || !st.user?.username)
      return { ok: false, message: st?.error ? st.error : 'the token is not valid for this workspace' };
    if (this.options.audiences.length && !(st.audiences ?? []).some((a) => this.options.audiences.includes(a))) {
      return { ok: false, message: 'the token is not meant for this workspace (audience)' };
    }
    const user: UserInfo = { username: st.user.username };
    if (st.user.uid) user.uid = st.user.uid;
    if (st.user.groups) user.groups = st.user.groups;
    if (st.user.extra) user.extra = st.user.extra;
    return { ok: true, user };
  }

  private async authorize(user: UserInfo): Promise<{ allowed: boolean; reason: string }> {
    const spec: k8s.V1SubjectAccessReviewSpec = {
      user: user.username,
      resourceAttributes: { namespace: this.options.namespace, name: this.options.name, ...RPC_ACCESS },
    };
    if (user.uid) spec.uid = user.uid;
    if (user.groups) spec.groups = user.groups;
    if (user.extra) spec.extra = user.extra;
    const res = await retry(() =>
      this.authz.createSubjectAccessReview({
        body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec },
      }),
    );
    return { allowed: res.status?.allowed === true && res.status.denied !== true, reason: res.status?.reason ?? '' };
  }
}
