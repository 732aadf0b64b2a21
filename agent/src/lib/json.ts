/** Whether a parsed JSON value is an object (not null, not an array): the agent's one narrowing of JSON. */
export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** JSON text that must hold an object: throws, as JSON.parse does on text that is not JSON, when it holds anything else. */
export function parseJsonObject(text: string): Record<string, unknown> {
  const value: unknown = JSON.parse(text);
  if (!isRecord(value)) throw new SyntaxError('the JSON is not an object');
  return value;
}
