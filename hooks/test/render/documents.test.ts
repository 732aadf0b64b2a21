import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDocuments } from '../../src/cli/documents';
import { readInputs } from '../../src/cli/inputs';

const parse = (text: string, namespace = 'default') => parseDocuments({ name: 'in.yaml', text }, namespace);

describe('reading manifests', () => {
  it('gives namespaced objects the namespace kubectl apply would, and leaves Namespaces without one', () => {
    const objects = parse(
      'apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b, namespace: x}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n',
      'team',
    );
    expect(objects.map((o) => o.metadata.namespace)).toEqual(['team', 'x', undefined]);
  });

  it('skips empty documents and expands a List into its items', () => {
    const objects = parse(
      '---\n---\napiVersion: v1\nkind: List\nmetadata: {resourceVersion: ""}\nitems:\n- {apiVersion: v1, kind: Secret, metadata: {name: a}}\n- {apiVersion: v1, kind: Secret, metadata: {name: b}}\n',
    );
    expect(objects.map((o) => o.metadata.name)).toEqual(['a', 'b']);
  });

  it('keeps times as strings and applies merge keys, as the API server stores the JSON', () => {
    const [secret] = parse(
      'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, creationTimestamp: 2026-01-01T00:00:00Z}\nx: &base {k: v}\ndata:\n  <<: *base\n  when: 2026-01-01\n',
    );
    expect(secret!.metadata.creationTimestamp).toBe('2026-01-01T00:00:00Z');
    expect(secret!.data).toEqual({ k: 'v', when: '2026-01-01' });
  });

  it('names the item of a List that is not an object', () => {
    expect(() => parse('apiVersion: v1\nkind: List\nitems: [3]\n')).toThrow('in.yaml: document 1, items[0]: expected');
  });
});

describe('reading paths', () => {
  it("reads a directory's manifests recursively, in name order, and nothing else", () => {
    const dir = mkdtempSync(join(tmpdir(), 'render-inputs-'));
    mkdirSync(join(dir, 'b'));
    writeFileSync(join(dir, 'b', 'stack.yaml'), 'b');
    writeFileSync(join(dir, 'a.yml'), 'a');
    writeFileSync(join(dir, 'c.json'), 'c');
    writeFileSync(join(dir, 'README.md'), 'no');
    const texts = readInputs([dir, '-'], () => 'stdin');
    expect(texts.map((t) => t.text)).toEqual(['a', 'b', 'c', 'stdin']);
    expect(texts[3]!.name).toBe('<stdin>');
  });
});
