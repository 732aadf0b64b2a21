/** The wire formats of spec.outputsTo between hooks and runner: the request, the report, keys and values. */
import {
  formatUpdateResult,
  isDataKey,
  isObjectName,
  MAX_REPORTED_NAMES,
  outputText,
  parseOutputsToReport,
  parseOutputsToRequest,
  parseUpdateResult,
  type UpdateResult,
} from './index';

describe('an OutputsToRequest', () => {
  const stack = { name: 'app', uid: 'u-1' };

  it('round-trips', () => {
    const request = {
      stack,
      target: { kind: 'ConfigMap', name: 'app.cfg', outputs: [{ name: 'db:url', key: 'DB_URL' }, { name: 'x' }] },
      previous: { kind: 'Secret', name: 'old' },
    };
    expect(parseOutputsToRequest(JSON.stringify(request))).toEqual(request);
    expect(parseOutputsToRequest(JSON.stringify({ stack, previous: { kind: 'Secret', name: 'old' } }))).toEqual({
      stack,
      previous: { kind: 'Secret', name: 'old' },
    });
  });

  it.each([
    ['[]', 'must be a JSON object'],
    [JSON.stringify({ stack: { name: 'app', uid: '' }, target: { kind: 'Secret', name: 'x' } }), 'stack must name'],
    [JSON.stringify({ stack }), 'names neither a target nor a previous object'],
    [JSON.stringify({ stack, target: { kind: 'Secret', name: '-x' } }), 'target.name must be'],
    [JSON.stringify({ stack, target: { kind: 'Secret', name: 'x', outputs: {} } }), 'target.outputs must be a list'],
    [JSON.stringify({ stack, target: { kind: 'Secret', name: 'x', outputs: [{ name: 'a', key: '..' }] } }), 'key'],
    [JSON.stringify({ stack, previous: { kind: 'toString', name: 'x' } }), 'previous.kind must be'],
  ])('refuses %s', (raw, problem) => {
    const parsed = parseOutputsToRequest(raw);
    expect(typeof parsed).toBe('string');
    expect(parsed).toContain(problem);
  });
});

describe('an OutputsToReport', () => {
  it('travels in a result, lists cut to a bounded size', () => {
    const many = Array.from({ length: 50 }, (_, i) => `secret-${i}`);
    const result: UpdateResult = {
      state: 'succeeded',
      type: 'up',
      message: 'ok',
      outputsTo: { kind: 'ConfigMap', name: 'cfg', state: 'written', skipped: { secret: many, total: 50 } },
    };
    const parsed = parseUpdateResult(formatUpdateResult(result));
    expect(parsed?.outputsTo?.skipped?.secret).toEqual(many.slice(0, MAX_REPORTED_NAMES));
    expect(parsed?.outputsTo?.skipped?.total).toBe(50);
  });

  it.each([
    [{ kind: 'Secret', name: 'x', state: 'maybe' }],
    [{ kind: 'Pod', name: 'x', state: 'written' }],
    ['written'],
  ])('is nothing when malformed: %j', (v) => {
    expect(parseOutputsToReport(v)).toBeUndefined();
  });
});

describe('keys, names and values', () => {
  it.each(['url', 'DB_URL', 'a.b-c_d', '.hidden', '__proto__'])('%s is a key', (k) => expect(isDataKey(k)).toBe(true));
  it.each(['', '.', '..', '..x', 'a/b', 'a b', 'db:url', 'k'.repeat(254)])('%j is no key', (k) =>
    expect(isDataKey(k)).toBe(false),
  );
  it('names objects as Kubernetes does', () => {
    expect(isObjectName('app-outputs.v1')).toBe(true);
    expect(['App', '-a', 'a_b', ''].map(isObjectName)).toEqual([false, false, false, false]);
  });
  it('writes strings as they are and anything else as JSON', () => {
    expect([outputText('s'), outputText(3), outputText(true), outputText(null), outputText({ a: [1] })]).toEqual([
      's',
      '3',
      'true',
      'null',
      '{"a":[1]}',
    ]);
  });
});
