import { Writable } from 'node:stream';
import { configFromEnv } from '../src/config';
import { consoleLine } from '../src/http/console-log';
import { buildServer } from '../src/server';
import { postJson, listenOnLoopback } from './answers';
import { makeStack, NOW, syncRequest, testConfig } from './builders';

describe('LOG_FORMAT=console (upstream: controller.logFormat console)', () => {
  it('is read from the environment: json by default, console, anything else refused', () => {
    expect(configFromEnv({}).logFormat).toBe('json');
    expect(configFromEnv({ LOG_FORMAT: 'console' }).logFormat).toBe('console');
    expect(() => configFromEnv({ LOG_FORMAT: 'logfmt' })).toThrow('LOG_FORMAT must be json or console, not "logfmt"');
  });

  it("writes each hook call's line as time, level, message and the other fields as JSON, tab-separated", async () => {
    let logged = '';
    const logStream = new Writable({
      write(chunk: Buffer, _e, cb) {
        logged += chunk.toString();
        cb();
      },
    });
    const { app } = buildServer(
      { ...testConfig, logLevel: 'info', logFormat: 'console' },
      { logStream, clock: () => NOW },
    );
    const base = await listenOnLoopback(app);
    const res = await postJson(
      `${base}/stack/sync`,
      { controller: {}, ...syncRequest(makeStack()) },
      { 'x-request-id': 'console-1' },
    );
    // The line is written once the answer has gone out.
    for (let i = 0; i < 100 && !logged.includes('console-1'); i++) await new Promise((r) => setTimeout(r, 10));
    await app.close();
    expect(res.status).toBe(200);
    const line = logged.split('\n').find((l) => l.includes('console-1'));
    const [time, level, msg, fields, ...rest] = (line ?? '').split('\t');
    expect({ level, msg, rest }).toEqual({ level: 'info', msg: 'stack sync', rest: [] });
    expect(new Date(time!).toISOString()).toBe(time);
    expect(JSON.parse(fields!)).toMatchObject({ requestId: 'console-1', statusCode: 200, stack: 'team-a/my-stack' });
    // Every line is a console line: no JSON object starts a line.
    expect(logged.split('\n').filter((l) => l.startsWith('{'))).toEqual([]);
  });

  it('leaves out pid and hostname, and the fields column when there is nothing else', () => {
    const line = consoleLine('{"level":40,"time":0,"pid":1,"hostname":"h","msg":"careful"}\n');
    expect(line).toBe('1970-01-01T00:00:00.000Z\twarn\tcareful\n');
    expect(consoleLine('not json\n')).toBe('not json\n');
  });
});
