/**
 * Running the image tools (buildah, mmdebstrap, gcc, npm, ctr): output appended to a log file,
 * and on failure an error naming the command with the tail of its output.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';

export interface RunOptions {
  /** Appended to: the command line, then its stdout and stderr. */
  log: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

export class CommandError extends Error {
  constructor(
    readonly command: string[],
    readonly code: number | null,
    readonly output: string,
    log: string,
  ) {
    const tail = output.trimEnd().split('\n').slice(-25).join('\n');
    super(`${command.join(' ')} exited with ${code ?? 'a signal'} (log: ${log})\n${tail}`);
    this.name = 'CommandError';
  }
}

/** Runs `cmd args`, resolves with its stdout; stderr goes to the log only. */
export function run(cmd: string, args: readonly string[], options: RunOptions): Promise<string> {
  fs.appendFileSync(options.log, `\n$ ${[cmd, ...args].join(' ')}\n`);
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let output = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      output += c.toString();
      fs.appendFileSync(options.log, c);
    });
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString();
      fs.appendFileSync(options.log, c);
    });
    child.on('error', (err) =>
      reject(new CommandError([cmd, ...args], null, `${output}\n${err.message}`, options.log)),
    );
    child.on('close', (code) => {
      if (code === 0) resolve(stdout);
      else reject(new CommandError([cmd, ...args], code, output, options.log));
    });
  });
}

/** Whether `cmd` is an executable on PATH. */
export function onPath(cmd: string, env: NodeJS.ProcessEnv = process.env): boolean {
  for (const dir of (env.PATH ?? '').split(':')) {
    if (dir === '') continue;
    try {
      fs.accessSync(`${dir}/${cmd}`, fs.constants.X_OK);
      return true;
    } catch {
      // not here
    }
  }
  return false;
}
