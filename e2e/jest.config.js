/**
 * End-to-end suite: real etcd, kube-apiserver, kube-controller-manager and Pulumi binaries built by
 * e2e/toolchain/build.sh. Run with `npm run test:e2e` (jest --config e2e/jest.config.js).
 *
 * @kubernetes/client-node 1.x and some of its dependencies (openid-client, oauth4webapi, jose,
 * jsonpath-plus, rfc4648) ship ES modules only, which jest's CommonJS runtime cannot load: they are
 * transpiled to CommonJS by ts-jest like our own sources.
 */
const fs = require('node:fs');
const path = require('node:path');

const esmOnly = ['@kubernetes/client-node', 'openid-client', 'oauth4webapi', 'jose', 'jsonpath-plus', 'rfc4648'];

const rootDir = path.join(__dirname, '..');
const roots = ['e2e', 'agent', 'packaging'].map((r) => path.join(rootDir, r));

/**
 * The test files that need a toolchain component .ci/run builds beside the suite rather than
 * before it (the older Pulumi CLIs, Flux's controllers, the stores of Flux's OCIRepository and
 * Bucket): the ones that import the module through which tests use such a component
 * (testbed/older-clis.ts; testbed/<name>-controller.ts for the component <name>-controller;
 * testbed/flux-stores.ts for distribution and gofakes3). PKO_E2E_PHASE=early runs the other files, PKO_E2E_PHASE=late
 * these (.ci/run runs them after that build); unset, every file.
 */
const LATE_MODULE = /^import [^;]* from '[^']*\/(older-clis|flux-stores|[\w-]+-controller)';$/m;

function testFiles(dir) {
  return fs
    .readdirSync(dir, { recursive: true })
    .filter((f) => f.endsWith('.e2e.ts') && !f.split(path.sep).includes('node_modules'))
    .map((f) => path.join(dir, f));
}

function phaseIgnorePatterns(phase) {
  if (phase === undefined || phase === '') return [];
  if (phase !== 'early' && phase !== 'late') throw new Error(`PKO_E2E_PHASE is '${phase}', expected early or late`);
  const late = (f) => LATE_MODULE.test(fs.readFileSync(f, 'utf8'));
  const ignored = roots.flatMap(testFiles).filter((f) => late(f) === (phase === 'early'));
  return ignored.map((f) => `^${f.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
}

module.exports = {
  rootDir: '..',
  testEnvironment: 'node',
  roots: ['<rootDir>/e2e', '<rootDir>/agent', '<rootDir>/packaging'],
  testMatch: ['<rootDir>/e2e/**/*.e2e.ts', '<rootDir>/agent/test/**/*.e2e.ts', '<rootDir>/packaging/**/*.e2e.ts'],
  testPathIgnorePatterns: ['/node_modules/', ...phaseIgnorePatterns(process.env.PKO_E2E_PHASE)],
  // The late phase of a run whose checkout has no such file.
  passWithNoTests: process.env.PKO_E2E_PHASE === 'late',
  transform: {
    '^.+\\.ts$': ['ts-jest', { isolatedModules: true }],
    '^.+\\.m?js$': [
      'ts-jest',
      {
        isolatedModules: true,
        tsconfig: { allowJs: true, module: 'commonjs', target: 'ES2022', esModuleInterop: true, sourceMap: false },
      },
    ],
  },
  transformIgnorePatterns: [`/node_modules/(?!(${esmOnly.join('|')})/)`],
  // Each test file starts its own control plane: run files one at a time (2 cores).
  maxWorkers: 1,
  testTimeout: 120000,
  slowTestThreshold: 60,
};
