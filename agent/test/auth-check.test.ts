/**
 * The workspace's check that it may verify its callers (TokenReview and SubjectAccessReview,
 * granted by system:auth-delegator), against a stand-in of the two review APIs whose answers the
 * tests choose, and what the workspace reports meanwhile.
 */
import { afterEach, describe, expect, it } from '@jest/globals';
import type { WorkspaceStatus } from '../../contract';
import { Redactor } from '../src/lib/redact';
import {
  AuthCheck,
  refusalMessage,
  type CallerVerification,
  type ReviewAnswer,
  type ReviewApi,
} from '../src/serve/auth-check';
import { StatusReporter } from '../src/serve/status';
import { Workspace } from '../src/serve/workspace';

const forbidden = (resource: string, group: string): ReviewAnswer => ({
  ok: false,
  forbidden: true,
  detail:
    `HTTP 403: ${resource}.${group} is forbidden: User "system:serviceaccount:team-a:no-delegator" cannot create ` +
    `resource "${resource}" in API group "${group}" at the cluster scope`,
});
const tokenForbidden = forbidden('tokenreviews', 'authentication.k8s.io');
const accessForbidden = forbidden('subjectaccessreviews', 'authorization.k8s.io');
const allowed: ReviewAnswer = { ok: true };

/** The review APIs as the tests set them; counts the checks. */
class StandInReviews implements ReviewApi {
  token: ReviewAnswer = tokenForbidden;
  access: ReviewAnswer = accessForbidden;
  checks = 0;
  tokenReview(): Promise<ReviewAnswer> {
    this.checks++;
    return Promise.resolve(this.token);
  }
  subjectAccessReview(): Promise<ReviewAnswer> {
    return Promise.resolve(this.access);
  }
  allow(): void {
    this.token = allowed;
    this.access = allowed;
  }
}

/** Polls until `predicate` holds (the check runs on its own timers). */
async function until(what: string, predicate: () => boolean): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A workspace (never opened: no Pulumi) whose own state is `state`, checking its callers. */
function workspaceIn(state: WorkspaceStatus['state']): Workspace {
  const workspace = new Workspace({
    workDir: '/nonexistent',
    stack: { name: 'dev', create: true, config: [] },
    hash: 'h1',
    reporter: new StatusReporter(undefined),
    redactor: new Redactor(),
    logLevel: 0,
    verifiesCallers: true,
  });
  workspace.state = state;
  return workspace;
}

const stops: AbortController[] = [];
afterEach(() => {
  for (const s of stops.splice(0)) s.abort();
});

function start(api: ReviewApi, onChange: (state: CallerVerification) => void): AuthCheck {
  const check = new AuthCheck({ api, onChange, retryDelayMs: 10, maxRetryDelayMs: 40 });
  const stop = new AbortController();
  stops.push(stop);
  void check.run(stop.signal);
  return check;
}

describe('the refusal message', () => {
  it('names what was refused, the account the API server named, the ClusterRole and that it is checked again', () => {
    expect(refusalMessage(tokenForbidden, accessForbidden, 120)).toBe(
      'the workspace cannot verify its callers: its ServiceAccount (system:serviceaccount:team-a:no-delegator) may ' +
        'not create tokenreviews.authentication.k8s.io or subjectaccessreviews.authorization.k8s.io, which the ' +
        'ClusterRole system:auth-delegator grants (checked again within 120 s, no restart needed)',
    );
    expect(refusalMessage(allowed, accessForbidden, 120)).toContain(
      'may not create subjectaccessreviews.authorization.k8s.io, which',
    );
  });

  it('says an API is unavailable when it failed for another reason than RBAC', () => {
    const down: ReviewAnswer = { ok: false, forbidden: false, detail: 'HTTP 503: the server is currently unable' };
    expect(refusalMessage(down, allowed, 60)).toBe(
      'the workspace cannot verify its callers: TokenReview API is unavailable (HTTP 503: the server is currently ' +
        'unable) (checked again within 60 s, no restart needed)',
    );
  });
});

describe('the access check', () => {
  it('reports Unauthenticated while the reviews are forbidden, however far the installation got', async () => {
    const api = new StandInReviews();
    const workspace = workspaceIn('Ready');
    start(api, (s) => workspace.setCallerVerification(s));
    await until('the refusal', () => workspace.status().state === 'Failed');
    expect(workspace.status()).toEqual({
      hash: 'h1',
      state: 'Failed',
      reason: 'Unauthenticated',
      message: refusalMessage(tokenForbidden, accessForbidden, 0),
    });
    // It keeps checking, with growing delays, and keeps reporting the same.
    const before = api.checks;
    await until('two more checks', () => api.checks >= before + 2);
    expect(workspace.status().reason).toBe('Unauthenticated');
  });

  it('lets the workspace report its own state once both reviews are allowed', async () => {
    const api = new StandInReviews();
    api.allow();
    const installing = workspaceIn('Installing');
    const seen: CallerVerification[] = [];
    start(api, (s) => {
      seen.push(s);
      installing.setCallerVerification(s);
    });
    await until('verified', () => seen.length > 0);
    expect(seen).toEqual([{ state: 'verified' }]);
    expect(installing.status().state).toBe('Installing');
    installing.state = 'Ready';
    expect(installing.status()).toMatchObject({ state: 'Ready' });
    // Verified once, it does not poll the API.
    const checks = api.checks;
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(api.checks).toBe(checks);
  });

  it('is not Ready before the first check answered', () => {
    const workspace = workspaceIn('Ready');
    expect(workspace.status()).toMatchObject({ state: 'Installing', reason: 'CheckingAccess' });
  });

  it('recovers without a restart when the binding is granted later', async () => {
    const api = new StandInReviews();
    const workspace = workspaceIn('Ready');
    const seen: string[] = [];
    start(api, (s) => {
      seen.push(s.state);
      workspace.setCallerVerification(s);
    });
    await until('the refusal', () => workspace.status().state === 'Failed');
    api.allow();
    await until('the recovery', () => workspace.status().state === 'Ready');
    expect(workspace.status()).toEqual({ hash: 'h1', state: 'Ready' });
    expect(seen).toEqual(['refused', 'verified']);
  });

  it('checks again when a caller is refused after it was verified (the binding was removed)', async () => {
    const api = new StandInReviews();
    api.allow();
    const workspace = workspaceIn('Ready');
    const check = start(api, (s) => workspace.setCallerVerification(s));
    await until('verified', () => check.state.state === 'verified');
    api.token = tokenForbidden;
    api.access = accessForbidden;
    check.recheck();
    await until('the refusal', () => workspace.status().state === 'Failed');
    expect(workspace.status().reason).toBe('Unauthenticated');
  });

  it('reports a refusal only when it changes', async () => {
    const api = new StandInReviews();
    const changes: CallerVerification[] = [];
    start(api, (s) => changes.push(s));
    await until('three checks', () => api.checks >= 3);
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ state: 'refused' });
  });
});
