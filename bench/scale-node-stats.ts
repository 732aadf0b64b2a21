/**
 * What bench/scale-node.ts reads on the test bed: the kubelet's /stats/summary, the API server's
 * apiserver_request_total, Prometheus text of any component, and the resident memory of the
 * processes that hold a Stack's cost (the hooks, Metacontroller, kube-apiserver, etcd).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import type { Operator } from '../e2e/harness';

export interface PodStats {
  podRef: { name: string; namespace: string };
  cpu?: { usageNanoCores?: number; usageCoreNanoSeconds?: number };
  memory?: { workingSetBytes?: number };
}

/** GET through the API server as its admin (the node proxy, /metrics). */
async function apiGet(op: Operator, path: string): Promise<string> {
  const res = await request(`${op.cp.server}${path}`, {
    headers: { authorization: `Bearer ${op.cp.adminToken}`, accept: 'application/json, text/plain' },
    dispatcher: new Agent({ connect: { ca: op.cp.caData } }),
  });
  const text = await res.body.text();
  if (res.statusCode !== 200) throw new Error(`${path}: ${res.statusCode} ${text.slice(0, 200)}`);
  return text;
}

/** The kubelet's figures for the pods of one namespace. */
export async function summary(op: Operator, namespace: string): Promise<PodStats[]> {
  const text = await apiGet(op, `/api/v1/nodes/${op.node.name}/proxy/stats/summary`);
  return ((JSON.parse(text) as { pods?: PodStats[] }).pods ?? []).filter((p) => p.podRef.namespace === namespace);
}

/** One sample of Prometheus text: each line `name{labels} value`, comments left out. */
export function promLines(text: string): { name: string; labels: string; value: number }[] {
  const out = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)/.exec(line);
    if (m) out.push({ name: m[1]!, labels: m[2] ?? '', value: Number(m[3]) });
  }
  return out;
}

/** A label's value in a `{...}` label set, '' when absent. */
export const label = (labels: string, name: string): string =>
  new RegExp(`[{,]${name}="([^"]*)"`).exec(labels)?.[1] ?? '';

/** The sum of a metric over every label set (NaN when the text has none of it). */
export function promSum(text: string, name: string): number {
  const xs = promLines(text).filter((l) => l.name === name);
  return xs.length ? xs.reduce((a, l) => a + l.value, 0) : Number.NaN;
}

/** The API server's apiserver_request_total summed over every label, and the mutating part of it. */
export interface ApiRequests {
  all: number;
  writes: number;
  /** By "verb resource" (and subresource). */
  by: Map<string, number>;
}

export async function apiRequests(op: Operator): Promise<ApiRequests> {
  const text = await apiGet(op, '/metrics');
  let all = 0;
  let writes = 0;
  const by = new Map<string, number>();
  for (const { name, labels, value } of promLines(text)) {
    if (name !== 'apiserver_request_total') continue;
    all += value;
    if (/verb="(POST|PUT|PATCH|DELETE|APPLY)"/.test(labels)) writes += value;
    const sub = label(labels, 'subresource');
    const key = `${label(labels, 'verb')} ${label(labels, 'resource')}${sub ? '/' + sub : ''}`;
    by.set(key, (by.get(key) ?? 0) + value);
  }
  return { all, writes, by };
}

/** The API server's own /metrics text. */
export const apiserverMetrics = (op: Operator): Promise<string> => apiGet(op, '/metrics');

/** The largest per-key increases from `before` to `after`, as "key": count. */
export function topDeltas(before: Map<string, number>, after: Map<string, number>, n: number): Record<string, number> {
  const deltas = [...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)] as const).filter(([, d]) => d > 0);
  return Object.fromEntries(deltas.sort((a, b) => b[1] - a[1]).slice(0, n));
}

/** The q-quantile (0..1) of xs by the nearest rank; NaN when empty. */
export function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))]! : Number.NaN;
}

export const median = (xs: number[]): number => quantile(xs, 0.5);
export const mib = (bytes: number): number => Math.round((bytes / 2 ** 20) * 10) / 10;
export const round2 = (x: number): number => Math.round(x * 100) / 100;

/** VmRSS of a process from /proc, in bytes (NaN when it is gone). */
export function rssOf(pid: number): number {
  try {
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return kb === undefined ? Number.NaN : Number(kb) * 1024;
  } catch {
    return Number.NaN;
  }
}

/** The process whose command line holds `arg` (e.g. the real Metacontroller's --kubeconfig=<this run's>). */
export function pidWithArg(arg: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(arg)) return Number(entry);
    } catch {
      /* gone meanwhile */
    }
  }
  return undefined;
}
