/**
 * The tests' shared helpers are defined once: a helper that a test file or the test bed needs is
 * imported from its one home (e2e/testbed/helpers.ts for waiting, ports and log tails;
 * hooks/test/stories.ts for a sync's context; hooks/test/builders.ts for conditions;
 * hooks/test/answers.ts for serving the hook server), not written again. Reads the sources of the
 * tests, the test bed, the packaging tests and the benchmarks: a top-level definition of one of
 * these names anywhere but its home fails here.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from '../e2e/testbed/toolchain';

/** Each shared helper and the one file that defines it. */
const HOMES: Record<string, string> = {
  sleep: 'e2e/testbed/helpers.ts',
  eventually: 'e2e/testbed/helpers.ts',
  freePort: 'e2e/testbed/helpers.ts',
  distinctFreePorts: 'e2e/testbed/helpers.ts',
  tail: 'e2e/testbed/helpers.ts',
  ctx: 'hooks/test/stories.ts',
  condition: 'hooks/test/builders.ts',
  listenOnLoopback: 'hooks/test/answers.ts',
};

/** Where test code lives (production code, e.g. agent/src/lib/sleep.ts, has its own rules). */
const TEST_CODE = ['e2e', 'hooks/test', 'agent/test', 'packaging', 'bench'];

function sourcesUnder(dir: string): string[] {
  return fs.readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return e.name === 'node_modules' ? [] : sourcesUnder(rel);
    return /\.(ts|js|mjs)$/.test(e.name) ? [rel] : [];
  });
}

/** Top-level definitions (functions, consts, lets, classes) of `names` in a source text: name -> line numbers. */
export function topLevelDefinitions(text: string, names: readonly string[]): Map<string, number[]> {
  const found = new Map<string, number[]>();
  const definition = /^(?:export\s+)?(?:async\s+)?(?:function\*?|const|let|var|class)\s+([A-Za-z_$][\w$]*)/;
  text.split('\n').forEach((line, i) => {
    const name = definition.exec(line)?.[1];
    if (name !== undefined && names.includes(name)) found.set(name, [...(found.get(name) ?? []), i + 1]);
  });
  return found;
}

describe('the shared test helpers', () => {
  const names = Object.keys(HOMES);

  it('finds definitions by name at the top level only', () => {
    const text = [
      'export const sleep = (ms: number) => 1;',
      'async function eventually() {}',
      'export async function freePort() {}',
      '  const tail = 1; // nested: a local, not a helper',
      'const ctxOf = 1;',
    ].join('\n');
    expect(Object.fromEntries(topLevelDefinitions(text, names))).toEqual({
      sleep: [1],
      eventually: [2],
      freePort: [3],
    });
  });

  it('are each defined once, in their home', () => {
    const misplaced: string[] = [];
    const homesSeen = new Set<string>();
    for (const file of TEST_CODE.flatMap(sourcesUnder)) {
      const defs = topLevelDefinitions(fs.readFileSync(path.join(REPO_ROOT, file), 'utf8'), names);
      for (const [name, lines] of defs) {
        if (HOMES[name] === file && lines.length === 1) homesSeen.add(name);
        else misplaced.push(`${name} defined at ${file}:${lines.join(',')} (its home: ${HOMES[name]})`);
      }
    }
    expect(misplaced).toEqual([]);
    expect([...homesSeen].sort()).toEqual([...names].sort());
  });
});
