/** Narrowing parsed JSON, for tests that inspect JSON of no fixed shape. */

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON text that must hold an object. */
export function parseObject(text: string): Record<string, unknown> {
  const parsed: unknown = JSON.parse(text);
  if (!isRecord(parsed)) throw new Error(`not a JSON object: ${text.slice(0, 200)}`);
  return parsed;
}

/** Deletes the last key of `path` in parsed JSON; throws when the path is not there. */
export function deleteAt(json: unknown, path: readonly string[]): void {
  let node = json;
  for (const key of path.slice(0, -1)) node = isRecord(node) ? node[key] : undefined;
  const last = path[path.length - 1];
  if (last === undefined || !isRecord(node) || !(last in node)) throw new Error(`no ${path.join('.')} to delete`);
  delete node[last];
}
