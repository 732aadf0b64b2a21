import { load } from 'js-yaml';
import { createHash } from 'node:crypto';
import { renderProgram } from '../src/program/render';
import { syncProgram } from '../src/program/sync';
import { LAST_APPLIED_ANNOTATION } from '../src/lib/k8s';
import type { Program, ProgramStatus } from '../../schemas/generated/types';
import { NOW } from './builders';
import { asChild } from './children';

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

/** An attachment as the cluster holds it after Metacontroller applied it: with its last-applied annotation. */
function asObserved(attachment: unknown) {
  const configMap = asChild(attachment, 'ConfigMap');
  return {
    ...configMap,
    metadata: {
      ...configMap.metadata,
      annotations: { ...configMap.metadata.annotations, [LAST_APPLIED_ANNOTATION]: JSON.stringify(configMap) },
    },
  };
}

describe('the Program hook', () => {
  it('attaches the rendered project and reports an upstream-shaped artifact', () => {
    const res = syncProgram({ object: program(full, 4) }, NOW);
    const rendered = renderProgram(program(full, 4));
    expect(res.attachments).toEqual([
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: {
          name: 'random-yaml-program',
          namespace: 'team-a',
          labels: { 'pulumi.com/program-name': 'random-yaml' },
          annotations: { 'pulumi.com/program-revision': '4', 'pulumi.com/program-digest': rendered.digest },
        },
        data: { 'Pulumi.yaml': rendered.yaml },
      },
    ]);
    expect(res.status.observedGeneration).toBe(4);
    expect(res.status.artifact).toEqual({
      path: 'programs/team-a/random-yaml/4',
      url: 'configmap://team-a/random-yaml-program/Pulumi.yaml',
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
    const first = syncProgram({ object: program(full, 4) }, NOW);
    const again = syncProgram({ object: program(full, 4, first.status) }, new Date('2026-11-22T12:00:00Z'));
    expect(JSON.stringify(again.status)).toBe(JSON.stringify(first.status));
  });

  it('reports an invalid Program and keeps its last good attachment', () => {
    const good = syncProgram({ object: program(full, 1) }, NOW);
    const observed = asObserved(good.attachments[0]);
    const bad = syncProgram(
      {
        object: program({ resources: { pet: { type: '' } } }, 2, good.status),
        attachments: { 'ConfigMap.v1': { 'team-a/random-yaml-program': observed } },
      },
      NOW,
    );
    expect(bad.status.artifact).toBeUndefined();
    expect(bad.status.conditions?.find((c) => c.type === 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'SpecInvalid',
    });
    expect(bad.status.conditions?.find((c) => c.type === 'Stalled')?.message).toMatch(/program\.resources\.pet\.type/);
    expect(bad.attachments).toEqual([good.attachments[0]]);
  });

  it('reports a Program nested deeper than 100 levels instead of failing, and keeps its attachment', () => {
    const good = syncProgram({ object: program(full, 1) }, NOW);
    const observed = asObserved(good.attachments[0]);
    let deep: unknown = 'x';
    for (let i = 0; i < 10_000; i++) deep = { d: deep };
    const bad = syncProgram(
      {
        object: program({ ...full, variables: { deep } }, 2, good.status),
        attachments: { 'ConfigMap.v1': { 'team-a/random-yaml-program': observed } },
      },
      NOW,
    );
    expect(bad.status.artifact).toBeUndefined();
    expect(bad.status.conditions?.find((c) => c.type === 'Stalled')).toMatchObject({
      status: 'True',
      reason: 'SpecInvalid',
    });
    expect(bad.status.conditions?.find((c) => c.type === 'Stalled')?.message).toMatch(
      /^program\.variables\.deep\.d\.d\.d\.d\.d… is nested more than 100 levels deep/,
    );
    expect(bad.attachments).toEqual([good.attachments[0]]);
  });
});
