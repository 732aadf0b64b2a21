/**
 * End-to-end suite: real etcd, kube-apiserver, kube-controller-manager and Pulumi binaries built by
 * e2e/toolchain/build.sh. Run with `npm run test:e2e` (jest --config e2e/jest.config.js).
 *
 * @kubernetes/client-node 1.x and some of its dependencies (openid-client, oauth4webapi, jose,
 * jsonpath-plus, rfc4648) ship ES modules only, which jest's CommonJS runtime cannot load: they are
 * transpiled to CommonJS by ts-jest like our own sources.
 */
const esmOnly = ['@kubernetes/client-node', 'openid-client', 'oauth4webapi', 'jose', 'jsonpath-plus', 'rfc4648'];

// pulumi-resource-command cannot be built here (the Go module proxy refuses it: see
// <toolchain>/pulumi-command-*/.unavailable). agent/test/toolchain-plugins.e2e.ts, which needs it, runs
// only where it is built; anywhere else the run says so. (pulumi-language-nodejs is refused too, but
// agent/test/nodejs-project.e2e.ts then uses the test-bed host agent/testkit/language-nodejs.ts.)
const fs = require('node:fs');
const path = require('node:path');
const os = require('node:os');
const tcDir = process.env.PKO_TOOLCHAIN_DIR || path.join(os.homedir(), '.cache', 'pko-toolchain');
const versions = Object.fromEntries(
  fs.readFileSync(path.join(__dirname, 'toolchain', 'versions.env'), 'utf8').split('\n').filter((l) => /^[A-Z_]+=/.test(l)).map((l) => l.split('=')),
);
const plugins = [path.join(tcDir, `pulumi-command-${versions.PULUMI_COMMAND_VERSION}`, 'bin', 'pulumi-resource-command')];
const missingPlugins = plugins.filter((p) => !fs.existsSync(p));
if (missingPlugins.length > 0) {
  process.stderr.write(`NOT RUN: agent/test/toolchain-plugins.e2e.ts (missing ${missingPlugins.join(', ')})\n`);
}

module.exports = {
  rootDir: '..',
  testEnvironment: 'node',
  roots: ['<rootDir>/e2e', '<rootDir>/agent', '<rootDir>/packaging'],
  testMatch: ['<rootDir>/e2e/**/*.e2e.ts', '<rootDir>/agent/test/**/*.e2e.ts', '<rootDir>/packaging/**/*.e2e.ts'],
  testPathIgnorePatterns: missingPlugins.length > 0 ? ['/node_modules/', 'agent/test/toolchain-plugins\\.e2e\\.ts$'] : ['/node_modules/'],
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
