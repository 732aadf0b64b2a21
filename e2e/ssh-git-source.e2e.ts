/**
 * Issue 20, item 6: a Stack tracking a branch of an SSH git URL (`git@host:org/repo.git`) with
 * gitAuth.sshAuth, against a real OpenSSH sshd with git-shell on the test network
 * (e2e/testbed/sshd-git-server.ts). The hooks resolve the branch head over SSH with the Stack's
 * key, checking the server's host key against their known_hosts (SSH_KNOWN_HOSTS, here the test
 * server's key); the fetch init container clones with OpenSSH, trusting the same key only.
 * The HTTP equivalents are in git-source.e2e.ts.
 */
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { e2eStackSpec, eventually, type Operator, condition } from './harness';
import { e2eSuite } from './suite';
import { startSshdGitServer, type SshdGitServer } from './testbed/sshd-git-server';

const PASSPHRASE = 'e2e ssh key passphrase';
let op: Operator;
let sshd: SshdGitServer;

// Before the suite's own beforeAll: the hooks start knowing this server's host key.
beforeAll(async () => {
  sshd = await startSshdGitServer({ passphrase: PASSPHRASE });
}, 60_000);

const { timings } = e2eSuite(
  'ssh-git-source',
  undefined,
  (started) => (op = started),
  () => ({ hookConfig: { sshKnownHosts: sshd.knownHosts } }),
);

afterAll(async () => {
  await sshd?.close();
});

/** A Pulumi YAML project in `app/` whose only output says which version of the repository ran. */
function project(message: string): Record<string, string> {
  return { 'app/Pulumi.yaml': ['name: sshapp', 'runtime: yaml', 'outputs:', `  message: ${message}`, ''].join('\n') };
}

const secretRef = (name: string, key: string) => ({ type: 'Secret', secret: { name, key } });

async function createStack(ns: string, name: string, projectRepo: string): Promise<void> {
  await op.core.createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: { name: 'deploy-key', namespace: ns },
      stringData: { key: sshd.clientKey, passphrase: PASSPHRASE },
    },
  });
  await op.objects.create({
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: ns },
    spec: e2eStackSpec({
      stack: 'dev',
      projectRepo,
      branch: 'main',
      repoDir: 'app',
      resyncFrequencySeconds: 60,
      gitAuth: {
        sshAuth: { sshPrivateKey: secretRef('deploy-key', 'key'), password: secretRef('deploy-key', 'passphrase') },
      },
    }),
  } as k8s.KubernetesObject);
}

describe('a Stack tracking a branch of an SSH git URL with gitAuth.sshAuth', () => {
  const ns = 'ssh-branch';
  let head = '';

  it('becomes Ready at the branch head, read over SSH by the hooks and cloned over SSH', async () => {
    await op.namespace(ns);
    const { scpUrl } = sshd.createRepo('org/infra');
    expect(scpUrl).toMatch(/^git@[\d.]+:org\/infra\.git$/);
    head = sshd.commit('org/infra', 'main', project('v1'), 'v1');
    const started = Date.now();
    await createStack(ns, 'tracked', scpUrl);
    const stack = await op.readyStack(ns, 'tracked');
    timings['ssh branch: apply to Ready'] = Date.now() - started;
    expect(stack.status?.lastUpdate).toMatchObject({
      type: 'up',
      state: 'succeeded',
      lastAttemptedCommit: head,
      lastSuccessfulCommit: head,
      failures: 0,
    });
    expect(stack.status?.outputs).toEqual({ message: 'v1' });
    // Both sides logged in with the key: the hooks (ssh2) and the fetch container (OpenSSH).
    expect(sshd.log()).toMatch(/Accepted publickey for git from/);
    // Neither the key nor its passphrase reached the status or the workspace's logs.
    for (const text of [
      JSON.stringify(stack),
      await op.logs(ns, 'tracked-workspace-0', 'fetch'),
      await op.logs(ns, 'tracked-workspace-0', 'pulumi'),
    ]) {
      expect(text).not.toContain('PRIVATE KEY');
      expect(text).not.toContain(PASSPHRASE);
    }
  }, 360_000);

  it('runs a new update after a push, within one polling period', async () => {
    const before = await op.getStack(ns, 'tracked');
    const pushed = sshd.commit('org/infra', 'main', project('v2'), 'v2');
    expect(pushed).not.toBe(head);
    const started = Date.now();
    // As for HTTP: resyncFrequencySeconds 60, lookups cached 20 s, then the update itself.
    const stack = await op.readyStack(
      ns,
      'tracked',
      (s) => s.status?.lastUpdate?.lastSuccessfulCommit === pushed,
      150_000,
    );
    timings['ssh branch: push to Ready at the new commit'] = Date.now() - started;
    expect(stack.status?.lastUpdate?.name).not.toBe(before.status?.lastUpdate?.name);
    expect(stack.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastAttemptedCommit: pushed, failures: 0 });
    expect(stack.status?.outputs).toEqual({ message: 'v2' });
  }, 300_000);
});

describe('an SSH server whose host key the hooks do not know', () => {
  it('is Stalled/SourceUnavailable, naming the server and the key it offered', async () => {
    const stranger = await startSshdGitServer({ port: 2222, passphrase: PASSPHRASE });
    try {
      const ns = 'ssh-unknown-host';
      await op.namespace(ns);
      const { sshUrl } = stranger.createRepo('org/infra');
      stranger.commit('org/infra', 'main', project('never'), 'never');
      const started = Date.now();
      await createStack(ns, 'stranger', sshUrl);
      const stalled = await eventually(
        'the Stack to be Stalled by the host key check',
        async () => {
          const s = await op.getStack(ns, 'stranger');
          return condition(s, 'Stalled')?.status === 'True' ? s : undefined;
        },
        120_000,
        500,
      );
      timings['ssh unknown host key: apply to Stalled'] = Date.now() - started;
      expect(condition(stalled, 'Stalled')).toMatchObject({
        reason: 'SourceUnavailable',
        message: expect.stringMatching(
          new RegExp(`the host key of ${stranger.host.replace(/\./g, '\\.')}:2222 is not known: .*SHA256:`),
        ),
      });
      expect(stalled.status?.lastUpdate).toBeUndefined();
      // The hooks hung up at the host key: they never offered the key to a server they do not trust.
      expect(stranger.log()).not.toMatch(/Accepted publickey|Postponed publickey/);
    } finally {
      await stranger.close();
    }
  }, 180_000);
});
