/** A small client of the workspace server's HTTP API for tests (the runner has the real one). */
import { request } from 'undici';
import type { OperationRequest } from '../../contract';
import type { OperationResult, StreamLine } from '../src/api';

export interface StreamedOperation {
  status: number;
  body?: { code: number; reason: string; message: string };
  lines: StreamLine[];
  result?: OperationResult;
  /** Milliseconds from the request to the result line. */
  ms: number;
}

export async function operate(
  base: string,
  op: OperationRequest,
  opts: { token?: string; onLine?: (l: StreamLine) => void } = {},
): Promise<StreamedOperation> {
  const t0 = Date.now();
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const res = await request(`${base}/v1/operations`, {
    method: 'POST',
    headers,
    body: JSON.stringify(op),
    bodyTimeout: 300_000,
    headersTimeout: 300_000,
  });
  if (res.statusCode !== 200) {
    const body = (await res.body.json()) as StreamedOperation['body'];
    return { status: res.statusCode, ...(body ? { body } : {}), lines: [], ms: Date.now() - t0 };
  }
  const lines: StreamLine[] = [];
  let buf = '';
  for await (const chunk of res.body) {
    buf += (chunk as Buffer).toString('utf8');
    let i: number;
    while ((i = buf.indexOf('\n')) >= 0) {
      const text = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (!text.trim()) continue;
      const line = JSON.parse(text) as StreamLine;
      lines.push(line);
      opts.onLine?.(line);
    }
  }
  const last = lines[lines.length - 1];
  const out: StreamedOperation = { status: 200, lines, ms: Date.now() - t0 };
  if (last?.kind === 'result') out.result = last.result;
  return out;
}

export async function getJson(base: string, path: string, token?: string): Promise<{ status: number; body: unknown }> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await request(`${base}${path}`, { method: 'GET', headers });
  const text = await res.body.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* text */
  }
  return { status: res.statusCode, body };
}

export async function post(base: string, path: string, token?: string): Promise<number> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await request(`${base}${path}`, { method: 'POST', headers });
  await res.body.dump();
  return res.statusCode;
}
