/**
 * The e2e suite on several test beds at once: `npm run build && npm run test:e2e:lanes -- --out
 * <dir> [pattern...]` (run-in-testbed.sh --beds N, N from PKO_E2E_BEDS or 2, running this; `.ci/run`
 * does so, with the phase in PKO_E2E_PHASE; patterns select files as jest's own do).
 * run-in-testbed.sh runs this once in each bed, a lane. Every lane lists the same files in the same
 * order (longest first by e2e/durations.json, files it does not list before them, largest first as
 * jest orders files it has no timings for) and takes the next one that no
 * lane has claimed (a directory made in the run's directory: mkdir is atomic, so each file runs
 * once), running it alone with jest in its bed, as `npm run test:e2e -- <file>` would. Per file,
 * `<dir>/<n>.json` is jest's result and `<dir>/<n>.log` its output; a lane prints a line per file,
 * and a failed file's output. It exits 1 when one of its files failed or gave no result.
 *
 * Why lanes: a file mostly waits on its pods, so a second bed uses the CPU the first leaves idle
 * (docs/testbed.md, "The whole run"). `<dir>` must be new or empty: results are read from it whole.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO_ROOT } from './testbed/toolchain';

const JEST = [require.resolve('jest/bin/jest', { paths: [REPO_ROOT] }), '--config', 'e2e/jest.config.js'];

interface Lane {
  lane: number;
  lanes: number;
  /** Where lanes claim files: the run's directory, shared by the beds. */
  claims: string;
  out: string;
  /** jest's path patterns: which of the suite's files. */
  patterns: string[];
}

function laneFromEnvironment(argv: string[], env: NodeJS.ProcessEnv): Lane {
  const [flag, out, ...patterns] = argv.slice(2);
  if (flag !== '--out' || !out) throw new Error('usage: lanes.js --out <dir> [pattern...] (inside run-in-testbed.sh)');
  const { PKO_TESTBED_LANE: lane, PKO_TESTBED_LANES: lanes, PKO_TESTBED_RUN_DIR: runDir } = env;
  if (!lane || !lanes || !runDir)
    throw new Error('not inside run-in-testbed.sh: PKO_TESTBED_LANE, _LANES or _RUN_DIR unset');
  return {
    lane: Number(lane),
    lanes: Number(lanes),
    claims: path.join(runDir, 'claims'),
    out: path.resolve(out),
    patterns,
  };
}

/** Runs jest with `args` from the repository's root; resolves with its exit code. */
function jest(args: string[], output: 'pipe' | number): Promise<{ code: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...JEST, ...args], { cwd: REPO_ROOT, stdio: ['ignore', output, output] });
    let stdout = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code: code ?? 1, stdout }));
  });
}

/** Seconds per file (repository-relative) from e2e/durations.json: what orders the files. */
export function recordedSeconds(): Record<string, number> {
  const recorded = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'e2e', 'durations.json'), 'utf8')) as {
    seconds: Record<string, number>;
  };
  return recorded.seconds;
}

/**
 * `files` longest first, so that the lanes end together: by their recorded seconds, the files with
 * none first (a new file may be long), those by size, largest first.
 */
export function longestFirst(files: string[], seconds: Record<string, number>, size: (f: string) => number): string[] {
  const recorded = (f: string) => seconds[path.relative(REPO_ROOT, f)] ?? Infinity;
  return [...files].sort((a, b) => recorded(b) - recorded(a) || size(b) - size(a) || a.localeCompare(b));
}

/** The suite's files for this phase (jest.config.js decides), longest first, the same in every lane. */
async function suiteFiles(patterns: string[]): Promise<string[]> {
  const listed = await jest(['--listTests', ...patterns], 'pipe');
  if (listed.code !== 0) throw new Error(`jest --listTests exited ${listed.code}`);
  const files = listed.stdout.split('\n').filter((f) => f.endsWith('.e2e.ts'));
  return longestFirst(files, recordedSeconds(), (f) => fs.statSync(f).size);
}

/** Whether this lane got file `n` (no other lane has). */
function claim(claims: string, n: number): boolean {
  try {
    fs.mkdirSync(path.join(claims, String(n)));
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  }
}

/** The outcome of one file from its jest result, or undefined when jest wrote none. */
function outcome(json: string): { passed: number; failed: number } | undefined {
  try {
    const r = JSON.parse(fs.readFileSync(json, 'utf8')) as { numPassedTests: number; numFailedTests: number };
    return { passed: r.numPassedTests, failed: r.numFailedTests };
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  const lane = laneFromEnvironment(process.argv, process.env);
  fs.mkdirSync(lane.claims, { recursive: true });
  fs.mkdirSync(lane.out, { recursive: true });
  const files = await suiteFiles(lane.patterns);
  const tag = `lane ${lane.lane}/${lane.lanes}`;
  let failures = 0;
  for (const [n, file] of files.entries()) {
    if (!claim(lane.claims, n)) continue;
    const json = path.join(lane.out, `${n}.json`);
    const log = path.join(lane.out, `${n}.log`);
    const fd = fs.openSync(log, 'w');
    const started = Date.now();
    const { code } = await jest(['--ci', '--runTestsByPath', file, '--json', '--outputFile', json], fd).finally(() =>
      fs.closeSync(fd),
    );
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    const result = outcome(json);
    const relative = path.relative(REPO_ROOT, file);
    if (code === 0 && result && result.failed === 0) {
      console.log(`${tag}: PASS ${relative} (${result.passed} tests, ${seconds} s)`);
      continue;
    }
    failures++;
    const what = result
      ? `${result.failed} of ${result.passed + result.failed} tests failed`
      : `no result, exit ${code}`;
    console.log(`${tag}: FAIL ${relative} (${what}, ${seconds} s); its output:\n${fs.readFileSync(log, 'utf8')}`);
  }
  process.exitCode = failures > 0 ? 1 : 0;
}

if (require.main === module) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(2);
  });
}
