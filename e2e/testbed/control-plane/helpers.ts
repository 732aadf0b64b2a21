/** The control plane's small helpers: plain HTTP(S) probes (before any kubeconfig exists) and kubeconfigs. */
import * as http from 'node:http';
import * as https from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';

interface HttpResult {
  status: number;
  body: string;
}

export function request(
  url: string,
  opts: { token?: string; ca?: string; insecure?: boolean; timeoutMs?: number } = {},
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const u = new URL(url);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (opts.token !== undefined) headers.authorization = `Bearer ${opts.token}`;
    const common = { method: 'GET', headers, timeout: opts.timeoutMs ?? 2000 };
    const onRes = (res: http.IncomingMessage): void => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    };
    const req =
      u.protocol === 'https:'
        ? https.request(u, { ...common, ca: opts.ca, rejectUnauthorized: opts.insecure !== true, agent: false }, onRes)
        : http.request(u, { ...common, agent: false }, onRes);
    req.on('timeout', () => req.destroy(new Error(`timeout after ${common.timeout} ms`)));
    req.on('error', reject);
    req.end();
  });
}

export function kubeconfigYaml(server: string, caData: string, user: string, token: string): string {
  // JSON is valid YAML; no quoting pitfalls.
  return JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        { name: 'pko-e2e', cluster: { server, 'certificate-authority-data': Buffer.from(caData).toString('base64') } },
      ],
      users: [{ name: user, user: { token } }],
      contexts: [{ name: user, context: { cluster: 'pko-e2e', user } }],
      'current-context': user,
    },
    null,
    2,
  );
}

export function loadKubeConfig(file: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return kc;
}
