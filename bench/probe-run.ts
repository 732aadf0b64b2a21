/**
 * Sends the probe's cases (./probe-cases.ts) to a hook server on 127.0.0.1 and counts what came
 * back: status classes, connection errors, crashes, answers that break what every answer must be
 * (./probe-checks.ts), Events the server wrote, latency, the server's memory; then renders YAML
 * alias bombs with `render`, in this process. Every phase is bounded by a count and by wall time
 * and stops by itself.
 */
import { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { runCli } from '../hooks/src/cli/main';
import { answerProblems } from './probe-checks';
import { nestingCase, prng, probeCase, renderCase, soakCase, type ProbeCase, type SeedBody } from './probe-cases';

/** The server under probe: where it listens now, and what it can say about itself. */
export interface ProbeTarget {
  port(): number;
  /** Resident memory now and at its peak, in bytes (undefined in-process, where the test's own counts). */
  rss(): { now: number; peak: number } | undefined;
  /** Called after a connection error: restarts a crashed server; false while it is still up. */
  recover(): Promise<boolean>;
  crashes(): number;
  /** What was wrong with the Events the server wrote (./probe-hooks.ts), and how many it wrote. */
  events(): Promise<{ problems: string[]; written: number }>;
}

export interface ProbeOptions {
  seed: number;
  /** Fuzz cases to send, and the wall time they may take. */
  requests: number;
  seconds: number;
  /** Nesting depths, each sent as arrays and as objects, alone and inside a real body. */
  nestingDepths: number[];
  /** The soak: the real bodies in turn at `soakRate` requests/s for `soakSeconds`. */
  soakSeconds: number;
  soakRate: number;
  concurrency: number;
  /** YAML texts rendered with `render`, in this process (renderCase). */
  renderCases: number;
  /** How many failures the report lists (default 20). */
  failuresKept?: number;
}

export interface Failure {
  phase: string;
  index: number;
  method: string;
  path: string;
  mutation: string;
  outcome: string;
}

export interface ProbeReport {
  seed: number;
  requests: number;
  byPhase: Record<string, number>;
  status: { '2xx': number; '4xx': number; '5xx': number; other: number };
  connectionErrors: number;
  /** Answers that break what every answer must be, or what their case expects; Events with problems; renders that failed. */
  violations: number;
  /** Cases of each class sent on purpose (probe-cases.ts CLASSES), and Events the server wrote. */
  byClass: Record<string, number>;
  eventsWritten: number;
  /** Oversized bodies whose connection the server closed before the client read its 413 (not errors). */
  oversizedClosed: number;
  crashes: number;
  rssMiB: { start: number; end: number; peak: number } | undefined;
  latencyMs: { p50: number; p99: number; max: number };
  wallSeconds: number;
  /** The first failures (5xx, connection errors, broken checks), each rebuilt from the seed and its index. */
  failures: Failure[];
}

const REQUEST_TIMEOUT_MS = 30_000;

export async function runProbe(
  target: ProbeTarget,
  seeds: readonly SeedBody[],
  opts: ProbeOptions,
): Promise<ProbeReport> {
  const started = performance.now();
  const dispatcher = new Agent({
    connections: opts.concurrency,
    headersTimeout: REQUEST_TIMEOUT_MS,
    bodyTimeout: REQUEST_TIMEOUT_MS,
  });
  const latencies: number[] = [];
  const report: ProbeReport = {
    seed: opts.seed,
    requests: 0,
    byPhase: {},
    status: { '2xx': 0, '4xx': 0, '5xx': 0, other: 0 },
    connectionErrors: 0,
    violations: 0,
    byClass: {},
    eventsWritten: 0,
    oversizedClosed: 0,
    crashes: 0,
    rssMiB: undefined,
    latencyMs: { p50: 0, p99: 0, max: 0 },
    wallSeconds: 0,
    failures: [],
  };
  const rssStart = target.rss();
  let rssPeak = rssStart?.peak ?? 0;
  const fail = (f: Failure) => {
    if (report.failures.length < (opts.failuresKept ?? 20)) report.failures.push(f);
  };
  const violation = (
    phase: string,
    index: number,
    c: { method: string; path: string; mutation: string },
    outcome: string,
  ) => {
    report.violations++;
    fail({ phase, index, method: c.method, path: c.path, mutation: c.mutation, outcome });
  };

  async function send(phase: string, index: number, c: ProbeCase): Promise<void> {
    const t0 = performance.now();
    report.requests++;
    report.byPhase[phase] = (report.byPhase[phase] ?? 0) + 1;
    if (c.class) report.byClass[c.class] = (report.byClass[c.class] ?? 0) + 1;
    try {
      const res = await request(`http://127.0.0.1:${target.port()}${c.path}`, {
        method: c.method,
        headers: c.contentType === undefined ? {} : { 'content-type': c.contentType },
        body: c.slow && c.body ? Readable.from(slowly(c.body, c.slow.pieces, c.slow.gapMs)) : c.body,
        dispatcher,
      });
      const answered = res.statusCode >= 200 && res.statusCode < 300;
      const text = answered ? await res.body.text() : (await res.body.dump({ limit: 64 * 1024 * 1024 }), '');
      latencies.push(performance.now() - t0);
      if (answered) {
        for (const problem of answerProblems(c.path, c.body, text)) violation(phase, index, c, problem);
        const expected = c.expect?.(JSON.parse(text) as Record<string, unknown>);
        if (expected) violation(phase, index, c, expected);
      }
      const cls = Math.floor(res.statusCode / 100);
      if (cls === 2) report.status['2xx']++;
      else if (cls === 4) report.status['4xx']++;
      else if (cls === 5) {
        report.status['5xx']++;
        fail({ phase, index, method: c.method, path: c.path, mutation: c.mutation, outcome: `HTTP ${res.statusCode}` });
      } else report.status.other++;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (c.oversized && (code === 'EPIPE' || code === 'ECONNRESET') && !(await target.recover())) {
        report.oversizedClosed++;
        return;
      }
      report.connectionErrors++;
      fail({ phase, index, method: c.method, path: c.path, mutation: c.mutation, outcome: String(error) });
      await target.recover();
    }
    const rss = target.rss();
    if (rss) rssPeak = Math.max(rssPeak, rss.peak);
  }

  /** Sends cases from `next` with `concurrency` in flight until it gives none or time is up. */
  async function pool(
    phase: string,
    next: (i: number) => ProbeCase | undefined,
    deadline: number,
    concurrency: number,
  ) {
    let i = 0;
    const worker = async () => {
      for (;;) {
        if (performance.now() > deadline) return;
        const index = i++;
        const c = next(index);
        if (!c) return;
        await send(phase, index, c);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }

  const fuzzDeadline = performance.now() + opts.seconds * 1000;
  await pool(
    'fuzz',
    (i) => (i < opts.requests ? probeCase(opts.seed, i, seeds) : undefined),
    fuzzDeadline,
    opts.concurrency,
  );

  // Nesting: each depth as arrays and as objects, alone and inside a real body; one at a time.
  const nestingCases: ProbeCase[] = [];
  const rand = prng(opts.seed, 0xdeed);
  for (const depth of opts.nestingDepths)
    for (let k = 0; k < 4; k++) nestingCases.push(nestingCase(rand, seeds, depth));
  await pool('nesting', (i) => nestingCases[i], performance.now() + 120_000, 1);

  // Soak: a fixed mix at a bounded rate for a bounded time.
  if (opts.soakSeconds > 0 && opts.soakRate > 0) {
    const soakStart = performance.now();
    const soakEnd = soakStart + opts.soakSeconds * 1000;
    const gap = 1000 / opts.soakRate;
    const inFlight = new Set<Promise<void>>();
    for (let i = 0; performance.now() < soakEnd; i++) {
      const due = soakStart + i * gap;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      // Bounded in flight: a server that stalls slows the soak instead of piling up requests.
      if (inFlight.size >= opts.concurrency * 4) await Promise.race(inFlight);
      const p: Promise<void> = send('soak', i, soakCase(i, seeds)).finally(() => inFlight.delete(p));
      inFlight.add(p);
    }
    await Promise.all(inFlight);
  }

  // The Events the server wrote for all of the above.
  const events = await target.events();
  report.eventsWritten = events.written;
  for (const problem of events.problems)
    violation('events', 0, { method: '-', path: '-', mutation: 'an Event' }, problem);

  // render, in this process: YAML with anchors and aliases, alias bombs among them.
  for (let i = 0; i < opts.renderCases; i++) {
    report.byPhase.render = (report.byPhase.render ?? 0) + 1;
    const c = renderCase(opts.seed, i);
    const what = { method: 'render', path: '-', mutation: c.what };
    let stderr = '';
    let code: number;
    try {
      code = runCli(['render', '-'], {
        stdout: () => undefined,
        stderr: (t) => (stderr += t),
        readStdin: () => c.text,
        env: {},
      });
    } catch (err) {
      violation('render', i, what, `threw ${String(err)}`);
      continue;
    }
    if (c.bomb ? code !== 3 || !stderr.includes('refused') : code > 1)
      violation('render', i, what, `exit ${code}: ${stderr.trim().slice(0, 200)}`);
  }

  await dispatcher.close();
  const rssEnd = target.rss();
  if (rssStart && rssEnd)
    report.rssMiB = { start: mib(rssStart.now), end: mib(rssEnd.now), peak: mib(Math.max(rssPeak, rssEnd.peak)) };
  report.crashes = target.crashes();
  report.latencyMs = latencySummary(latencies);
  report.wallSeconds = Math.round((performance.now() - started) / 100) / 10;
  return report;
}

const mib = (bytes: number) => Math.round((bytes / 1024 / 1024) * 10) / 10;

function latencySummary(xs: number[]): ProbeReport['latencyMs'] {
  if (xs.length === 0) return { p50: 0, p99: 0, max: 0 };
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => Math.round(s[Math.min(s.length - 1, Math.floor(q * s.length))]! * 100) / 100;
  return { p50: at(0.5), p99: at(0.99), max: Math.round(s.at(-1)! * 100) / 100 };
}

/** A body sent in `pieces`, `gapMs` apart. */
async function* slowly(body: Buffer, pieces: number, gapMs: number): AsyncGenerator<Buffer> {
  const size = Math.ceil(body.length / pieces);
  for (let at = 0; at < body.length; at += size) {
    if (at > 0) await new Promise((r) => setTimeout(r, gapMs));
    yield body.subarray(at, at + size);
  }
}

/** True when the run found nothing: no 5xx, no crash, no connection error, no answer breaking the checks. */
export function probePassed(r: ProbeReport): boolean {
  return r.status['5xx'] === 0 && r.crashes === 0 && r.connectionErrors === 0 && r.violations === 0;
}

export function formatReport(r: ProbeReport): string {
  const rows: [string, string][] = [
    ['seed', String(r.seed)],
    [
      'requests',
      `${r.requests} (${Object.entries(r.byPhase)
        .map(([p, n]) => `${p} ${n}`)
        .join(', ')})`,
    ],
    ['2xx / 4xx / 5xx / other', `${r.status['2xx']} / ${r.status['4xx']} / ${r.status['5xx']} / ${r.status.other}`],
    [
      'classes sent',
      Object.entries(r.byClass)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || 'none',
    ],
    ['crashes (restarts)', String(r.crashes)],
    ['connection errors', String(r.connectionErrors)],
    ['answers, events, renders breaking the checks', String(r.violations)],
    ['events written', String(r.eventsWritten)],
    ['oversized, closed before 413 read', String(r.oversizedClosed)],
    [
      'RSS start / end / peak',
      r.rssMiB ? `${r.rssMiB.start} / ${r.rssMiB.end} / ${r.rssMiB.peak} MiB` : 'n/a (in-process)',
    ],
    ['latency p50 / p99 / max', `${r.latencyMs.p50} / ${r.latencyMs.p99} / ${r.latencyMs.max} ms`],
    ['wall time', `${r.wallSeconds} s`],
    ['result', probePassed(r) ? 'PASS' : 'FAIL'],
  ];
  const w = Math.max(...rows.map(([k]) => k.length));
  const lines = rows.map(([k, v]) => `${k.padEnd(w)}  ${v}`);
  for (const f of r.failures)
    lines.push(`  ${f.phase} #${f.index} ${f.method} ${f.path}: ${f.outcome} (${f.mutation.slice(0, 160)})`);
  return lines.join('\n');
}
