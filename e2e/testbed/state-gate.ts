/**
 * Named pipes on a namespace's state volume (the PVC the e2e Stacks mount at /state): a program that
 * reads one blocks until the test writes to it, so a test can hold an operation mid-run.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { KubernetesObject } from '@kubernetes/client-node';

/** A Program whose `up` blocks until the pipe at `gatePath` (in the pod) is written to, then outputs what it read. */
export function gatedProgram(name: string, namespace: string, gatePath: string): KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name, namespace },
    program: {
      variables: { opened: { 'fn::readFile': gatePath } },
      resources: { stash: { type: 'pulumi:index:Stash', properties: { input: '${opened}' } } },
      outputs: { opened: '${opened}' },
    },
  } as KubernetesObject;
}

export interface StateGates {
  /** A new pipe `name` in the state directory: its path in the pod, and a writer that waits for the reader. */
  gate(name: string): { inPod: string; write(text: string): void };
  /** Kills the writers still waiting for a reader. */
  stop(): void;
}

export function stateGates(stateDir: () => string): StateGates {
  const writers: ChildProcess[] = [];
  return {
    gate(name) {
      const dir = stateDir();
      if (!existsSync(dir)) {
        mkdirSync(dir, { recursive: true });
        chmodSync(dir, 0o777);
      }
      const file = join(dir, name);
      execFileSync('mkfifo', ['-m', '666', file]);
      if (!statSync(file).isFIFO()) throw new Error(`${file} is not a named pipe`);
      return {
        inPod: `/state/${name}`,
        // Opening a pipe for writing blocks until a reader opens it: a child process waits for the program.
        write(text) {
          writers.push(spawn('sh', ['-c', 'printf %s "$1" > "$2"', 'sh', text, file], { stdio: 'ignore' }));
        },
      };
    },
    stop() {
      for (const w of writers) if (w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
    },
  };
}
