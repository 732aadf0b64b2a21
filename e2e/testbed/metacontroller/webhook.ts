/**
 * Hook calls (https://metacontroller.github.io/metacontroller/api/hook.html#webhook, https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/hooks/webhook.go):
 * POST JSON, success only on 200, 429 → retry
 * after Retry-After, the whole call bounded by `timeout` (default 10s), and the response decoded
 * loosely (v1) or strictly (v2: unknown top-level fields are an error) unless
 * `responseUnMarshallMode` says otherwise. With a resolved endpoint (endpoint.ts): the server
 * checked against `caBundle` instead of the system's CAs (TLS 1.2 at least), the client
 * certificate of `clientTLS` presented, and the Authorization header of `authorization` or
 * `basicAuth` sent on every call.
 */
import { Agent, request } from 'undici';
import type { ResolvedEndpoint } from './endpoint';

export interface WebhookSpec {
  url?: string;
  path?: string;
  service?: { name: string; namespace: string; port?: number; protocol?: string };
  timeout?: string;
  responseUnMarshallMode?: 'loose' | 'strict';
  [k: string]: unknown;
}
export interface HookSpec {
  version?: 'v1' | 'v2';
  webhook?: WebhookSpec;
}
export type HookUrl = (hook: { service?: WebhookSpec['service']; path?: string; url?: string }) => string;

/** Thrown on HTTP 429: requeue after this many seconds, no event, no backoff step. */
export class TooManyRequests extends Error {
  constructor(readonly afterSeconds: number) {
    super(`too many requests, retry after ${afterSeconds}s`);
  }
}

/** Parses a Go duration ("10s", "1m30s", "500ms"); undefined for anything else. */
export function parseDuration(s: string): number | undefined {
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let m: RegExpExecArray | null;
  let end = 0;
  while ((m = re.exec(s)) !== null) {
    total += parseFloat(m[1]!) * units[m[2]!]!;
    end = re.lastIndex;
  }
  return end === s.length && s.length > 0 ? total : s === '0' ? 0 : undefined;
}

/** The URL Metacontroller would call; service+path webhooks go through `hookUrl` if given. */
export function webhookUrl(w: WebhookSpec, hookUrl?: HookUrl): string {
  if (w.url) return w.url;
  if (!w.service || w.path === undefined) {
    throw new Error("invalid webhook config: must specify either a full 'url', or both 'service' and 'path'");
  }
  if (!w.service.name || !w.service.namespace) {
    throw new Error("invalid webhook config: 'service' must specify both 'name' and 'namespace'");
  }
  if (hookUrl) return hookUrl({ service: w.service, path: w.path });
  return `${w.service.protocol ?? 'http'}://${w.service.name}.${w.service.namespace}:${w.service.port ?? 80}${w.path}`;
}

export interface ResponseShape {
  /** Top-level field → expected JSON type ('object' accepts null too, like a Go map or pointer). */
  [field: string]: 'object' | 'array' | 'number' | 'boolean' | 'stringMap';
}

export class Webhook {
  readonly url: string;
  readonly version: 'v1' | 'v2';
  private readonly timeoutMs: number;
  private readonly strict: boolean;
  private readonly agent: Agent;
  /** The agent of this webhook's own TLS settings, closed with it; undefined: the shared one. */
  private readonly ownAgent: Agent | undefined;
  private readonly authHeader: string | undefined;

  constructor(
    readonly type: 'sync' | 'finalize' | 'customize',
    spec: HookSpec,
    hookUrl: HookUrl | undefined,
    sharedAgent: Agent,
    endpoint?: ResolvedEndpoint,
  ) {
    const w = spec.webhook;
    if (!w) throw new Error(`${type} hook: only webhook hooks are supported`);
    this.url = webhookUrl(w, hookUrl);
    if (endpoint?.caBundle || endpoint?.clientCert) {
      this.ownAgent = new Agent({
        keepAliveTimeout: 4_000,
        connect: {
          minVersion: 'TLSv1.2',
          ...(endpoint.caBundle ? { ca: endpoint.caBundle } : {}),
          ...(endpoint.clientCert ? { cert: endpoint.clientCert.cert, key: endpoint.clientCert.key } : {}),
        },
      });
    }
    this.agent = this.ownAgent ?? sharedAgent;
    this.authHeader = endpoint?.authHeader;
    this.version = spec.version ?? 'v1';
    const t = w.timeout === undefined ? undefined : parseDuration(w.timeout);
    this.timeoutMs = t === undefined || t <= 0 ? 10_000 : t;
    this.strict = (w.responseUnMarshallMode ?? (this.version === 'v2' ? 'strict' : 'loose')) === 'strict';
  }

  async call(body: unknown, shape: ResponseShape): Promise<Record<string, unknown>> {
    let statusCode: number;
    let text: string;
    let retryAfter: string | string[] | undefined;
    try {
      const res = await request(this.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(this.authHeader ? { authorization: this.authHeader } : {}) },
        body: JSON.stringify(body),
        dispatcher: this.agent,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      statusCode = res.statusCode;
      retryAfter = res.headers['retry-after'];
      text = await res.body.text();
    } catch (e) {
      const err = e as Error;
      const msg = err.name === 'TimeoutError' ? `timeout after ${this.timeoutMs}ms` : err.message;
      throw new Error(`http error: Post "${this.url}": ${msg}`, { cause: e });
    }
    if (statusCode === 429) {
      const ra = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
      const date = ra !== undefined && /[a-z]/i.test(ra) ? Date.parse(ra) : NaN;
      throw new TooManyRequests(
        Number.isNaN(date) ? parseInt(ra ?? '0', 10) || 0 : Math.ceil((date - Date.now()) / 1000),
      );
    }
    if (statusCode !== 200) throw new Error(`unsupported status code: ${statusCode} body: ${text}`);
    return this.decode(text, shape);
  }

  /** Closes the connections of this webhook's own TLS settings. */
  async close(): Promise<void> {
    await this.ownAgent?.destroy().catch(() => undefined);
  }

  /** sigs.k8s.io/json UnmarshalStrict into the response struct: type errors always fail. */
  private decode(text: string, shape: ResponseShape): Record<string, unknown> {
    const fail = (why: string): never => {
      throw new Error(`can't unmarshal webhookResponse (version: ${this.version}, type: ${this.type}): ${why}`);
    };
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch (e) {
      return fail((e as Error).message);
    }
    if (v === null) return {};
    if (typeof v !== 'object' || Array.isArray(v))
      return fail(`cannot unmarshal ${Array.isArray(v) ? 'array' : typeof v} into Go value of type struct`);
    const out = v as Record<string, unknown>;
    const unknown: string[] = [];
    for (const [k, val] of Object.entries(out)) {
      const t = shape[k];
      if (!t) {
        unknown.push(`unknown field "${k}"`);
        continue;
      }
      if (val === null) continue;
      const ok =
        t === 'array'
          ? Array.isArray(val) && val.every((x) => typeof x === 'object' && x !== null && !Array.isArray(x))
          : t === 'object'
            ? typeof val === 'object' && !Array.isArray(val)
            : t === 'stringMap'
              ? typeof val === 'object' &&
                !Array.isArray(val) &&
                Object.values(val).every((x) => x === null || typeof x === 'string')
              : typeof val === t;
      if (!ok) fail(`field ${k}: unexpected ${JSON.stringify(val).slice(0, 80)}`);
    }
    if (unknown.length > 0) {
      if (this.strict) {
        throw new Error(
          `strict validation failed for ${this.version} webhookResponse (type: ${this.type}, mode: strict): ${unknown.length === 1 ? unknown[0] : `[${unknown.join(', ')}]`}`,
        );
      }
      for (const k of Object.keys(out)) if (!shape[k]) delete out[k];
    }
    return out;
  }
}
