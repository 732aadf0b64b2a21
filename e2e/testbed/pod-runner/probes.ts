/**
 * Probes and lifecycle handlers the kubelet's way: httpGet (2xx/3xx succeed, redirects not
 * followed), tcpSocket (connect), grpc (grpc.health.v1.Health/Check over h2c must answer
 * SERVING), exec (in the container's namespaces, exit 0 succeeds). Every pod shares the host's
 * network, so the default host is 127.0.0.1.
 */
import * as http from 'node:http';
import * as http2 from 'node:http2';
import * as https from 'node:https';
import * as net from 'node:net';
import type { V1Container, V1HTTPGetAction, V1LifecycleHandler, V1Probe } from '@kubernetes/client-node';
import { POD_IP } from './env';

export type ProbeResult = { ok: boolean; message: string };

export interface ProbeTarget {
  container: V1Container;
  exec: (argv: string[], timeoutMs: number) => Promise<{ exitCode: number; output: string; timedOut: boolean }>;
}

/** A named or numeric port of the container. */
export function resolvePort(port: number | string | undefined, container: V1Container): number {
  if (typeof port === 'number') return port;
  if (port === undefined) throw new Error('probe has no port');
  if (/^\d+$/.test(port)) return Number(port);
  const p = (container.ports ?? []).find((x) => x.name === port);
  if (!p) throw new Error(`port ${port} is not a named port of container ${container.name}`);
  return p.containerPort;
}

export function httpGet(action: V1HTTPGetAction, container: V1Container, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    let port: number;
    try {
      port = resolvePort(action.port, container);
    } catch (e) {
      resolve({ ok: false, message: (e as Error).message });
      return;
    }
    const host = action.host || POD_IP;
    const scheme = (action.scheme ?? 'HTTP').toUpperCase();
    const headers: Record<string, string> = { 'user-agent': 'kube-probe/1.36', accept: '*/*' };
    for (const h of action.httpHeaders ?? []) headers[h.name.toLowerCase()] = h.value;
    const pathPart = action.path ? (action.path.startsWith('/') ? action.path : `/${action.path}`) : '/';
    const opts: https.RequestOptions = {
      host,
      port,
      path: pathPart,
      method: 'GET',
      headers,
      timeout: timeoutMs,
      agent: false,
      rejectUnauthorized: false,
    };
    const req = (scheme === 'HTTPS' ? https : http).request(opts, (res) => {
      res.resume();
      const code = res.statusCode ?? 0;
      resolve({ ok: code >= 200 && code < 400, message: `HTTP probe ${pathPart} on ${host}:${port}: status ${code}` });
    });
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', (e) =>
      resolve({ ok: false, message: `Get "${scheme.toLowerCase()}://${host}:${port}${pathPart}": ${e.message}` }),
    );
    req.end();
  });
}

export function tcpSocket(host: string, port: number, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    const sock = net.connect({ host, port });
    const timer = setTimeout(() => {
      sock.destroy();
      resolve({ ok: false, message: `dial tcp ${host}:${port}: i/o timeout` });
    }, timeoutMs);
    sock.once('connect', () => {
      clearTimeout(timer);
      sock.destroy();
      resolve({ ok: true, message: '' });
    });
    sock.once('error', (e) => {
      clearTimeout(timer);
      resolve({ ok: false, message: `dial tcp ${host}:${port}: ${e.message}` });
    });
  });
}

/** grpc.health.v1.Health/Check with the given service; SERVING (1) succeeds. */
export function grpcCheck(host: string, port: number, service: string, timeoutMs: number): Promise<ProbeResult> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: ProbeResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.close();
      client.destroy();
      resolve(r);
    };
    const client = http2.connect(`http://${host}:${port}`);
    const timer = setTimeout(() => done({ ok: false, message: `grpc probe on ${host}:${port}: timeout` }), timeoutMs);
    client.on('error', (e: Error) => done({ ok: false, message: `grpc probe on ${host}:${port}: ${e.message}` }));
    const svc = Buffer.from(service, 'utf8');
    const msg = svc.length ? Buffer.concat([Buffer.from([0x0a, svc.length]), svc]) : Buffer.alloc(0);
    const frame = Buffer.alloc(5 + msg.length);
    frame.writeUInt8(0, 0);
    frame.writeUInt32BE(msg.length, 1);
    msg.copy(frame, 5);
    const req = client.request({
      ':method': 'POST',
      ':path': '/grpc.health.v1.Health/Check',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    let grpcStatus: string | undefined;
    req.on('response', (h: http2.IncomingHttpHeaders) => {
      if (h['grpc-status'] !== undefined) grpcStatus = String(h['grpc-status']);
    });
    req.on('trailers', (t: http2.IncomingHttpHeaders) => {
      if (t['grpc-status'] !== undefined) grpcStatus = String(t['grpc-status']);
    });
    req.on('error', (e: Error) => done({ ok: false, message: `grpc probe on ${host}:${port}: ${e.message}` }));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (grpcStatus !== undefined && grpcStatus !== '0') {
        done({ ok: false, message: `grpc probe: rpc error: code = ${grpcStatus}` });
        return;
      }
      // HealthCheckResponse { status = 1 (enum) } → 0x08 <status>
      const payload = body.subarray(5);
      const status = payload.length >= 2 && payload[0] === 0x08 ? payload[1] : 0;
      done(
        status === 1
          ? { ok: true, message: '' }
          : { ok: false, message: `service unhealthy (responded with status ${status})` },
      );
    });
    req.end(frame);
  });
}

export async function runProbe(probe: V1Probe, target: ProbeTarget): Promise<ProbeResult> {
  const timeoutMs = (probe.timeoutSeconds ?? 1) * 1000;
  try {
    if (probe.httpGet) return await httpGet(probe.httpGet, target.container, timeoutMs);
    if (probe.tcpSocket) {
      return await tcpSocket(
        probe.tcpSocket.host || POD_IP,
        resolvePort(probe.tcpSocket.port, target.container),
        timeoutMs,
      );
    }
    if (probe.grpc) return await grpcCheck(POD_IP, probe.grpc.port, probe.grpc.service ?? '', timeoutMs);
    if (probe.exec) {
      const r = await target.exec(probe.exec.command ?? [], timeoutMs);
      if (r.timedOut) return { ok: false, message: `command timed out after ${timeoutMs} ms` };
      return { ok: r.exitCode === 0, message: r.output.trim() };
    }
  } catch (e) {
    return { ok: false, message: (e as Error).message };
  }
  return { ok: false, message: 'probe has no handler' };
}

/** The probe's timings with the API's defaults. */
export function probeTimings(probe: V1Probe): {
  initialDelayMs: number;
  periodMs: number;
  successThreshold: number;
  failureThreshold: number;
} {
  return {
    initialDelayMs: (probe.initialDelaySeconds ?? 0) * 1000,
    periodMs: (probe.periodSeconds ?? 10) * 1000,
    successThreshold: probe.successThreshold ?? 1,
    failureThreshold: probe.failureThreshold ?? 3,
  };
}

/** A lifecycle handler (postStart, preStop) within timeoutMs (Infinity: no limit of its own). */
export async function runHandler(h: V1LifecycleHandler, target: ProbeTarget, timeoutMs: number): Promise<ProbeResult> {
  const t = Number.isFinite(timeoutMs) ? Math.max(timeoutMs, 1) : 2 ** 31 - 1;
  if (h.exec) {
    const r = await target.exec(h.exec.command ?? [], t);
    return {
      ok: r.exitCode === 0 && !r.timedOut,
      message: `exec ${JSON.stringify(h.exec.command)} exited ${r.exitCode}: ${r.output.trim()}`,
    };
  }
  if (h.httpGet) return httpGet(h.httpGet, target.container, Math.min(t, 2 ** 31 - 1));
  if (h.tcpSocket) {
    try {
      return await tcpSocket(
        h.tcpSocket.host || POD_IP,
        resolvePort(h.tcpSocket.port, target.container),
        Math.min(t, 30_000),
      );
    } catch (e) {
      return { ok: false, message: (e as Error).message };
    }
  }
  if (h.sleep) {
    const seconds = h.sleep.seconds;
    await new Promise((r) => setTimeout(r, Math.min(seconds * 1000, t)));
    return { ok: true, message: '' };
  }
  return { ok: false, message: 'handler has no action' };
}
