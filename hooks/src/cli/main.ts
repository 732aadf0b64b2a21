import { readFileSync } from 'node:fs';
import { configFromEnv, readKnownHosts, type HookConfig } from '../config';
import { yamlBudget } from '../lib/yaml';
import { parseRenderArgs, RENDER_USAGE } from './args';
import { parseDocuments } from './documents';
import { ExitCode, InputError, UsageError } from './exit-codes';
import { readInputs } from './inputs';
import { formatResult } from './output';
import { render } from './render';
import { errorMessage } from '../lib/errors';

/** What the command reads and writes, so tests run it in-process. */
export interface CliIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  readStdin: () => string;
  env: NodeJS.ProcessEnv;
}

/** The hook server's settings that shape the children (images, pull policy, known hosts), from the same env vars. */
const CHILD_SETTINGS = [
  'AGENT_IMAGE',
  'WORKSPACE_IMAGE',
  'WORKSPACE_IMAGE_BASELINE',
  'AGENT_IMAGE_PULL_POLICY',
  'IMAGE_REGISTRY',
  'FLUX_MAX_UNTAR_SIZE_BYTES',
  'SSH_KNOWN_HOSTS',
  'PROGRAM_SERVER_URL',
  'PROGRAM_SERVER_CA_FILE',
] as const;

/**
 * The hook server's configuration from the env vars that shape children; the others (port, egress,
 * git timeouts) are the server's alone. Known hosts only from SSH_KNOWN_HOSTS: the defaults
 * (~/.ssh/known_hosts) are this machine's, not the hook server's, and would make renders differ.
 */
function renderConfig(env: NodeJS.ProcessEnv): HookConfig {
  const picked: NodeJS.ProcessEnv = {};
  for (const key of CHILD_SETTINGS) if (env[key] !== undefined) picked[key] = env[key];
  try {
    return configFromEnv(picked, (e) => (e.SSH_KNOWN_HOSTS ? readKnownHosts(e) : ''));
  } catch (err) {
    throw new UsageError(errorMessage(err));
  }
}

function runRender(args: readonly string[], io: CliIo): number {
  const options = parseRenderArgs(args);
  if (options.help) {
    io.stdout(RENDER_USAGE);
    return ExitCode.rendered;
  }
  const config = renderConfig(io.env);
  // One alias budget for every text of the render (lib/yaml.ts).
  const budget = yamlBudget();
  const parse = (paths: readonly string[]) =>
    readInputs(paths, io.readStdin).flatMap((text) => parseDocuments(text, options.namespace, budget));
  const documents = parse(options.files.length > 0 ? options.files : ['-']);
  const observed = parse(options.observed);
  const result = render(
    { documents, observed },
    { config, now: options.now, refs: options.refs, skipUnknown: options.skipUnknown },
  );
  io.stdout(formatResult(result, options.output));
  for (const note of result.notes) io.stderr(`note: ${note}\n`);
  for (const problem of result.invalid) io.stderr(`invalid: ${problem}\n`);
  return result.invalid.length > 0 ? ExitCode.specInvalid : ExitCode.rendered;
}

const USAGE = `Usage: pulumi-metacontroller-operator render [flags] [FILE|DIR|-]...
Run "pulumi-metacontroller-operator render --help" for the flags.
`;

/** The package's command line: `pulumi-metacontroller-operator render …`. Returns the exit code. */
export function runCli(argv: readonly string[], io: CliIo): number {
  const [command, ...args] = argv;
  try {
    if (command === 'render') return runRender(args, io);
    if (command === '-h' || command === '--help' || command === 'help') {
      io.stdout(USAGE);
      return ExitCode.rendered;
    }
    throw new UsageError(command === undefined ? 'no command given' : `unknown command "${command}"`);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`error: ${err.message}\n${USAGE}`);
      return ExitCode.usage;
    }
    if (err instanceof InputError) {
      io.stderr(`error: ${err.message}\n`);
      return ExitCode.unreadableInput;
    }
    throw err;
  }
}

/** Entry point of the package's bin. */
export function main(): void {
  process.exitCode = runCli(process.argv.slice(2), {
    stdout: (text) => process.stdout.write(text),
    stderr: (text) => process.stderr.write(text),
    readStdin: () => readFileSync(0, 'utf8'),
    env: process.env,
  });
}
