import { ExitCode } from '../../src/cli/exit-codes';
import { syncStack } from '../../src/stack/sync';
import { makeStack, NOW, testConfig } from '../builders';
import { conditionIn, parseOutput, PROGRAM_STACK, runRender } from './run';

const INVALID_STACK = `
apiVersion: pulumi.com/v1
kind: Stack
metadata: { name: typo, namespace: team-a }
spec:
  stack: dev
  programRef: { name: p }
  refresh: "yes please"
`;

describe('render exit codes', () => {
  it('exits 0 when everything rendered', () => {
    const run = runRender(['-o', 'json'], PROGRAM_STACK);
    expect(run.code).toBe(ExitCode.rendered);
    expect(parseOutput(run.stdout).stacks.map((s) => s.name)).toEqual(['hello']);
  });

  it('exits 1 for an invalid Stack, with the message of its Stalled condition naming the field', () => {
    const run = runRender(['-o', 'json'], INVALID_STACK);
    expect(run.code).toBe(ExitCode.specInvalid);
    const [stack] = parseOutput(run.stdout).stacks;
    const stalled = conditionIn(stack!, 'Stalled');
    expect(stalled).toMatchObject({ status: 'True', reason: 'SpecInvalid' });
    expect(stalled!.message).toContain('spec.refresh');
    // The same message the sync hook gives the same Stack.
    const hook = syncStack(
      { parent: makeStack({ refresh: 'yes please' } as never, { name: 'typo', uid: undefined }) },
      { config: testConfig, now: NOW, lookups: new Map() },
    );
    expect(stalled!.message).toBe(hook.status.conditions!.find((c) => c.type === 'Stalled')!.message);
    expect(run.stderr).toBe(`invalid: Stack team-a/typo: ${String(stalled!.message)}\n`);
  });

  it('exits 1 for an invalid Program, naming the field', () => {
    const run = runRender(
      ['-o', 'json'],
      'apiVersion: pulumi.com/v1\nkind: Program\nmetadata: {name: p}\nprogram: {resources: 3}\n',
    );
    expect(run.code).toBe(ExitCode.specInvalid);
    expect(run.stderr).toMatch(/^invalid: Program default\/p: program\.resources /);
  });

  it('exits 2 for a bad command line, saying what is wrong', () => {
    for (const args of [
      ['--bogus'],
      ['-o', 'xml'],
      ['--ref', 'https://g.test/r.git#main=abc'],
      ['--now', 'yesterday'],
    ]) {
      const run = runRender(args, PROGRAM_STACK);
      expect(run.code).toBe(ExitCode.usage);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/^error: /);
    }
    expect(runRender(['--ref', 'https://g.test/r.git#main=abc']).stderr).toContain('not a full commit SHA');
  });

  it('exits 3 for unreadable input, naming the document and the field', () => {
    const cases: [string, RegExp][] = [
      ['a: [\n', /^error: <stdin>: not valid YAML: /],
      ['- just\n- a list\n', /^error: <stdin>: document 1: expected a Kubernetes object \(a mapping\), not a list/],
      ['apiVersion: pulumi.com/v1\nkind: Stack\nmetadata: {}\n', /document 1: metadata\.name is required/],
      [
        '---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\n---\nkind: Stack\n',
        /document 2: apiVersion is required/,
      ],
      ['apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n', /never read a Deployment .*--skip-unknown/],
      [`${PROGRAM_STACK}\n---\n${PROGRAM_STACK}`, /Program\.pulumi\.com\/v1 default\/hello-program appears twice/],
      ['apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {__proto__: {x: 1}}\n', /data\.__proto__ is refused/],
    ];
    for (const [input, message] of cases) {
      const run = runRender([], input);
      expect({ input, code: run.code }).toEqual({ input, code: ExitCode.unreadableInput });
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(message);
    }
    const missing = runRender(['/nonexistent/stacks.yaml']);
    expect(missing.code).toBe(ExitCode.unreadableInput);
    expect(missing.stderr).toContain('/nonexistent/stacks.yaml: cannot read');
  });

  it('leaves out kinds the hooks never read with --skip-unknown, and says so', () => {
    const run = runRender(
      ['--skip-unknown', '-o', 'json'],
      `${PROGRAM_STACK}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n`,
    );
    expect(run.code).toBe(ExitCode.rendered);
    expect(run.stderr).toContain('note: skipped Deployment.apps/v1 default/d');
  });

  it('prints its usage with --help', () => {
    const run = runRender(['--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('Exit codes: 0 rendered; 1');
  });
});

describe('render and deeply nested documents', () => {
  const stackNested = (depth: number) =>
    `apiVersion: pulumi.com/v1\nkind: Stack\nmetadata: {name: deep}\nspec: {stack: dev, programRef: {name: p}, config: {x: {value: ${'['.repeat(depth)}${']'.repeat(depth)}}}}\n`;

  it('leaves a spec nested too deep to the hooks, which find it invalid', () => {
    const run = runRender([], stackNested(300));
    expect(run.code).toBe(ExitCode.specInvalid);
    expect(run.stderr).toMatch(
      /^invalid: Stack default\/deep: spec\.config\.x\.value.* is nested more than 100 levels deep/,
    );
  });

  it('refuses a document nested deeper than it reads, without crashing', () => {
    const run = runRender([], stackNested(100_000));
    expect(run.code).toBe(ExitCode.unreadableInput);
    expect(run.stderr).toMatch(/^error: <stdin>: not valid YAML: nesting exceeded maxDepth/);
  });
});

describe('render and alias bombs', () => {
  /** A Stack whose config value is `levels` levels of 9 aliases to the level below: 9^levels strings as a tree. */
  const bomb = (levels: number) => {
    const anchors = [`  a0: &a0 [${Array(9).fill('"lol"').join(',')}]`];
    for (let i = 1; i <= levels; i++)
      anchors.push(
        `  a${i}: &a${i} [${Array(9)
          .fill(`*a${i - 1}`)
          .join(',')}]`,
      );
    return `apiVersion: pulumi.com/v1\nkind: Stack\nmetadata: {name: boom}\nspec:\n  stack: dev\n  programRef: {name: p}\n  config:\n  ${anchors.join('\n  ')}\n`;
  };

  it('refuses a billion laughs (a few hundred bytes, 9^10 strings as a tree) at once, naming the budget', () => {
    const text = bomb(10);
    expect(text.length).toBeLessThan(800);
    const run = runRender([], text);
    expect(run.code).toBe(ExitCode.unreadableInput);
    expect(run.stderr).toBe(
      'error: <stdin>: refused: document 1: its aliases expand to more than the 16777216 bytes allowed (an alias bomb?)\n',
    );
  });

  it('renders anchors that stay within the budget as before', () => {
    const run = runRender([], `${bomb(2)}${PROGRAM_STACK.replace(/^/, '---\n')}`);
    expect(run.code).toBe(ExitCode.rendered);
  });
});
