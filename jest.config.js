/** Unit and HTTP tests. The e2e suite has its own config (e2e/jest.config.js). */
module.exports = {
  testEnvironment: 'node',
  roots: [
    '<rootDir>/contract',
    '<rootDir>/hooks',
    '<rootDir>/agent',
    '<rootDir>/schemas',
    '<rootDir>/bench',
    '<rootDir>/packaging',
    '<rootDir>/pulumi',
    '<rootDir>/deploy',
    '<rootDir>/e2e',
  ],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', {}] },
  // deploy/typescript imports the typed classes by the package's name (a self-reference Node.js
  // resolves through package.json "exports", to dist/ after a build); the tests take the sources,
  // as tsconfig.json's "paths" does for the type check (its "node" resolution ignores "exports").
  moduleNameMapper: { '^pulumi-metacontroller-operator/pulumi$': '<rootDir>/pulumi/index.ts' },
  testTimeout: 30000,
};
