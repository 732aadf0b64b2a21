/**
 * `pko-agent`: the agent image's single command.
 *
 *   pko-agent fetch git|flux|program|project-info|local   the workspace pod's init container
 *   pko-agent serve                                      the workspace server (StatefulSet container `pulumi`)
 *   pko-agent update                                     an operation's runner (each Job's container)
 *   pko-agent version
 *
 * Settings come from the environment the hooks put in the pod specs (contract/ Env). Failures print
 * one line naming what failed and why, and exit non-zero.
 */
import { version } from '../../package.json';
import { AgentError, errorMessage } from './lib/errors';
import { redactor } from './lib/redact';
import { registerSecretEnv } from './lib/secret-env';

const USAGE = `usage: pko-agent <command>
  fetch git|flux|program|project-info|local   put the project at /share/workspace (init container)
  serve [--port N] [--host H] [--auth-mode none|kube] [--workspace DIR] [--env-file FILE]
                                              run the workspace server
  update                                      run the Job's operation through the workspace
  version                                     print the version`;

export async function run(argv: string[]): Promise<number> {
  // Before anything can log or fail: the secrets in the environment are masked from the first line.
  registerSecretEnv(process.env);
  const [cmd, ...rest] = argv;
  switch (cmd) {
    case 'fetch': {
      const { runFetch } = await import('./fetch/index');
      const [kind] = rest;
      if (kind === undefined || rest.length !== 1)
        throw new AgentError(`usage: pko-agent fetch git|flux|program|project-info|local`, {
          reason: 'InvalidArguments',
          exitCode: 2,
        });
      try {
        await runFetch(kind);
      } catch (e) {
        const { reportFetchFailure } = await import('./fetch/report');
        await reportFetchFailure(kind, e);
        throw e;
      }
      return 0;
    }
    case 'serve': {
      const { serveCommand } = await import('./serve/main');
      return serveCommand(rest);
    }
    case 'update': {
      const { updateCommand } = await import('./update/main');
      return updateCommand();
    }
    case 'version':
    case '--version':
      process.stdout.write(`pko-agent ${version}\n`);
      return 0;
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return 0;
    default:
      process.stderr.write(`${cmd === undefined ? 'no command given' : `unknown command "${cmd}"`}\n${USAGE}\n`);
      return 2;
  }
}

/** The one line a failed command prints: its error's message, secrets masked. */
export function fatalLine(cmd: string | undefined, e: unknown): string {
  const name = cmd ?? 'pko-agent';
  const message = redactor.redact(errorMessage(e));
  const prefix = message.startsWith(name) || message.startsWith('fetch ') ? '' : `${name}: `;
  return `pko-agent ${prefix}${message}`;
}

/** Runs the CLI and exits; errors become one line on stderr (never a bare stack trace). */
export function main(argv: string[] = process.argv.slice(2)): void {
  run(argv).then(
    (code) => {
      process.exitCode = code;
      // Let stdout/stderr drain, then leave even if a handle (a socket, a timer) is still open.
      setImmediate(() => process.exit(code));
    },
    (e: unknown) => {
      process.stderr.write(`${fatalLine(argv[0], e)}\n`);
      if (process.env.PKO_AGENT_DEBUG === '1' && e instanceof Error && e.stack)
        process.stderr.write(`${redactor.redact(e.stack)}\n`);
      const code = e instanceof AgentError ? e.exitCode : 1;
      setImmediate(() => process.exit(code));
    },
  );
}

if (require.main === module) main();
