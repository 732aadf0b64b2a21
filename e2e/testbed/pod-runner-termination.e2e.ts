/**
 * Self-tests of the pod runner, part 3 of 3: how pods and runners end: graceful deletion (SIGTERM,
 * then SIGKILL at the grace period's end), a second runner started and stopped beside the first,
 * and runner.stop() leaving no process, mount point or temp dir behind. Set-up: pod-runner-fixture.ts.
 * Run: npm run test:e2e -- e2e/testbed/pod-runner-termination.e2e.ts
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { startPodRunner } from './pod-runner';
import { eventually } from './eventually';
import {
  bed,
  usePodRunnerBed,
  namespace,
  readPod,
  podInPhase,
  condition,
  isGone,
  processesMentioning,
  pidAlive,
  marker,
} from './pod-runner-fixture';

usePodRunnerBed();

describe('deletion', () => {
  test('deleting a running pod delivers SIGTERM to the process, then the pod disappears', async () => {
    const { runner, core, hostDir } = bed();
    const ns = await namespace();
    const markers = path.join(hostDir, 'sigterm');
    fs.mkdirSync(markers);
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'term' },
        spec: {
          terminationGracePeriodSeconds: 60,
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: [
                'sh',
                '-c',
                'trap "echo got-sigterm > /markers/term; exit 0" TERM; echo started; while true; do sleep 0.2; done',
              ],
              lifecycle: {
                preStop: {
                  exec: { command: ['sh', '-c', 'test ! -e /markers/term && echo before-sigterm > /markers/prestop'] },
                },
              },
              volumeMounts: [{ name: 'markers', mountPath: '/markers' }],
            },
          ],
          volumes: [{ name: 'markers', hostPath: { path: markers, type: 'Directory' } }],
        },
      },
    });
    await eventually('running', async () =>
      (await readPod(ns, 'term')).status?.containerStatuses?.[0]?.state?.running ? true : undefined,
    );
    await eventually('started', () => (runner.logs(ns, 'term', 'main').includes('started') ? true : undefined));
    expect(fs.existsSync(path.join(markers, 'term'))).toBe(false);
    await core.deleteNamespacedPod({ name: 'term', namespace: ns });
    await eventually('pod gone', () => isGone(() => readPod(ns, 'term')));
    expect(fs.readFileSync(path.join(markers, 'prestop'), 'utf8')).toBe('before-sigterm\n');
    expect(fs.readFileSync(path.join(markers, 'term'), 'utf8')).toBe('got-sigterm\n');
  });

  test('a process that ignores SIGTERM is killed when the grace period ends', async () => {
    const { runner, core } = bed();
    const ns = await namespace();
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'stubborn' },
        spec: {
          terminationGracePeriodSeconds: 2,
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: ['sh', '-c', `trap "echo ignoring" TERM; while true; do sleep 0.2; done # ${marker}-stubborn`],
            },
          ],
        },
      },
    });
    await eventually('running', async () =>
      (await readPod(ns, 'stubborn')).status?.containerStatuses?.[0]?.state?.running ? true : undefined,
    );
    expect(processesMentioning(`${marker}-stubborn`).length).toBeGreaterThan(0);
    await core.deleteNamespacedPod({ name: 'stubborn', namespace: ns });
    await eventually('pod gone', () => isGone(() => readPod(ns, 'stubborn')));
    expect(runner.logs(ns, 'stubborn', 'main')).toContain('ignoring');
    expect(processesMentioning(`${marker}-stubborn`)).toEqual([]);
  });
});

describe('more runners', () => {
  test('a second runner on its own node, watching one namespace, streams container output', async () => {
    const { cp, runner, core } = bed();
    const ns = await namespace();
    const lines: string[] = [];
    const second = await startPodRunner({
      kubeConfig: cp.kubeConfig,
      nodeName: 'pko-e2e-node-2',
      namespaces: [ns],
      schedule: false,
      streamLogs: (l) => lines.push(l),
    });
    try {
      await core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: { name: 's' },
          spec: {
            nodeName: 'pko-e2e-node-2',
            restartPolicy: 'Never',
            containers: [
              { name: 'main', image: 'busybox', command: ['sh', '-c', 'echo one; echo two >&2; printf three'] },
            ],
          },
        },
      });
      const pod = await podInPhase(ns, 's', ['Succeeded']);
      expect(condition(pod, 'PodScheduled')).toBe('True');
      expect(second.logs(ns, 's', 'main')).toBe('one\ntwo\nthree');
      expect(runner.logs(ns, 's', 'main')).toBe('');
      expect(lines).toEqual(expect.arrayContaining([`[${ns}/s/main] one`, `[${ns}/s/main] two`]));
      const node = await core.readNode({ name: 'pko-e2e-node-2' });
      expect(condition(node, 'Ready')).toBe('True');
    } finally {
      await second.stop();
    }
  });
});

// Last: stops the runner.
describe('stop', () => {
  test('runner.stop() kills every process it started, removes the mount points it created and its temp dir', async () => {
    const { runner, core } = bed();
    const ns = await namespace();
    const mountPath = `/var/run/pko-e2e-stop-${process.pid}`;
    const sleepA = 300000 + (process.pid % 10000) * 2;
    const sleepB = sleepA + 1;
    await core.createNamespacedPod({
      namespace: ns,
      body: {
        metadata: { name: 'forever' },
        spec: {
          terminationGracePeriodSeconds: 600,
          containers: [
            {
              name: 'main',
              image: 'busybox',
              command: [
                'sh',
                '-c',
                `trap "" TERM; sleep ${sleepA} & setsid sleep ${sleepB} & echo ready; wait # ${marker}-stop`,
              ],
              volumeMounts: [{ name: 'e', mountPath }],
            },
          ],
          volumes: [{ name: 'e', emptyDir: {} }],
        },
      },
    });
    await eventually('running', () => (runner.logs(ns, 'forever', 'main').includes('ready') ? true : undefined));
    const procs = runner.processes().filter((p) => p.namespace === ns);
    expect(procs).toHaveLength(1);
    const pids = [procs[0]!.reaperPid!, procs[0]!.initPid!];
    expect(pids.every(pidAlive)).toBe(true);
    expect(processesMentioning(`${marker}-stop`).length).toBeGreaterThan(0);
    const sleepers = (): number[] =>
      [...processesMentioning(String(sleepA)), ...processesMentioning(String(sleepB))].filter((pid) => {
        try {
          return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep\u0000');
        } catch {
          return false;
        }
      });
    expect(sleepers().length).toBeGreaterThanOrEqual(2);
    expect(fs.existsSync(mountPath)).toBe(true);
    const workDir = runner.workDir;

    await runner.stop();

    expect(pids.filter(pidAlive)).toEqual([]);
    expect(processesMentioning(`${marker}-stop`)).toEqual([]);
    expect(sleepers()).toEqual([]);
    expect(processesMentioning(workDir)).toEqual([]);
    expect(fs.existsSync(mountPath)).toBe(false);
    expect(fs.existsSync(workDir)).toBe(false);
    expect(runner.processes()).toEqual([]);
  });
});
