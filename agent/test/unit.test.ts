/** Unit tests of the agent's pure parts (the behaviour is covered end to end in *.e2e.ts). */
import { createHash } from 'node:crypto';
import { parseOperationRequest } from '../src/api';
import { classifyGitError } from '../src/fetch/git';
import { hasherFor, parseDigest } from '../src/fetch/flux';
import { parseEnvFile } from '../src/lib/envfile';
import { safeSubdir } from '../src/lib/paths';
import { Redactor, redactUrl } from '../src/lib/redact';
import { compareVersions, configJson, hasStructuredConfig, qualifyKey, resolveConfig } from '../src/serve/config';
import { describeChanges, findPermalink, operationArgs } from '../src/serve/operation';
import { containsSecret } from '../src/serve/stack-state';
import {
  baseInputs,
  checkInputs,
  CommandRunner,
  diffCommand,
  goQuote,
  reveal,
  UNKNOWN,
  type Value,
} from '../testkit/command-provider';
import { configEnv, parseArgs, splitArgs } from '../testkit/language-nodejs';
import { toUpdateResult } from '../src/update/main';
import {
  fitOutputs,
  formatUpdateResult,
  MAX_OUTPUTS_ANNOTATION_BYTES,
  parseUpdateResult,
  type UpdateResult,
} from '../../contract';

describe('env file', () => {
  it('parses godotenv-style lines', () => {
    expect(
      parseEnvFile(
        [
          '# comment',
          'A=1',
          'export B = two ',
          "C='lit $X \\n'",
          'D="esc\\nnl \\"q\\""',
          'E=val # note',
          'bad line',
          'F="multi',
          'line"',
          '',
        ].join('\n'),
      ),
    ).toEqual({ A: '1', B: 'two', C: 'lit $X \\n', D: 'esc\nnl "q"', E: 'val', F: 'multi\nline' });
  });
});

describe('redaction', () => {
  it('replaces secret strings, their JSON-escaped and trimmed forms, and leaves short ones', () => {
    const r = new Redactor();
    r.add('p@ss"word\n');
    r.add({ nested: ['deep-secret-1'] });
    r.add('abc');
    expect(r.redact('a p@ss"word b')).toBe('a [secret] b');
    expect(r.redact(JSON.stringify({ v: 'p@ss"word\n' }))).toBe('{"v":"[secret]"}');
    expect(r.redact('x deep-secret-1 abc')).toBe('x [secret] abc');
    expect(redactUrl('https://user:tok@host/repo.git')).toBe('https://***:***@host/repo.git');
  });
});

describe('config', () => {
  it('qualifies keys and reads values', () => {
    expect(qualifyKey('a', 'p')).toBe('p:a');
    expect(qualifyKey('aws:region', 'p')).toBe('aws:region');
    const items = [
      { key: 'a', value: 'x', secret: false },
      { key: 'n', value: 3, secret: false },
      { key: 'e', valueFrom: { env: 'PKO_TEST_V' }, secret: true },
      { key: 'a', value: 'y', secret: false },
    ];
    expect(hasStructuredConfig(items)).toBe(true);
    const resolved = resolveConfig(items, 'p', { PKO_TEST_V: 'from-env' });
    expect(resolved).toEqual([
      { key: 'p:a', value: 'y', structured: false, secret: false, path: false },
      { key: 'p:n', value: 3, structured: true, secret: false, path: false },
      { key: 'p:e', value: 'from-env', structured: false, secret: true, path: false },
    ]);
    expect(JSON.parse(configJson(resolved))).toEqual({
      'p:a': { value: 'y', secret: false },
      'p:n': { value: '3', objectValue: 3, secret: false },
      'p:e': { value: 'from-env', secret: true },
    });
    expect(() => resolveConfig([{ key: 'm', valueFrom: { env: 'NOPE_NOT_SET' }, secret: false }], 'p', {})).toThrow(
      'environment variable NOPE_NOT_SET is not set',
    );
    expect(() => resolveConfig([{ key: 'f', valueFrom: { path: '/nonexistent/x' }, secret: true }], 'p', {})).toThrow(
      'cannot read /nonexistent/x (ENOENT)',
    );
  });

  it("keeps a Workspace's property paths (path: true), for string values only", () => {
    expect(resolveConfig([{ key: 'data.nums[0]', value: '1', secret: false, path: true }], 'p', {})).toEqual([
      { key: 'p:data.nums[0]', value: '1', structured: false, secret: false, path: true },
    ]);
    expect(() => resolveConfig([{ key: 'data', value: { a: 1 }, secret: false, path: true }], 'p', {})).toThrow(
      'a property path (path: true) takes a string value',
    );
  });

  it('compares versions', () => {
    expect(compareVersions('v3.248.0', '3.202.0')).toBeGreaterThan(0);
    expect(compareVersions('3.197.0', '3.202.0')).toBeLessThan(0);
    expect(compareVersions('v3.202.0-alpha', '3.202.0')).toBe(0);
  });
});

describe('operations', () => {
  it('maps requests to CLI flags', () => {
    expect(
      operationArgs(
        {
          type: 'up',
          stack: 's',
          message: 'm',
          target: ['u1'],
          targetDependents: true,
          refresh: true,
          parallel: 4,
          expectNoChanges: true,
          continueOnError: true,
          replace: ['r'],
        },
        'dev',
        '/e',
        0,
      ),
    ).toEqual([
      'up',
      '--yes',
      '--skip-preview',
      '--diff',
      '--suppress-progress',
      '--expect-no-changes',
      '--refresh',
      '--replace',
      'r',
      '--target',
      'u1',
      '--target-dependents',
      '--continue-on-error',
      '--message',
      'm',
      '--parallel',
      '4',
      '--stack',
      'dev',
      '--color',
      'never',
      '--exec-kind',
      'auto.local',
      '--event-log',
      '/e',
      '--non-interactive',
    ]);
    expect(operationArgs({ type: 'destroy', stack: 's', remove: true, runProgram: false }, 'dev', '/e', 2)).toEqual([
      'destroy',
      '--yes',
      '--skip-preview',
      '--suppress-progress',
      '--remove',
      '--run-program=false',
      '--stack',
      'dev',
      '--color',
      'never',
      '--exec-kind',
      'auto.local',
      '--event-log',
      '/e',
      '--non-interactive',
      '--logtostderr',
      '--logflow',
      '--verbose',
      '2',
      '--debug',
    ]);
  });

  it('validates requests', () => {
    expect(parseOperationRequest({ type: 'preview', stack: 'dev', target: ['a'] })).toEqual({
      type: 'preview',
      stack: 'dev',
      target: ['a'],
    });
    expect(() => parseOperationRequest({ type: 'apply', stack: 'dev' })).toThrow('"type" must be one of');
    expect(() => parseOperationRequest({ type: 'up', stack: 'dev', parallel: 'x' })).toThrow(
      '"parallel" must be an integer',
    );
  });

  it('finds secrets, permalinks and summaries', () => {
    const sig = { '4dabf18193072939515e22adb298388d': '1b47061264138c4ac30d75fd1eb44270', ciphertext: '[secret]' };
    expect(containsSecret({ a: [1, { b: sig }] })).toBe(true);
    expect(containsSecret({ a: '[secret]' })).toBe(false);
    expect(findPermalink('View in Browser (Ctrl+O): https://app.pulumi.com/o/p/s/updates/3\n')).toBe(
      'https://app.pulumi.com/o/p/s/updates/3',
    );
    expect(describeChanges({ create: 2, same: 1, update: 0 }, false)).toBe('2 created, 1 unchanged');
    expect(describeChanges({ create: 2 }, true)).toBe('2 to create');
  });
});

describe('fetch helpers', () => {
  it('classifies git failures', () => {
    expect(classifyGitError("fatal: Authentication failed for 'https://h/r.git/'", 'basic')).toMatch(
      /^bad credentials/,
    );
    expect(
      classifyGitError("fatal: could not read Username for 'https://h': terminal prompts disabled", 'none'),
    ).toMatch(/requires credentials/);
    expect(
      classifyGitError('git@h: Permission denied (publickey).\nfatal: Could not read from remote repository.', 'ssh'),
    ).toMatch(/^bad SSH credentials/);
    expect(classifyGitError('fatal: remote error: upload-pack: not our ref 0123', 'none')).toMatch(/^ref not found/);
    expect(classifyGitError("fatal: repository 'https://h/x.git/' not found", 'none')).toMatch(/^repository not found/);
  });

  it('parses digests and subdirectories', () => {
    expect(parseDigest('sha256:ABCD')).toEqual({ algorithm: 'sha256', hex: 'abcd' });
    expect(() => parseDigest('md5:00')).toThrow('unsupported digest');
    expect(() => parseDigest('constructor:00')).toThrow('unsupported digest');
    expect(parseDigest('blake3:AF13')).toEqual({ algorithm: 'blake3', hex: 'af13' });
    expect(safeSubdir('./a/b/')).toBe('a/b');
    expect(safeSubdir('basic/')).toBe('basic');
    expect(safeSubdir('')).toBe('');
    expect(() => safeSubdir('a/../../b')).toThrow('must be relative and inside the source');
    expect(() => safeSubdir('/etc')).toThrow();
  });
});

describe("the digests of Flux artifacts (source-controller's --artifact-digest-algo)", () => {
  const hex = (algorithm: string, chunks: string[]) => {
    const h = hasherFor(algorithm);
    for (const c of chunks) h.update(Buffer.from(c));
    return h.hex();
  };

  it('BLAKE3, the one Node.js has not: the test vectors of its reference implementation, in one chunk or several', () => {
    expect(hex('blake3', [])).toBe('af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262');
    expect(hex('blake3', ['abc'])).toBe('6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85');
    expect(hex('blake3', ['a', 'b', 'c'])).toBe(hex('blake3', ['abc']));
  });

  it('the SHA-2 family and SHA-1 as Node.js computes them', () => {
    for (const algorithm of ['sha256', 'sha384', 'sha512', 'sha1'])
      expect(hex(algorithm, ['ab', 'c'])).toBe(createHash(algorithm).update('abc').digest('hex'));
  });
});

describe('test-bed pulumi-language-nodejs', () => {
  it("reads the CLI's flags and engine address, nodeargs and config as the real host does", () => {
    expect(parseArgs(['--logtostderr', '-v=9', '--tracing', 'http://t', '127.0.0.1:4000'])).toEqual({
      flags: { logtostderr: 'true', v: '9', tracing: 'http://t' },
      positional: ['127.0.0.1:4000'],
    });
    expect(splitArgs(` --max-old-space-size=4096  --title "a b" 'c d' e\\ f`)).toEqual([
      '--max-old-space-size=4096',
      '--title',
      'a b',
      'c d',
      'e f',
    ]);
    expect(() => splitArgs('"open')).toThrow(/unterminated/);
    expect(
      JSON.parse(
        configEnv([
          ['proj:greeting', 'hi'],
          ['aws:config:region', 'x'],
        ]),
      ),
    ).toEqual({ 'proj:config:greeting': 'hi', 'aws:config:region': 'x' });
    expect(() => configEnv([['nonamespace', 'v']])).toThrow(/configuration key/);
  });
});

describe('test-bed pulumi-resource-command', () => {
  const secret = (value: Value): Value => ({
    '4dabf18193072939515e22adb298388d': '1b47061264138c4ac30d75fd1eb44270',
    value,
  });

  it('diffs inputs per property path: updates, except triggers as a whole, which replace', () => {
    expect(diffCommand({ create: 'a' }, { create: 'a', version: '1.2.1', __internal: 'x' })).toEqual({
      changes: false,
      detailed: {},
      replaces: [],
      diffs: [],
    });
    expect(
      diffCommand(
        { create: 'a', environment: { A: '1', 'B-C': '2' } },
        { create: 'b', environment: { A: '1', 'B-C': '3', D: '4' } },
      ),
    ).toEqual({
      changes: true,
      detailed: { create: 'update', 'environment["B-C"]': 'update', 'environment.D': 'add' },
      replaces: [],
      diffs: ['create', 'environment'],
    });
    // triggers added or removed as a whole: replaced; an element changed: an update here (the YAML host's
    // replaceOnChanges from the schema makes the engine replace it).
    expect(diffCommand({ create: 'a' }, { create: 'a', triggers: [1] })).toMatchObject({
      detailed: { triggers: 'add-replace' },
      replaces: ['triggers'],
    });
    expect(diffCommand({ triggers: [1, 2] }, { triggers: [1, 3, 4] })).toMatchObject({
      detailed: { 'triggers[1]': 'update', 'triggers[2]': 'add' },
      replaces: [],
      diffs: ['triggers'],
    });
    // A value that became secret changed; unknowns equal unknowns.
    expect(diffCommand({ stdin: 'x' }, { stdin: secret('x') }).detailed).toEqual({ stdin: 'update' });
    expect(diffCommand({ stdin: secret('x') }, { stdin: secret('x') }).changes).toBe(false);
    expect(diffCommand({ dir: UNKNOWN }, { dir: UNKNOWN }).changes).toBe(false);
    expect(diffCommand({ dir: '/a' }, { dir: UNKNOWN }).detailed).toEqual({ dir: 'update' });
  });

  it('checks input types, keeps only known inputs, refuses asset and archive paths', () => {
    expect(
      checkInputs(
        { create: 'x', environment: { A: secret('s') }, logging: 'none', bogus: 1 },
        { create: 'string', environment: 'stringMap', logging: 'logging' },
      ),
    ).toEqual({
      inputs: { create: 'x', environment: { A: secret('s') }, logging: 'none' },
      failures: [],
    });
    const { failures } = checkInputs(
      { create: 3, interpreter: ['sh', false], logging: 'loud', assetPaths: ['*'] },
      { create: 'string', interpreter: 'strings', logging: 'logging', assetPaths: 'strings' },
    );
    expect(failures.map((f) => f.property)).toEqual(['create', 'interpreter[1]', 'logging', 'assetPaths']);
  });

  it('quotes commands as Go does in its error message, and reveals secrets for the command', () => {
    expect(goQuote('echo "hi" \\ done\n\tx\x01')).toBe('"echo \\"hi\\" \\\\ done\\n\\tx\\x01"');
    expect(goQuote('héllo ✓')).toBe('"héllo ✓"');
    expect(reveal({ a: [secret('x')], b: secret({ c: 'y' }) })).toEqual({ a: ['x'], b: { c: 'y' } });
    expect(
      baseInputs({ environment: secret({ T: 'v' }), interpreter: ['/bin/bash', '-c'], addPreviousOutputInEnv: false }),
    ).toEqual({
      environment: { T: 'v' },
      interpreter: ['/bin/bash', '-c'],
      addPreviousOutputInEnv: false,
    });
  });

  it('runs commands with environment, stdin, dir and previous output, and fails like upstream', async () => {
    const logged: string[] = [];
    const runner = new CommandRunner((_urn, line) => {
      logged.push(line);
      return Promise.resolve();
    });
    const r = await runner.run(
      'urn',
      'cat; echo "$X/$PULUMI_COMMAND_STDOUT/$(pwd)"; echo err >&2',
      { stdin: 'in\n', environment: { X: 'x' }, dir: '/' },
      { stdout: 'prev', stderr: '' },
    );
    expect(r).toEqual({ stdout: 'in\nx/prev//', stderr: 'err' });
    expect(logged.sort()).toEqual(['err', 'in', 'x/prev//']);
    const quiet: string[] = [];
    const q = new CommandRunner((_urn, line) => {
      quiet.push(line);
      return Promise.resolve();
    });
    expect(
      await q.run(
        'urn',
        'echo "[$PULUMI_COMMAND_STDOUT]"',
        { logging: 'none', addPreviousOutputInEnv: false },
        { stdout: 'prev', stderr: '' },
      ),
    ).toEqual({ stdout: '[]', stderr: '' });
    expect(quiet).toEqual([]);
    await expect(runner.run('urn', 'echo out; echo bad >&2; exit 4', {}, { stdout: '', stderr: '' })).rejects.toThrow(
      /^exit status 4: running "echo out; echo bad >&2; exit 4":\nout\nbad\n$/,
    );
    await expect(runner.run('urn', 'kill -9 $$', {}, { stdout: '', stderr: '' })).rejects.toThrow(
      /^signal: killed: running /,
    );
    await expect(runner.run('urn', 'true', { dir: '/nonexistent-pko' }, { stdout: '', stderr: '' })).rejects.toThrow(
      'chdir /nonexistent-pko: no such file or directory: running "true":\n',
    );
    await expect(
      runner.run('urn', 'true', { interpreter: ['no-such-interpreter-pko'] }, { stdout: '', stderr: '' }),
    ).rejects.toThrow('exec: "no-such-interpreter-pko": executable file not found in $PATH');
  });
});

describe('the result annotation', () => {
  const up = { type: 'up' as const, stack: 'dev' };
  /** What the workspace reports for a successful up with these outputs. */
  const succeeded = (outputs: Record<string, { value: unknown; secret: boolean }>) =>
    toUpdateResult(up, {
      id: 'op-1',
      type: 'up',
      state: 'succeeded',
      message: 'update succeeded',
      startTime: '2026-11-22T10:00:00Z',
      endTime: '2026-11-22T10:01:00Z',
      outputs,
    });
  const bytes = (text: string) => Buffer.byteLength(text);

  it('carries all outputs, secret values masked, when they fit', () => {
    const result = succeeded({
      url: { value: 'https://example.test', secret: false },
      pw: { value: 'hunter2', secret: true },
    });
    const text = formatUpdateResult(result);
    expect(text).not.toContain('hunter2');
    expect(parseUpdateResult(text)).toEqual({ ...result, outputs: { pw: '[secret]', url: 'https://example.test' } });
    expect(parseUpdateResult(text)?.outputsOmitted).toBeUndefined();
  });

  it('keeps whole outputs in name order while they fit, within the budget, and counts them all', () => {
    const outputs: Record<string, { value: unknown; secret: boolean }> = {};
    // 40 outputs of 2 KiB (80 KiB in all), a secret one, and a large one early in name order.
    for (let i = 0; i < 40; i++)
      outputs[`out${String(i).padStart(2, '0')}`] = { value: 'v'.repeat(2048), secret: false };
    outputs.aaLarge = { value: { blob: 'b'.repeat(MAX_OUTPUTS_ANNOTATION_BYTES) }, secret: false };
    outputs.token = { value: 's3cr3t-value', secret: true };
    const result = succeeded(outputs);
    const text = formatUpdateResult(result);
    expect(bytes(text)).toBeLessThanOrEqual(MAX_OUTPUTS_ANNOTATION_BYTES);
    expect(text).not.toContain('s3cr3t-value');
    const parsed = parseUpdateResult(text)!;
    expect(parsed).toMatchObject({ state: 'succeeded', outputsOmitted: true, outputsTotal: 42 });
    const kept = Object.keys(parsed.outputs ?? {});
    // The large one is left out, and whatever follows in name order still gets its chance.
    expect(kept).not.toContain('aaLarge');
    expect(kept).toContain('token');
    expect(parsed.outputs?.token).toBe('[secret]');
    expect(kept).toEqual([...kept].sort());
    for (const k of kept) expect(parsed.outputs?.[k]).toEqual(result.outputs?.[k]);
    // Tight: every output left out would have taken the annotation past the budget.
    for (const k of Object.keys(result.outputs ?? {}).filter((name) => !kept.includes(name))) {
      const more: UpdateResult = { ...parsed, outputs: { ...parsed.outputs, [k]: result.outputs?.[k] } };
      expect({ k, over: bytes(JSON.stringify(more)) > MAX_OUTPUTS_ANNOTATION_BYTES }).toEqual({ k, over: true });
    }
  });

  it('is the same whatever order the outputs arrive in', () => {
    const names = Array.from({ length: 30 }, (_, i) => `o${i}`);
    const make = (order: string[]) =>
      succeeded(Object.fromEntries(order.map((n) => [n, { value: n.repeat(1200), secret: false }])));
    expect(formatUpdateResult(make([...names].reverse()))).toBe(formatUpdateResult(make(names)));
  });

  it('leaves results without outputs alone', () => {
    const failed: UpdateResult = { state: 'failed', type: 'up', message: 'm'.repeat(4000), reason: 'UpdateFailed' };
    expect(fitOutputs(failed)).toBe(failed);
  });
});
