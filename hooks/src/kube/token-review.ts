/**
 * Who holds a bearer token, and what they may do, as the API server says: a TokenReview
 * (authentication.k8s.io/v1) names the token's user, a SubjectAccessReview (authorization.k8s.io/v1)
 * says whether that user may do something, both asked with the hooks' own identity (kube/access.ts;
 * its ClusterRole grants `create` on both). This is how the hooks check a caller they did not issue
 * a credential to, such as Prometheus on /metrics, the way upstream's controller-runtime does.
 *
 * Answers are remembered briefly (a token revoked, a binding removed, count within the TTL) in a
 * cache bounded in entries and bytes, keyed by a hash: no token is kept in clear, logged or put in
 * an error message. Reviews in flight are bounded too, so a flood of made-up tokens costs the API
 * server at most that many requests at a time.
 */
import { createHash } from 'node:crypto';
import type * as k8s from '@kubernetes/client-node';
import { LRUCache } from 'lru-cache';
import { abortAfter, k8sModule } from './access';

/** A token's user, as a TokenReview's status.user names it. */
export interface UserInfo {
  username: string;
  uid: string;
  groups: string[];
  extra: Record<string, string[]>;
}

/** What a SubjectAccessReview asks about: a non-resource URL, or a resource. */
/** A SubjectAccessReview's resource attributes, as the API names them. */
export interface ResourceAttributes {
  verb: string;
  resource: string;
  group?: string;
  version?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

export type AccessAttributes = { nonResourceURL: string; verb: string } | ResourceAttributes;

/** What the reviewer asks the API server: each call answers the review's `status`, as JSON. */
export interface ReviewApi {
  tokenReview(spec: { token: string; audiences?: string[] }): Promise<unknown>;
  subjectAccessReview(spec: SubjectAccessReviewSpec): Promise<unknown>;
}

export interface SubjectAccessReviewSpec {
  user: string;
  uid: string;
  groups: string[];
  extra: Record<string, string[]>;
  nonResourceAttributes?: { path: string; verb: string };
  resourceAttributes?: ResourceAttributes;
}

/** Authentication and authorization of bearer tokens; what callers depend on. */
export interface Reviewer {
  /** The token's user, or undefined if the token is not valid (for one of `audiences`, when given). */
  authenticate(token: string, audiences?: readonly string[]): Promise<UserInfo | undefined>;
  /** Whether `user` may do what `attributes` says. */
  authorize(user: UserInfo, attributes: AccessAttributes): Promise<boolean>;
}

/** The API server could not answer (unreachable, refused the hooks, too slow) or too many reviews are in flight. Never cached. */
export class ReviewUnavailable extends Error {}

export interface TokenReviewerOptions {
  /** How long a positive answer (a valid token, an allowed access) is remembered (default 60 s). */
  allowTtlMs?: number;
  /** How long a negative answer is remembered (default 10 s). */
  denyTtlMs?: number;
  /** Answers remembered at most (default 1024). */
  maxEntries?: number;
  /** Bytes of answers remembered at most, keys included (default 1 MiB). */
  maxBytes?: number;
  /** Reviews asked of the API server at once, at most (default 16); more fail with ReviewUnavailable. */
  maxInFlight?: number;
  /** How long one review may take (default 5 s). */
  timeoutMs?: number;
  /** The reviewer's only notion of time; tests move it. */
  now?: () => number;
}

/** Longer tokens are refused without asking: a ServiceAccount token is a few kB at most. */
export const MAX_TOKEN_BYTES = 16 * 1024;

/** One remembered answer: a user (or none), or an access decision. */
type Answer = { user: UserInfo | undefined } | { allowed: boolean };

/**
 * The TokenReview and SubjectAccessReview APIs of a kubeconfig. Each call is aborted after
 * `timeoutMs`, so a review the reviewer stopped waiting for does not keep its request open.
 */
export function kubeReviewApi(kc: k8s.KubeConfig, timeoutMs = 5_000): ReviewApi {
  const k = k8sModule();
  const authn = kc.makeApiClient(k.AuthenticationV1Api);
  const authz = kc.makeApiClient(k.AuthorizationV1Api);
  return {
    async tokenReview(spec) {
      const review = await authn.createTokenReview(
        { body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec } },
        abortAfter(timeoutMs),
      );
      return review.status;
    },
    async subjectAccessReview(spec) {
      const review = await authz.createSubjectAccessReview(
        { body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SubjectAccessReview', spec } },
        abortAfter(timeoutMs),
      );
      return review.status;
    },
  };
}

/** Reviews through `api`, with the answers cached and the reviews in flight bounded. */
export class TokenReviewer implements Reviewer {
  private readonly answers: LRUCache<string, Answer>;
  /** Reviews in flight, by key: concurrent callers with the same question share one. */
  private readonly inFlight = new Map<string, Promise<Answer>>();
  private readonly allowTtlMs: number;
  private readonly denyTtlMs: number;
  private readonly maxInFlight: number;
  private readonly timeoutMs: number;

  constructor(
    private readonly api: ReviewApi,
    options: TokenReviewerOptions = {},
  ) {
    this.allowTtlMs = options.allowTtlMs ?? 60_000;
    this.denyTtlMs = options.denyTtlMs ?? 10_000;
    this.maxInFlight = options.maxInFlight ?? 16;
    this.timeoutMs = options.timeoutMs ?? 5_000;
    const now = options.now ?? Date.now;
    const maxBytes = options.maxBytes ?? 1024 * 1024;
    // Every expiry is read from `now` (ttlResolution 0), so a test's clock moves them. Shifted by
    // 1 ms: lru-cache takes an entry stored at time 0 for one without a TTL.
    this.answers = new LRUCache<string, Answer>({
      max: options.maxEntries ?? 1024,
      maxSize: maxBytes,
      maxEntrySize: maxBytes,
      sizeCalculation: (answer, key) => key.length + JSON.stringify(answer).length,
      ttlResolution: 0,
      perf: { now: () => now() + 1 },
    });
  }

  /** Answers remembered now (for the tests of the bounds). */
  get size(): number {
    return this.answers.size;
  }

  async authenticate(token: string, audiences: readonly string[] = []): Promise<UserInfo | undefined> {
    if (token === '' || Buffer.byteLength(token) > MAX_TOKEN_BYTES) return undefined;
    const wanted = [...new Set(audiences)].sort();
    const answer = await this.ask(keyOf('authn', token, wanted), async () => {
      const status = await this.api.tokenReview({ token, ...(wanted.length > 0 ? { audiences: wanted } : {}) });
      return { user: userOf(status, wanted) };
    });
    return 'user' in answer ? answer.user : undefined;
  }

  async authorize(user: UserInfo, attributes: AccessAttributes): Promise<boolean> {
    const spec: SubjectAccessReviewSpec = {
      user: user.username,
      uid: user.uid,
      groups: user.groups,
      extra: user.extra,
      ...('nonResourceURL' in attributes
        ? { nonResourceAttributes: { path: attributes.nonResourceURL, verb: attributes.verb } }
        : { resourceAttributes: attributes }),
    };
    const answer = await this.ask(keyOf('authz', JSON.stringify(spec), []), async () => {
      const status = (await this.api.subjectAccessReview(spec)) as { allowed?: unknown; denied?: unknown } | undefined;
      return { allowed: status?.allowed === true && status.denied !== true };
    });
    return 'allowed' in answer && answer.allowed;
  }

  /** The remembered answer to `key`, else the one `review` gets (shared with concurrent askers), remembered. */
  private async ask(key: string, review: () => Promise<Answer>): Promise<Answer> {
    const known = this.answers.get(key);
    if (known) return known;
    const pending = this.inFlight.get(key);
    if (pending) return pending;
    if (this.inFlight.size >= this.maxInFlight)
      throw new ReviewUnavailable('too many reviews in flight: retry shortly');
    const asked = this.withTimeout(review()).then(
      (answer) => {
        const positive = 'user' in answer ? answer.user !== undefined : answer.allowed;
        this.answers.set(key, answer, { ttl: positive ? this.allowTtlMs : this.denyTtlMs });
        return answer;
      },
      (err: unknown) => {
        // Only the status code: a client error's message may carry the request, token included.
        if (err instanceof ReviewUnavailable) throw err;
        const code = (err as { code?: unknown } | null)?.code;
        throw new ReviewUnavailable(
          `the API server did not answer the review${typeof code === 'number' ? ` (HTTP ${code})` : ''}`,
        );
      },
    );
    this.inFlight.set(key, asked);
    try {
      return await asked;
    } finally {
      this.inFlight.delete(key);
    }
  }

  private withTimeout<T>(work: Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new ReviewUnavailable(`the API server did not answer the review within ${this.timeoutMs} ms`)),
        this.timeoutMs,
      );
    });
    return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
  }
}

/** A cache key: a hash, so no token is held in clear. */
function keyOf(kind: 'authn' | 'authz', subject: string, audiences: string[]): string {
  return createHash('sha256')
    .update(JSON.stringify([kind, subject, audiences]))
    .digest('hex');
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : [];
}

/**
 * The user of a TokenReview's status, if it says the token is valid, and, when audiences were
 * asked for, valid for at least one of them (an authenticator that ignores audiences answers none).
 */
function userOf(status: unknown, audiences: string[]): UserInfo | undefined {
  const s = status as { authenticated?: unknown; user?: Record<string, unknown>; audiences?: unknown } | undefined;
  if (s?.authenticated !== true) return undefined;
  const username = s.user?.username;
  if (typeof username !== 'string' || username === '') return undefined;
  if (audiences.length > 0 && !strings(s.audiences).some((a) => audiences.includes(a))) return undefined;
  const given = s.user?.extra;
  // fromEntries defines each key, "__proto__" too, rather than assigning it.
  const extra: Record<string, string[]> =
    given && typeof given === 'object'
      ? Object.fromEntries(Object.entries(given as Record<string, unknown>).map(([k, v]) => [k, strings(v)]))
      : {};
  const uid = s.user?.uid;
  return { username, uid: typeof uid === 'string' ? uid : '', groups: strings(s.user?.groups), extra };
}
