import { AgentError } from './errors';

/** `--name value` and `--name=value` flags; anything else is positional. */
export function parseFlags(
  argv: string[],
  known: readonly string[],
): { flags: Record<string, string>; positional: string[] } {
  const flags: Record<string, string> = {};
  const positional: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (!a.startsWith('--')) {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const name = eq >= 0 ? a.slice(2, eq) : a.slice(2);
    if (!known.includes(name))
      throw new AgentError(
        `unknown flag --${name} (known: ${known.map((k) => `--${k}`).join(', ') || 'none'})`,
        'InvalidArguments',
        2,
      );
    if (eq >= 0) flags[name] = a.slice(eq + 1);
    else {
      const v = argv[i + 1];
      if (v === undefined) throw new AgentError(`flag --${name} needs a value`, 'InvalidArguments', 2);
      flags[name] = v;
      i++;
    }
  }
  return { flags, positional };
}
