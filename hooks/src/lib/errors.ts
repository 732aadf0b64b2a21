/**
 * What a caught value says, whatever was thrown: an error's message, else the value as text. Read
 * by shape, not `instanceof Error`: an error from another realm (a vm context, as under jest) is one too.
 */
export function errorMessage(e: unknown): string {
  return typeof e === 'object' && e !== null && 'message' in e && typeof e.message === 'string' ? e.message : String(e);
}

/** A caught system error's code (`ENOENT`), if it has one (read by shape, as errorMessage). */
export function errorCode(e: unknown): string | undefined {
  return typeof e === 'object' && e !== null && 'code' in e && typeof e.code === 'string' ? e.code : undefined;
}

/** A caught value as an Error, for callbacks typed `(err: Error) => …`: itself when it is one, else one saying it. */
export function asError(e: unknown): Error {
  return e instanceof Error ? e : new Error(errorMessage(e));
}
