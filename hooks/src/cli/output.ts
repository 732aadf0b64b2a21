import { dump } from 'js-yaml';
import { isRecord } from '../lib/json';
import type { OutputFormat } from './args';
import type { RenderResult } from './render';

/**
 * What `render` prints: each Program's and Stack's hook answer, under its namespace and name.
 * Object keys are sorted and lists keep the hooks' order, so the same input always prints the same
 * bytes and a diff of two renders shows only what changed.
 */
export function formatResult(result: RenderResult, format: OutputFormat): string {
  const value = sortedKeys({
    programs: result.programs.map(({ namespace, name, response }) => ({ namespace, name, response })),
    stacks: result.stacks.map(({ namespace, name, response }) => ({ namespace, name, response })),
  });
  if (format === 'json') return `${JSON.stringify(value, undefined, 2)}\n`;
  return dump(value, { noRefs: true, lineWidth: -1, sortKeys: true });
}

/** A JSON copy with every object's keys in order (JSON.stringify's own walk, as the hook server's answer). */
function sortedKeys(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, (_key, v: unknown) =>
      isRecord(v)
        ? Object.fromEntries(
            Object.keys(v)
              .sort()
              .map((k) => [k, v[k]]),
          )
        : v,
    ),
  );
}
