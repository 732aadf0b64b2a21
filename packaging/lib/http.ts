/** Minimal HTTP client for tests (node:http; no dependencies that jest cannot load). */
import * as http from 'node:http';

export interface HttpResult {
  status: number;
  text: string;
}

export function httpRequest(
  url: string,
  body?: string,
  method = body === undefined ? 'GET' : 'POST',
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
    const req = http.request(url, { method, headers, timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`timeout: ${method} ${url}`)));
    req.end(body);
  });
}
