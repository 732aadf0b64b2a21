export interface AgentErrorDetails {
  /** A machine-readable cause (upstream's condition reasons), where one applies. */
  reason?: string;
  /** The process's exit code when the error ends a command: 2 for bad arguments or settings. */
  exitCode?: number;
  /** The HTTP status behind the error: the Kubernetes API's answer, or the workspace server's. */
  status?: number;
}

/**
 * Errors the agent reports to a human: one line naming what failed and why, never a bare stack
 * trace. Callers branch on `reason` and `status`, never on the message.
 */
export class AgentError extends Error {
  readonly reason: string | undefined;
  readonly exitCode: number;
  readonly status: number | undefined;

  constructor(message: string, details: AgentErrorDetails = {}) {
    super(message);
    this.name = 'AgentError';
    this.reason = details.reason;
    this.exitCode = details.exitCode ?? 1;
    this.status = details.status;
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

/** A caught system error's code (`ENOENT`), if it has one: read by shape (an error of another realm is one too). */
export function errorCode(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string' ? e.code : undefined;
}
