/** Unit tests of the agent's pure parts (the behaviour is covered end to end in *.e2e.ts). */
import { parseOperationRequest } from '../src/api';
import { classifyGitError } from '../src/fetch/git';
import { parseDigest } from '../src/fetch/flux';
import { parseEnvFile } from '../src/lib/envfile';
import { safeSubdir } from '../src/lib/paths';
import { Redactor, redactUrl } from '../src/lib/redact';
import { compareVersions, configJson, hasStructuredConfig, qualifyKey, resolveConfig } from '../src/serve/config';
import { containsSecret, describeChanges, findPermalink, operationArgs } from '../src/serve/operation';
import { configEnv, parseArgs, splitArgs } from '../testkit/language-nodejs';

describe('env file', () => {
  it('parses godotenv-style lines', () => {
    expect(
      parseEnvFile(['# comment', 'A=1', 'export B = two ', "C='lit $X \\n'", 'D="esc\\nnl \\"q\\""', 'E=val # note', 'bad line', 'F="multi', 'line"', ''].join('\n')),
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
      { key: 'p:a', value: 'y', structured: false, secret: false },
      { key: 'p:n', value: 3, structured: true, secret: false },
      { key: 'p:e', value: 'from-env', structured: false, secret: true },
    ]);
    expect(JSON.parse(configJson(resolved))).toEqual({
      'p:a': { value: 'y', secret: false },
      'p:n': { value: '3', objectValue: 3, secret: false },
      'p:e': { value: 'from-env', secret: true },
    });
    expect(() => resolveConfig([{ key: 'm', valueFrom: { env: 'NOPE_NOT_SET' }, secret: false }], 'p', {})).toThrow('environment variable NOPE_NOT_SET is not set');
    expect(() => resolveConfig([{ key: 'f', valueFrom: { path: '/nonexistent/x' }, secret: true }], 'p', {})).toThrow('cannot read /nonexistent/x (ENOENT)');
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
      operationArgs({ type: 'up', stack: 's', message: 'm', target: ['u1'], targetDependents: true, refresh: true, parallel: 4, expectNoChanges: true, continueOnError: true, replace: ['r'] }, 'dev', '/e', 0),
    ).toEqual([
      'up', '--yes', '--skip-preview', '--diff', '--suppress-progress', '--expect-no-changes', '--refresh', '--replace', 'r', '--target', 'u1', '--target-dependents', '--continue-on-error',
      '--message', 'm', '--parallel', '4', '--stack', 'dev', '--color', 'never', '--exec-kind', 'auto.local', '--event-log', '/e', '--non-interactive',
    ]);
    expect(operationArgs({ type: 'destroy', stack: 's', remove: true, runProgram: false }, 'dev', '/e', 2)).toEqual([
      'destroy', '--yes', '--skip-preview', '--suppress-progress', '--remove', '--run-program=false',
      '--stack', 'dev', '--color', 'never', '--exec-kind', 'auto.local', '--event-log', '/e', '--non-interactive', '--logtostderr', '--logflow', '--verbose', '2', '--debug',
    ]);
  });

  it('validates requests', () => {
    expect(parseOperationRequest({ type: 'preview', stack: 'dev', target: ['a'] })).toEqual({ type: 'preview', stack: 'dev', target: ['a'] });
    expect(() => parseOperationRequest({ type: 'apply', stack: 'dev' })).toThrow('"type" must be one of');
    expect(() => parseOperationRequest({ type: 'up', stack: 'dev', parallel: 'x' })).toThrow('"parallel" must be an integer');
  });

  it('finds secrets, permalinks and summaries', () => {
    const sig = { '4dabf18193072939515e22adb298388d': '1b47061264138c4ac30d75fd1eb44270', ciphertext: '[secret]' };
    expect(containsSecret({ a: [1, { b: sig }] })).toBe(true);
    expect(containsSecret({ a: '[secret]' })).toBe(false);
    expect(findPermalink('View in Browser (Ctrl+O): https://app.pulumi.com/o/p/s/updates/3\n')).toBe('https://app.pulumi.com/o/p/s/updates/3');
    expect(describeChanges({ create: 2, same: 1, update: 0 }, false)).toBe('2 created, 1 unchanged');
    expect(describeChanges({ create: 2 }, true)).toBe('2 to create');
  });
});

describe('fetch helpers', () => {
  it('classifies git failures', () => {
    expect(classifyGitError("fatal: Authentication failed for 'https://h/r.git/'", 'basic')).toMatch(/^bad credentials/);
    expect(classifyGitError('fatal: could not read Username for \'https://h\': terminal prompts disabled', 'none')).toMatch(/requires credentials/);
    expect(classifyGitError('git@h: Permission denied (publickey).\nfatal: Could not read from remote repository.', 'ssh')).toMatch(/^bad SSH credentials/);
    expect(classifyGitError('fatal: remote error: upload-pack: not our ref 0123', 'none')).toMatch(/^ref not found/);
    expect(classifyGitError('fatal: repository \'https://h/x.git/\' not found', 'none')).toMatch(/^repository not found/);
  });

  it('parses digests and subdirectories', () => {
    expect(parseDigest('sha256:ABCD')).toEqual({ algorithm: 'sha256', hex: 'abcd' });
    expect(() => parseDigest('md5:00')).toThrow('unsupported digest');
    expect(safeSubdir('./a/b/')).toBe('a/b');
    expect(safeSubdir('')).toBe('');
    expect(() => safeSubdir('a/../../b')).toThrow('must be relative and inside the source');
    expect(() => safeSubdir('/etc')).toThrow();
  });
});

describe('test-bed pulumi-language-nodejs', () => {
  it('reads the CLI\'s flags and engine address, nodeargs and config as the real host does', () => {
    expect(parseArgs(['--logtostderr', '-v=9', '--tracing', 'http://t', '127.0.0.1:4000'])).toEqual({
      flags: { logtostderr: 'true', v: '9', tracing: 'http://t' },
      positional: ['127.0.0.1:4000'],
    });
    expect(splitArgs(` --max-old-space-size=4096  --title "a b" 'c d' e\\ f`)).toEqual(['--max-old-space-size=4096', '--title', 'a b', 'c d', 'e f']);
    expect(() => splitArgs('"open')).toThrow(/unterminated/);
    expect(JSON.parse(configEnv([['proj:greeting', 'hi'], ['aws:config:region', 'x']]))).toEqual({ 'proj:config:greeting': 'hi', 'aws:config:region': 'x' });
    expect(() => configEnv([['nonamespace', 'v']])).toThrow(/configuration key/);
  });
});
