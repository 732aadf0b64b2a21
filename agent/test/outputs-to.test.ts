/**
 * The runner's part of spec.outputsTo against an in-memory stand-in for the API server's Secrets and
 * ConfigMaps (the real calls run in e2e/stack-outputs-target.e2e.ts): what is written and under
 * which keys, what is left out, an object that is not the Stack's left untouched, the object of an
 * earlier up deleted, and no value in what the runner prints.
 */
import { OutputsToKeys, type OutputsToKind, type OutputsToRequest, type UpdateResult } from '../../contract';
import type { OutputValue } from '../src/api';
import {
  selectOutputs,
  withOutputsTo,
  writeOutputsTo,
  type DataObject,
  type OutputsToApi,
} from '../src/update/outputs-to';

const STACK = { name: 'app', uid: 'uid-app' };
const SECRET_VALUE = 'hunter2-never-printed';

const outputs: Record<string, OutputValue> = {
  url: { value: 'https://app.example', secret: false },
  replicas: { value: 3, secret: false },
  tags: { value: { env: 'dev', zones: ['a', 'b'] }, secret: false },
  password: { value: SECRET_VALUE, secret: true },
  'db:url': { value: 'postgres://db', secret: false },
};

/** Secrets and ConfigMaps by kind and name, with a counter for uids and resourceVersions. */
class FakeApi implements OutputsToApi {
  readonly objects = new Map<string, DataObject>();
  readonly calls: string[] = [];
  private counter = 0;
  /** Something else writes the object right after the runner read it, this many times. */
  interleave = 0;

  put(kind: OutputsToKind, o: DataObject): void {
    this.counter++;
    o.metadata = { ...o.metadata, uid: o.metadata.uid ?? `uid-${this.counter}`, resourceVersion: String(this.counter) };
    this.objects.set(`${kind}/${o.metadata.name}`, structuredClone(o));
  }

  get(kind: OutputsToKind, name: string): DataObject | undefined {
    return this.objects.get(`${kind}/${name}`);
  }

  read(kind: OutputsToKind, name: string): Promise<DataObject | undefined> {
    this.calls.push(`read ${kind}/${name}`);
    const o = this.get(kind, name);
    if (o && this.interleave > 0) {
      this.interleave--;
      const copy = structuredClone(o);
      this.put(kind, o); // a new resourceVersion: the read copy is stale
      return Promise.resolve(copy);
    }
    return Promise.resolve(o && structuredClone(o));
  }

  create(kind: OutputsToKind, body: DataObject): Promise<boolean> {
    this.calls.push(`create ${kind}/${body.metadata.name}`);
    if (this.get(kind, body.metadata.name ?? '')) return Promise.resolve(false);
    this.put(kind, body);
    return Promise.resolve(true);
  }

  replace(kind: OutputsToKind, body: DataObject): Promise<boolean> {
    this.calls.push(`replace ${kind}/${body.metadata.name}`);
    const o = this.get(kind, body.metadata.name ?? '');
    if (!o || o.metadata.resourceVersion !== body.metadata.resourceVersion) return Promise.resolve(false);
    this.put(kind, body);
    return Promise.resolve(true);
  }

  remove(kind: OutputsToKind, name: string, uid: string): Promise<void> {
    this.calls.push(`delete ${kind}/${name}`);
    if (this.get(kind, name)?.metadata.uid === uid) this.objects.delete(`${kind}/${name}`);
    return Promise.resolve();
  }
}

const decode = (data: Record<string, string> | undefined) =>
  Object.fromEntries(Object.entries(data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));

/** Runs `fn`, returning what it printed on stdout and stderr along with its value. */
async function printed<T>(fn: () => Promise<T>): Promise<{ value: T; text: string }> {
  const lines: string[] = [];
  const out = jest.spyOn(process.stdout, 'write').mockImplementation((s) => (lines.push(String(s)), true));
  const err = jest.spyOn(process.stderr, 'write').mockImplementation((s) => (lines.push(String(s)), true));
  try {
    return { value: await fn(), text: lines.join('') };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

const secretTarget = (extra: Partial<OutputsToRequest['target']> = {}): OutputsToRequest => ({
  stack: STACK,
  target: { kind: 'Secret', name: 'app-outputs', ...extra },
});

describe('which outputs go where', () => {
  it('all of them, each under its name: strings as they are, other values as JSON', () => {
    const s = selectOutputs({ kind: 'Secret', name: 'x' }, outputs);
    expect(Object.fromEntries(s.data)).toEqual({
      url: 'https://app.example',
      replicas: '3',
      tags: '{"env":"dev","zones":["a","b"]}',
      password: SECRET_VALUE,
    });
    // A name that is no key is left out, to be listed with a key.
    expect(s.skipped).toEqual({ secret: [], invalidKey: ['db:url'], missing: [] });
  });

  it('a list, renamed: a listed output the stack lacks is named as missing', () => {
    const s = selectOutputs(
      {
        kind: 'Secret',
        name: 'x',
        outputs: [{ name: 'db:url', key: 'DB_URL' }, { name: 'password', key: 'PASSWORD' }, { name: 'gone' }],
      },
      outputs,
    );
    expect(Object.fromEntries(s.data)).toEqual({ DB_URL: 'postgres://db', PASSWORD: SECRET_VALUE });
    expect(s.skipped.missing).toEqual(['gone']);
  });

  it('never a secret output into a ConfigMap', () => {
    const s = selectOutputs(
      { kind: 'ConfigMap', name: 'x', outputs: [{ name: 'password' }, { name: 'url' }] },
      outputs,
    );
    expect(Object.fromEntries(s.data)).toEqual({ url: 'https://app.example' });
    expect(s.skipped.secret).toEqual(['password']);
  });

  it('an output named like an inherited property is only itself', () => {
    const s = selectOutputs(
      { kind: 'Secret', name: 'x', outputs: [{ name: 'constructor' }, { name: 'toString' }] },
      {},
    );
    expect(s.data.size).toBe(0);
    expect(s.skipped.missing).toEqual(['constructor', 'toString']);
  });
});

describe('writing the object', () => {
  it('creates it owned by the Stack (no controller reference) and labelled, values in base64', async () => {
    const api = new FakeApi();
    const { value: report, text } = await printed(() => writeOutputsTo(api, secretTarget(), outputs, 'team-a'));
    expect(report).toEqual({
      kind: 'Secret',
      name: 'app-outputs',
      state: 'written',
      skipped: { invalidKey: ['db:url'], total: 1 },
    });
    const secret = api.get('Secret', 'app-outputs')!;
    expect(secret.metadata.ownerReferences).toEqual([
      { apiVersion: 'pulumi.com/v1', kind: 'Stack', name: 'app', uid: 'uid-app' },
    ]);
    expect(secret.metadata.labels).toEqual({ 'pulumi.com/stack-name': 'app', [OutputsToKeys.label]: 'app' });
    expect(secret.type).toBe('Opaque');
    expect(decode(secret.data).password).toBe(SECRET_VALUE);
    expect(text).toContain('outputs written to Secret app-outputs: 4 key(s), 1 output(s) left out');
    expect(text).not.toContain(SECRET_VALUE);
  });

  it('writes a ConfigMap in plain text', async () => {
    const api = new FakeApi();
    await writeOutputsTo(api, { stack: STACK, target: { kind: 'ConfigMap', name: 'cfg' } }, outputs, 'team-a');
    expect(api.get('ConfigMap', 'cfg')!.data).toEqual({
      url: 'https://app.example',
      replicas: '3',
      tags: '{"env":"dev","zones":["a","b"]}',
    });
  });

  it("replaces the Stack's object's data, keeping what others added to it", async () => {
    const api = new FakeApi();
    await writeOutputsTo(api, secretTarget(), outputs, 'team-a');
    const existing = api.get('Secret', 'app-outputs')!;
    existing.metadata.annotations = { 'example.com/note': 'kept' };
    existing.data = { ...existing.data, stale: Buffer.from('old').toString('base64') };
    api.put('Secret', existing);
    await writeOutputsTo(api, secretTarget({ outputs: [{ name: 'url' }] }), outputs, 'team-a');
    const after = api.get('Secret', 'app-outputs')!;
    expect(decode(after.data)).toEqual({ url: 'https://app.example' });
    expect(after.metadata.annotations).toEqual({ 'example.com/note': 'kept' });
    expect(after.metadata.uid).toBe(existing.metadata.uid);
  });

  it('reads again when the object changed under it', async () => {
    const api = new FakeApi();
    await writeOutputsTo(api, secretTarget(), outputs, 'team-a');
    api.interleave = 1;
    const report = await writeOutputsTo(api, secretTarget({ outputs: [{ name: 'url' }] }), outputs, 'team-a');
    expect(report?.state).toBe('written');
    expect(decode(api.get('Secret', 'app-outputs')!.data)).toEqual({ url: 'https://app.example' });
    // The first replace is refused (stale resourceVersion), the second, after a new read, accepted.
    expect(api.calls.filter((c) => c.startsWith('replace')).length).toBe(2);
  });

  it('gives up, failing, when it keeps changing', async () => {
    const api = new FakeApi();
    await writeOutputsTo(api, secretTarget(), outputs, 'team-a');
    api.interleave = 10;
    await expect(writeOutputsTo(api, secretTarget(), outputs, 'team-a')).rejects.toThrow(
      'Secret app-outputs kept changing while the outputs were written',
    );
  });

  const foreign: [string, DataObject][] = [
    ['no owner and no label', { metadata: { name: 'app-outputs' }, data: { mine: 'eA==' } }],
    [
      'the label but no owner reference',
      { metadata: { name: 'app-outputs', labels: { [OutputsToKeys.label]: 'app' } }, data: { mine: 'eA==' } },
    ],
    [
      "another Stack's",
      {
        metadata: {
          name: 'app-outputs',
          labels: { [OutputsToKeys.label]: 'app' },
          ownerReferences: [{ apiVersion: 'pulumi.com/v1', kind: 'Stack', name: 'app', uid: 'uid-of-an-older-app' }],
        },
        data: { mine: 'eA==' },
      },
    ],
  ];
  it.each(foreign)('leaves an object with %s untouched, and reports a conflict', async (_, object) => {
    const api = new FakeApi();
    api.put('Secret', object);
    const before = structuredClone(api.get('Secret', 'app-outputs'));
    const report = await writeOutputsTo(api, secretTarget(), outputs, 'team-a');
    expect(report).toEqual({ kind: 'Secret', name: 'app-outputs', state: 'conflict' });
    expect(api.get('Secret', 'app-outputs')).toEqual(before);
    expect(api.calls).toEqual(['read Secret/app-outputs']);
  });

  it('leaves a Secret and a ConfigMap of one name apart', async () => {
    const api = new FakeApi();
    api.put('ConfigMap', { metadata: { name: 'app-outputs' }, data: { theirs: 'x' } });
    const report = await writeOutputsTo(api, secretTarget(), outputs, 'team-a');
    expect(report?.state).toBe('written');
    expect(api.get('ConfigMap', 'app-outputs')!.data).toEqual({ theirs: 'x' });
  });
});

describe('the object of an earlier up', () => {
  it('is deleted once the outputs are elsewhere, if it is still the Stack’s', async () => {
    const api = new FakeApi();
    await writeOutputsTo(api, secretTarget(), outputs, 'team-a');
    const moved: OutputsToRequest = {
      stack: STACK,
      target: { kind: 'ConfigMap', name: 'app-outputs' },
      previous: { kind: 'Secret', name: 'app-outputs' },
    };
    await writeOutputsTo(api, moved, outputs, 'team-a');
    expect(api.get('Secret', 'app-outputs')).toBeUndefined();
    expect(api.get('ConfigMap', 'app-outputs')).toBeDefined();
  });

  it('is deleted when the field was removed, with nothing written', async () => {
    const api = new FakeApi();
    await writeOutputsTo(api, secretTarget(), outputs, 'team-a');
    const report = await writeOutputsTo(
      api,
      { stack: STACK, previous: { kind: 'Secret', name: 'app-outputs' } },
      outputs,
      'team-a',
    );
    expect(report).toBeUndefined();
    expect(api.objects.size).toBe(0);
  });

  it('is left alone when it is not the Stack’s any more, or gone', async () => {
    const api = new FakeApi();
    api.put('Secret', { metadata: { name: 'old' }, data: {} });
    await writeOutputsTo(api, { stack: STACK, previous: { kind: 'Secret', name: 'old' } }, outputs, 'team-a');
    await writeOutputsTo(api, { stack: STACK, previous: { kind: 'Secret', name: 'never-was' } }, outputs, 'team-a');
    expect(api.get('Secret', 'old')).toBeDefined();
    expect(api.calls.filter((c) => c.startsWith('delete'))).toEqual([]);
  });

  it('is deleted even when the new object is in conflict', async () => {
    const api = new FakeApi();
    await writeOutputsTo(api, secretTarget(), outputs, 'team-a');
    api.put('Secret', { metadata: { name: 'taken' }, data: {} });
    const report = await writeOutputsTo(
      api,
      { stack: STACK, target: { kind: 'Secret', name: 'taken' }, previous: { kind: 'Secret', name: 'app-outputs' } },
      outputs,
      'team-a',
    );
    expect(report?.state).toBe('conflict');
    expect(api.get('Secret', 'app-outputs')).toBeUndefined();
  });
});

describe('the result of the up', () => {
  const result: UpdateResult = { state: 'succeeded', type: 'up', message: 'ok', outputs: { url: 'u' } };
  // Never used: each case ends before any API call.
  const kube = (env: NodeJS.ProcessEnv) => ({ kubeConfig: {} as never, namespace: 'team-a', env });

  it('is unchanged without a request', async () => {
    expect(await withOutputsTo(result, outputs, kube({}))).toBe(result);
  });

  it('fails, without outputs, when the request is malformed', async () => {
    const failed = await withOutputsTo(result, outputs, kube({ [OutputsToKeys.env]: '{"stack":' }));
    expect(failed).toMatchObject({ state: 'failed', reason: 'UpdateFailed' });
    expect(failed.message).toBe(
      'the up succeeded, but its outputs could not be written to spec.outputsTo: PULUMI_OUTPUTS_TO is not JSON',
    );
    expect(failed.outputs).toBeUndefined();
  });
});
