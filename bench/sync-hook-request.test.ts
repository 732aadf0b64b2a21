/**
 * `npm run bench` measures the sync hook on a Stack at rest: its requests (./sync-hook-request.ts)
 * must stay at rest, for the bench's own check and for the hook server it starts, on any day.
 * The answers depend on the clock (a finished Update past its TTL is pruned), so both run at the
 * request's clock, not the wall clock, which is set years ahead here.
 */
import type { AddressInfo } from 'node:net';
import { benchHookServer, benchRequest, expectAnsweredAtRest, type RequestKind } from './sync-hook-request';

beforeAll(() => {
  // Only Date: the server's sockets and timers stay real.
  jest.useFakeTimers({
    now: new Date('2036-01-01T00:00:00Z'),
    doNotFake: [
      'hrtime',
      'nextTick',
      'performance',
      'queueMicrotask',
      'setImmediate',
      'clearImmediate',
      'setInterval',
      'clearInterval',
      'setTimeout',
      'clearTimeout',
    ],
  });
});
afterAll(() => jest.useRealTimers());

test.each<RequestKind>(['captured', 'synthetic'])(
  'the %s request is at rest years after it was made, and the bench hook server answers it so',
  async (kind) => {
    const request = benchRequest(kind);
    const { app } = benchHookServer(kind, { logger: false });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      await expectAnsweredAtRest((app.server.address() as AddressInfo).port, request);
    } finally {
      await app.close();
    }
  },
);
