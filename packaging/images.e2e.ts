/**
 * The project's two images, built from the Dockerfile (npm run testbed:images), run as pods on the
 * test bed's real node: the hooks image serves under the restricted profile with a read-only root
 * and stops cleanly; the agent image has its tools, runs as uid/gid 1000 under tini, and every
 * command the hooks put in pod specs resolves in it.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, jest } from '@jest/globals';
import { Agent, request } from 'undici';
import { AGENT_COMMAND, Env, WORKSPACE_PORT } from '../contract';
import { eventually } from '../e2e/testbed/helpers';
import { IMAGE_REFS } from '../e2e/testbed/images/refs';
import { versions } from '../e2e/testbed/toolchain';
import { configFromEnv } from '../hooks/src/config';
import type { WorkspaceSource } from '../hooks/src/stack/source';
import { RESTRICTED_POD_SECURITY } from '../hooks/src/workspace/pod';
import { stackJob, stackWorkspacePod } from '../hooks/test/controllers';
import { makeHookCredentials } from '../hooks/test/credentials';
import type { CompositeSyncResponse, Stack } from '../schemas';
import {
  deleteAndWatchEnd,
  imageConfigOf,
  type PodBed,
  podOf,
  runningWithIp,
  runPod,
  startPodBed,
} from '../e2e/testbed/pod-bed';
import { findObject, loadObjects, podSpecOf, readRepoFile, required } from './lib/repo';

jest.setTimeout(180_000);

let bed: PodBed;

beforeAll(async () => {
  bed = await startPodBed('images');
});

afterAll(async () => {
  await bed?.stop();
});

const sh = (script: string) => ({ command: ['/bin/sh', '-c', script] });

/** Every distinct container command of the pods the hooks build (workspace StatefulSets, Jobs). */
function hookCommands(): string[][] {
  // A server that serves Programs, so that the Program's fetch container is among the pods.
  const config = { ...configFromEnv({}), programServer: { url: 'https://hooks.test', ca: 'PEM' } };
  const stack: Stack = {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name: 'app', namespace: 'team-a', uid: 'uid-1', generation: 1 },
    spec: { stack: 'dev' },
  };
  const sources: WorkspaceSource[] = [
    { kind: 'git', url: 'https://example.com/repo.git', revision: 'a'.repeat(40), shallow: false, auth: [] },
    { kind: 'flux', url: 'http://source-controller/artifact.tar.gz', digest: 'sha256:00' },
    { kind: 'program', name: 'p', digest: 'sha256:00' },
    { kind: 'local', dir: '/src' },
    { kind: 'projectInfo', name: 'p', runtime: 'yaml' },
  ];
  const specs = sources.map((source) => podSpecOf(stackWorkspacePod(stack, source, config).statefulSet.spec));
  for (const type of ['up', 'preview', 'refresh', 'destroy'] as const) {
    const job = stackJob(stack, type, 'm', { generation: 1, reconcileRequest: '', commit: '', previous: '' }, config);
    specs.push(podSpecOf(job.spec));
  }
  const commands = new Map<string, string[]>();
  for (const spec of specs)
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      // The workspace container runs in the user's image (the injected agent: the next test).
      if (c.image !== config.agentImage) continue;
      const command = required(c.command, `container ${c.name} has a command`);
      commands.set(command.join(' '), command);
    }
  return [...commands.values()];
}

describe('hooks image', () => {
  it('runs as a numeric non-root user', async () => {
    const user = /^(\d+):(\d+)$/.exec((await imageConfigOf(bed, IMAGE_REFS.hooks)).User ?? '');
    expect(user).not.toBeNull();
    const [uid, gid] = [Number(user![1]), Number(user![2])];
    expect(uid).toBeGreaterThan(0);
    expect(gid).toBeGreaterThan(0);
    // runAsNonRoot without runAsUser: kubelet admits the image's user only if numeric and not 0. It
    // takes only the uid from it: without runAsGroup the process's gid is 0, as the uid has no
    // /etc/passwd entry (the Deployment sets runAsUser and runAsGroup, packaging/manifests.test.ts).
    const { phase, log } = await runPod(bed, podOf(bed.ns, 'hooks-id', IMAGE_REFS.hooks, sh('id -u')));
    expect(phase).toBe('Succeeded');
    expect(log.trim()).toBe(String(uid));
  });

  it('has no npm, npx or corepack at run time', async () => {
    const script = 'for t in npm npx corepack; do command -v "$t" || echo "no $t"; done';
    const { phase, log } = await runPod(bed, podOf(bed.ns, 'hooks-tools', IMAGE_REFS.hooks, sh(script)));
    expect(phase).toBe('Succeeded');
    expect(log.trim().split('\n')).toEqual(['no npm', 'no npx', 'no corepack']);
  });

  it('its default command serves the hooks as install.yaml runs it: HTTPS, the token required, a read-only root; it stops cleanly on SIGTERM', async () => {
    const port = configFromEnv({}).port;
    expect(Object.keys((await imageConfigOf(bed, IMAGE_REFS.hooks)).ExposedPorts ?? {})).toEqual([`${port}/tcp`]);
    // The Secrets of hooks-credentials.sh, and install.yaml's container settings and volumes.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-images-'));
    const credentials = makeHookCredentials(dir, { NAMESPACE: bed.ns });
    fs.rmSync(dir, { recursive: true, force: true });
    for (const secret of credentials.secrets)
      await bed.core.createNamespacedSecret({ namespace: bed.ns, body: secret });
    const deployment = findObject(loadObjects(readRepoFile('manifests/install.yaml')), 'Deployment', 'pulumi-mc-hooks');
    const spec = required(deployment.spec?.template.spec, 'the Deployment has a pod spec');
    const container = required(spec.containers[0], 'the Deployment has a container');
    const pod = podOf(bed.ns, 'hooks-serve', IMAGE_REFS.hooks, {
      env: container.env,
      volumeMounts: container.volumeMounts,
    });
    pod.spec!.volumes = spec.volumes;
    await bed.core.createNamespacedPod({ namespace: bed.ns, body: pod });
    // Called as Metacontroller calls it: the server checked against the CA, for the Service's name.
    const agent = new Agent({ connect: { ca: credentials.ca, servername: `pulumi-mc-hooks.${bed.ns}` } });
    try {
      const base = `https://${await runningWithIp(bed, 'hooks-serve')}:${port}`;
      const health = await eventually('GET /healthz', async () => {
        const r = await request(`${base}/healthz`, { dispatcher: agent }).catch(() => undefined);
        return r?.statusCode === 200 ? r : undefined;
      });
      await health.body.dump();
      const sync = async (authorization?: string) => {
        const r = await request(`${base}/stack/sync`, {
          dispatcher: agent,
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
          body: readRepoFile('examples/hooks/stack-sync-new.json'),
        });
        return { status: r.statusCode, text: await r.body.text() };
      };
      expect((await sync()).status).toBe(401);
      const answered = await sync(`Bearer ${credentials.token}`);
      expect(answered.status).toBe(200);
      expect((JSON.parse(answered.text) as CompositeSyncResponse).children?.length).toBeGreaterThan(0);
    } finally {
      await agent.close();
    }
    const end = await deleteAndWatchEnd(bed, 'hooks-serve');
    expect({ exitCode: end.exitCode, reason: end.reason }).toEqual({ exitCode: 0, reason: 'Completed' });
  });
});

describe('agent image', () => {
  it("runs as uid/gid 1000, the ids of the workspace pods' restricted profile, with tini as PID 1", async () => {
    // args only: the image's ENTRYPOINT stays in front of them.
    const script = 'id -u; id -g; echo "$HOME"; tr "\\0" " " < /proc/1/cmdline; echo';
    const { phase, log } = await runPod(
      bed,
      podOf(bed.ns, 'agent-id', IMAGE_REFS.agent, { args: ['/bin/sh', '-c', script] }),
    );
    expect(phase).toBe('Succeeded');
    const [uid, gid, home, pid1] = log.trim().split('\n');
    expect([Number(uid), Number(gid)]).toEqual([RESTRICTED_POD_SECURITY.runAsUser, RESTRICTED_POD_SECURITY.runAsGroup]);
    expect(home).toBe('/home/node');
    expect(pid1?.trim().split(' ').slice(0, 3)).toEqual(['/usr/bin/tini', '--', '/bin/sh']);
  });

  it('has git, ssh, pulumi, pulumi-language-yaml and pko-agent on PATH, and pulumi is the toolchain CLI', async () => {
    const tools = ['git', 'ssh', 'pulumi', 'pulumi-language-yaml', AGENT_COMMAND];
    const script = `for t in ${tools.join(' ')}; do p=$(command -v "$t") && [ -x "$p" ] && echo "$t $p" || echo "$t missing"; done; pulumi version; ${AGENT_COMMAND} version`;
    const { phase, log } = await runPod(bed, podOf(bed.ns, 'agent-tools', IMAGE_REFS.agent, sh(script)));
    expect(phase).toBe('Succeeded');
    const lines = log.trim().split('\n');
    expect(lines.slice(0, tools.length)).toEqual([
      'git /usr/bin/git',
      'ssh /usr/bin/ssh',
      'pulumi /pulumi/bin/pulumi',
      'pulumi-language-yaml /pulumi/bin/pulumi-language-yaml',
      `${AGENT_COMMAND} /usr/local/bin/${AGENT_COMMAND}`,
    ]);
    const bare = (v: string | undefined) => v?.trim().replace(/^v/, '');
    expect(bare(lines[tools.length])).toBe(bare(versions.pulumi));
    // The launcher reaches the compiled agent: everything it loads is in the image.
    const pkg = JSON.parse(readRepoFile('package.json')) as { version: string };
    expect(lines[tools.length + 1]).toBe(`${AGENT_COMMAND} ${pkg.version}`);
  });

  it('every command the hooks put in pod specs resolves to an executable in the image', async () => {
    const commands = hookCommands();
    expect(commands.map((c) => c.join(' ')).sort()).toEqual([
      'cp -R /opt/pko-agent/. /share/',
      'pko-agent fetch flux',
      'pko-agent fetch git',
      'pko-agent fetch local',
      'pko-agent fetch program',
      'pko-agent fetch project-info',
      'pko-agent update',
    ]);
    const names = [...new Set(commands.map((c) => c[0]!))];
    const script = names.map((n) => `p=$(command -v '${n}') && [ -x "$p" ] && echo "${n} ok" || echo "${n} missing"`);
    const { phase, log } = await runPod(bed, podOf(bed.ns, 'agent-commands', IMAGE_REFS.agent, sh(script.join('; '))));
    expect(phase).toBe('Succeeded');
    expect(log.trim().split('\n')).toEqual(names.map((n) => `${n} ok`));
  });

  it('holds the injected agent: static tini, and node that loads its C++ runtime from its own lib/', async () => {
    const script = [
      'ldd /opt/pko-agent/agent/node | grep -E "libstdc|libgcc_s" | sed -E "s/ \\(0x[0-9a-f]+\\)//; s/^\\s+//"',
      'ldd /opt/pko-agent/tini 2>&1 | grep -q "not a dynamic executable" && echo "tini static"',
      // -s: here tini is not PID 1 (in the workspace container it is).
      '/opt/pko-agent/tini -s -- /opt/pko-agent/agent/node /opt/pko-agent/agent/agent.js version',
    ];
    const { phase, log } = await runPod(bed, podOf(bed.ns, 'injected-agent', IMAGE_REFS.agent, sh(script.join('; '))));
    expect(phase).toBe('Succeeded');
    const pkg = JSON.parse(readRepoFile('package.json')) as { version: string };
    expect(log.trim().split('\n')).toEqual([
      'libstdc++.so.6 => /opt/pko-agent/agent/lib/libstdc++.so.6',
      'libgcc_s.so.1 => /opt/pko-agent/agent/lib/libgcc_s.so.1',
      'tini static',
      `pko-agent ${pkg.version}`,
    ]);
  });

  it('its default command is pko-agent serve, behind tini', async () => {
    const config = await imageConfigOf(bed, IMAGE_REFS.agent);
    expect({ entrypoint: config.Entrypoint, cmd: config.Cmd }).toEqual({
      entrypoint: ['/usr/bin/tini', '--'],
      cmd: [AGENT_COMMAND, 'serve'],
    });
    // Started with neither command nor args, the container serves the workspace.
    const env = [
      { name: Env.workspaceStack, value: JSON.stringify({ name: 'dev' }) },
      { name: 'PKO_AGENT_AUTH_MODE', value: 'none' },
    ];
    const body = podOf(bed.ns, 'agent-serve', IMAGE_REFS.agent, { env }, true);
    await bed.core.createNamespacedPod({ namespace: bed.ns, body });
    const ip = await runningWithIp(bed, 'agent-serve');
    const health = await eventually('GET /healthz of the workspace server', async () => {
      const r = await request(`http://${ip}:${WORKSPACE_PORT}/healthz`, { headersTimeout: 5000, bodyTimeout: 5000 });
      await r.body.dump();
      return r.statusCode === 200 ? r : undefined;
    });
    expect(health.statusCode).toBe(200);
  });
});
