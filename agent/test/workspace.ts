/** Starts `pko-agent serve` on a free port for a project directory, the way the workspace pod runs it. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { WorkspaceStackSpec, WorkspaceStatus } from '../../contract';
import { afterEach, beforeAll, beforeEach } from '@jest/globals';
import { sleep } from '../src/lib/sleep';
import { eventually, GiveUp } from '../../e2e/testbed/helpers';
import { ensureBuilt, startAgent, tmpDir, type AgentProcess } from './helpers';
import { getJson } from './workspace-client';

export interface RunningWorkspace {
  proc: AgentProcess;
  base: string;
  /** Milliseconds from the start of the process to Ready. */
  readyMs?: number;
}

export async function startWorkspace(opts: {
  root: string;
  env: Record<string, string>;
  stack: WorkspaceStackSpec;
  authMode?: 'none' | 'kube';
  /** Wait for Ready (default), or only for the port. */
  waitReady?: boolean;
}): Promise<RunningWorkspace> {
  const portFile = path.join(opts.root, `port-${Date.now()}-${Math.random().toString(36).slice(2)}`);
  const t0 = Date.now();
  const proc = startAgent(['serve', '--port', '0', '--host', '127.0.0.1', '--auth-mode', opts.authMode ?? 'none'], {
    ...opts.env,
    PKO_AGENT_ROOT: opts.root,
    PKO_AGENT_PORT_FILE: portFile,
    PULUMI_WORKSPACE_STACK: JSON.stringify(opts.stack),
  });
  const port = await eventually('the workspace port', () => {
    if (proc.child.exitCode !== null) throw new GiveUp(`serve exited:\n${proc.output()}`);
    return fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8') !== ''
      ? fs.readFileSync(portFile, 'utf8')
      : undefined;
  });
  const base = `http://127.0.0.1:${port}`;
  const ws: RunningWorkspace = { proc, base };
  if (opts.waitReady !== false) {
    await waitReady(ws);
    ws.readyMs = Date.now() - t0;
  }
  return ws;
}

/** Polls /readyz until Ready; fails at once when the workspace reports Failed or exits. */
export async function waitReady(ws: RunningWorkspace, timeoutMs = 240_000): Promise<WorkspaceStatus> {
  return waitState(ws, 'Ready', timeoutMs);
}

export async function waitState(
  ws: RunningWorkspace,
  state: WorkspaceStatus['state'],
  timeoutMs = 240_000,
): Promise<WorkspaceStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (ws.proc.child.exitCode !== null) throw new Error(`serve exited:\n${ws.proc.output()}`);
    const r = await getJson(ws.base, '/readyz');
    const st = r.body as WorkspaceStatus;
    if (st.state === state) return st;
    if (st.state === 'Failed') throw new Error(`workspace failed: ${st.reason}: ${st.message}\n${ws.proc.output()}`);
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${state}:\n${ws.proc.output()}`);
    await sleep(200);
  }
}

export interface WorkspaceSuite {
  /** This test's directory (the pod's `/`: share/, the project, PULUMI_HOME), made fresh for each test. */
  readonly root: string;
  /** Registers a started workspace, so that it is stopped after the test. */
  track(w: RunningWorkspace): RunningWorkspace;
}

/**
 * The set-up every workspace test file shares: the agent built once, a fresh directory per test,
 * and every workspace the test started stopped (and its directory removed) after it.
 */
export function workspaceSuite(prefix: string): WorkspaceSuite {
  let root = '';
  let running: RunningWorkspace[] = [];
  beforeAll(() => ensureBuilt());
  beforeEach(() => {
    root = tmpDir(prefix);
  });
  afterEach(async () => {
    for (const w of running) await w.proc.stop();
    running = [];
    fs.rmSync(root, { recursive: true, force: true });
  });
  return {
    get root() {
      return root;
    },
    track(w) {
      running.push(w);
      return w;
    },
  };
}
