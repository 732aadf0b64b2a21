/** The result annotation's outputs when an output is hostile: nested too deep, or named __proto__. */
import { fitOutputs, formatUpdateResult, maskOutputs, type UpdateResult } from './index';

describe('outputs a program may export', () => {
  it('nested too deep for JSON.stringify: left out, the others kept', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const result: UpdateResult = { state: 'succeeded', type: 'up', message: 'ok', outputs: { deep, url: 'u' } };
    const fitted = fitOutputs(result);
    expect(fitted).toMatchObject({ outputs: { url: 'u' }, outputsOmitted: true, outputsTotal: 2 });
    expect(JSON.parse(formatUpdateResult(result))).toMatchObject({ outputs: { url: 'u' } });
  });

  it('named __proto__: kept as an own member (an assignment would have set the prototype)', () => {
    const outputs = JSON.parse('{"__proto__":{"polluted":true},"b":"s"}') as Record<string, unknown>;
    const masked = maskOutputs(outputs, ['b']);
    expect(Object.keys(masked)).toEqual(['__proto__', 'b']);
    expect(JSON.stringify(masked)).toBe('{"__proto__":{"polluted":true},"b":"[secret]"}');
    expect((masked as { polluted?: unknown }).polluted).toBeUndefined();
    const big: UpdateResult = {
      state: 'succeeded',
      type: 'up',
      message: 'ok',
      outputs: { ...masked, pad: 'x'.repeat(70 * 1024) },
    };
    expect(Object.keys(fitOutputs(big).outputs ?? {})).toEqual(['__proto__', 'b']);
  });
});
