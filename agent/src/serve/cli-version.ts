import { compareVersions } from './config';

/**
 * What the workspace needs of the Pulumi CLI in its image (the user's `workspaceTemplate.spec.image`),
 * from the CLI's changelog (github.com/pulumi/pulumi CHANGELOG.md) and checked against v3.197.0 and
 * v3.274.1 on the test bed.
 */
export const PULUMI_CLI_VERSIONS = {
  /**
   * Every command and flag the workspace may run: `pulumi install` (3.91.0), `--suppress-progress`
   * (3.105.0), `--continue-on-error` (3.114.0) and, the newest, `destroy --run-program` (3.160.0).
   */
  minimum: '3.160.0',
  /** Structured (JSON) config, `config set-all --json`: checked only when the stack has some, as upstream. */
  structuredConfig: '3.202.0',
  /**
   * `config set --raw` keeps a value read from stdin byte-exact. Not a requirement: an older CLI
   * strips one trailing newline from stdin, so it gets the value with one added (secretConfigSet).
   */
  rawConfigSet: '3.247.0',
} as const;

/**
 * Why the workspace cannot run with the CLI `version` (as `pulumi version` or the Automation API
 * prints it), or undefined when it can. The message names both versions and the fix.
 */
export function pulumiVersionProblem(version: string, structuredConfig: boolean): string | undefined {
  const v = (s: string): string => `v${s.replace(/^v/, '')}`;
  const need = (min: string, what: string): string =>
    `the workspace image's Pulumi CLI is ${v(version)}; ${what} needs ${v(min)} or newer: ` +
    'use a newer Pulumi image in workspaceTemplate.spec.image';
  if (compareVersions(version, PULUMI_CLI_VERSIONS.minimum) < 0)
    return need(PULUMI_CLI_VERSIONS.minimum, 'the workspace');
  if (structuredConfig && compareVersions(version, PULUMI_CLI_VERSIONS.structuredConfig) < 0)
    return need(PULUMI_CLI_VERSIONS.structuredConfig, 'structured config (config set-all --json)');
  return undefined;
}

/**
 * `pulumi config set --secret` of a string value read from stdin, exactly as given: with `--raw`
 * where the CLI has it, else with one newline added for the CLI to strip.
 */
export function secretConfigSet(
  version: string,
  stack: string,
  key: string,
  value: string,
): { args: string[]; stdin: string } {
  if (compareVersions(version, PULUMI_CLI_VERSIONS.rawConfigSet) >= 0)
    return { args: ['config', 'set', '--secret', '--raw', '--stack', stack, '--', key], stdin: value };
  return { args: ['config', 'set', '--secret', '--stack', stack, '--', key], stdin: `${value}\n` };
}
