/** What a caught value says, whatever was thrown (an Error's message, else the value as text). */
export function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/** A caught system error's code (`ENOENT`), if it has one. */
export function errorCode(e: unknown): string | undefined {
  return e instanceof Error && 'code' in e && typeof e.code === 'string' ? e.code : undefined;
}
