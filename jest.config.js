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
  testTimeout: 30000,
};
