import { AgentError } from './errors';

/** `--name value` and `--name=value` flags of the `known` names; anything else is positional. */
export function parseFlags<Name extends string>(
  argv: string[],
  known: readonly Name[],
): { flags: Partial<Record<Name, string>>; positional: string[] } {
  const isKnown = (name: string): name is Name => (known as readonly string[]).includes(name);
  const flags: Partial<Record<Name, string>> = {};
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq >= 0 ? a.slice(2, eq) : a.slice(2);
    if (!isKnown(name))
      throw new AgentError(`unknown flag --${name} (known: ${known.map((k) => `--${k}`).join(', ') || 'none'})`, {
        reason: 'InvalidArguments',
        exitCode: 2,
      });
    if (eq >= 0) flags[name] = a.slice(eq + 1);
    else {
      const v = argv[i + 1];
      if (v === undefined)
        throw new AgentError(`flag --${name} needs a value`, { reason: 'InvalidArguments', exitCode: 2 });
      flags[name] = v;
      i++;
    }
  }
  return { flags, positional };
}
