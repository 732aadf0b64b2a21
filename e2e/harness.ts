/**
 * What the e2e scenario files import: the operator on the test bed (testbed/operator.ts), cluster
 * helpers (testbed/cluster.ts), fixtures (testbed/fixtures.ts) and the shared waits and conditions.
 * The set-up with jest's hooks is suite.ts.
 */
export { condition } from '../hooks/test/builders';
export * from './testbed/cluster';
export * from './testbed/fixtures';
export { eventually } from './testbed/helpers';
export * from './testbed/operator';
