/**
 * The benchmark's Stack sync requests, both in steady state (Ready) with the Stack's Workspace and
 * three finished Updates observed: the request Metacontroller sends on every resync and every
 * child event. (Recordings before the Workspace and Update objects had the StatefulSet, Service,
 * Jobs and RBAC as the Stack's own children.)
 * - `captured` (the default): recorded from a real cluster by ./capture-sync-request.ts, objects as
 *   the API server stores them (managedFields, defaults, controllers' status, last-applied).
 * - `synthetic`: built with the unit tests' helpers, which leave out what the API server adds, so it
 *   is half the size; kept to compare with earlier figures.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { request as httpRequest } from 'undici';
import { validateStack } from '../schemas';
import { configFromEnv, type HookConfig } from '../hooks/src/config';
import { buildServer, type HookServer, type ServerDeps } from '../hooks/src/server';
import { syncStack, type StackSyncRequest, type StackSyncResponse } from '../hooks/src/stack/sync';
import {
  applyChildren,
  jobFinishes,
  jobsOf,
  makeStack,
  noLookups,
  NOW,
  syncRequest,
  testConfig,
  withStatus,
  workspaceBecomesReady,
} from '../hooks/test/builders';
import { syncStack as syncStackAndItsControllers } from '../hooks/test/controllers';
import { step } from '../hooks/test/stories';
import type { KObject } from '../hooks/src/lib/k8s';
import { recording, restingClock, type Recording } from './recordings';

export type RequestKind = 'captured' | 'synthetic';

// What the two benches of the sync hook (./sync-hook.ts, time; ./sync-hook-instructions.ts,
// instructions) share: which request, which servers, how long they warm up.

/** Which request (BENCH_REQUEST): `captured` from a real cluster (default) or `synthetic`. */
export function requestKindFromEnv(): RequestKind {
  const kind = process.env.BENCH_REQUEST ?? 'captured';
  if (kind !== 'captured' && kind !== 'synthetic')
    throw new Error(`BENCH_REQUEST must be captured or synthetic, not ${kind}`);
  return kind;
}

/**
 * The servers of ./sync-hook-server.ts. The target compares the hook with `bare` (Fastify as it
 * comes); `bare-parser` isolates the parser's share.
 */
export const SERVER_MODES = ['bare', 'bare-parser', 'hooks'] as const;
export const ROUTE_NAMES: Record<(typeof SERVER_MODES)[number], string> = {
  bare: 'bare Fastify route',
  'bare-parser': "bare route, hooks' JSON parser",
  hooks: 'sync hook',
};

/** The hook server's log level as deployed (LOG_LEVEL's default): the bench's hook server logs at it. */
export const DEPLOYED_LOG_LEVEL = configFromEnv({}).logLevel;

/** What a server of ./sync-hook-server.ts sends: its port once it listens, its CPU time when asked. */
export type ServerMessage = { port: number } | { cpu: NodeJS.CpuUsage };

/** The port a server sent, or an error for any other message. */
export function portOf(message: unknown): number {
  if (typeof message === 'object' && message !== null && 'port' in message && typeof message.port === 'number')
    return message.port;
  throw new Error(`expected the server's port, got ${JSON.stringify(message)}`);
}

/** The CPU time a server sent (user + system, µs), or an error for any other message. */
export function cpuOf(message: unknown): number {
  if (typeof message === 'object' && message !== null && 'cpu' in message) {
    const { cpu } = message;
    if (typeof cpu === 'object' && cpu !== null && 'user' in cpu && 'system' in cpu) {
      if (typeof cpu.user === 'number' && typeof cpu.system === 'number') return cpu.user + cpu.system;
    }
  }
  throw new Error(`expected the server's CPU time, got ${JSON.stringify(message)}`);
}

/**
 * Starts one server of ./sync-hook-server.ts through `execPath` (taskset, valgrind) and `execArgv`.
 * The hook server writes a log line per call to stdout, which is drained here as a container
 * runtime does; an undrained pipe would fill and stall the server on its next line.
 */
export function forkServer(
  mode: string,
  bytes: number,
  request: RequestKind,
  launcher: { execPath: string; execArgv: string[] },
): ChildProcess {
  const child = fork(join(__dirname, 'sync-hook-server.js'), [mode, String(bytes), request], {
    ...launcher,
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  child.stdout!.resume();
  return child;
}

/**
 * Requests each server answers before it is measured (BENCH_WARMUP_REQUESTS). V8 optimises a
 * function after enough calls, not after enough seconds, and the hook has more functions to
 * optimise than a bare route (counts: docs/benchmarks.md#warm-up-the-jits-steady-state). A hook
 * server runs for days, so the steady state is what is measured.
 */
export const WARMUP_REQUESTS = Number(process.env.BENCH_WARMUP_REQUESTS ?? 6000);

/**
 * What the hook server answers a request kind with, as at rest: the configuration the request was
 * made for (the workspace's agent image) and the clock (within its Updates' TTL, on any day).
 */
export interface BenchHook {
  config: HookConfig;
  now: Date;
}

export interface BenchRequest extends BenchHook {
  body: string;
  /** The answer at rest: the hook server must answer `body` with these bytes. */
  response: string;
}

export function benchRequest(kind: RequestKind): BenchRequest {
  return kind === 'captured' ? capturedSyncRequest() : syntheticSyncRequest();
}

/** Ready, with the three finished operations kept: as Jobs (synthetic) or as Update objects (captured since the Stack has Updates). */
function assertSteadyState(response: StackSyncResponse): void {
  const ready = response.status.conditions?.find((c) => c.type === 'Ready');
  const operations = Math.max(jobsOf(response).length, response.children.filter((c) => c.kind === 'Update').length);
  if (ready?.status !== 'True' || operations !== 3)
    throw new Error('benchmark request is not the steady state it claims to be');
}

/** The hook server's configuration and clock for a request kind (the server needs no more than this). */
function benchHook(kind: RequestKind): BenchHook {
  return kind === 'captured' ? capturedHook(capturedRecording()) : { config: testConfig, now: NOW };
}

/**
 * The bench's hook server for a request kind, with the configuration and clock the request is at
 * rest with, logging as deployed (LOG_LEVEL's default: one line per call to stdout) unless `deps`
 * silences it.
 */
export function benchHookServer(kind: RequestKind, deps: Pick<ServerDeps, 'logger'> = {}): HookServer {
  const { config, now } = benchHook(kind);
  return buildServer(
    { ...config, bodyLimit: 8 * 1024 * 1024, logLevel: DEPLOYED_LOG_LEVEL },
    { ...deps, clock: () => now },
  );
}

/** bench/requests/steady-state-sync.json, as ./capture-sync-request.ts writes it. */
const capturedRecording = () => recording<StackSyncRequest>('steady-state-sync.json', validateStack);

const capturedHook = (file: Recording<StackSyncRequest>): BenchHook => ({
  config: { ...configFromEnv({}), agentImage: file.agentImage, programServer: file.programServer },
  now: restingClock(file.request),
});

function capturedSyncRequest(): BenchRequest {
  const file = capturedRecording();
  const hook = capturedHook(file);
  const response = syncStack(file.request, { ...hook, lookups: new Map() });
  assertSteadyState(response);
  return { body: JSON.stringify(file.request), response: JSON.stringify(response), ...hook };
}

/**
 * Throws unless the hook server at `port` answers `body` with `response`: a server that answered
 * otherwise (another clock, another configuration) would be measured on work a Stack at rest does
 * not cause.
 */
export async function expectAnsweredAtRest(port: number, { body, response }: BenchRequest): Promise<void> {
  const res = await httpRequest(`http://127.0.0.1:${port}/stack/sync`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
  const answer = await res.body.text();
  if (res.statusCode !== 200 || answer !== response)
    throw new Error(`the hook server does not answer the benchmark request as at rest (HTTP ${res.statusCode})`);
}

function syntheticSyncRequest(): BenchRequest {
  let stack = makeStack({
    backend: 's3://example-pulumi-state',
    envRefs: {
      PULUMI_CONFIG_PASSPHRASE: { type: 'Secret', secret: { name: 'pulumi', key: 'passphrase' } },
      AWS_REGION: { type: 'Literal', literal: { value: 'us-west-2' } },
      AWS_ACCESS_KEY_ID: { type: 'Secret', secret: { name: 'aws', key: 'id' } },
      AWS_SECRET_ACCESS_KEY: { type: 'Secret', secret: { name: 'aws', key: 'secret' } },
    },
    config: {
      'aws:region': 'us-west-2',
      'app:replicas': 3,
      'app:tags': { team: 'a', env: 'dev' },
      'app:domain': 'example.test',
      'app:debug': false,
    },
    secretsRef: { 'app:dbPassword': { type: 'Secret', secret: { name: 'db', key: 'password' } } },
    workspaceTemplate: {
      spec: {
        image: 'example.test/custom-agent:1',
        resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '2Gi' } },
        podTemplate: {
          spec: {
            volumes: [{ name: 'cache', emptyDir: {} }],
            containers: [
              { name: 'pulumi', volumeMounts: [{ name: 'cache', mountPath: '/cache' }] },
              { name: 'sidecar', image: 'busybox', command: ['sleep', 'infinity'] },
            ],
          },
        },
      },
    },
  });
  let cluster: KObject[] = [];
  // Three updates, each absorbed: the steady state has three finished Updates. The steps go through
  // the Workspace and Update controllers too (their children join the stand-in cluster).
  for (let i = 1; i <= 3; i++) {
    stack = { ...stack, metadata: { ...stack.metadata, generation: i } };
    // Each step is a sync and, when it records an operation, the sync that makes its Update (stories.step).
    const first = step(stack, cluster);
    stack = first.stack;
    cluster = workspaceBecomesReady(first.cluster);
    const second = step(stack, cluster);
    stack = second.stack;
    cluster = second.cluster;
    // The update in flight (started by the first step once the workspace exists, else by the second).
    const running = stack.status?.currentUpdate?.name;
    if (!running) throw new Error('benchmark request: no update started');
    cluster = jobFinishes(cluster, running, {
      state: 'succeeded',
      outputs: { url: 'https://example.test', password: '[secret]' },
    });
    const r3 = syncStackAndItsControllers(syncRequest(stack, cluster), {
      config: testConfig,
      now: NOW,
      lookups: noLookups,
    });
    stack = withStatus(stack, r3);
    cluster = applyChildren(cluster, r3.children);
  }
  const request = {
    controller: {
      apiVersion: 'metacontroller.k8s.io/v1alpha1',
      kind: 'CompositeController',
      metadata: { name: 'pulumi-stacks' },
    },
    ...syncRequest(stack, cluster),
  };
  const response = syncStack(request, { config: testConfig, now: NOW, lookups: noLookups });
  assertSteadyState(response);
  return { body: JSON.stringify(request), response: JSON.stringify(response), config: testConfig, now: NOW };
}
