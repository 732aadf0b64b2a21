import { load } from 'js-yaml';
import { createHash } from 'node:crypto';
import { renderProgram } from '../src/program/render';
import { syncProgram } from '../src/program/sync';
import { syncStack } from './controllers';
import type { KObject } from '../src/lib/k8s';
import type { Program, ProgramStatus } from '../../schemas/generated/types';
import { makeProgram, makeStack, NOW, syncRequest } from './builders';
import { ctx } from './stories';

/** A Program; its `program` is any JSON, as the hook validates it itself. */
function program(spec: Record<string, unknown>, generation = 1, status?: ProgramStatus): Program {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name: 'random-yaml', namespace: 'team-a', generation },
    program: spec,
    ...(status ? { status } : {}),
  };
}
const full = {
  configuration: { size: { type: 'Number', default: 3 } },
  resources: { pet: { type: 'random:RandomPet', properties: { length: '${size}' }, options: { protect: false } } },
  variables: { greeting: 'hello' },
  outputs: { name: '${pet.id}' },
  packages: { random: 'pulumi/random@4.16.0' },
};

describe('rendering a Program', () => {
  it('produces a Pulumi YAML project named after the Program', () => {
    const r = renderProgram(program(full));
    expect(load(r.yaml)).toEqual({ name: 'random-yaml', runtime: 'yaml', ...full });
    expect(r.digest).toBe('sha256:' + createHash('sha256').update(r.yaml).digest('hex'));
    expect(r.size).toBe(Buffer.byteLength(r.yaml));
  });

  it('gives the same bytes whatever order the maps arrive in', () => {
    const reordered = {
      outputs: full.outputs,
      packages: full.packages,
      resources: full.resources,
      variables: full.variables,
      configuration: full.configuration,
    };
    expect(renderProgram(program(reordered)).digest).toBe(renderProgram(program(full)).digest);
    expect(renderProgram(program({ ...full, variables: { greeting: 'hi' } })).digest).not.toBe(
      renderProgram(program(full)).digest,
    );
  });
});

const SERVER = 'https://pulumi-mc-hooks.pulumi-system.svc';

describe('the Program hook', () => {
  it('reports an upstream-shaped artifact served by the hook server, and attaches nothing', () => {
    const res = syncProgram({ object: program(full, 4) }, NOW, SERVER);
    const rendered = renderProgram(program(full, 4));
    expect(res.attachments).toEqual([]);
    expect(res.status.observedGeneration).toBe(4);
    expect(res.status.artifact).toEqual({
      path: 'programs/team-a/random-yaml/4',
      url: 'https://pulumi-mc-hooks.pulumi-system.svc/programs/team-a/random-yaml',
      revision: '4',
      digest: rendered.digest,
      size: rendered.size,
      lastUpdateTime: '2026-11-22T10:00:00Z',
    });
    expect(res.status.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'True',
      reason: 'ProcessingCompleted',
    });
  });

  it('keeps lastUpdateTime while the artifact is unchanged (no status hot loop)', () => {
    const first = syncProgram({ object: program(full, 4) }, NOW, SERVER);
    const again = syncProgram({ object: program(full, 4, first.status) }, new Date('2026-11-22T12:00:00Z'), SERVER);
    expect(JSON.stringify(again.status)).toBe(JSON.stringify(first.status));
  });

  it('reports an invalid Program, without an artifact', () => {
    const good = syncProgram({ object: program(full, 1) }, NOW, SERVER);
    const bad = syncProgram({ object: program({ resources: { pet: { type: '' } } }, 2, good.status) }, NOW, SERVER);
    expect(bad.status.artifact).toBeUndefined();
    expect(bad.status.conditions?.find((c) => c.type === 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'SpecInvalid',
    });
    expect(bad.status.conditions?.find((c) => c.type === 'Stalled')?.message).toMatch(/program\.resources\.pet\.type/);
    expect(bad.attachments).toEqual([]);
  });

  it('reports a Program nested deeper than 100 levels instead of failing', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 10_000; i++) deep = { d: deep };
    const bad = syncProgram({ object: program({ ...full, variables: { deep } }, 2) }, NOW, SERVER);
    expect(bad.status.artifact).toBeUndefined();
    expect(bad.status.conditions?.find((c) => c.type === 'Stalled')?.message).toMatch(
      /^program\.variables\.deep\.d\.d\.d\.d\.d… is nested more than 100 levels deep/,
    );
  });

  it('has an artifact whatever its size up to what the API server stores (no ConfigMap, no 256 KiB cap)', () => {
    const big = syncProgram({ object: program({ ...full, variables: { blob: 'x<'.repeat(700_000) } }) }, NOW, SERVER);
    expect(big.status.artifact?.size).toBeGreaterThan(1024 * 1024);
    expect(big.status.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
    expect(big.attachments).toEqual([]);
  });

  it('is Stalled without an artifact while the hook server does not serve Programs, and so are its Stacks', () => {
    const off = syncProgram({ object: program(full, 2) }, NOW, undefined);
    expect(off.status.artifact).toBeUndefined();
    expect(off.status.conditions?.find((c) => c.type === 'Stalled')).toMatchObject({
      reason: 'ProgramServerNotConfigured',
      message: expect.stringContaining('PROGRAM_SERVER_URL') as string,
    });
    const related = { ...makeProgram('random-yaml', 2), status: off.status } as KObject;
    const res = syncStack(syncRequest(makeStack({ programRef: { name: 'random-yaml' } }), [], [related]), ctx());
    const stalled = res.status.conditions?.find((c) => c.type === 'Stalled');
    expect(stalled?.reason).toBe('SourceUnavailable');
    expect(stalled?.message).toMatch(
      /^Program team-a\/random-yaml has no artifact: the hook server does not serve Programs/,
    );
  });
});
