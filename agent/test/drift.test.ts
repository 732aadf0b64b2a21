import { parseOperationRequest } from '../src/api';
import { DriftCollector } from '../src/serve/drift';
import { operationArgs } from '../src/serve/operation';
import { toUpdateResult } from '../src/update/main';
import { parseUpdateResult } from '../../contract';

const CM = 'urn:pulumi:dev::site::kubernetes:core/v1:ConfigMap::site';
const FILE = 'urn:pulumi:dev::site::command:local:Command::file';
const STACK = 'urn:pulumi:dev::site::pulumi:pulumi:Stack::site-dev';
const PROVIDER = 'urn:pulumi:dev::site::pulumi:providers:kubernetes::default';

const step = (key: 'resourcePreEvent' | 'resOutputsEvent', metadata: Record<string, unknown>) => ({
  [key]: { metadata, planning: true },
});

describe('drift checks in the agent', () => {
  it('a previewOnly refresh runs `pulumi refresh --preview-only` (no --yes, no --skip-preview)', () => {
    const args = operationArgs({ type: 'refresh', stack: 's', previewOnly: true }, 'dev', '/e', 0);
    expect(args.slice(0, 3)).toEqual(['refresh', '--preview-only', '--suppress-progress']);
    expect(args).not.toContain('--yes');
    expect(operationArgs({ type: 'refresh', stack: 's' }, 'dev', '/e', 0).slice(0, 2)).toEqual(['refresh', '--yes']);
  });

  it('previewOnly is a boolean of the operation request', () => {
    expect(parseOperationRequest({ type: 'refresh', stack: 's', previewOnly: true }).previewOnly).toBe(true);
    expect(() => parseOperationRequest({ type: 'refresh', stack: 's', previewOnly: 'yes' })).toThrow(
      '"previewOnly" must be a boolean',
    );
  });

  it('counts resources whose refresh has diffs, is an update or delete, or whose outputs changed', () => {
    const c = new DriftCollector();
    c.add(step('resourcePreEvent', { op: 'refresh', urn: CM, type: 'kubernetes:core/v1:ConfigMap' }));
    c.add(
      step('resOutputsEvent', {
        op: 'refresh',
        urn: CM,
        type: 'kubernetes:core/v1:ConfigMap',
        old: { outputs: { data: { a: '1' } } },
        new: { outputs: { data: { a: '2' } } },
      }),
    );
    c.add(
      step('resOutputsEvent', {
        op: 'refresh',
        urn: 'urn:same',
        type: 't:m:T',
        old: { outputs: { x: 1, y: 2 } },
        new: { outputs: { y: 2, x: 1 } },
      }),
    );
    c.add(step('resOutputsEvent', { op: 'refresh', urn: FILE, type: 'command:local:Command', diffs: ['stdout'] }));
    c.add(step('resOutputsEvent', { op: 'delete', urn: 'urn:gone', type: 't:m:T' }));
    c.add(step('resOutputsEvent', { op: 'same', urn: 'urn:fine', type: 't:m:T' }));
    c.add(step('resOutputsEvent', { op: 'refresh', urn: STACK, type: 'pulumi:pulumi:Stack', diffs: ['outputs'] }));
    c.add(step('resOutputsEvent', { op: 'update', urn: PROVIDER, type: 'pulumi:providers:kubernetes' }));
    expect(c.result()).toEqual({ changedResources: 3, changedUrns: [CM, FILE, 'urn:gone'] });
  });

  it('a resource gone from the provider counts; a pre event without the new state does not', () => {
    const c = new DriftCollector();
    c.add(step('resourcePreEvent', { op: 'refresh', urn: CM, type: 'k:c:C', old: { outputs: { a: 1 } } }));
    expect(c.result().changedResources).toBe(0);
    c.add(step('resOutputsEvent', { op: 'refresh', urn: CM, type: 'k:c:C', old: { outputs: { a: 1 } } }));
    expect(c.result()).toEqual({ changedResources: 1, changedUrns: [CM] });
  });

  it("takes the summary's count when it saw more than the steps, and names at most 20 URNs", () => {
    const c = new DriftCollector();
    for (let i = 0; i < 25; i++) c.add(step('resOutputsEvent', { op: 'update', urn: `urn:${i}`, type: 't:m:T' }));
    c.add({ summaryEvent: { resourceChanges: { update: 27, delete: 3, same: 10 } } });
    const r = c.result();
    expect(r.changedResources).toBe(30);
    expect(r.changedUrns).toHaveLength(20);
  });

  it('ignores events that are not steps, or malformed ones', () => {
    const c = new DriftCollector();
    for (const e of [
      {},
      { resOutputsEvent: 3 },
      { resOutputsEvent: { metadata: { op: 'update' } } },
      { diagnosticEvent: {} },
    ])
      c.add(e);
    expect(c.result()).toEqual({ changedResources: 0, changedUrns: [] });
  });

  it('the result on the Job carries the count and URNs, and reads back', () => {
    const u = toUpdateResult(
      { type: 'refresh', stack: 'dev', previewOnly: true },
      {
        id: 'x',
        type: 'refresh',
        state: 'succeeded',
        message: 'refresh succeeded (1 to update)',
        startTime: 's',
        endTime: 'e',
        changedResources: 1,
        changedUrns: [CM],
      },
    );
    expect(u).toMatchObject({ changedResources: 1, changedUrns: [CM] });
    expect(parseUpdateResult(JSON.stringify(u))).toMatchObject({ changedResources: 1, changedUrns: [CM] });
    expect(parseUpdateResult(JSON.stringify({ ...u, changedResources: -1, changedUrns: [1, CM] }))).toMatchObject({
      changedUrns: [CM],
    });
    expect(parseUpdateResult(JSON.stringify({ ...u, changedResources: -1 }))?.changedResources).toBeUndefined();
  });
});
