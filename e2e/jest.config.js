/**
 * End-to-end suite: real etcd, kube-apiserver, kube-controller-manager and Pulumi binaries built by
 * e2e/toolchain/build.sh. Run with `npm run test:e2e` (jest --config e2e/jest.config.js).
 *
 * @kubernetes/client-node 1.x and some of its dependencies (openid-client, oauth4webapi, jose,
 * jsonpath-plus, rfc4648) ship ES modules only, which jest's CommonJS runtime cannot load: they are
 * transpiled to CommonJS by ts-jest like our own sources.
 */
const esmOnly = ['@kubernetes/client-node', 'openid-client', 'oauth4webapi', 'jose', 'jsonpath-plus', 'rfc4648'];

module.exports = {
  rootDir: '..',
  testEnvironment: 'node',
  roots: ['<rootDir>/e2e', '<rootDir>/agent', '<rootDir>/packaging'],
  testMatch: ['<rootDir>/e2e/**/*.e2e.ts', '<rootDir>/agent/test/**/*.e2e.ts', '<rootDir>/packaging/**/*.e2e.ts'],
  testPathIgnorePatterns: ['/node_modules/'],
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
