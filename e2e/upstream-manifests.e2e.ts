/**
 * Issue 20, item 4: upstream's own e2e manifests (operator/e2e/testdata of
 * github.com/pulumi/pulumi-kubernetes-operator), applied as vendored in e2e/testdata/upstream (but for IMAGE_SUBSTITUTES),
 * reach the outcomes upstream's e2e asserts (operator/e2e/e2e_test.go). Only the ones whose
 * programs our toolchain can run are here; docs/upstream-manifests.md has every file and why.
 * They name upstream's images (pulumi/pulumi:<version>-nonroot): the workspace runs the injected
 * agent in those stand-ins.
 */
import { Annotations } from '../contract';
import { defined, eventually, type Operator, condition, workspaceReport } from './harness';
import { e2eSuite } from './suite';
import { applyUpstream } from './upstream/apply';

let op: Operator;
const { recordTiming } = e2eSuite('upstream-manifests', undefined, (started) => (op = started));

const TESTDATA = 'operator/e2e/testdata';
/** Upstream waits up to 5 minutes for each outcome. */
const OUTCOME_TIMEOUT_MS = 300_000;

describe('upstream e2e manifests, applied as vendored (one image tag substituted)', () => {
  it(
    'structured-config: Ready, every inline and ConfigMap config value an output of its type',
    async () => {
      const ns = 'structured-config';
      const started = Date.now();
      await applyUpstream(op, `${TESTDATA}/structured-config`);
      const stack = await op.readyStack(ns, 'structured-config', undefined, OUTCOME_TIMEOUT_MS);
      recordTiming('structured-config: apply to Ready', started);
      // What upstream asserts, key by key, is the whole of each value: compared whole here.
      expect(stack.status?.outputs).toEqual({
        simpleString: 'hello-world',
        databaseConfig: { host: 'db.example.com', port: 5432, database: 'myapp', ssl: true, maxConnections: 100 },
        allowedRegions: ['us-west-2', 'us-east-1', 'eu-west-1'],
        maxRetries: 3,
        timeout: 30.5,
        enableCaching: true,
        debugMode: false,
        oauth: {
          clientId: 'my-client-id',
          scopes: ['read', 'write'],
          endpoints: { token: 'https://auth.example.com/token', authorize: 'https://auth.example.com/authorize' },
        },
        appSettings: {
          apiEndpoint: 'https://api.example.com',
          timeout: 30,
          retryEnabled: true,
          features: { authentication: true, rateLimit: 1000 },
          regions: ['us-west-1', 'us-east-1'],
        },
        appVersion: 'v1.2.3',
      });
    },
    OUTCOME_TIMEOUT_MS + 60_000,
  );

  it(
    'structured-config-version: PulumiVersionTooLow in pulumi/pulumi:3.197.0-nonroot, Ready after the switch to 3.202.0 (3.203.0 here)',
    async () => {
      const ns = 'structured-config-version';
      const name = 'structured-config-version';
      const started = Date.now();
      await applyUpstream(op, `${TESTDATA}/structured-config-version`);
      const stalled = await eventually(
        'the Stack to be Stalled with PulumiVersionTooLow',
        async () => {
          const c = condition(await op.getStack(ns, name), 'Stalled');
          return c?.status === 'True' && c.reason === 'PulumiVersionTooLow' ? c : undefined;
        },
        OUTCOME_TIMEOUT_MS,
        1000,
      );
      recordTiming('structured-config-version: apply to Stalled', started);
      // Both versions, so that the user knows what to change.
      expect(stalled.message).toContain('3.197.0');
      expect(stalled.message).toContain('3.202.0');

      const switched = Date.now();
      await applyUpstream(op, `${TESTDATA}/structured-config-version/step2`);
      // Upstream waits for its Workspace object to be Ready; here that is the agent's report in the
      // workspace's status ConfigMap, for the pod template that runs the new image.
      await eventually(
        'the workspace to be Ready in pulumi/pulumi:3.203.0-nonroot (for 3.202.0)',
        async () => {
          const sts = await op.apps.readNamespacedStatefulSet({ namespace: ns, name: `${name}-workspace` });
          const template = defined(sts.spec?.template, 'the workspace pod template');
          const image = template.spec?.containers.find((c) => c.name === 'pulumi')?.image;
          const hash = template.metadata?.annotations?.[Annotations.workspaceHash];
          const status = await workspaceReport(op, ns, name);
          return image === 'pulumi/pulumi:3.203.0-nonroot' && status?.hash === hash && status?.state === 'Ready';
        },
        OUTCOME_TIMEOUT_MS,
        1000,
      );
      const ready = await op.readyStack(ns, name, undefined, OUTCOME_TIMEOUT_MS);
      recordTiming('structured-config-version: switch to Ready', switched);
      expect(ready.status?.outputs).toEqual({
        databaseConfig: { host: 'localhost', port: 5432 },
        regions: ['us-west-2', 'us-east-1'],
      });
    },
    3 * OUTCOME_TIMEOUT_MS + 60_000,
  );
});
