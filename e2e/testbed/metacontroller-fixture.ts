/**
 * The fixture of the Metacontroller driver's self-tests (metacontroller.e2e.ts): test CRDs (group
 * test.pko.example), a CompositeController and a DecoratorController over them, and their hooks,
 * served over HTTPS by a server that records every call and refuses those without the credential.
 * The CompositeController's webhooks carry their own `caBundle` (a Secret) and `authorization`;
 * the DecoratorController's come from `endpointConfigs` (the CA from a ConfigMap, `basicAuth`).
 */
import type * as http from 'node:http';
import * as https from 'node:https';
import type { HookCredentials } from '../../hooks/test/credentials';
import type { KObject, Resource } from './metacontroller/kube';

export const GROUP = 'test.pko.example';
export const CC_NAME = 'pko-test-parents';
export const DC_NAME = 'pko-test-decorator';
export const FINALIZER = `metacontroller.io/compositecontroller-${CC_NAME}`;

const res = (apiVersion: string, resource: string, kind: string, namespaced = true): Resource => ({
  apiVersion,
  group: apiVersion.includes('/') ? apiVersion.split('/')[0]! : '',
  resource,
  kind,
  namespaced,
  hasStatus: true,
});
export const PARENTS = res(`${GROUP}/v1`, 'parents', 'Parent');
export const TARGETS = res(`${GROUP}/v1`, 'targets', 'Target');
export const CONFIGMAPS = res('v1', 'configmaps', 'ConfigMap');
export const SECRETS = res('v1', 'secrets', 'Secret');
export const SERVICEACCOUNTS = res('v1', 'serviceaccounts', 'ServiceAccount');
export const CLUSTERROLES = res('rbac.authorization.k8s.io/v1', 'clusterroles', 'ClusterRole', false);
export const CRDS = res('apiextensions.k8s.io/v1', 'customresourcedefinitions', 'CustomResourceDefinition', false);

// ---------------------------------------------------------------------------------------------
// Hooks: a plain HTTP server recording every call.

/** What the test parents' spec asks their hooks for. */
export interface ParentSpec {
  children?: string[];
  value?: string;
  secret?: string;
  relatedConfigMap?: string;
  malformed?: boolean;
  resyncAfterSeconds?: number;
  /** Children answered exactly as given (any kind, any namespace), after the others. */
  verbatim?: object[];
}
type ObjectMap = Record<string, Record<string, KObject>>;
/** A hook request, any of the four (customize, sync, finalize, decorator sync): fields by hook. */
export interface HookRequest {
  controller?: { metadata: { name: string } };
  parent?: KObject & { spec?: ParentSpec };
  object?: KObject;
  children?: ObjectMap;
  attachments?: ObjectMap;
  related?: ObjectMap;
  finalizing?: boolean;
}
export interface Call {
  path: string;
  body: HookRequest;
  /** The Authorization header the call came with. */
  authorization: string | undefined;
}
export const calls: Call[] = [];
/** Calls refused for a missing or wrong credential (their bodies unread). */
export const refused: Omit<Call, 'body'>[] = [];

/** The hooks' Service (the CompositeController's webhooks), whose name the certificate holds. */
export const HOOKS_SERVICE = { name: 'pko-test-hooks', namespace: 'default' };
/** The credentials' Secrets and ConfigMap, in HOOKS_SERVICE.namespace. */
export const TLS_SECRET = `${HOOKS_SERVICE.name}-tls`;
export const AUTH_SECRET = `${HOOKS_SERVICE.name}-auth`;
export const BASIC_SECRET = `${HOOKS_SERVICE.name}-basic`;
export const CA_CONFIGMAP = `${HOOKS_SERVICE.name}-ca`;
export const BASIC_USER = { username: 'metacontroller', password: 'decorator-password' };
const basicHeader = `Basic ${Buffer.from(`${BASIC_USER.username}:${BASIC_USER.password}`).toString('base64')}`;
/** Parents (by name) whose finalize hook answers finalized: false. */
export const finalizeHold = new Set<string>();

const { namespace } = HOOKS_SERVICE;
/** A webhook of the CompositeController: its own caBundle and authorization. */
const hook = (path: string): object => ({
  version: 'v2',
  webhook: {
    timeout: '10s',
    service: { ...HOOKS_SERVICE, port: 443, protocol: 'https' },
    path,
    caBundle: { secretRef: { name: TLS_SECRET, namespace } },
    authorization: { secretRef: { name: AUTH_SECRET, namespace, key: 'token' } },
  },
});

/**
 * The controllers, for hooks served at https://127.0.0.1:<port>: the DecoratorController's
 * endpointConfigs entry names that host, which its webhook calls after the harness's rewrite.
 */
export const controllers = (port: number): object[] => [
  {
    apiVersion: 'metacontroller.k8s.io/v1alpha1',
    kind: 'CompositeController',
    metadata: { name: CC_NAME },
    spec: {
      generateSelector: true,
      parentResource: { apiVersion: `${GROUP}/v1`, resource: 'parents' },
      childResources: [
        { apiVersion: 'v1', resource: 'configmaps', updateStrategy: { method: 'InPlace' } },
        { apiVersion: 'v1', resource: 'secrets' }, // default strategy: OnDelete
      ],
      resyncPeriodSeconds: 3600,
      hooks: {
        customize: hook('/parents/customize'),
        sync: hook('/parents/sync'),
        finalize: hook('/parents/finalize'),
      },
    },
  },
  {
    apiVersion: 'metacontroller.k8s.io/v1alpha1',
    kind: 'DecoratorController',
    metadata: { name: DC_NAME },
    spec: {
      resources: [
        { apiVersion: `${GROUP}/v1`, resource: 'targets', labelSelector: { matchLabels: { decorate: 'yes' } } },
      ],
      attachments: [{ apiVersion: 'v1', resource: 'configmaps', updateStrategy: { method: 'InPlace' } }],
      resyncPeriodSeconds: 3600,
      hooks: {
        sync: {
          version: 'v2',
          webhook: {
            timeout: '10s',
            service: { ...HOOKS_SERVICE, port: 443, protocol: 'https' },
            path: '/targets/sync',
          },
        },
      },
      endpointConfigs: [
        { host: 'elsewhere.example:443', authorization: { secretRef: { name: 'none', namespace, key: 'none' } } },
        {
          host: `127.0.0.1:${port}`,
          caBundle: { configMapRef: { name: CA_CONFIGMAP, namespace } },
          basicAuth: { secretRef: { name: BASIC_SECRET, namespace } },
        },
      ],
    },
  },
];

/** The Secrets and the ConfigMap the controllers name, holding `credentials` and BASIC_USER. */
export function credentialObjects(credentials: HookCredentials): KObject[] {
  return [
    ...(credentials.secrets as unknown as KObject[]),
    {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: BASIC_SECRET, namespace },
      stringData: BASIC_USER,
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: CA_CONFIGMAP, namespace },
      data: { 'ca.crt': credentials.ca },
    },
  ];
}

function parentsHook(path: string, body: HookRequest): unknown {
  if (!body.parent) throw new Error(`${path}: no parent in the request`);
  const parent = body.parent;
  const spec = parent.spec ?? {};
  const { name, namespace } = parent.metadata;
  if (path === '/parents/customize') {
    return {
      relatedResources: spec.relatedConfigMap
        ? [{ apiVersion: 'v1', resource: 'configmaps', namespace, names: [spec.relatedConfigMap] }]
        : [],
    };
  }
  if (spec.malformed) return { children: [], unexpected: true };
  const finalizing = path === '/parents/finalize';
  const children: object[] = finalizing
    ? []
    : (spec.children ?? []).map((n) => ({
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `${name}-${n}`, labels: { app: 'pko-test' } },
        data: { value: String(spec.value ?? '') },
      }));
  if (!finalizing && spec.secret) {
    children.push({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: `${name}-secret` },
      data: { v: Buffer.from(spec.secret).toString('base64') },
    });
  }
  if (!finalizing) children.push(...(spec.verbatim ?? []));
  const status: Record<string, unknown> = { children: children.length };
  if (spec.value !== undefined) status.value = spec.value;
  const related = spec.relatedConfigMap
    ? body.related?.['ConfigMap.v1']?.[`${namespace}/${spec.relatedConfigMap}`]
    : undefined;
  if (related) status.related = (related.data as Record<string, string> | undefined)?.v;
  const out: Record<string, unknown> = { status, children };
  if (spec.resyncAfterSeconds) out.resyncAfterSeconds = spec.resyncAfterSeconds;
  if (finalizing) {
    out.finalized = !finalizeHold.has(name);
    if (!out.finalized) out.resyncAfterSeconds = 0.2; // waiting on "something external"
  }
  return out;
}

function targetsHook(body: HookRequest): unknown {
  if (!body.object) throw new Error('/targets/sync: no object in the request');
  const { name } = body.object.metadata;
  return {
    labels: { decorated: 'true' },
    annotations: { 'pko-test/decorated-by': DC_NAME },
    status: { attached: true },
    attachments: [
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: `${name}-attachment` }, data: { target: name } },
    ],
  };
}

/** The hooks over HTTPS with `credentials`' certificate: /parents/* want its token, /targets/* BASIC_USER. */
export function startHooks(credentials: HookCredentials): Promise<http.Server> {
  const server = https.createServer({ cert: credentials.cert, key: credentials.key }, (req, resp) => {
    const path = req.url ?? '';
    const authorization = req.headers.authorization;
    const wanted = path.startsWith('/targets/') ? basicHeader : `Bearer ${credentials.token}`;
    if (authorization !== wanted) {
      refused.push({ path, authorization });
      resp.writeHead(401, { 'content-type': 'application/json', connection: 'close' });
      resp.end(JSON.stringify({ error: 'Unauthorized' }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as HookRequest;
        calls.push({ path, body, authorization });
        const out = path.startsWith('/parents/')
          ? parentsHook(path, body)
          : path === '/targets/sync'
            ? targetsHook(body)
            : undefined;
        resp.writeHead(out === undefined ? 404 : 200, { 'content-type': 'application/json' });
        resp.end(JSON.stringify(out ?? { error: 'no such hook' }));
      } catch (e) {
        resp.writeHead(500);
        resp.end(String(e));
      }
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** A namespaced test CRD of GROUP/v1 with the status subresource and free-form spec and status. */
export function crd(plural: string, kind: string): KObject {
  const preserve = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${GROUP}` },
    spec: {
      group: GROUP,
      scope: 'Namespaced',
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: { openAPIV3Schema: { type: 'object', properties: { spec: preserve, status: preserve } } },
        },
      ],
    },
  };
}
