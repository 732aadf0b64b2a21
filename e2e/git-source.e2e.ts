/**
 * Issue 5, scenario 2: Stacks whose program comes from a real git repository, served over smart
 * HTTP on loopback by `git http-backend` (e2e/testbed/git-server.ts). A pinned commit, a tracked
 * branch that receives a push, private repositories read with basic auth and with an access token,
 * and wrong credentials. Everything goes through the API server; the hooks resolve branches with
 * their own smart-HTTP lookup and the agent's fetch init container clones the repository.
 */
import * as k8s from '@kubernetes/client-node';
import { expect } from '@jest/globals';
import { e2eStackSpec, eventually, type Operator, condition } from './harness';
import { e2eSuite } from './suite';
import { startGitServer, type GitServer } from './testbed/git-server';

let op: Operator;
const getStack = (ns: string, name: string) => op.getStack(ns, name);
const readyStack = (...args: Parameters<Operator['readyStack']>) => op.readyStack(...args);
let publicGit: GitServer;
let basicGit: GitServer;
let tokenGit: GitServer;

const BASIC = { username: 'alice', password: 'correct horse battery staple' };
const TOKEN = { username: 'git', password: 'ghp_e2eAccessToken0123456789' };

const { timings } = e2eSuite('git-source', undefined, (started) => (op = started));

beforeAll(async () => {
  publicGit = await startGitServer();
  basicGit = await startGitServer({ auth: BASIC });
  tokenGit = await startGitServer({ auth: TOKEN });
}, 180_000);

afterAll(async () => {
  await Promise.all([publicGit?.close(), basicGit?.close(), tokenGit?.close()]);
});

const STACKS = { group: 'pulumi.com', version: 'v1', plural: 'stacks' } as const;

async function createStack(ns: string, name: string, spec: Parameters<typeof e2eStackSpec>[0]): Promise<void> {
  await op.objects.create({
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: ns },
    spec: e2eStackSpec(spec),
  } as k8s.KubernetesObject);
}
/** Deletes a Stack (no destroyOnFinalize: it goes at once) so its workspace pod stops using the CPU. */
async function deleteStack(ns: string, name: string): Promise<void> {
  await op.custom.deleteNamespacedCustomObject({ ...STACKS, namespace: ns, name });
  await eventually(
    `Stack ${ns}/${name} to be gone`,
    async () => {
      try {
        await getStack(ns, name);
        return false;
      } catch (e) {
        return e instanceof k8s.ApiException && e.code === 404;
      }
    },
    120_000,
    500,
  );
}
async function createSecret(ns: string, name: string, data: Record<string, string>): Promise<void> {
  await op.core.createNamespacedSecret({
    namespace: ns,
    body: { metadata: { name, namespace: ns }, stringData: data },
  });
}
const secretRef = (name: string, key: string) => ({ type: 'Secret', secret: { name, key } });

/** A Pulumi YAML project in `app/` whose only output says which version of the repository ran. */
function project(message: string): Record<string, string> {
  return {
    'README.md': '# e2e repository\n',
    'app/Pulumi.yaml': ['name: gitapp', 'runtime: yaml', 'outputs:', `  message: ${message}`, ''].join('\n'),
  };
}

describe('a git source Stack', () => {
  it('pinned to a commit becomes Ready at that commit', async () => {
    const ns = await op.namespace('git-pinned');
    publicGit.createRepo('pinned');
    const first = publicGit.commit('pinned', 'main', project('first'), 'first');
    // The branch moves on; the Stack must stay at the pinned commit.
    const second = publicGit.commit('pinned', 'main', project('second'), 'second');
    expect(second).not.toBe(first);
    const started = Date.now();
    await createStack(ns, 'pinned', {
      stack: 'dev',
      projectRepo: `${publicGit.baseUrl}/pinned.git`,
      commit: first,
      repoDir: 'app',
    });
    const stack = await readyStack(ns, 'pinned');
    timings['git pinned commit: apply to Ready'] = Date.now() - started;
    expect(stack.status?.lastUpdate).toMatchObject({
      type: 'up',
      state: 'succeeded',
      lastSuccessfulCommit: first,
      lastAttemptedCommit: first,
      failures: 0,
    });
    expect(stack.status?.outputs).toEqual({ message: 'first' });
    expect(stack.status?.projectInfo).toEqual({ name: 'gitapp', runtime: 'yaml' });
    await deleteStack(ns, 'pinned');
  }, 360_000);

  describe('tracking a branch', () => {
    const ns = 'git-branch';
    let head = '';

    it('becomes Ready at the branch head', async () => {
      await op.namespace(ns);
      publicGit.createRepo('tracked');
      head = publicGit.commit('tracked', 'main', project('v1'), 'v1');
      const started = Date.now();
      await createStack(ns, 'tracked', {
        stack: 'dev',
        projectRepo: `${publicGit.baseUrl}/tracked.git`,
        branch: 'main',
        repoDir: 'app',
        resyncFrequencySeconds: 60,
      });
      const stack = await readyStack(ns, 'tracked');
      timings['git branch: apply to Ready'] = Date.now() - started;
      expect(stack.status?.lastUpdate).toMatchObject({
        type: 'up',
        state: 'succeeded',
        lastSuccessfulCommit: head,
        failures: 0,
      });
      expect(stack.status?.outputs).toEqual({ message: 'v1' });
    }, 360_000);

    it('runs a new update after a push, within one polling period', async () => {
      const before = await getStack(ns, 'tracked');
      const pushed = publicGit.commit('tracked', 'main', project('v2'), 'v2');
      expect(pushed).not.toBe(head);
      const started = Date.now();
      // resyncFrequencySeconds is 60 s; the hooks cache branch lookups for 20 s; the update itself
      // takes some seconds more. 150 s covers one polling period with room to spare.
      const stack = await readyStack(
        ns,
        'tracked',
        (s) => s.status?.lastUpdate?.lastSuccessfulCommit === pushed,
        150_000,
      );
      timings['git branch: push to Ready at the new commit'] = Date.now() - started;
      expect(stack.status?.lastUpdate?.name).not.toBe(before.status?.lastUpdate?.name);
      expect(stack.status?.lastUpdate).toMatchObject({
        type: 'up',
        state: 'succeeded',
        lastAttemptedCommit: pushed,
        failures: 0,
      });
      expect(stack.status?.outputs).toEqual({ message: 'v2' });
      await deleteStack(ns, 'tracked');
    }, 300_000);
  });

  it('reads a private repository with basic auth', async () => {
    const ns = await op.namespace('git-basic-auth');
    basicGit.createRepo('private');
    const head = basicGit.commit('private', 'main', project('basic'), 'basic');
    await createSecret(ns, 'git-creds', { username: BASIC.username, password: BASIC.password });
    const started = Date.now();
    await createStack(ns, 'private', {
      stack: 'dev',
      projectRepo: `${basicGit.baseUrl}/private.git`,
      branch: 'main',
      repoDir: 'app',
      gitAuth: {
        basicAuth: { userName: secretRef('git-creds', 'username'), password: secretRef('git-creds', 'password') },
      },
    });
    const stack = await readyStack(ns, 'private');
    timings['git basic auth: apply to Ready'] = Date.now() - started;
    expect(stack.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastSuccessfulCommit: head });
    expect(stack.status?.outputs).toEqual({ message: 'basic' });
    // The password reached neither the Stack's status nor its workspace's logs.
    expect(JSON.stringify(stack)).not.toContain(BASIC.password);
    for (const c of ['fetch', 'pulumi'])
      expect(await op.logs(ns, 'private-workspace-0', c)).not.toContain(BASIC.password);
    await deleteStack(ns, 'private');
  }, 360_000);

  it('reads a private repository with an access token', async () => {
    const ns = await op.namespace('git-token');
    tokenGit.createRepo('private');
    const head = tokenGit.commit('private', 'main', project('token'), 'token');
    await createSecret(ns, 'git-token', { accessToken: TOKEN.password });
    const started = Date.now();
    await createStack(ns, 'private', {
      stack: 'dev',
      projectRepo: `${tokenGit.baseUrl}/private.git`,
      branch: 'main',
      repoDir: 'app',
      gitAuth: { accessToken: secretRef('git-token', 'accessToken') },
    });
    const stack = await readyStack(ns, 'private');
    timings['git access token: apply to Ready'] = Date.now() - started;
    expect(stack.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastSuccessfulCommit: head });
    expect(stack.status?.outputs).toEqual({ message: 'token' });
    expect(JSON.stringify(stack)).not.toContain(TOKEN.password);
    for (const c of ['fetch', 'pulumi'])
      expect(await op.logs(ns, 'private-workspace-0', c)).not.toContain(TOKEN.password);
    await deleteStack(ns, 'private');
  }, 360_000);

  it('reports wrong credentials, and recovers when they are fixed', async () => {
    const ns = await op.namespace('git-wrong-creds');
    basicGit.createRepo('locked');
    const head = basicGit.commit('locked', 'main', project('locked'), 'locked');
    await createSecret(ns, 'git-creds', { username: BASIC.username, password: 'not the password' });
    const started = Date.now();
    await createStack(ns, 'locked', {
      stack: 'dev',
      projectRepo: `${basicGit.baseUrl}/locked.git`,
      branch: 'main',
      repoDir: 'app',
      gitAuth: {
        basicAuth: { userName: secretRef('git-creds', 'username'), password: secretRef('git-creds', 'password') },
      },
    });
    const stalled = await eventually(
      'the Stack to be Stalled by the failed branch lookup',
      async () => {
        const s = await getStack(ns, 'locked');
        return condition(s, 'Stalled')?.status === 'True' ? s : undefined;
      },
      120_000,
      500,
    );
    timings['git wrong credentials: apply to Stalled'] = Date.now() - started;
    expect(condition(stalled, 'Stalled')).toMatchObject({
      reason: 'SourceUnavailable',
      message: expect.stringMatching(/authentication/i),
    });
    expect(condition(stalled, 'Ready')).toMatchObject({ status: 'False' });
    expect(stalled.status?.lastUpdate).toBeUndefined();
    expect(JSON.stringify(stalled)).not.toContain('not the password');

    // Fixing the Secret (a related object of the Stack) is enough: no edit of the Stack.
    const fixed = Date.now();
    await op.core.replaceNamespacedSecret({
      namespace: ns,
      name: 'git-creds',
      body: {
        metadata: { name: 'git-creds', namespace: ns },
        stringData: { username: BASIC.username, password: BASIC.password },
      },
    });
    const stack = await readyStack(ns, 'locked');
    timings['git wrong credentials: fixed Secret to Ready'] = Date.now() - fixed;
    expect(stack.status?.lastUpdate).toMatchObject({ state: 'succeeded', lastSuccessfulCommit: head });
    await deleteStack(ns, 'locked');
  }, 360_000);
});
