import { load } from 'js-yaml';
import { DEFAULT_NOW } from '../../src/cli/args';
import { conditionIn, GIT_STACK, parseOutput, PROGRAM_STACK, runRender, SHA } from './run';

const REF = `https://git.example.test/infra.git#main=${SHA}`;
const INPUT = `${PROGRAM_STACK}\n---\n${GIT_STACK}`;

/** The same objects with the documents and every mapping's keys in another order. */
const REORDERED = `
kind: Stack
spec:
  backend: file:///tmp
  gitAuth:
    accessToken:
      secret: { key: accessToken, name: git-credentials }
      type: Secret
  branch: main
  projectRepo: https://git.example.test/infra.git
  stack: dev
metadata:
  name: infra
apiVersion: pulumi.com/v1
---
metadata: { name: hello }
kind: Stack
apiVersion: pulumi.com/v1
spec: { backend: file:///tmp, programRef: { name: hello-program }, stack: dev }
---
data:
  accessToken: ${Buffer.from('not-a-real-token').toString('base64')}
metadata:
  name: git-credentials
kind: Secret
apiVersion: v1
---
program: { outputs: { greeting: hello } }
metadata: { name: hello-program }
kind: Program
apiVersion: pulumi.com/v1
`;

describe('render output', () => {
  it('is the same bytes for the same input, whatever the order of documents and keys', () => {
    for (const format of ['yaml', 'json']) {
      const args = ['-o', format, '--ref', REF];
      const first = runRender(args, INPUT);
      expect(first.code).toBe(0);
      expect(runRender(args, INPUT).stdout).toBe(first.stdout);
      expect(runRender(args, REORDERED).stdout).toBe(first.stdout);
    }
  });

  it('says the same in YAML and JSON', () => {
    const json = runRender(['-o', 'json', '--ref', REF], INPUT).stdout;
    const yaml = runRender(['--ref', REF], INPUT).stdout;
    expect(load(yaml)).toEqual(JSON.parse(json));
  });

  it("has every object's keys in order", () => {
    const { stdout } = runRender(['-o', 'json', '--ref', REF], INPUT);
    const unordered: string[] = [];
    JSON.parse(stdout, (key, value: unknown) => {
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
        const keys = Object.keys(value);
        if (keys.join('\0') !== [...keys].sort().join('\0')) unordered.push(key);
      }
      return value;
    });
    expect(unordered).toEqual([]);
  });

  it('takes its clock from --now, and a fixed one without it', () => {
    const at = (args: string[]) =>
      parseOutput(runRender(['-o', 'json', ...args], PROGRAM_STACK).stdout).stacks.map(
        (s) => conditionIn(s, 'Ready')!.lastTransitionTime,
      );
    expect(at([])).toEqual([DEFAULT_NOW]);
    expect(at(['--now', '2026-03-04T05:06:07Z'])).toEqual(['2026-03-04T05:06:07Z']);
  });
});
