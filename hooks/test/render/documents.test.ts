import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDocuments } from '../../src/cli/documents';
import { readInputs } from '../../src/cli/inputs';
import { MAX_YAML_TEXT_BYTES, yamlBudget } from '../../src/lib/yaml';

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

describe('the YAML budgets', () => {
  const configMap = (data: string) => `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n${data}\n`;
  const refused = (text: string, why: string, budget = yamlBudget()) =>
    expect(() => parseDocuments({ name: 'in.yaml', text }, 'default', budget)).toThrow(`in.yaml: refused: ${why}`);

  it('charges what aliases to a string add, as they are read', () => {
    // 1 MiB of text once, then 20 aliases to it: 20 MiB more as JSON.
    const text = configMap(
      `data:\n  a: &big "${'x'.repeat(1024 * 1024)}"\n${Array.from({ length: 20 }, (_, i) => `  k${i}: *big`).join('\n')}`,
    );
    refused(text, 'its aliases expand to more than the 16777216 bytes allowed (an alias bomb?)');
    // Ten of them are within the budget, and read as the string itself.
    const ten = configMap(
      `data:\n  a: &big "${'x'.repeat(1024 * 1024)}"\n${Array.from({ length: 10 }, (_, i) => `  k${i}: *big`).join('\n')}`,
    );
    expect(parse(ten)[0]!.data).toMatchObject({ k9: 'x'.repeat(1024 * 1024) });
  });

  it('charges every repeat of a collection its size as JSON, each object measured once', () => {
    const levels = Array.from({ length: 30 }, (_, i) => `  l${i + 1}: &l${i + 1} [*l${i}, *l${i}]`).join('\n');
    refused(configMap(`x:\n  l0: &l0 ["lol"]\n${levels}`), 'document 1: its aliases expand to more than');
  });

  it('refuses an alias to a collection that holds it, and aliases nested past the depth it reads', () => {
    refused(configMap('x: &loop [1, *loop]'), 'document 1: an alias refers to a collection that holds it (a cycle)');
    refused(configMap('x: &m {self: *m}'), 'document 1: an alias refers to a collection that holds it (a cycle)');
    const chain = Array.from({ length: 1200 }, (_, i) => `  c${i + 1}: &c${i + 1} [*c${i}]`).join('\n');
    refused(
      configMap(`x:\n  c0: &c0 [1]\n${chain}`),
      'document 1: nested more than 1000 levels deep once its aliases are expanded',
    );
  });

  it('counts one budget across the texts read with it', () => {
    const budget = yamlBudget();
    const half = configMap(
      `data:\n  a: &big "${'x'.repeat(1024 * 1024)}"\n${Array.from({ length: 9 }, (_, i) => `  k${i}: *big`).join('\n')}`,
    );
    expect(parseDocuments({ name: 'in.yaml', text: half }, 'default', budget)).toHaveLength(1);
    refused(half, 'its aliases expand to more than', budget);
  });

  it('refuses a text larger than it reads, before parsing it', () => {
    refused(
      `# ${'x'.repeat(MAX_YAML_TEXT_BYTES)}`,
      `${MAX_YAML_TEXT_BYTES + 2} bytes is more than the ${MAX_YAML_TEXT_BYTES} bytes read in one text`,
    );
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
