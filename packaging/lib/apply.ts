/**
 * Server-side apply against a real API server, for tests (over the test bed's one REST client,
 * e2e/testbed/metacontroller/kube.ts): discovery maps a kind to its resource,
 * objects are applied (or dry-run: `dryRun=All`) with strict field validation, and the API
 * server's warnings (Pod Security "warn" among them) are returned with the result.
 */
import type {
  KubeConfig,
  V1APIGroupList,
  V1APIResourceList,
  V1CustomResourceDefinition,
  V1SubjectAccessReview,
} from '@kubernetes/client-node';
import { eventually } from '../../e2e/testbed/helpers';
import { type ApiResult, Kube } from '../../e2e/testbed/metacontroller/kube';
import type { KObject } from './repo';

export type { ApiResult };

export interface ApplyOptions {
  dryRun?: boolean;
  /** Namespace for a namespaced object without metadata.namespace (like kubectl apply -n). */
  namespace?: string;
}

interface ResourceInfo {
  resource: string;
  namespaced: boolean;
}

const FIELD_MANAGER = 'pko-packaging-test';

/** A response's body when it has the given status, typed as the API documents it for the request. */
function bodyOf<T extends object>(r: ApiResult, status = 200): T | undefined {
  return r.status === status && typeof r.body === 'object' && r.body !== null ? (r.body as T) : undefined;
}

/** The message of a Kubernetes Status body (what the API server answers on an error), if any. */
export function statusMessage(body: unknown): string | undefined {
  return typeof body === 'object' && body !== null && 'message' in body && typeof body.message === 'string'
    ? body.message
    : undefined;
}

export class ApiClient {
  private discovery = new Map<string, ResourceInfo>();

  private readonly kube: Kube;

  /** A client with the credentials and TLS settings of `kubeConfig` (the admin's: cp.kubeConfig). */
  constructor(kubeConfig: KubeConfig) {
    this.kube = new Kube(kubeConfig);
  }

  request(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<ApiResult> {
    return this.kube.send(method, path, body, contentType);
  }

  /** Closes the connection pool. */
  close(): Promise<void> {
    return this.kube.close();
  }

  private async discover(): Promise<void> {
    const next = new Map<string, ResourceInfo>();
    const add = (groupVersion: string, list: V1APIResourceList | undefined) => {
      for (const r of list?.resources ?? []) {
        if (r.name.includes('/')) continue;
        next.set(`${groupVersion}/${r.kind}`, { resource: r.name, namespaced: r.namespaced === true });
      }
    };
    add('v1', bodyOf<V1APIResourceList>(await this.request('GET', '/api/v1')));
    const groups = bodyOf<V1APIGroupList>(await this.request('GET', '/apis'));
    if (!groups) throw new Error('API discovery: GET /apis failed');
    for (const g of groups.groups) {
      for (const v of g.versions)
        add(v.groupVersion, bodyOf<V1APIResourceList>(await this.request('GET', `/apis/${v.groupVersion}`)));
    }
    this.discovery = next;
  }

  async resourceOf(apiVersion: string, kind: string): Promise<ResourceInfo> {
    const key = `${apiVersion}/${kind}`;
    if (!this.discovery.has(key)) await this.discover();
    const info = this.discovery.get(key);
    if (!info) throw new Error(`the API server does not serve ${kind} in ${apiVersion}`);
    return info;
  }

  async path(o: KObject, namespace?: string): Promise<string> {
    const info = await this.resourceOf(o.apiVersion, o.kind);
    const base = o.apiVersion.includes('/') ? `/apis/${o.apiVersion}` : `/api/${o.apiVersion}`;
    const ns = o.metadata.namespace ?? namespace;
    if (info.namespaced && !ns) throw new Error(`${o.kind}/${o.metadata.name} needs a namespace`);
    return `${base}${info.namespaced ? `/namespaces/${ns}` : ''}/${info.resource}/${encodeURIComponent(o.metadata.name)}`;
  }

  /** Server-side apply (force, strict field validation), optionally as a dry run. */
  async apply(o: KObject, opts: ApplyOptions = {}): Promise<ApiResult> {
    const query = new URLSearchParams({ fieldManager: FIELD_MANAGER, force: 'true', fieldValidation: 'Strict' });
    if (opts.dryRun) query.set('dryRun', 'All');
    const body =
      opts.namespace && !o.metadata.namespace && (await this.resourceOf(o.apiVersion, o.kind)).namespaced
        ? { ...o, metadata: { ...o.metadata, namespace: opts.namespace } }
        : o;
    return this.request(
      'PATCH',
      `${await this.path(o, opts.namespace)}?${query.toString()}`,
      body,
      'application/apply-patch+yaml',
    );
  }

  /** Polls until fn returns a value (not undefined) or the timeout passes. */
  eventually<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
    return eventually(what, fn, timeoutMs, 200);
  }

  /** Waits until a CRD is Established and its kind shows up in discovery. */
  async waitForCrd(crd: KObject): Promise<void> {
    await this.eventually(`CRD ${crd.metadata.name} established`, async () => {
      const r = await this.request(
        'GET',
        `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata.name}`,
      );
      const conditions = bodyOf<V1CustomResourceDefinition>(r)?.status?.conditions ?? [];
      return conditions.some((c) => c.type === 'Established' && c.status === 'True') ? true : undefined;
    });
    const spec = crd.spec as { group: string; names: { kind: string }; versions: { name: string; served: boolean }[] };
    for (const v of spec.versions.filter((x) => x.served)) {
      await this.eventually(`${spec.names.kind} in discovery`, async () => {
        this.discovery.delete(`${spec.group}/${v.name}/${spec.names.kind}`);
        return (await this.resourceOf(`${spec.group}/${v.name}`, spec.names.kind)) ?? undefined;
      });
    }
  }

  /** Whether `user` (with `groups`) may do what the resource attributes say (SubjectAccessReview). */
  async can(user: string, groups: string[], attrs: Record<string, string>): Promise<boolean> {
    const r = await this.request('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user, groups, resourceAttributes: attrs },
    });
    if (r.status !== 201) throw new Error(`SubjectAccessReview: HTTP ${r.status} ${JSON.stringify(r.body)}`);
    return bodyOf<V1SubjectAccessReview>(r, 201)?.status?.allowed === true;
  }
}

/** A readable line for a failed apply. */
export function describeFailure(o: KObject, r: ApiResult): string {
  const detail = statusMessage(r.body) ?? (typeof r.body === 'string' ? r.body : JSON.stringify(r.body));
  return `${o.kind}/${o.metadata.name}: HTTP ${r.status} ${detail}`;
}
