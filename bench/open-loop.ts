/**
 * A constant-rate (open-loop) load generator: requests are scheduled at fixed intervals whatever
 * the server does, and each latency is measured from the moment the request was due, not from
 * when it was sent, so a stalled server cannot hide its backlog (no "coordinated omission", the
 * method of wrk2 and HdrHistogram). autocannon's `overallRate` cannot measure this: each of its
 * connections sends back to back until that second's quota is spent and then waits for the next
 * second, so the server sees bursts at full load and the latency measured is the saturated one.
 */
import { Pool } from 'undici';

export interface OpenLoopResult {
  /** Requests answered (all with a 2xx, or the run throws). */
  requests: number;
  /** Achieved rate over the run, requests/s. */
  rate: number;
  /** Latency percentiles from the due time, in ms. */
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  /** How late the generator itself sent requests (p99, ms): the floor under every latency above. */
  sendLagP99: number;
}

export interface OpenLoopOptions {
  url: string;
  path: string;
  body: string;
  rate: number;
  seconds: number;
  /** Enough that a request never waits for a free connection at the target rate. */
  connections?: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

export async function openLoop(opts: OpenLoopOptions): Promise<OpenLoopResult> {
  const pool = new Pool(opts.url, { connections: opts.connections ?? 64, pipelining: 1 });
  const total = Math.round(opts.rate * opts.seconds);
  const intervalNs = 1e9 / opts.rate;
  const latencies = new Float64Array(total);
  const sendLags = new Float64Array(total);
  let failures = 0;
  let firstError: unknown;
  let done = 0;
  const start = process.hrtime.bigint();
  const elapsedNs = () => Number(process.hrtime.bigint() - start);

  const fire = (i: number, dueNs: number) => {
    sendLags[i] = (elapsedNs() - dueNs) / 1e6;
    pool
      .request({ path: opts.path, method: 'POST', headers: { 'content-type': 'application/json' }, body: opts.body })
      .then(async (res) => {
        await res.body.dump();
        if (res.statusCode < 200 || res.statusCode >= 300) throw new Error(`HTTP ${res.statusCode}`);
      })
      .catch((err: unknown) => {
        failures++;
        firstError ??= err;
      })
      .finally(() => {
        latencies[i] = (elapsedNs() - dueNs) / 1e6;
        done++;
      });
  };

  // Polls with setImmediate rather than timers (1 ms granularity): the generator has a core of its
  // own, and due requests go out within tens of microseconds while responses are still read
  // between polls.
  await new Promise<void>((resolve) => {
    let next = 0;
    const poll = () => {
      const now = elapsedNs();
      while (next < total && next * intervalNs <= now) {
        fire(next, next * intervalNs);
        next++;
      }
      if (done === total) resolve();
      else setImmediate(poll);
    };
    poll();
  });
  const seconds = elapsedNs() / 1e9;
  await pool.close();
  if (failures > 0) throw new Error(`${failures} of ${total} requests failed: ${String(firstError)}`);
  latencies.sort();
  sendLags.sort();
  return {
    requests: total,
    rate: total / seconds,
    p50: percentile(latencies, 50),
    p90: percentile(latencies, 90),
    p99: percentile(latencies, 99),
    p999: percentile(latencies, 99.9),
    max: latencies[total - 1]!,
    sendLagP99: percentile(sendLags, 99),
  };
}
