/** Unit tests of agent/src/serve/stack-state.ts: secret stack outputs decrypted from the state (passphrase stacks). */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import {
  decryptV1,
  diyStateFile,
  onlySecretMarkers,
  PassphraseKeys,
  passphraseFromEnv,
  readStateFile,
  revealOutputs,
  SECRET_SIG,
  SIG_KEY,
  StackStateReader,
  type Deployment,
} from '../src/serve/stack-state';

// A real passphrase stack of Pulumi 3.248.0 (passphrase "bench"): its salt state (from
// Pulumi.dev.yaml / the checkpoint's secrets_providers) and two secret outputs of its checkpoint.
const SALT = 'v1:bwgWbEcRGdk=:v1:CoFdEnFeVq3x2hot:Ry+X2PzYB30W/QjKmKhe9IjvFdyTrA==';
const PASSPHRASE = 'bench';
const TOKEN_CIPHERTEXT = 'v1:2yok8uh1VrtHBgYt:SFN8V/aZi8RW0nwWT6idAK9fXAezaFize00uW51G';
const NESTED_CIPHERTEXT =
  'v1:pLMag/KfGvNM6C2o:iJ8lQKbFBXZimQiHry2XRWsluk1obdQhLMUActP0p6i35iJL+J1TAo/sCBlUdaE576/Z6X7F5Q==';
const URN = 'urn:pulumi:dev::exp::pulumi:pulumi:Stack::exp-dev';

const blinded = { [SIG_KEY]: SECRET_SIG, ciphertext: '[secret]' };
const encrypt = (key: Buffer, plaintext: string): string => {
  const nonce = crypto.randomBytes(12);
  const c = crypto.createCipheriv('aes-256-gcm', key, nonce);
  const sealed = Buffer.concat([c.update(plaintext, 'utf8'), c.final(), c.getAuthTag()]);
  return `v1:${nonce.toString('base64')}:${sealed.toString('base64')}`;
};
const secretOf = (key: Buffer, value: unknown) => ({
  [SIG_KEY]: SECRET_SIG,
  ciphertext: encrypt(key, JSON.stringify(value)),
});

let key: Buffer;
beforeAll(async () => {
  key = (await new PassphraseKeys().key(SALT, PASSPHRASE))!;
});

describe('Pulumi passphrase crypto', () => {
  it('derives the key of a real stack and decrypts its secrets as Pulumi wrote them', () => {
    expect(key).toHaveLength(32);
    expect(decryptV1(key, TOKEN_CIPHERTEXT)).toBe('"s3cr3t-value"');
    expect(JSON.parse(decryptV1(key, NESTED_CIPHERTEXT)!)).toEqual({ plain: 'hello', sec: 'n3sted-secret' });
  });

  it('refuses a wrong passphrase, a malformed state and tampered values', async () => {
    const keys = new PassphraseKeys();
    await expect(keys.key(SALT, 'not-the-passphrase')).resolves.toBeUndefined();
    await expect(keys.key('v2:bwgWbEcRGdk=:v1:x:y', PASSPHRASE)).resolves.toBeUndefined();
    await expect(keys.key('garbage', PASSPHRASE)).resolves.toBeUndefined();
    const [v, n, c] = TOKEN_CIPHERTEXT.split(':');
    const flipped = Buffer.from(c!, 'base64');
    flipped[0] = flipped[0]! ^ 1;
    expect(decryptV1(key, `${v}:${n}:${flipped.toString('base64')}`)).toBeUndefined();
    expect(decryptV1(key, 'v1:only-two')).toBeUndefined();
    expect(decryptV1(key, '[secret]')).toBeUndefined();
    expect(decryptV1(crypto.randomBytes(32), TOKEN_CIPHERTEXT)).toBeUndefined();
  });

  it('derives a key once per salt and passphrase', () => {
    const keys = new PassphraseKeys();
    expect(keys.key(SALT, 'x')).toBe(keys.key(SALT, 'x'));
    expect(keys.key(SALT, 'x')).not.toBe(keys.key(SALT, 'y'));
  });
});

describe('revealOutputs', () => {
  const since = new Date('2026-11-22T05:00:00Z');
  const deployment = (
    outputs: Record<string, unknown>,
    time = '2026-11-22T05:00:01.123456789Z',
    urn = URN,
  ): Deployment => ({
    manifest: { time },
    secrets_providers: { type: 'passphrase', state: { salt: SALT } },
    resources: [
      { urn, type: 'pulumi:pulumi:Stack', outputs },
      { urn: 'urn:pulumi:dev::exp::agenttest:index:Sleep::a', type: 'agenttest:index:Sleep', outputs: { x: 1 } },
    ],
  });

  it('replaces each blinded secret of the event by its plaintext, at any depth', () => {
    const state = {
      plain: 'hello',
      n: 3,
      token: { [SIG_KEY]: SECRET_SIG, ciphertext: TOKEN_CIPHERTEXT },
      whole: { [SIG_KEY]: SECRET_SIG, ciphertext: NESTED_CIPHERTEXT },
      obj: { a: [1, secretOf(key, { deep: true })], b: null },
    };
    const event = { plain: 'hello', n: 3, token: blinded, whole: blinded, obj: { a: [1, blinded], b: null } };
    expect(revealOutputs(event, URN, deployment(state), key, since)).toEqual({
      outputs: {
        plain: 'hello',
        n: 3,
        token: 's3cr3t-value',
        whole: { plain: 'hello', sec: 'n3sted-secret' },
        obj: { a: [1, { deep: true }], b: null },
      },
    });
  });

  it('refuses a state that is not exactly the one of the event, naming no value', () => {
    const good = { plain: 'visible-v4lue', token: { [SIG_KEY]: SECRET_SIG, ciphertext: TOKEN_CIPHERTEXT } };
    const event = { plain: 'visible-v4lue', token: blinded };
    const cases: Array<[Deployment, Record<string, unknown>]> = [
      [deployment(good, '2026-11-22T04:59:59.999Z'), event], // written before the operation
      [deployment(good, 'not a time'), event],
      [deployment(good, undefined, 'urn:pulumi:prod::exp::pulumi:pulumi:Stack::exp-prod'), event],
      [deployment({ ...good, plain: 'other-v4lue' }), event],
      [deployment({ ...good, extra: 1 }), event],
      [deployment({ plain: 'visible-v4lue' }), event],
      [deployment({ ...good, token: 's3cr3t-value' }), event], // a plain value where the event has a secret
      [deployment({ ...good, plain: { [SIG_KEY]: SECRET_SIG, ciphertext: TOKEN_CIPHERTEXT } }), event], // a secret where the event has none
      [
        deployment({ ...good, token: { [SIG_KEY]: SECRET_SIG, ciphertext: encrypt(crypto.randomBytes(32), '"x"') } }),
        event,
      ], // another key
      [deployment({ ...good, token: { [SIG_KEY]: SECRET_SIG, ciphertext: encrypt(key, 'not json s3cr3t') } }), event],
      [
        deployment({ ...good, token: secretOf(key, { [SIG_KEY]: 'c44067f5952c0a294b673a41bacd8c17', text: 'asset' }) }),
        event,
      ], // an asset inside
      [{ ...deployment(good), resources: [] }, event],
    ];
    for (const [d, e] of cases) {
      const r = revealOutputs(e, URN, d, key, new Date('2026-11-22T05:00:00Z'));
      expect(r).toHaveProperty('reason');
      expect(JSON.stringify(r)).not.toMatch(/s3cr3t|v4lue/);
    }
  });

  it('knows which events only hold secrets', () => {
    expect(onlySecretMarkers({ a: 1, b: [blinded], c: { d: blinded } })).toBe(true);
    expect(onlySecretMarkers({ a: { [SIG_KEY]: 'c44067f5952c0a294b673a41bacd8c17', text: 'x' } })).toBe(false);
  });
});

describe('the DIY backend state file', () => {
  let dir: string;
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-stack-state-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
  const put = (rel: string, content: string | Buffer, mtime?: number): string => {
    const p = path.join(dir, rel);
    fs.mkdirSync(path.dirname(p), { recursive: true });
    fs.writeFileSync(p, content);
    if (mtime !== undefined) fs.utimesSync(p, mtime, mtime);
    return p;
  };

  it('finds it as the CLI does: layout from meta.yaml, the newest of .json/.json.gz/.json.zst', () => {
    put('b/.pulumi/meta.yaml', 'version: 1\n');
    const json = put('b/.pulumi/stacks/proj/dev.json', '{}', 1000);
    expect(diyStateFile(`file://${dir}/b`, 'proj', 'dev', '/')).toBe(json);
    expect(diyStateFile(`file://${dir}/b?no_tmp_dir=true`, 'proj', 'organization/dev', '/')).toBe(json);
    expect(diyStateFile(`file://${dir}/b`, 'other', 'organization/proj/dev', '/')).toBe(json);
    expect(diyStateFile('file://b', 'proj', 'dev', dir)).toBe(json);
    expect(diyStateFile('file://~/b', 'proj', 'dev', '/', dir)).toBe(json);
    const gz = put('b/.pulumi/stacks/proj/dev.json.gz', '', 2000);
    expect(diyStateFile(`file://${dir}/b`, 'proj', 'dev', '/')).toBe(gz);
    const zst = put('b/.pulumi/stacks/proj/dev.json.zst', '', 3000);
    expect(diyStateFile(`file://${dir}/b`, 'proj', 'dev', '/')).toBe(zst);
    expect(readStateFile(zst)).toBeUndefined();
    expect(diyStateFile(`file://${dir}/b`, 'proj', 'acme/proj/dev', '/')).toBeUndefined();
    expect(diyStateFile(`file://${dir}/b`, undefined, 'dev', '/')).toBeUndefined();
    expect(diyStateFile(`s3://bucket`, 'proj', 'dev', '/')).toBeUndefined();
    expect(diyStateFile(`file://${dir}/nothing`, 'proj', 'dev', '/')).toBeUndefined();
  });

  it('reads the legacy layout, and plain and gzipped checkpoints', () => {
    put('l/.pulumi/meta.yaml', 'version: 0\n');
    const latest = { manifest: { time: 't' }, resources: [] };
    const file = put('l/.pulumi/stacks/dev.json', JSON.stringify({ version: 3, checkpoint: { stack: 'dev', latest } }));
    expect(diyStateFile(`file://${dir}/l`, 'proj', 'dev', '/')).toBe(file);
    expect(diyStateFile(`file://${dir}/l`, 'proj', 'organization/proj/dev', '/')).toBeUndefined();
    expect(readStateFile(file)).toEqual(latest);
    const gz = put('g.json.gz', zlib.gzipSync(JSON.stringify({ version: 3, checkpoint: { latest } })));
    expect(readStateFile(gz)).toEqual(latest);
    expect(readStateFile(put('bad.json', '{'))).toBeUndefined();
  });

  it('takes the passphrase as the CLI does', () => {
    put('pp', '  from-file\n');
    expect(passphraseFromEnv({ PULUMI_CONFIG_PASSPHRASE: '', PULUMI_CONFIG_PASSPHRASE_FILE: 'pp' }, dir)).toBe('');
    expect(passphraseFromEnv({ PULUMI_CONFIG_PASSPHRASE_FILE: 'pp' }, dir)).toBe('from-file');
    expect(passphraseFromEnv({ PULUMI_CONFIG_PASSPHRASE_FILE: 'missing' }, dir)).toBeUndefined();
    expect(passphraseFromEnv({}, dir)).toBeUndefined();
  });

  it('reads the outputs of a file:// stack without the CLI, and stops trying for another secrets provider', async () => {
    put('s/.pulumi/meta.yaml', 'version: 1\n');
    const checkpoint = (type: string) => ({
      version: 3,
      checkpoint: {
        stack: 'organization/exp/dev',
        latest: {
          manifest: { time: new Date(Date.now() + 1000).toISOString() },
          secrets_providers: { type, state: { salt: SALT } },
          resources: [
            {
              urn: URN,
              type: 'pulumi:pulumi:Stack',
              outputs: { plain: 1, token: { [SIG_KEY]: SECRET_SIG, ciphertext: TOKEN_CIPHERTEXT } },
            },
          ],
        },
      },
    });
    const file = put('s/.pulumi/stacks/exp/dev.json', JSON.stringify(checkpoint('passphrase')));
    // PULUMI_CLI points nowhere: a CLI call would fail the read.
    const env = {
      PULUMI_BACKEND_URL: `file://${dir}/s`,
      PULUMI_CONFIG_PASSPHRASE: PASSPHRASE,
      PULUMI_CLI: '/nonexistent/pulumi',
    };
    const req = {
      workDir: dir,
      stack: 'dev',
      project: 'exp',
      eventOutputs: { plain: 1, token: blinded },
      stackUrn: URN,
      since: new Date(),
    };
    const reader = new StackStateReader(env);
    await expect(reader.read(req)).resolves.toEqual({
      outputs: { plain: 1, token: 's3cr3t-value' },
      source: 'state file',
    });
    await expect(new StackStateReader({ ...env, PULUMI_CONFIG_PASSPHRASE: 'wrong' }).read(req)).resolves.toEqual({
      reason: 'the passphrase does not open the state',
    });
    await expect(new StackStateReader({ PULUMI_BACKEND_URL: env.PULUMI_BACKEND_URL }).read(req)).resolves.toEqual({
      reason: 'no passphrase in the environment',
    });
    fs.writeFileSync(file, JSON.stringify(checkpoint('awskms')));
    await expect(reader.read(req)).resolves.toEqual({
      reason: 'the stack does not use the passphrase secrets provider',
    });
    fs.writeFileSync(file, JSON.stringify(checkpoint('passphrase')));
    await expect(reader.read(req)).resolves.toEqual({
      reason: 'the stack does not use the passphrase secrets provider',
    });
    // Without a readable state file, `pulumi stack export` is asked (here it cannot run).
    fs.rmSync(file);
    await expect(new StackStateReader(env).read(req)).resolves.toEqual({ reason: 'pulumi stack export failed' });
  });
});
