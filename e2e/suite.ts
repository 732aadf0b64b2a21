/**
 * The set-up every scenario file shares. Apart from harness.ts because it needs jest: scripts such as
 * bench/capture-sync-request.ts import the harness to call startOperator() outside jest, where
 * @jest/globals throws.
 */
import { afterAll, beforeAll } from '@jest/globals';
import { startOperator, type Operator, type OperatorOptions } from './harness';
import type { Stack } from '../schemas/generated/types';

export interface E2eSuite {
  timings: Record<string, number>;
  /** Records how long a scenario took; .ci/run prints every suite's figures, slowest first. */
  // Function-typed properties, not methods: the suites destructure them.
  recordTiming: (scenario: string, started: number, detail?: string) => void;
  /** The suite's Stack `name` in its namespace, as the API server has it. */
  getStack: (name: string) => Promise<Stack>;
  /** Waits until the suite's Stack `name` is Ready for its current generation (and `after` holds). */
  readyStack: (name: string, after?: (stack: Stack) => boolean, timeoutMs?: number) => Promise<Stack>;
}

/**
 * One scenario file's set-up: starts the operator before its tests (handing it to `started`),
 * creates its namespace (if it has one), and stops everything after them, printing the scenario
 * timings. A file's own beforeAll/afterAll, declared after this call, run after these.
 */
export function e2eSuite(
  suite: string,
  namespace: string | undefined,
  started: (op: Operator) => void,
  /** The operator's options, read when it starts (after the file's beforeAll hooks declared before this call). */
  options: () => OperatorOptions = () => ({}),
): E2eSuite {
  let op: Operator | undefined;
  const timings: Record<string, number> = {};
  beforeAll(async () => {
    op = await startOperator(options());
    if (namespace !== undefined) await op.namespace(namespace);
    started(op);
  }, 180_000);
  afterAll(async () => {
    await op?.stop();
    console.log(`scenario timings (ms): ${JSON.stringify(timings)}`);
  });
  const inNamespace = (): [Operator, string] => {
    if (!op) throw new Error(`the ${suite} suite's operator is not running`);
    if (namespace === undefined)
      throw new Error(`the ${suite} suite has no namespace of its own: use op.getStack(namespace, name)`);
    return [op, namespace];
  };
  return {
    timings,
    recordTiming(scenario, startedAt, detail) {
      const ms = Date.now() - startedAt;
      timings[scenario] = ms;
      console.log(JSON.stringify({ suite, scenario, ms, ...(detail ? { detail } : {}) }));
    },
    getStack: (name) => {
      const [o, ns] = inNamespace();
      return o.getStack(ns, name);
    },
    readyStack: (name, after, timeoutMs) => {
      const [o, ns] = inNamespace();
      return o.readyStack(ns, name, after, timeoutMs);
    },
  };
}
