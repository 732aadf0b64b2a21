/**
 * The test bed's one Kubernetes REST client (the Metacontroller driver's, and packaging/lib/apply.ts's): requests, discovery, list+watch streams and
 * Events, on one keep-alive undici Agent built from a @kubernetes/client-node KubeConfig (TLS and
 * credentials come from the KubeConfig; nothing here is specific to our control plane).
 */
import * as https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { Agent, request } from 'undici';

export interface KObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    generation?: number;
    resourceVersion?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    finalizers?: string[];
    ownerReferences?: OwnerReference[];
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

/** A resource as discovery describes it. `apiVersion` is `version` (core) or `group/version`. */
export interface Resource {
  apiVersion: string;
  group: string;
  resource: string;
  kind: string;
  namespaced: boolean;
  hasStatus: boolean;
}

/** An API error with the Status reason, as apimachinery's IsNotFound/IsConflict/... test it. */
export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}
export const isNotFound = (e: unknown): boolean => e instanceof ApiError && e.code === 404;
export const isConflict = (e: unknown): boolean => e instanceof ApiError && e.code === 409 && e.reason === 'Conflict';
export const isAlreadyExists = (e: unknown): boolean => e instanceof ApiError && e.reason === 'AlreadyExists';
export const isGone = (e: unknown): boolean => e instanceof ApiError && e.code === 410;
/** For .catch(): swallows the errors any predicate accepts, rethrows the others. */
export const unless =
  (...preds: ((e: unknown) => boolean)[]) =>
  (e: unknown): undefined => {
    if (!preds.some((p) => p(e))) throw e;
    return undefined;
  };

export function groupOf(apiVersion: string): string {
  const i = apiVersion.indexOf('/');
  return i < 0 ? '' : apiVersion.slice(0, i);
}

/** What the API server answered to one request. */
export interface ApiResult {
  status: number;
  /** Parsed JSON, or the text when it is not JSON, or undefined when empty. */
  body: unknown;
  warnings: string[];
}

export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: KObject & { code?: number; reason?: string; message?: string };
}

export class Kube {
  private agent?: Agent;
  private readonly server: string;
  private readonly discovery = new Map<string, Promise<Resource[]>>();
  private readonly aborts = new Set<AbortController>();
  private closed = false;

  constructor(private readonly kc: KubeConfig) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    this.server = cluster.server.replace(/\/$/, '');
  }

  /** TLS material and credentials, taken from the KubeConfig on every call (tokens may rotate). */
  private async options(): Promise<{ headers: Record<string, string> }> {
    const opts: https.RequestOptions = { headers: {} };
    await this.kc.applyToHTTPSOptions(opts);
    if (!this.agent) {
      const { ca, cert, key, servername, rejectUnauthorized } = opts;
      this.agent = new Agent({
        keepAliveTimeout: 10_000,
        connect: { ca, cert, key, servername, ...(rejectUnauthorized === false ? { rejectUnauthorized } : {}) },
      });
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) if (v !== undefined) headers[k.toLowerCase()] = String(v);
    if (opts.auth) headers.authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
    return { headers };
  }

  /**
   * One request, whatever its answer: the status, the body (parsed JSON; the text when it is not
   * JSON; undefined when empty) and the API server's warnings (Pod Security "warn" among them).
   */
  async send(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<ApiResult> {
    if (this.closed) throw new Error('client closed');
    const { headers } = await this.options();
    headers.accept = 'application/json';
    if (body !== undefined) headers['content-type'] = contentType;
    const res = await request(this.server + path, {
      method: method as 'GET',
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher: this.agent,
      headersTimeout: 30_000,
      bodyTimeout: 30_000,
    });
    const text = await res.body.text();
    let parsed: unknown = text === '' ? undefined : text;
    try {
      if (text !== '') parsed = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    const warning = res.headers.warning;
    const warnings = warning === undefined ? [] : Array.isArray(warning) ? warning : [warning];
    return { status: res.statusCode, body: parsed, warnings };
  }

  /** A request that must succeed: its body (a Kubernetes object), or an ApiError with the Status's reason. */
  async request<T = KObject>(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<T> {
    const res = await this.send(method, path, body, contentType);
    if (res.status >= 300) {
      // A metav1.Status (reason, message) on failure.
      const status = (typeof res.body === 'object' && res.body !== null ? res.body : {}) as {
        reason?: unknown;
        message?: unknown;
      };
      const message =
        typeof status.message === 'string'
          ? status.message
          : typeof res.body === 'string'
            ? res.body
            : JSON.stringify(res.body ?? '');
      throw new ApiError(
        res.status,
        typeof status.reason === 'string' ? status.reason : '',
        `${method} ${path}: ${res.status} ${message}`,
      );
    }
    return (res.body ?? {}) as T;
  }

  // -- paths and discovery ------------------------------------------------------------------

  static basePath(apiVersion: string): string {
    return apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  }

  static path(r: Resource, namespace?: string, name?: string, sub?: string): string {
    const ns = r.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
    return `${Kube.basePath(r.apiVersion)}${ns}/${r.resource}${name ? `/${encodeURIComponent(name)}` : ''}${sub ? `/${sub}` : ''}`;
  }

  private async resources(apiVersion: string, refresh: boolean): Promise<Resource[]> {
    let p = this.discovery.get(apiVersion);
    if (!p || refresh) {
      p = this.request<{ resources: { name: string; kind: string; namespaced: boolean }[] }>(
        'GET',
        Kube.basePath(apiVersion),
      ).then((list) => {
        const names = new Set(list.resources.map((r) => r.name));
        return list.resources
          .filter((r) => !r.name.includes('/'))
          .map((r) => ({
            apiVersion,
            group: groupOf(apiVersion),
            resource: r.name,
            kind: r.kind,
            namespaced: r.namespaced,
            hasStatus: names.has(`${r.name}/status`),
          }));
      });
      p.catch(() => this.discovery.delete(apiVersion));
      this.discovery.set(apiVersion, p);
    }
    return p;
  }

  /**
   * Discovery lookup by resource (plural) or by kind; re-reads discovery once on a miss (where
   * Metacontroller refreshes it every --discovery-interval: docs/metacontroller-local.md).
   */
  async resolve(apiVersion: string, by: { resource: string } | { kind: string }): Promise<Resource> {
    const find = (rs: Resource[]): Resource | undefined =>
      rs.find((r) => ('resource' in by ? r.resource === by.resource : r.kind === by.kind));
    let found: Resource | undefined;
    try {
      found = find(await this.resources(apiVersion, false)) ?? find(await this.resources(apiVersion, true));
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    if (!found)
      throw new Error(
        `discovery: can't find ${'resource' in by ? `resource ${by.resource}` : `kind ${by.kind}`} in apiVersion ${apiVersion}`,
      );
    return found;
  }

  // -- CRUD -----------------------------------------------------------------------------------

  get(r: Resource, ns: string | undefined, name: string): Promise<KObject> {
    return this.request('GET', Kube.path(r, ns, name));
  }
  create(r: Resource, obj: KObject): Promise<KObject> {
    return this.request('POST', Kube.path(r, obj.metadata.namespace), obj);
  }
  update(r: Resource, obj: KObject, sub?: 'status'): Promise<KObject> {
    return this.request('PUT', Kube.path(r, obj.metadata.namespace, obj.metadata.name, sub), obj);
  }
  /** DELETE with a UID precondition and Background propagation (deleteChildren in https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/controller/common/manage_children.go). */
  delete(r: Resource, ns: string | undefined, name: string, uid?: string): Promise<unknown> {
    return this.request('DELETE', Kube.path(r, ns, name), {
      apiVersion: 'v1',
      kind: 'DeleteOptions',
      propagationPolicy: 'Background',
      ...(uid ? { preconditions: { uid } } : {}),
    });
  }

  /** All objects of a resource (paginated); items get apiVersion/kind as client-go's lists do. */
  async list(r: Resource): Promise<{ items: KObject[]; resourceVersion: string }> {
    const items: KObject[] = [];
    let cont = '';
    for (;;) {
      const q = `?limit=500${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`;
      const page = await this.request<{ items: KObject[]; metadata: { resourceVersion: string; continue?: string } }>(
        'GET',
        Kube.path(r) + q,
      );
      for (const it of page.items) items.push({ ...it, apiVersion: r.apiVersion, kind: r.kind });
      if (!page.metadata.continue) return { items, resourceVersion: page.metadata.resourceVersion };
      cont = page.metadata.continue;
    }
  }

  /** One watch stream from `resourceVersion`; resolves when the server closes it. */
  async watch(r: Resource, resourceVersion: string, onEvent: (e: WatchEvent) => void): Promise<void> {
    if (this.closed) return;
    const { headers } = await this.options();
    const ac = new AbortController();
    this.aborts.add(ac);
    try {
      const timeout = 240 + Math.floor(Math.random() * 120);
      const q = `?watch=1&allowWatchBookmarks=true&resourceVersion=${encodeURIComponent(resourceVersion)}&timeoutSeconds=${timeout}`;
      const res = await request(this.server + Kube.path(r) + q, {
        method: 'GET',
        headers: { ...headers, accept: 'application/json' },
        dispatcher: this.agent,
        signal: ac.signal,
        bodyTimeout: 0,
      });
      if (res.statusCode !== 200) {
        const text = await res.body.text();
        throw new ApiError(
          res.statusCode,
          res.statusCode === 410 ? 'Expired' : '',
          `watch ${Kube.path(r)}: ${res.statusCode} ${text}`,
        );
      }
      let buf = '';
      for await (const chunk of res.body) {
        buf += (chunk as Buffer).toString('utf8');
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (line !== '') onEvent(JSON.parse(line) as WatchEvent);
        }
      }
    } catch (e) {
      if (!ac.signal.aborted) throw e;
    } finally {
      this.aborts.delete(ac);
    }
  }

  /**
   * A Warning/Normal Event on an object, as client-go's recorder writes it (source component
   * `metacontroller`); a repeat of the same reason and message bumps `count` (event correlation).
   */
  private readonly events = new Map<string, { name: string; ns: string; count: number }>();
  async event(obj: KObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const ns = obj.metadata.namespace || 'default';
    const key = `${obj.metadata.uid}\0${type}\0${reason}\0${message}`;
    const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    const seen = this.events.get(key);
    if (seen) {
      const patch = { count: ++seen.count, lastTimestamp: now };
      return void (await this.request(
        'PATCH',
        `/api/v1/namespaces/${ns}/events/${seen.name}`,
        patch,
        'application/merge-patch+json',
      ));
    }
    const { apiVersion, kind, metadata: m } = obj;
    const name = `${m.name}.${(BigInt(Date.now()) * 1_000_000n).toString(16)}`;
    const involvedObject = {
      apiVersion,
      kind,
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
    };
    const source = { component: 'metacontroller' };
    const event = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace: ns },
      involvedObject,
      type,
      reason,
      message,
      source,
    };
    await this.request('POST', `/api/v1/namespaces/${ns}/events`, {
      ...event,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    });
    this.events.set(key, { name, ns, count: 1 });
  }

  /** Aborts open watches and closes the connection pool. */
  async close(): Promise<void> {
    this.closed = true;
    for (const ac of this.aborts) ac.abort();
    await this.agent?.destroy().catch(() => undefined);
  }
}
