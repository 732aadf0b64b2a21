import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dump } from 'js-yaml';
import { configFromEnv } from '../../src/config';
import type { KObject } from '../../src/lib/k8s';
import { refLookupKey } from '../../src/stack/source';
import { syncStack } from '../../src/stack/sync';
import type { Stack } from '../../../schemas/generated/types';
import { GIT_STACK, parseOutput, RENDER_ENV, runRender, SHA } from './run';
import { applyChildren } from '../builders';

const NOW = '2026-11-22T10:00:00Z';
const UID = '6d1c2b3a-0000-4000-8000-000000000001';
const REF = `https://git.example.test/infra.git#main=${SHA}`;
const dir = mkdtempSync(join(tmpdir(), 'render-observed-'));

const owner = { apiVersion: 'pulumi.com/v1', kind: 'Stack', name: 'infra', uid: UID, controller: true };

/**
 * The observed state after Metacontroller applied an answer: the children, owned, with the label
 * and last-applied annotation it writes (builders.applyChildren), and the Stack with its status.
 */
function observedAfter(answer: { children: KObject[]; status: unknown }, stack: KObject): KObject[] {
  const children = applyChildren([], answer.children).map((c) => ({
    ...c,
    metadata: { ...c.metadata, ownerReferences: [owner] },
  }));
  return [{ ...stack, metadata: { ...stack.metadata, uid: UID, generation: 1 }, status: answer.status }, ...children];
}

function writeObserved(name: string, objects: KObject[]): string {
  const file = join(dir, name);
  writeFileSync(file, dump({ apiVersion: 'v1', kind: 'List', items: objects }));
  return file;
}

describe('render with an observed state', () => {
  const first = runRender(['-o', 'json', '--now', NOW, '--ref', REF], GIT_STACK);
  const firstAnswer = parseOutput(first.stdout).stacks[0]!.response as unknown as {
    children: KObject[];
    status: unknown;
  };
  const stackDoc = {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name: 'infra', namespace: 'default' },
    spec: {
      stack: 'dev',
      projectRepo: 'https://git.example.test/infra.git',
      branch: 'main',
      gitAuth: { accessToken: { type: 'Secret', secret: { name: 'git-credentials', key: 'accessToken' } } },
      backend: 'file:///tmp',
    },
  };
  const secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'git-credentials', namespace: 'default' },
    data: { accessToken: Buffer.from('not-a-real-token').toString('base64') },
  };

  it('hands the Stack its owned children and observed status, as the sync hook receives them', () => {
    const observed = observedAfter(firstAnswer, stackDoc);
    // Another Stack's child is not this Stack's.
    const foreign: KObject = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'elsewhere', namespace: 'default', ownerReferences: [{ ...owner, name: 'other', uid: 'x' }] },
    };
    const file = writeObserved('observed.yaml', [...observed, foreign]);
    const run = runRender(['-o', 'json', '--now', NOW, '--ref', REF, '--observed', file], GIT_STACK);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);

    const byType: Record<string, Record<string, KObject>> = {};
    for (const child of observed.slice(1)) {
      const type = `${child.kind}.${child.apiVersion}`;
      (byType[type] ??= {})[`default/${child.metadata.name}`] = child;
    }
    const expected = syncStack(
      {
        parent: observed[0] as unknown as Stack,
        children: byType,
        related: { 'Secret.v1': { 'default/git-credentials': secret } },
      },
      {
        config: configFromEnv(RENDER_ENV, () => ''),
        now: new Date(NOW),
        lookups: new Map([[refLookupKey('https://git.example.test/infra.git', 'main'), { sha: SHA }]]),
      },
    );
    expect(parseOutput(run.stdout).stacks[0]!.response).toEqual(JSON.parse(JSON.stringify(expected)));
  });

  it('counts a changed spec as a new generation, as the API server would', () => {
    const file = writeObserved('observed-gen.yaml', observedAfter(firstAnswer, stackDoc));
    const same = parseOutput(
      runRender(['-o', 'json', '--now', NOW, '--ref', REF, '--observed', file], GIT_STACK).stdout,
    );
    expect(same.stacks[0]!.response.status.observedGeneration).toBe(1);
    const changed = GIT_STACK.replace('stack: dev', 'stack: prod');
    const next = parseOutput(runRender(['-o', 'json', '--now', NOW, '--ref', REF, '--observed', file], changed).stdout);
    expect(next.stacks[0]!.response.status.observedGeneration).toBe(2);
  });

  it('keeps the observed children of a Stack the hooks find invalid, as they were applied', () => {
    const file = writeObserved('observed-invalid.yaml', observedAfter(firstAnswer, stackDoc));
    const invalid = GIT_STACK.replace('backend: file:///tmp', 'backend: file:///tmp\n  refresh: "yes please"');
    const run = runRender(['-o', 'json', '--now', NOW, '--ref', REF, '--observed', file], invalid);
    expect(run.code).toBe(1);
    const kept = parseOutput(run.stdout).stacks[0]!.response.children as KObject[];
    const names = (objects: KObject[]) => objects.map((o) => `${o.kind} ${o.metadata.name}`).sort();
    expect(firstAnswer.children.length).toBeGreaterThan(0);
    expect(names(kept)).toEqual(names(firstAnswer.children));
    // Without the observed state there is nothing to keep.
    expect(parseOutput(runRender(['-o', 'json', '--ref', REF], invalid).stdout).stacks[0]!.response.children).toEqual(
      [],
    );
  });

  it('refuses, as the hooks would (409), to keep an observed child it cannot verify as theirs', () => {
    // The Workspace as if someone else had written it: no last-applied copy the status's digest verifies.
    const observed = observedAfter(firstAnswer, stackDoc).map((o) =>
      o.kind === 'Workspace' ? { ...o, metadata: { ...o.metadata, annotations: {} } } : o,
    );
    const file = writeObserved('observed-forged.yaml', observed);
    const invalid = GIT_STACK.replace('backend: file:///tmp', 'backend: file:///tmp\n  refresh: "yes please"');
    const run = runRender(['-o', 'json', '--now', NOW, '--ref', REF, '--observed', file], invalid);
    expect(run.code).toBe(3);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('Stack default/infra: the hooks would refuse the request (HTTP 409)');
    expect(run.stderr).toContain('Workspace infra in namespace default');
  });
});
