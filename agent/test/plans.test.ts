import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { PLAN_NOT_FOUND } from '../../contract';
import { parseOperationRequest } from '../src/api';
import { operationArgs } from '../src/serve/operation';
import { planArgs, planFile, preparePlan } from '../src/serve/plans';

describe('update plans in the workspace', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-plans-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('a preview saves its plan, an up applies one, each under the id in the plan directory', () => {
    const preview = operationArgs({ type: 'preview', stack: 's', savePlan: 'a-preview-1' }, 'dev', '/e', 0, dir);
    expect(preview).toEqual(expect.arrayContaining(['--save-plan', path.join(dir, 'a-preview-1.json')]));
    const up = operationArgs({ type: 'up', stack: 's', plan: 'a-preview-1' }, 'dev', '/e', 0, dir);
    expect(up).toEqual(expect.arrayContaining(['--plan', path.join(dir, 'a-preview-1.json')]));
    expect(planArgs({ type: 'up', stack: 's' }, dir)).toEqual([]);
    expect(planArgs({ type: 'refresh', stack: 's', plan: 'x' }, dir)).toEqual([]);
  });

  it('never makes a path of an id that is not a DNS label', () => {
    for (const bad of ['../etc/passwd', 'A', '', 'a/b', '-a', 'a'.repeat(64)])
      expect(planFile(bad, dir)).toBeUndefined();
    expect(() => parseOperationRequest({ type: 'up', stack: 's', plan: '../x' })).toThrow(/plan id/);
    expect(() => parseOperationRequest({ type: 'up', stack: 's', savePlan: 'x' })).toThrow(/preview operations only/);
    expect(() => parseOperationRequest({ type: 'preview', stack: 's', plan: 'x' })).toThrow(/up operations only/);
    expect(parseOperationRequest({ type: 'up', stack: 's', plan: 'x-1' })).toEqual({
      type: 'up',
      stack: 's',
      plan: 'x-1',
    });
  });

  it('an up whose plan is gone fails PlanNotFound before anything runs', () => {
    expect(preparePlan({ type: 'preview', stack: 's', savePlan: 'p-1' }, dir)).toBeUndefined();
    expect(fs.statSync(dir).isDirectory()).toBe(true);
    expect(preparePlan({ type: 'up', stack: 's', plan: 'p-1' }, dir)).toMatchObject({ reason: PLAN_NOT_FOUND });
    fs.writeFileSync(path.join(dir, 'p-1.json'), '{}');
    expect(preparePlan({ type: 'up', stack: 's', plan: 'p-1' }, dir)).toBeUndefined();
  });
});
