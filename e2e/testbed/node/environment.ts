/**
 * What e2e/testbed/node/run-in-testbed.sh hands to the command it runs inside the test network:
 * the namespace, the run's directory, the node's address, containerd's socket and the cgroup root.
 */

export interface TestbedEnvironment {
  netns: string;
  dir: string;
  nodeIp: string;
  containerdSocket: string;
  cgroupRoot: string;
}

const VARIABLES = {
  netns: 'PKO_TESTBED_NETNS',
  dir: 'PKO_TESTBED_DIR',
  nodeIp: 'PKO_TESTBED_NODE_IP',
  containerdSocket: 'PKO_TESTBED_CONTAINERD',
  cgroupRoot: 'PKO_TESTBED_CGROUP_ROOT',
} as const;

/** The test network this process runs in, or undefined outside it. */
export function testbedEnvironment(env: NodeJS.ProcessEnv = process.env): TestbedEnvironment | undefined {
  const entries = Object.entries(VARIABLES).map(([key, variable]) => [key, env[variable]] as const);
  if (entries.every(([, value]) => !value)) return undefined;
  const missing = entries.filter(([, value]) => !value).map(([key]) => VARIABLES[key as keyof typeof VARIABLES]);
  if (missing.length > 0) throw new Error(`incomplete test-bed environment: ${missing.join(', ')} unset`);
  return Object.fromEntries(entries) as unknown as TestbedEnvironment;
}

/** The test network, or an error that says how to get into it. */
export function requireTestbedEnvironment(): TestbedEnvironment {
  const env = testbedEnvironment();
  if (!env) {
    throw new Error(
      'not inside the test network: run the e2e suite with `npm run test:e2e` ' +
        '(bash e2e/testbed/node/run-in-testbed.sh jest --config e2e/jest.config.js ...)',
    );
  }
  return env;
}

/**
 * Where a test's own servers (git, Flux artifacts) listen: on the node's address inside the test
 * network, so that pods reach them too; on loopback elsewhere.
 */
export function testServerHost(): string {
  return testbedEnvironment()?.nodeIp ?? '127.0.0.1';
}
