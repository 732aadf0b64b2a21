import { load } from 'js-yaml';
import { createHash } from 'node:crypto';
import { renderProgram } from '../src/program/render';
import { syncProgram } from '../src/program/sync';
import { goJsonBytes, MAX_ANNOTATIONS_BYTES } from '../src/program/size';
import { syncStack } from './controllers';
import { LAST_APPLIED_ANNOTATION, type KObject } from '../src/lib/k8s';
import type { Program, ProgramStatus } from '../../schemas/generated/types';
import { makeProgram, makeStack, NOW, syncRequest } from './builders';
import { ctx } from './stories';

const DECORATOR_ANNOTATION = 'metacontroller.k8s.io/decorator-controller';
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

describe('a Program too large for its ConfigMap', () => {
  /** A Program whose one variable is `text`. */
  const sized = (text: string, generation = 2, status?: ProgramStatus) =>
    program({ ...full, variables: { blob: text } }, generation, status);
  /** The annotations of an attachment as Metacontroller's dynamic apply writes it (size.ts's model of it). */
  function annotationsOnceApplied(attachment: KObject): number {
    const annotated: KObject = {
      ...attachment,
      metadata: {
        ...attachment.metadata,
        annotations: { ...attachment.metadata.annotations, [DECORATOR_ANNOTATION]: 'pulumi-programs' },
      },
    };
    const all = { ...annotated.metadata.annotations, [LAST_APPLIED_ANNOTATION]: 'x'.repeat(goJsonBytes(annotated)) };
    return Object.entries(all).reduce((n, [k, v]) => n + Buffer.byteLength(k + v), 0);
  }
  const accepted = (text: string) => syncProgram({ object: sized(text) }, NOW).attachments.length === 1;

  it('is Stalled with the size, the limit and what to do, and keeps the last good ConfigMap', () => {
    const good = syncProgram({ object: program(full, 1) }, NOW);
    const res = syncProgram(
      {
        object: sized('x'.repeat(300_000), 2, good.status),
        attachments: { 'ConfigMap.v1': { 'team-a/random-yaml-program': asObserved(good.attachments[0]) } },
      },
      NOW,
    );
    expect(res.status.artifact).toBeUndefined();
    const stalled = res.status.conditions?.find((c) => c.type === 'Stalled');
    expect(stalled).toMatchObject({ status: 'True', reason: 'ProgramTooLarge' });
    expect(stalled?.message).toMatch(/^Program team-a\/random-yaml renders to a Pulumi.yaml of 294 KiB \(\d+ bytes\)/);
    expect(stalled?.message).toContain('262144 bytes (256 KiB) of annotations');
    expect(stalled?.message).toContain('spec.projectRepo');
    expect(res.status.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
    expect(res.attachments).toEqual([good.attachments[0]]);
  });

  it('attaches nothing when it never had a ConfigMap', () => {
    expect(syncProgram({ object: sized('x'.repeat(300_000)) }, NOW).attachments).toEqual([]);
  });

  it('is told apart by what its copy takes as Go writes JSON, where <, > and & take 6 bytes', () => {
    expect(accepted('x'.repeat(200_000))).toBe(true);
    expect(accepted('<'.repeat(200_000))).toBe(false);
    expect(goJsonBytes({ a: '<&>\u2028' })).toBe(Buffer.byteLength(JSON.stringify({ a: '<&>\u2028' })) + 18);
  });

  it('is accepted up to just under the annotation limit, and its ConfigMap then fits', () => {
    // The longest variable accepted, by bisection, for text with characters Go escapes.
    const text = (n: number) => 'ab<'.repeat(Math.ceil(n / 3)).slice(0, n);
    let [lo, hi] = [0, 300_000];
    while (hi - lo > 1) {
      const mid = Math.floor((lo + hi) / 2);
      if (accepted(text(mid))) lo = mid;
      else hi = mid;
    }
    const largest = syncProgram({ object: sized(text(lo)) }, NOW).attachments[0]!;
    const bytes = annotationsOnceApplied(largest);
    expect(bytes).toBeLessThanOrEqual(MAX_ANNOTATIONS_BYTES);
    // The margin for what Metacontroller adds is small.
    expect(bytes).toBeGreaterThan(MAX_ANNOTATIONS_BYTES - 1024);
  });

  it('stalls the Stacks that use it, with its message', () => {
    const big = syncProgram({ object: sized('x'.repeat(300_000)) }, NOW);
    const related = { ...makeProgram('random-yaml', 2), status: big.status } as KObject;
    const stack = makeStack({ programRef: { name: 'random-yaml' } });
    const res = syncStack(syncRequest(stack, [], [related]), ctx());
    const stalled = res.status.conditions?.find((c) => c.type === 'Stalled');
    expect(stalled?.reason).toBe('SourceUnavailable');
    expect(stalled?.message).toMatch(
      /^Program team-a\/random-yaml has no artifact: Program team-a\/random-yaml renders/,
    );
    expect(stalled?.message).toContain('262144 bytes');
  });
});
