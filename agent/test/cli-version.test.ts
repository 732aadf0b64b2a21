import { PULUMI_CLI_VERSIONS, pulumiVersionProblem, secretConfigSet } from '../src/serve/cli-version';

describe("the workspace image's Pulumi CLI version", () => {
  it('accepts the supported CLI, with or without structured config', () => {
    expect(pulumiVersionProblem('3.274.1', true)).toBeUndefined();
    expect(pulumiVersionProblem('v3.274.1', false)).toBeUndefined();
    expect(pulumiVersionProblem(PULUMI_CLI_VERSIONS.structuredConfig, true)).toBeUndefined();
  });

  it('accepts a CLI older than structured config needs when the stack has none (as upstream)', () => {
    expect(pulumiVersionProblem('3.197.0', false)).toBeUndefined();
  });

  it('refuses structured config on an older CLI, naming both versions and the fix', () => {
    expect(pulumiVersionProblem('3.197.0', true)).toBe(
      "the workspace image's Pulumi CLI is v3.197.0; structured config (config set-all --json) needs " +
        'v3.202.0 or newer: use a newer Pulumi image in workspaceTemplate.spec.image',
    );
  });

  it('refuses a CLI older than the commands and flags the workspace runs, whatever the config', () => {
    const message = pulumiVersionProblem('3.150.0', false);
    expect(message).toContain('is v3.150.0');
    expect(message).toContain(`needs v${PULUMI_CLI_VERSIONS.minimum} or newer`);
    expect(pulumiVersionProblem('3.150.0', true)).toBe(message);
  });

  it('reads pre-release and v-prefixed versions as their release', () => {
    expect(pulumiVersionProblem('v3.202.0-alpha.1', true)).toBeUndefined();
    expect(pulumiVersionProblem('3.201.9-dev', true)).toContain('is v3.201.9-dev');
  });
});

describe('secret string config on stdin', () => {
  it('uses --raw where the CLI has it: the value as is', () => {
    expect(secretConfigSet('3.274.1', 'dev', 'p:pw', 'a\n')).toEqual({
      args: ['config', 'set', '--secret', '--raw', '--stack', 'dev', '--', 'p:pw'],
      stdin: 'a\n',
    });
    expect(secretConfigSet(PULUMI_CLI_VERSIONS.rawConfigSet, 'dev', 'p:pw', 'a').args).toContain('--raw');
  });

  it('adds the one newline an older CLI strips, so the value arrives exactly', () => {
    expect(secretConfigSet('3.246.0', 'dev', 'p:pw', 'a\n')).toEqual({
      args: ['config', 'set', '--secret', '--stack', 'dev', '--', 'p:pw'],
      stdin: 'a\n\n',
    });
    expect(secretConfigSet('3.197.0', 'dev', 'p:pw', '').stdin).toBe('\n');
  });
});
