/**
 * The probe's hook server in its own process (./probe.ts forks it), so a crash is seen as an exit
 * and its memory as its own RSS. Logs as deployed, to stdout, which the probe drains. Asked
 * `{ events: true }`, it answers with what was wrong with the Events it wrote.
 */
import { buildProbeServer, EventChecks } from './probe-hooks';

async function main(): Promise<void> {
  const events = new EventChecks();
  const { app, events: recorder } = buildProbeServer(process.stdout, events);
  await app.listen({ port: 0, host: '127.0.0.1' });
  process.on('message', () => {
    void recorder?.idle().then(() => process.send!({ eventProblems: events.problems, eventsWritten: events.written }));
  });
  process.send!({ port: (app.server.address() as { port: number }).port });
}
void main();
