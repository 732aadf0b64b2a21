/**
 * Errors the agent reports to a human: one line naming what failed and why, never a bare stack
 * trace. `reason` is a machine-readable cause (upstream's condition reasons) where one applies.
 */
export class AgentError extends Error {
  constructor(
    message: string,
    readonly reason?: string,
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = 'AgentError';
  }
}

/** The message of anything thrown, on one line. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return oneLine(e.message);
  return oneLine(String(e));
}

export function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ').trim();
}

/** Cuts a message to at most `max` characters, saying so. */
export function truncate(s: string, max: number): string {
  if (s.length <= max) return s;
  return `${s.slice(0, max - 15)}… (truncated)`;
}
