/**
 * A small JSON client for the pod runner: HTTPS requests with the TLS settings and credentials
 * that @kubernetes/client-node's KubeConfig provides (applyToHTTPSOptions), and list+watch.
 * Raw JSON on purpose: the typed client's serializer drops fields its 1.4 models do not know
 * (the API server is newer) and turns timestamps into Dates; the runner patches pod status with
 * strategic merge patches built from plain objects, as the kubelet does.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly method: string,
    readonly path: string,
    readonly body: string,
  ) {
    super(`${method} ${path}: HTTP ${code}: ${body.slice(0, 500)}`);
    this.name = 'ApiError';
  }
}

export const isNotFound = (e: unknown): boolean => e instanceof ApiError && e.code === 404;
export const isConflict = (e: unknown): boolean => e instanceof ApiError && e.code === 409;

export interface KObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [k: string]: unknown;
  };
  [k: string]: unknown;
}

export interface ObjectList<T> {
  metadata?: { resourceVersion?: string };
  items?: T[];
}

export interface WatchEvent<T> {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: T;
}

export type ContentType =
  'application/json' | 'application/merge-patch+json' | 'application/strategic-merge-patch+json';

export class Api {
  readonly server: URL;
  private readonly agent: https.Agent | http.Agent;
  private closed = false;
  private readonly inflight = new Set<http.ClientRequest>();

  constructor(private readonly kc: KubeConfig) {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('pod runner: the KubeConfig has no current cluster');
    this.server = new URL(cluster.server);
    this.agent =
      this.server.protocol === 'https:'
        ? new https.Agent({ keepAlive: true, maxSockets: 32 })
        : new http.Agent({ keepAlive: true, maxSockets: 32 });
  }

  /** PEM of the cluster's CA, if the KubeConfig names one. */
  async caPem(): Promise<string | undefined> {
    const opts: https.RequestOptions = {};
    await this.kc.applyToHTTPSOptions(opts);
    const ca = opts.ca;
    if (ca === undefined) return undefined;
    return Buffer.isBuffer(ca) ? ca.toString('utf8') : Array.isArray(ca) ? ca.map(String).join('\n') : String(ca);
  }

  private async options(method: string, path: string, headers: Record<string, string>): Promise<https.RequestOptions> {
    const opts: https.RequestOptions = {};
    await this.kc.applyToHTTPSOptions(opts);
    const merged: Record<string, string> = {};
    for (const [k, v] of Object.entries(opts.headers ?? {})) if (v !== undefined) merged[k] = String(v);
    Object.assign(merged, headers);
    return {
      protocol: this.server.protocol,
      hostname: this.server.hostname,
      port: this.server.port,
      method,
      path,
      headers: merged,
      ca: opts.ca,
      cert: opts.cert,
      key: opts.key,
      rejectUnauthorized: opts.rejectUnauthorized,
      servername: opts.servername,
      auth: opts.auth,
      agent: this.agent,
    };
  }

  private send(opts: https.RequestOptions, body?: string): Promise<http.IncomingMessage> {
    if (this.closed) return Promise.reject(new Error('pod runner: API client closed'));
    return new Promise((resolve, reject) => {
      const mod = this.server.protocol === 'https:' ? https : http;
      const req = mod.request(opts, (res) => {
        this.inflight.delete(req);
        resolve(res);
      });
      this.inflight.add(req);
      req.on('error', (e) => {
        this.inflight.delete(req);
        reject(e);
      });
      req.setTimeout(60_000, () => req.destroy(new Error(`${opts.method} ${opts.path}: timeout`)));
      req.end(body);
    });
  }

  async request<T = unknown>(
    method: string,
    path: string,
    body?: unknown,
    contentType: ContentType = 'application/json',
  ): Promise<T> {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (payload !== undefined) {
      headers['content-type'] = contentType;
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    const res = await this.send(await this.options(method, path, headers), payload);
    const chunks: Buffer[] = [];
    for await (const c of res) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const code = res.statusCode ?? 0;
    if (code < 200 || code >= 300) throw new ApiError(code, method, path, text);
    return (text === '' ? undefined : JSON.parse(text)) as T;
  }

  get<T = unknown>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  /** GET that returns undefined on 404. */
  async getOptional<T = unknown>(path: string): Promise<T | undefined> {
    try {
      return await this.get<T>(path);
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  /**
   * Streams a watch. Resolves when the server ends the stream (timeout) or abort() is called;
   * rejects on connection errors or a non-200 answer. An ERROR event is handed to onEvent.
   */
  watch<T>(path: string, onEvent: (e: WatchEvent<T>) => void): { done: Promise<void>; abort: () => void } {
    let req: http.ClientRequest | undefined;
    let res: http.IncomingMessage | undefined;
    let aborted = false;
    const done = (async (): Promise<void> => {
      const opts = await this.options('GET', path, { accept: 'application/json' });
      if (aborted) return;
      await new Promise<void>((resolve, reject) => {
        if (this.closed) {
          resolve();
          return;
        }
        const mod = this.server.protocol === 'https:' ? https : http;
        // A watch holds its connection: not from the keep-alive pool.
        req = mod.request({ ...opts, agent: false }, (r) => {
          res = r;
          if (r.statusCode !== 200) {
            const chunks: Buffer[] = [];
            r.on('data', (c: Buffer) => chunks.push(c));
            r.on('end', () =>
              reject(new ApiError(r.statusCode ?? 0, 'GET', path, Buffer.concat(chunks).toString('utf8'))),
            );
            r.on('error', reject);
            return;
          }
          let buf = '';
          r.setEncoding('utf8');
          r.on('data', (chunk: string) => {
            buf += chunk;
            let nl: number;
            while ((nl = buf.indexOf('\n')) >= 0) {
              const line = buf.slice(0, nl).trim();
              buf = buf.slice(nl + 1);
              if (line === '') continue;
              let ev: WatchEvent<T>;
              try {
                ev = JSON.parse(line) as WatchEvent<T>;
              } catch {
                continue;
              }
              onEvent(ev);
            }
          });
          r.on('end', () => resolve());
          r.on('close', () => resolve());
          r.on('error', (e) => (aborted ? resolve() : reject(e)));
        });
        this.inflight.add(req);
        req.on('error', (e) => (aborted ? resolve() : reject(e)));
        req.on('close', () => {
          if (req) this.inflight.delete(req);
        });
        req.end();
      });
    })();
    return {
      done,
      abort: () => {
        aborted = true;
        res?.destroy();
        req?.destroy();
      },
    };
  }

  close(): void {
    this.closed = true;
    for (const r of this.inflight) r.destroy();
    this.inflight.clear();
    this.agent.destroy();
  }
}

/** URL-encodes each path segment. */
export function p(strings: TemplateStringsArray, ...values: (string | number)[]): string {
  let out = strings[0] ?? '';
  values.forEach((v, i) => {
    out += encodeURIComponent(String(v)) + (strings[i + 1] ?? '');
  });
  return out;
}
