/**
 * The hostile-input probe's short form (./probe-run.ts; the long form is `npm run bench:probe`):
 * 2,000 mutated real requests (a seventh of them the classes of issue 34: forged last-applied
 * annotations, far-future times, control characters, SSH keys of too many bcrypt rounds, slow
 * bodies), the nesting cases up to 100,000 levels and a 3 s soak against the real hook server
 * in-process on 127.0.0.1, then 10 YAML texts for `render`, alias bombs among them. Any 5xx,
 * connection error, answer or Event breaking the checks (./probe-checks.ts) or failed render
 * fails it; the report names the seed and each failing case's index.
 */
import { describe, expect, it } from '@jest/globals';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { CLASSES, loadSeedBodies, probeCase } from './probe-cases';
import { buildProbeServer, EventChecks } from './probe-hooks';
import { formatReport, runProbe } from './probe-run';

/** Fixed, so a failure here is rebuilt with `npm run bench:probe -- --seed 22`. */
const SEED = 22;

describe('hostile-input probe, short form', () => {
  it('answers every mutated request with 2xx or 4xx and never drops a connection', async () => {
    // The log is written (its code runs on hostile input too) and thrown away.
    const sink = new Writable({ write: (_chunk, _enc, done) => done() });
    const events = new EventChecks();
    const { app, events: recorder } = buildProbeServer(sink, events);
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as AddressInfo).port;
    try {
      const report = await runProbe(
        {
          port: () => port,
          rss: () => undefined,
          recover: () => Promise.resolve(false),
          crashes: () => 0,
          // The events still queued are written first.
          events: async () => {
            await recorder?.idle();
            return { problems: events.problems, written: events.written };
          },
        },
        loadSeedBodies(join(__dirname, '..')),
        {
          seed: SEED,
          requests: 2000,
          seconds: 40,
          nestingDepths: [1_000, 10_000, 100_000],
          soakSeconds: 3,
          soakRate: 100,
          concurrency: 4,
          renderCases: 10,
        },
      );
      process.stdout.write(`${formatReport(report)}\n`);
      expect(report.failures).toEqual([]);
      expect({
        '5xx': report.status['5xx'],
        connectionErrors: report.connectionErrors,
        violations: report.violations,
      }).toEqual({ '5xx': 0, connectionErrors: 0, violations: 0 });
      // Every class was sent, and the server wrote Events to check.
      expect(Object.keys(report.byClass).sort()).toEqual([...CLASSES].sort());
      expect(report.eventsWritten).toBeGreaterThan(0);
    } finally {
      await app.close();
    }
  }, 90_000);

  it('rebuilds any case from the seed and its index alone', () => {
    const seeds = loadSeedBodies(join(__dirname, '..'));
    for (const index of [0, 1, 977, 1999]) expect(probeCase(SEED, index, seeds)).toEqual(probeCase(SEED, index, seeds));
    expect(probeCase(SEED, 1, seeds)).not.toEqual(probeCase(SEED + 1, 1, seeds));
  });
});
