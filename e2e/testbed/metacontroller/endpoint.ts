/**
 * How a webhook proves who it calls and who calls: `caBundle`, `clientTLS`, `authorization` and
 * `basicAuth`, on the webhook or, when it sets none of them, in the first `endpointConfigs` entry
 * whose host matches (https://github.com/metacontroller/metacontroller/blob/v4.17.2/pkg/hooks/endpoint_config.go,
 * auth.go, cabundle.go). Resolved once, when the controller is started: the Secrets and
 * ConfigMaps read then are what every call uses until the controller object's spec changes or
 * Metacontroller restarts.
 */
import { X509Certificate } from 'node:crypto';
import { createSecureContext } from 'node:tls';
import type { Kube } from './kube';
import { webhookUrl, type WebhookSpec } from './webhook';

interface ResourceKeyRef {
  name: string;
  namespace: string;
  key?: string;
}
interface CABundle {
  inline?: string;
  secretRef?: ResourceKeyRef;
  configMapRef?: ResourceKeyRef;
}
interface SecretRef {
  name: string;
  namespace: string;
}
interface ClientTLS {
  secretRef: SecretRef;
  certKey?: string;
  privateKeyKey?: string;
}
interface Authorization {
  type?: string;
  secretRef: SecretRef & { key: string };
}
interface BasicAuth {
  secretRef: SecretRef;
  usernameKey?: string;
  passwordKey?: string;
}

/** The four fields, on a webhook or an endpointConfigs entry. */
export interface ConnectionFields {
  caBundle?: CABundle;
  clientTLS?: ClientTLS;
  authorization?: Authorization;
  basicAuth?: BasicAuth;
}
export interface EndpointConfig extends ConnectionFields {
  host: string;
}

/** What every call of one webhook uses. */
export interface ResolvedEndpoint {
  /** PEM of the CAs the server is checked against, instead of the system's. */
  caBundle?: string;
  /** The Authorization header's value. */
  authHeader?: string;
  /** The client certificate and key (PEM) of mutual TLS. */
  clientCert?: { cert: string; key: string };
}

/** Go's strings.TrimSpace, as Metacontroller trims Secret values. */
const trimSpace = (s: string): string => s.replace(/^[\s\u0085]+|[\s\u0085]+$/g, '');

async function secretData(kube: Kube, ref: SecretRef, what: string): Promise<Record<string, string>> {
  let secret: { data?: Record<string, string> };
  try {
    secret = await kube.request('GET', `/api/v1/namespaces/${ref.namespace}/secrets/${ref.name}`);
  } catch (e) {
    throw new Error(`can't get ${what} secret ${ref.namespace}/${ref.name}: ${(e as Error).message}`, { cause: e });
  }
  const data: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) data[k] = Buffer.from(v, 'base64').toString('utf8');
  return data;
}

async function resolveCABundle(kube: Kube, spec: CABundle): Promise<string> {
  const sources = [spec.inline, spec.secretRef, spec.configMapRef].filter((s) => s !== undefined).length;
  if (sources === 0) throw new Error('caBundle is set but none of inline, secretRef, or configMapRef is specified');
  if (sources > 1)
    throw new Error(
      'caBundle has more than one source set: exactly one of inline, secretRef, or configMapRef must be specified',
    );
  if (spec.inline !== undefined) return spec.inline;
  const fromSecret = spec.secretRef !== undefined;
  const ref = (spec.secretRef ?? spec.configMapRef)!;
  const key = ref.key || 'ca.crt';
  const kind = fromSecret ? 'Secret' : 'ConfigMap';
  let obj: { data?: Record<string, string> };
  try {
    obj = await kube.request(
      'GET',
      `/api/v1/namespaces/${ref.namespace}/${fromSecret ? 'secrets' : 'configmaps'}/${ref.name}`,
    );
  } catch (e) {
    throw new Error(`caBundle: failed to get ${kind} ${ref.namespace}/${ref.name}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  const raw = obj.data?.[key];
  if (raw === undefined) throw new Error(`caBundle: key "${key}" not found in ${kind} ${ref.namespace}/${ref.name}`);
  const value = fromSecret ? Buffer.from(raw, 'base64').toString('utf8') : raw;
  if (value === '') throw new Error(`caBundle: key "${key}" in ${kind} ${ref.namespace}/${ref.name} is empty`);
  return value;
}

async function resolveClientTLS(kube: Kube, spec: ClientTLS): Promise<{ cert: string; key: string }> {
  const { name, namespace } = spec.secretRef;
  const data = await secretData(kube, spec.secretRef, 'clientTLS');
  const certKey = spec.certKey || 'tls.crt';
  const keyKey = spec.privateKeyKey || 'tls.key';
  const cert = data[certKey];
  const key = data[keyKey];
  if (cert === undefined) throw new Error(`clientTLS secret ${namespace}/${name} does not contain key "${certKey}"`);
  if (key === undefined) throw new Error(`clientTLS secret ${namespace}/${name} does not contain key "${keyKey}"`);
  try {
    createSecureContext({ cert, key });
  } catch (e) {
    throw new Error(`can't parse clientTLS certificate from secret ${namespace}/${name}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  return { cert, key };
}

async function resolveAuthorization(kube: Kube, spec: Authorization): Promise<string> {
  const type = trimSpace(spec.type ?? '');
  if (type.toLowerCase() === 'basic')
    throw new Error(`authorization type "${spec.type}" is not supported; use the basicAuth field instead`);
  const { name, namespace, key } = spec.secretRef;
  const data = await secretData(kube, spec.secretRef, 'authorization');
  const value = data[key];
  if (value === undefined) throw new Error(`authorization secret ${namespace}/${name} does not contain key "${key}"`);
  return `${type || 'Bearer'} ${trimSpace(value)}`;
}

async function resolveBasicAuth(kube: Kube, spec: BasicAuth): Promise<string> {
  const { name, namespace } = spec.secretRef;
  const data = await secretData(kube, spec.secretRef, 'basicAuth');
  const userKey = spec.usernameKey || 'username';
  const passKey = spec.passwordKey || 'password';
  const user = data[userKey];
  const pass = data[passKey];
  if (user === undefined) throw new Error(`basicAuth secret ${namespace}/${name} does not contain key "${userKey}"`);
  if (pass === undefined) throw new Error(`basicAuth secret ${namespace}/${name} does not contain key "${passKey}"`);
  if (user.includes(':')) throw new Error("basicAuth username must not contain ':'");
  return `Basic ${Buffer.from(`${trimSpace(user)}:${trimSpace(pass)}`).toString('base64')}`;
}

/** Go's x509.CertPool.AppendCertsFromPEM: whether at least one certificate of the PEM text parses. */
function hasCertificate(pem: string): boolean {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.some((b) => {
    try {
      new X509Certificate(b);
      return true;
    } catch {
      return false;
    }
  });
}

async function resolveFields(kube: Kube, f: ConnectionFields): Promise<ResolvedEndpoint | undefined> {
  if (f.authorization && f.basicAuth) throw new Error('authorization and basicAuth are mutually exclusive');
  const resolved: ResolvedEndpoint = {};
  if (f.caBundle) {
    try {
      resolved.caBundle = await resolveCABundle(kube, f.caBundle);
    } catch (e) {
      throw new Error(`can't resolve caBundle: ${(e as Error).message}`, { cause: e });
    }
  }
  if (f.clientTLS) {
    try {
      resolved.clientCert = await resolveClientTLS(kube, f.clientTLS);
    } catch (e) {
      throw new Error(`can't resolve clientTLS: ${(e as Error).message}`, { cause: e });
    }
  }
  try {
    if (f.authorization) resolved.authHeader = await resolveAuthorization(kube, f.authorization);
    else if (f.basicAuth) resolved.authHeader = await resolveBasicAuth(kube, f.basicAuth);
  } catch (e) {
    throw new Error(`can't resolve ${f.authorization ? 'authorization' : 'basicAuth'}: ${(e as Error).message}`, {
      cause: e,
    });
  }
  if (!resolved.caBundle && !resolved.authHeader && !resolved.clientCert) return undefined;
  // NewWebhookExecutor's TLS transport: a bundle without a certificate is refused.
  if (resolved.caBundle && !hasCertificate(resolved.caBundle))
    throw new Error('caBundle: no valid PEM-encoded certificates found in the provided CA bundle');
  return resolved;
}

/** matchEndpointConfig: the first entry whose host is the URL's host, `:443`/`:80` and no port alike. */
function matchEndpointConfig(url: string, configs: readonly EndpointConfig[]): EndpointConfig | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return undefined;
  }
  const scheme = u.protocol.replace(/:$/, '');
  const defaultPort = scheme === 'https' ? '443' : scheme === 'http' ? '80' : '';
  // The URL parser drops a default port: put it back as Go's u.Host would keep it.
  const explicitPort = /^[a-z]+:\/\/[^/]*:(\d+)(\/|$)/i.exec(url)?.[1];
  const hostname = u.hostname;
  const urlHost = explicitPort ? `${hostname}:${explicitPort}` : hostname;
  const canonical = explicitPort ? urlHost : defaultPort ? `${hostname}:${defaultPort}` : urlHost;
  const eq = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();
  return configs.find(
    (c) =>
      eq(c.host, urlHost) ||
      eq(c.host, canonical) ||
      (explicitPort !== undefined && explicitPort === defaultPort && eq(c.host, hostname)),
  );
}

/**
 * ResolveEndpointConfig: the webhook's own fields when it sets any (endpointConfigs are then
 * ignored, not merged), else the matching endpointConfigs entry's. The host matched is the one
 * Metacontroller would call (`url`, or `service` and `path`).
 */
export async function resolveEndpoint(
  kube: Kube,
  webhook: WebhookSpec,
  endpointConfigs: readonly EndpointConfig[] | undefined,
): Promise<ResolvedEndpoint | undefined> {
  const own = webhook as WebhookSpec & ConnectionFields;
  if (own.caBundle || own.clientTLS || own.authorization || own.basicAuth) return resolveFields(kube, own);
  if (!endpointConfigs || endpointConfigs.length === 0) return undefined;
  let url: string;
  try {
    url = webhookUrl(webhook);
  } catch {
    return undefined; // the webhook's own error comes when it is built
  }
  const entry = matchEndpointConfig(url, endpointConfigs);
  return entry ? resolveFields(kube, entry) : undefined;
}
