import { request } from 'undici';
import type { OperationRequest } from '../../../contract';
import { API_PREFIX, type ApiError, type OperationResult, type StreamLine } from '../api';
import { errorMessage } from '../lib/errors';
import { sleep } from '../lib/sleep';
import { bufferChunks } from '../lib/bytes';

function base(url: string): string {
  return url.replace(/\/+$/, '');
}

/**
 * Polls GET /readyz until the workspace answers 200 or the deadline passes; `onWait` hears why it
 * is still waiting (connection refused, not installed yet, …).
 */
export async function waitForWorkspace(
  url: string,
  timeoutMs: number,
  onWait: (why: string) => void,
  signal: AbortSignal,
): Promise<{ ready: true } | { ready: false; why: string }> {
  const deadline = Date.now() + timeoutMs;
  let why: string;
  for (;;) {
    if (signal.aborted) return { ready: false, why: 'interrupted' };
    try {
      const res = await request(`${base(url)}/readyz`, {
        method: 'GET',
        headersTimeout: 5000,
        bodyTimeout: 5000,
        signal,
      });
      const text = await res.body.text();
      if (res.statusCode === 200) return { ready: true };
      try {
        const st = JSON.parse(text) as { state?: string; reason?: string; message?: string };
        why = `state ${st.state ?? 'unknown'}${st.reason ? ` (${st.reason})` : ''}${st.message ? `: ${st.message}` : ''}`;
      } catch {
        why = `HTTP ${res.statusCode}`;
      }
    } catch (e) {
      why = errorMessage(e);
    }
    if (Date.now() >= deadline) return { ready: false, why };
    onWait(why);
    await sleep(2000, signal);
  }
}

export type RemoteOutcome =
  | { kind: 'result'; result: OperationResult }
  | { kind: 'refused'; status: number; error: ApiError }
  | { kind: 'broken'; message: string; id?: string };

/**
 * POST /v1/operations and reads the NDJSON stream to its result line. `onStarted` gets the
 * operation's id (needed to cancel it); `onLine` every line.
 */
export async function runRemoteOperation(
  url: string,
  token: string | undefined,
  op: OperationRequest,
  handlers: { onStarted(id: string): void; onLine(line: StreamLine): void },
  signal: AbortSignal,
): Promise<RemoteOutcome> {
  let id: string | undefined;
  try {
    const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/x-ndjson' };
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await request(`${base(url)}${API_PREFIX}/operations`, {
      method: 'POST',
      headers,
      body: JSON.stringify(op),
      headersTimeout: 60_000,
      // Heartbeats arrive every 15 s while an operation runs.
      bodyTimeout: 120_000,
      signal,
    });
    if (res.statusCode !== 200) {
      const text = await res.body.text();
      let error: ApiError = {
        code: res.statusCode,
        reason: 'Unknown',
        message: text.slice(0, 500) || `HTTP ${res.statusCode}`,
      };
      try {
        const parsed = JSON.parse(text) as Partial<ApiError>;
        if (typeof parsed.message === 'string')
          error = { code: res.statusCode, reason: parsed.reason ?? 'Unknown', message: parsed.message };
      } catch {
        /* not JSON */
      }
      return { kind: 'refused', status: res.statusCode, error };
    }
    let buf = '';
    let result: OperationResult | undefined;
    for await (const chunk of bufferChunks(res.body)) {
      buf += chunk.toString('utf8');
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        const text = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (text.trim() === '') continue;
        let line: StreamLine;
        try {
          line = JSON.parse(text) as StreamLine;
        } catch {
          continue;
        }
        if (line.kind === 'started') {
          id = line.id;
          handlers.onStarted(line.id);
        }
        if (line.kind === 'result') result = line.result;
        handlers.onLine(line);
      }
    }
    if (result) return { kind: 'result', result };
    return { kind: 'broken', message: 'the workspace closed the stream without a result', ...(id ? { id } : {}) };
  } catch (e) {
    return {
      kind: 'broken',
      message: `the connection to the workspace failed: ${errorMessage(e)}`,
      ...(id ? { id } : {}),
    };
  }
}

/** POST /v1/operations/<id>/cancel: the workspace sends SIGINT to Pulumi. */
export async function cancelRemoteOperation(url: string, token: string | undefined, id: string): Promise<string> {
  try {
    const headers: Record<string, string> = {};
    if (token) headers.authorization = `Bearer ${token}`;
    const res = await request(`${base(url)}${API_PREFIX}/operations/${encodeURIComponent(id)}/cancel`, {
      method: 'POST',
      headers,
      headersTimeout: 10_000,
      bodyTimeout: 10_000,
    });
    await res.body.dump();
    return `HTTP ${res.statusCode}`;
  } catch (e) {
    return errorMessage(e);
  }
}
