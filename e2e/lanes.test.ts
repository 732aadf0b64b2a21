/**
 * The order in which e2e/lanes.ts hands out the suite's files: longest first by e2e/durations.json,
 * which names only files that exist.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { longestFirst, recordedSeconds } from './lanes';
import { REPO_ROOT } from './testbed/toolchain';

const at = (f: string) => path.join(REPO_ROOT, f);

describe('lanes', () => {
  test('e2e/durations.json names e2e files of this repository, with positive seconds', () => {
    const seconds = recordedSeconds();
    expect(Object.keys(seconds).length).toBeGreaterThan(0);
    for (const [file, s] of Object.entries(seconds)) {
      expect({ file, exists: fs.existsSync(at(file)), e2e: file.endsWith('.e2e.ts') }).toEqual({
        file,
        exists: true,
        e2e: true,
      });
      expect(s).toBeGreaterThan(0);
    }
  });

  test('files go longest first; a file with no figure before them, then by size', () => {
    const seconds = { 'e2e/a.e2e.ts': 10, 'e2e/b.e2e.ts': 300 };
    const sizes: Record<string, number> = { 'e2e/new-small.e2e.ts': 1, 'e2e/new-large.e2e.ts': 9 };
    const size = (f: string) => sizes[path.relative(REPO_ROOT, f)] ?? 5;
    const files = ['e2e/a.e2e.ts', 'e2e/new-small.e2e.ts', 'e2e/b.e2e.ts', 'e2e/new-large.e2e.ts'].map(at);
    expect(longestFirst(files, seconds, size).map((f) => path.relative(REPO_ROOT, f))).toEqual([
      'e2e/new-large.e2e.ts',
      'e2e/new-small.e2e.ts',
      'e2e/b.e2e.ts',
      'e2e/a.e2e.ts',
    ]);
  });
});
