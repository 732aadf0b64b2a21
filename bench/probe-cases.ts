/**
 * The hostile-input probe's requests: real request bodies (examples/hooks/*.json and the captured
 * steady-state sync) mutated with knowledge of their structure, and the classes of attack issue 34
 * found, sent on purpose (CLASSES): forged last-applied annotations on every kind of child,
 * far-future times, control characters, SSH keys asking for days of key derivation, bodies sent
 * slowly; and YAML alias bombs for `render`. Case `i` of seed `s` is built from a PRNG seeded with
 * (s, i) alone, so any case is rebuilt from the two numbers the report prints.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { MAX_SSH_KEY_ROUNDS } from '../contract';
import { LAST_APPLIED_ANNOTATION } from '../hooks/src/lib/k8s';
import { withKeyRounds } from '../hooks/test/ssh-git-server';

export interface ProbeCase {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  contentType: string | undefined;
  body: Buffer | undefined;
  /** What was done to the real body, for the report. */
  mutation: string;
  /**
   * Over the body limit: the server answers 413 and may close the connection while the body is
   * still being sent, so the client can see a reset instead of the answer.
   */
  oversized?: true;
  /** The class of hostile input it is sent for (CLASSES), if any. */
  class?: (typeof CLASSES)[number];
  /** Sent in this many pieces, this long apart (a slow client). */
  slow?: { pieces: number; gapMs: number };
  /** What a 2xx answer to this case must say, besides what every answer must (./probe-checks.ts); the problem if it does not. */
  expect?: (answer: Record<string, unknown>) => string | undefined;
}

export const HOOK_ROUTES = [
  '/stack/customize',
  '/stack/sync',
  '/stack/finalize',
  '/program/sync',
  '/workspace/sync',
  '/update/customize',
  '/update/sync',
] as const;
export const PROBE_ROUTES = ['/healthz', '/readyz', '/metrics'] as const;

/** The hook server's default BODY_LIMIT_BYTES; an oversized case is just over it. */
export const BODY_LIMIT = 8 * 1024 * 1024;

const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'];
const CONTENT_TYPES = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json; charset=latin1',
  'application/json-patch+json',
  'application/octet-stream',
  'application/jsonx',
  '',
];

/** mulberry32: small, fast, and the same numbers on every platform. */
export function prng(seed: number, index: number): () => number {
  let a = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(index >>> 0, 0x85ebca6b) ^ 0x5bd1e995) >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Rand = () => number;
const pick = <T>(rand: Rand, xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
const intIn = (rand: Rand, lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));

export interface SeedBody {
  name: string;
  route: (typeof HOOK_ROUTES)[number];
  value: unknown;
}

function routeOf(file: string): SeedBody['route'] {
  if (file.startsWith('stack-customize')) return '/stack/customize';
  if (file.startsWith('stack-finalize')) return '/stack/finalize';
  if (file.startsWith('program-')) return '/program/sync';
  if (file.startsWith('workspace-')) return '/workspace/sync';
  if (file.startsWith('update-')) return '/update/sync';
  return '/stack/sync';
}

/** The real bodies the mutations start from. */
export function loadSeedBodies(repoRoot: string): SeedBody[] {
  const dir = join(repoRoot, 'examples', 'hooks');
  const seeds: SeedBody[] = readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => ({ name: f, route: routeOf(f), value: JSON.parse(readFileSync(join(dir, f), 'utf8')) as unknown }));
  const captured = JSON.parse(readFileSync(join(repoRoot, 'bench', 'requests', 'steady-state-sync.json'), 'utf8')) as {
    request: unknown;
  };
  seeds.push({ name: 'steady-state-sync.json', route: '/stack/sync', value: captured.request });
  return seeds;
}

/** Nested arrays or objects `depth` levels deep, as JSON text (built as text: no recursion). */
export function deepJson(depth: number, shape: 'array' | 'object'): string {
  return shape === 'array' ? '['.repeat(depth) + ']'.repeat(depth) : '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

function hostileValue(rand: Rand): unknown {
  switch (intIn(rand, 0, 13)) {
    case 0:
      return null;
    case 1:
      return pick(rand, [0, -1, 1e308, -0, 2 ** 53 + 1, 0.5]);
    case 2:
      return rand() < 0.5;
    case 3:
      return [];
    case 4:
      return {};
    case 5:
      return pick(rand, PROTOTYPE_NAMES);
    case 6:
      return 'x'.repeat(intIn(rand, 1, 4) * 256 * 1024); // huge string
    case 7:
      return '\u0000\ud800\uffff"\\/<>&';
    case 8:
      return ' ';
    case 9:
      return [pick(rand, PROTOTYPE_NAMES), null, {}];
    case 10:
      return Object.fromEntries(PROTOTYPE_NAMES.map((n) => [n, n]));
    case 11:
      return '../../../../etc/passwd';
    case 12:
      return 'a'.repeat(300); // longer than any Kubernetes name
    default:
      return '9'.repeat(400); // a number too long for anything
  }
}

/** Sets an own property, `__proto__` included (plain assignment would set the prototype). */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A random walk from the root: the containers on the way, the last one's key. */
function randomSpot(
  rand: Rand,
  root: unknown,
): { holder: Record<string, unknown> | unknown[]; key: string } | undefined {
  let holder: Record<string, unknown> | unknown[] | undefined;
  let key = '';
  let node = root;
  for (let depth = 0; depth < 40; depth++) {
    if (node === null || typeof node !== 'object') break;
    const keys = Array.isArray(node) ? node.map((_, i) => String(i)) : Object.keys(node);
    if (keys.length === 0) break;
    holder = node as Record<string, unknown>;
    key = pick(rand, keys);
    node = (node as Record<string, unknown>)[key];
    if (rand() < 0.2) break; // stop at every depth, not only at the leaves
  }
  return holder ? { holder, key } : undefined;
}

/** The fields named by kind and name, where prototype names as values are most likely to hurt. */
const NAMED_FIELDS: string[][] = [
  ['parent', 'kind'],
  ['parent', 'metadata', 'name'],
  ['parent', 'metadata', 'namespace'],
  ['object', 'kind'],
  ['object', 'metadata', 'name'],
  ['parent', 'spec', 'programRef', 'name'],
  ['parent', 'spec', 'stack'],
  ['controller', 'kind'],
];

function structuralMutation(rand: Rand, body: unknown): { value: unknown; what: string } {
  const copy = structuredClone(body);
  const op = intIn(rand, 0, 6);
  if (op === 6) {
    // A prototype name as the value of a kind or name field, or as a key of a children map.
    const fieldPath = pick(rand, NAMED_FIELDS);
    let node = copy as Record<string, unknown>;
    for (const k of fieldPath.slice(0, -1)) {
      if (node[k] === null || typeof node[k] !== 'object') return { value: copy, what: 'unchanged' };
      node = node[k] as Record<string, unknown>;
    }
    const name = pick(rand, PROTOTYPE_NAMES);
    setOwn(node, fieldPath.at(-1)!, name);
    return { value: copy, what: `${fieldPath.join('.')} = ${name}` };
  }
  const spot = randomSpot(rand, copy);
  if (!spot) return { value: copy, what: 'unchanged' };
  const { holder, key } = spot;
  switch (op) {
    case 0:
    case 1: {
      const v = hostileValue(rand);
      if (Array.isArray(holder)) holder[Number(key)] = v;
      else setOwn(holder, key, v);
      return { value: copy, what: `replace ${key}` };
    }
    case 2:
      if (Array.isArray(holder)) holder.splice(Number(key), 1);
      else delete holder[key];
      return { value: copy, what: `delete ${key}` };
    case 3:
      if (Array.isArray(holder)) holder.push(...Array.from({ length: intIn(rand, 1, 200) }, () => holder[Number(key)]));
      else setOwn(holder, `${key}${key}`, holder[key]);
      return { value: copy, what: `duplicate ${key}` };
    case 4: {
      // A prototype name as a key, the value what was there.
      if (Array.isArray(holder)) return { value: copy, what: 'unchanged' };
      const name = pick(rand, PROTOTYPE_NAMES);
      setOwn(holder, name, rand() < 0.5 ? holder[key] : { prototype: { polluted: true } });
      return { value: copy, what: `key ${name} beside ${key}` };
    }
    default: {
      // Wrong container type: an object for an array and the other way round.
      const v: unknown = Array.isArray(holder) ? holder[Number(key)] : holder[key];
      const swapped = Array.isArray(v) ? { ...v } : v !== null && typeof v === 'object' ? Object.values(v) : [v];
      if (Array.isArray(holder)) holder[Number(key)] = swapped;
      else setOwn(holder, key, swapped);
      return { value: copy, what: `swap container ${key}` };
    }
  }
}

/** Text-level damage: what a JSON value cannot express. */
function textMutation(rand: Rand, text: string): { body: Buffer; what: string } {
  switch (intIn(rand, 0, 6)) {
    case 0: {
      // A duplicate key: the same name twice in one object, the second a hostile value.
      const keys = [...text.slice(0, 200_000).matchAll(/"([A-Za-z]+)":/g)];
      if (keys.length === 0) return { body: Buffer.from(text), what: 'unchanged' };
      const m = pick(rand, keys);
      const dup = `"${m[1]}":${JSON.stringify(hostileValue(rand)) ?? 'null'},`;
      return { body: Buffer.from(text.slice(0, m.index) + dup + text.slice(m.index)), what: `duplicate key ${m[1]}` };
    }
    case 1:
      return { body: Buffer.from(text.slice(0, intIn(rand, 0, text.length - 1))), what: 'truncated JSON' };
    case 2: {
      // Invalid UTF-8: a lone continuation byte, an overlong encoding, a truncated sequence.
      const bytes = Buffer.from(text);
      const bad = pick(rand, [[0xff], [0x80], [0xc0, 0xaf], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80]]);
      const at = intIn(rand, 0, bytes.length - 1);
      return {
        body: Buffer.concat([bytes.subarray(0, at), Buffer.from(bad), bytes.subarray(at)]),
        what: 'invalid UTF-8',
      };
    }
    case 3:
      return { body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(text)]), what: 'BOM' };
    case 4: {
      // A `__proto__` key spelt with escapes, inserted after a random `{`.
      const at = text.indexOf('{', intIn(rand, 0, text.length - 1));
      if (at < 0) return { body: Buffer.from(text), what: 'unchanged' };
      const key = pick(rand, ['"__proto__"', '"\\u005f_proto__"', '"constructor"', '"__pro\\u0074o__"']);
      const ins = `${key}:{"prototype":{"polluted":true}}${text[at + 1] === '}' ? '' : ','}`;
      return { body: Buffer.from(text.slice(0, at + 1) + ins + text.slice(at + 1)), what: `escaped key ${key}` };
    }
    case 5:
      return {
        body: Buffer.from(pick(rand, ['null', '[]', '"x"', '1', 'true', '{}', '', ' ', '{"a":1}{"a":1}'])),
        what: 'other top level',
      };
    default: {
      // Control characters and NUL in the text.
      const at = intIn(rand, 0, text.length - 1);
      return {
        body: Buffer.from(text.slice(0, at) + '\u0000\u0001\u001f' + text.slice(at)),
        what: 'control characters',
      };
    }
  }
}

/** The classes of hostile input sent on purpose (a seventh of the fuzz cases), each named in the report. */
export const CLASSES = [
  'forged last-applied',
  'far-future times',
  'control characters',
  'key-derivation rounds',
  'slow body',
] as const;

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The parent of a hook request: a CompositeController's `parent`, a DecoratorController's `object`. */
function parentOf(body: Json): Json | undefined {
  const parent = body.parent ?? body.object;
  return isObject(parent) ? parent : undefined;
}

/** Objects a forged last-applied annotation may claim to be: other kinds, other namespaces, the cluster. */
const FORGED: [apiVersion: string, kind: string, extra: Json][] = [
  [
    'rbac.authorization.k8s.io/v1',
    'ClusterRoleBinding',
    {
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
      subjects: [{ kind: 'Group', name: 'system:authenticated', apiGroup: 'rbac.authorization.k8s.io' }],
    },
  ],
  ['v1', 'Secret', { stringData: { token: 'forged' } }],
  ['v1', 'Namespace', {}],
  ['v1', 'Pod', { spec: { containers: [{ name: 'x', image: 'busybox', securityContext: { privileged: true } }] } }],
  ['admissionregistration.k8s.io/v1', 'MutatingWebhookConfiguration', { webhooks: [] }],
];

/** Observed children of every kind the seed's controller has, added to what the seed observes. */
const EXTRA_CHILDREN: Record<string, [apiVersion: string, kind: string][]> = {
  '/stack/sync': [
    ['auto.pulumi.com/v1alpha1', 'Workspace'],
    ['v1', 'ConfigMap'],
    ['apps/v1', 'StatefulSet'],
    ['v1', 'Service'],
    ['batch/v1', 'Job'],
    ['v1', 'ServiceAccount'],
    ['rbac.authorization.k8s.io/v1', 'Role'],
    ['rbac.authorization.k8s.io/v1', 'RoleBinding'],
  ],
  '/workspace/sync': [
    ['apps/v1', 'StatefulSet'],
    ['v1', 'Service'],
    ['rbac.authorization.k8s.io/v1', 'Role'],
    ['rbac.authorization.k8s.io/v1', 'RoleBinding'],
  ],
  '/update/sync': [
    ['batch/v1', 'Job'],
    ['v1', 'ServiceAccount'],
    ['rbac.authorization.k8s.io/v1', 'Role'],
    ['rbac.authorization.k8s.io/v1', 'RoleBinding'],
  ],
  '/program/sync': [['v1', 'ConfigMap']],
};
EXTRA_CHILDREN['/stack/finalize'] = EXTRA_CHILDREN['/stack/sync']!;

/**
 * Every child the request observes, and one of each kind its controller has (named as the hooks
 * name theirs, so that each is kept: a Job still running, which keeps an earlier version's children),
 * with a last-applied annotation claiming another kind or namespace. Whatever the hooks keep, an
 * answer may hold only children of the kinds the controller's manifest declares, in the parent's
 * namespace (./probe-checks.ts).
 */
function forgedChildrenCase(rand: Rand, seeds: readonly SeedBody[]): ProbeCase {
  const seed = pick(
    rand,
    seeds.filter((s) => Object.hasOwn(EXTRA_CHILDREN, s.route)),
  );
  const body = structuredClone(seed.value) as Json;
  const parent = parentOf(body);
  const parentMeta = isObject(parent?.metadata) ? parent.metadata : {};
  const name = typeof parentMeta.name === 'string' ? parentMeta.name : 'probe';
  const ns = typeof parentMeta.namespace === 'string' ? parentMeta.namespace : 'default';
  const mapKey = seed.route === '/program/sync' ? 'attachments' : 'children';
  const map = (isObject(body[mapKey]) ? body[mapKey] : (body[mapKey] = {})) as Record<string, Json>;
  for (const [apiVersion, kind] of EXTRA_CHILDREN[seed.route]!) {
    const childName =
      kind === 'Workspace' ? name : seed.route === '/workspace/sync' ? `${name}-workspace` : `${name}-probe`;
    const child: Json = { apiVersion, kind, metadata: { name: childName, namespace: ns } };
    // A Job with no Complete or Failed condition runs: its Stack keeps an earlier version's children.
    if (kind === 'Job') child.status = { active: 1 };
    const group = (map[`${kind}.${apiVersion}`] ??= {});
    group[`${ns}/${childName}`] ??= child;
  }
  if (seed.route === '/workspace/sync' && rand() < 0.5) {
    // A Workspace being deleted keeps its children as they were applied.
    (parent!.metadata as Json).deletionTimestamp = '2026-11-22T10:00:00Z';
  }
  const forged: string[] = [];
  for (const group of Object.values(map)) {
    if (!isObject(group)) continue;
    for (const child of Object.values(group)) {
      if (!isObject(child) || !isObject(child.metadata)) continue;
      const [apiVersion, kind, extra] =
        rand() < 0.2 ? [child.apiVersion as string, child.kind as string, {}] : pick(rand, FORGED);
      const namespace = pick(rand, ['kube-system', 'other-team', ns]);
      const claim = { apiVersion, kind, metadata: { name: child.metadata.name, namespace }, ...extra };
      child.metadata.annotations = {
        ...(isObject(child.metadata.annotations) ? child.metadata.annotations : {}),
        [LAST_APPLIED_ANNOTATION]: JSON.stringify(claim),
      };
      forged.push(`${String(child.kind)} as ${kind} in ${namespace}`);
    }
  }
  return {
    method: 'POST',
    path: seed.route,
    contentType: 'application/json',
    body: Buffer.from(JSON.stringify(body)),
    mutation: `forged last-applied in ${seed.name}: ${forged.join(', ')}`,
  };
}

const FAR_FUTURE = ['9999-12-31T23:59:59Z', '+275760-09-13T00:00:00Z', '2999-01-01T00:00:00Z', '0001-01-01T00:00:00Z'];

/**
 * Every time in a real body (statuses, conditions, a Job's result in its annotation) put at the
 * far ends of what JSON and JavaScript allow, a Stack given drift checks on a cron schedule and an
 * approval gate to schedule from them. Answers must come, and ask to be called again within a day.
 */
function farFutureCase(rand: Rand, seeds: readonly SeedBody[]): ProbeCase {
  const seed = pick(
    rand,
    seeds.filter((s) => s.route !== '/stack/customize'),
  );
  const body = structuredClone(seed.value) as Json;
  const parent = parentOf(body);
  if (seed.route.startsWith('/stack/') && isObject(parent?.spec)) {
    parent.spec.driftDetection = { schedule: pick(rand, ['5m', '0 0 29 2 *', '*/5 * * * *', '0 0 31 * 1']) };
    if (rand() < 0.5) parent.spec.approval = { required: true, expiresAfter: pick(rand, ['2562047h', '1h', '87600h']) };
  }
  let replaced = 0;
  const text = JSON.stringify(body).replace(/\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z/g, (time) => {
    if (rand() < 0.2) return time;
    replaced++;
    return pick(rand, FAR_FUTURE);
  });
  return {
    method: 'POST',
    path: seed.route,
    contentType: 'application/json',
    body: Buffer.from(text),
    mutation: `far-future times in ${seed.name}: ${replaced} replaced`,
  };
}

const CONTROL_TEXT = [
  '\u001b[31mred\u0007',
  'a\nWarning  Forged  1s  hooks  forged line',
  '\u009b2J\u001b]0;title\u0007',
  '\r\n\t',
  '\u0000\u007f',
];

/**
 * ESC, BEL, newlines and other control characters in spec keys the hooks quote in a Stalled
 * condition (and its Event), and in the messages of observed conditions and results they carry.
 */
function controlCharactersCase(rand: Rand, seeds: readonly SeedBody[]): ProbeCase {
  const seed = pick(
    rand,
    seeds.filter((s) => s.route !== '/stack/customize' && s.route !== '/program/sync'),
  );
  const text = pick(rand, CONTROL_TEXT);
  const body = structuredClone(seed.value) as Json;
  const parent = parentOf(body);
  if (seed.route.startsWith('/stack/') && isObject(parent?.spec)) {
    const field = pick(rand, ['secretsRef', 'envRefs', 'config'] as const);
    const refs: Json = isObject(parent.spec[field]) ? parent.spec[field] : (parent.spec[field] = {});
    refs[`key${text}`] = field === 'config' ? { value: text } : { type: 'Env', env: { name: text } };
  }
  // And in every message the request carries (conditions, results in annotations).
  const withText = JSON.stringify(body).replace(/"message":"/g, `"message":${JSON.stringify(text).slice(0, -1)}`);
  return {
    method: 'POST',
    path: seed.route,
    contentType: 'application/json',
    body: Buffer.from(withText),
    mutation: `control characters ${JSON.stringify(text)} in ${seed.name}`,
  };
}

/** An ed25519 key in OpenSSH format, encrypted with the passphrase `probe` in 4 bcrypt rounds. */
const PROBE_KEY = `-----BEGIN OPENSSH PRIVATE KEY-----
b3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABAv
WWlQptfHUsoXe4iczUIGAAAABAAAAAEAAAAzAAAAC3NzaC1lZDI1NTE5AAAAID5L
RItuVq4dPfJU0koAw6sHRWsY6o35ynF8DxF9CACJAAAAkBHea6lM7/w4fDHmx0yL
Cr0DnfHx36c1zMEHGz5pfHXqR1b+W1jswuQaCF/gYlPpGelOOs+3/9FQ/iLJTcyn
7b+Sm6Nxk0MeiY2Zk3z+QqoFmIZfhsWmEyULKkRiSBzHiWFJxDFNNN0/3A6IyJs6
yGmn+ShgOe/XFGKKkz82UBH3ox77/L/4vpmGEO9G8uTVGw==
-----END OPENSSH PRIVATE KEY-----
`;

/**
 * A Stack tracking a branch of an SSH repository with gitAuth.sshAuth, whose key (in a related
 * Secret) claims as many bcrypt rounds as the format allows, a few more than the hooks decrypt, or
 * its real 4. The answer must come at once (the key is never decrypted past the limit) and say why.
 */
function costlyKeyCase(rand: Rand, seeds: readonly SeedBody[]): ProbeCase {
  const seed = pick(
    rand,
    // Not one whose Update runs or whose spec is invalid: those answer before the source.
    seeds.filter(
      (s) => s.route === '/stack/sync' && !/running|invalid/.test(s.name) && isObject(parentOf(s.value as Json)?.spec),
    ),
  );
  const body = structuredClone(seed.value) as Json;
  const parent = parentOf(body)!;
  const namespace = (parent.metadata as Json).namespace;
  const ns = typeof namespace === 'string' ? namespace : 'default';
  const spec = parent.spec as Json;
  delete spec.programRef;
  delete spec.fluxSource;
  delete spec.commit;
  Object.assign(spec, {
    projectRepo: 'ssh://git@git.probe.invalid/org/app.git',
    branch: 'main',
    gitAuth: {
      sshAuth: {
        sshPrivateKey: { type: 'Secret', secret: { name: 'probe-key', key: 'id' } },
        password: { type: 'Secret', secret: { name: 'probe-key', key: 'passphrase' } },
      },
    },
  });
  const rounds = pick(rand, [2 ** 32 - 1, 400, MAX_SSH_KEY_ROUNDS + 1, 4]);
  const key = rounds === 4 ? PROBE_KEY : withKeyRounds(PROBE_KEY, rounds);
  const related = (isObject(body.related) ? body.related : (body.related = {})) as Record<string, Json>;
  related['Secret.v1'] = {
    [`${ns}/probe-key`]: {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: 'probe-key', namespace: ns },
      data: { id: Buffer.from(key).toString('base64'), passphrase: Buffer.from('probe').toString('base64') },
    },
  };
  return {
    method: 'POST',
    path: seed.route,
    contentType: 'application/json',
    body: Buffer.from(JSON.stringify(body)),
    mutation: `an SSH key of ${rounds} bcrypt rounds in ${seed.name}`,
    expect: (answer) => {
      const why = `${rounds > MAX_SSH_KEY_ROUNDS ? `encrypted with ${rounds} bcrypt rounds` : 'the probe makes no git lookups'}`;
      const status = isObject(answer.status) ? answer.status : {};
      const conditions = Array.isArray(status.conditions) ? (status.conditions as Json[]) : [];
      const stalled = conditions.find((c) => c.type === 'Stalled' && c.status === 'True');
      return typeof stalled?.message === 'string' && stalled.message.includes(why)
        ? undefined
        : `not Stalled saying "${why}" (${JSON.stringify(stalled?.message ?? 'no Stalled condition').slice(0, 200)})`;
    },
  };
}

/** A real body sent in pieces, a while apart, as a slow client (or a slowloris) sends it. */
function slowBodyCase(rand: Rand, seeds: readonly SeedBody[]): ProbeCase {
  const seed = pick(rand, seeds);
  const pieces = intIn(rand, 2, 10);
  const gapMs = intIn(rand, 10, 100);
  return {
    method: 'POST',
    path: seed.route,
    contentType: 'application/json',
    body: Buffer.from(JSON.stringify(seed.value)),
    mutation: `${seed.name} in ${pieces} pieces ${gapMs} ms apart`,
    slow: { pieces, gapMs },
  };
}

const CLASS_CASES: Record<(typeof CLASSES)[number], (rand: Rand, seeds: readonly SeedBody[]) => ProbeCase> = {
  'forged last-applied': forgedChildrenCase,
  'far-future times': farFutureCase,
  'control characters': controlCharactersCase,
  'key-derivation rounds': costlyKeyCase,
  'slow body': slowBodyCase,
};

/** A case of one of the CLASSES. */
function classCase(rand: Rand, seeds: readonly SeedBody[]): ProbeCase {
  const name = pick(rand, CLASSES);
  return { ...CLASS_CASES[name](rand, seeds), class: name };
}

/** A YAML text for `render`: a Stack whose spec holds anchors and aliases, within the budgets or far past them. */
export interface RenderCase {
  text: string;
  what: string;
  /** Past the YAML budgets: refused (exit 3) rather than rendered. */
  bomb: boolean;
}

const STACK_HEAD =
  'apiVersion: pulumi.com/v1\nkind: Stack\nmetadata: {name: boom, namespace: probe}\nspec:\n  stack: dev\n  programRef: {name: p}\n  config:\n';

/** Case `index` of the YAML cases for `render`: billion laughs of objects and of strings, cycles, alias chains, or modest anchors. */
export function renderCase(seed: number, index: number): RenderCase {
  const rand = prng(seed, 0x7a3100 + index);
  const width = intIn(rand, 2, 9);
  switch (intIn(rand, 0, 4)) {
    case 0: {
      const levels = intIn(rand, 20, 40);
      const lines = [`    a0: &a0 [${Array(width).fill('"lol"').join(', ')}]`];
      for (let i = 1; i <= levels; i++)
        lines.push(
          `    a${i}: &a${i} [${Array(width)
            .fill(`*a${i - 1}`)
            .join(', ')}]`,
        );
      return { text: STACK_HEAD + lines.join('\n') + '\n', what: `${width}^${levels} strings as a tree`, bomb: true };
    }
    case 1: {
      const size = intIn(rand, 1, 4) * 1024 * 1024;
      const aliases = Array.from({ length: 40 }, (_, i) => `    k${i}: *big`).join('\n');
      return {
        text: `${STACK_HEAD}    big: &big "${'x'.repeat(size)}"\n${aliases}\n`,
        what: `40 aliases to a string of ${size} bytes`,
        bomb: true,
      };
    }
    case 2:
      return {
        text: `${STACK_HEAD}    loop: &loop {self: *loop, list: [*loop]}\n`,
        what: 'an anchor holding its own alias',
        bomb: true,
      };
    case 3: {
      const chain = Array.from({ length: 3000 }, (_, i) => `    c${i + 1}: &c${i + 1} [*c${i}]`).join('\n');
      return { text: `${STACK_HEAD}    c0: &c0 [1]\n${chain}\n`, what: 'aliases nested 3,000 levels deep', bomb: true };
    }
    default: {
      const lines = [
        `    a0: &a0 {x: "lol"}`,
        `    a1: &a1 [${Array(width).fill('*a0').join(', ')}]`,
        `    a2: [*a1, *a1]`,
      ];
      return { text: STACK_HEAD + lines.join('\n') + '\n', what: 'a few anchors', bomb: false };
    }
  }
}

/** A body nested `depth` levels deep at a random place of a real body (or as the body itself). */
export function nestingCase(rand: Rand, seeds: readonly SeedBody[], depth: number): ProbeCase {
  const seed = pick(rand, seeds);
  const shape = rand() < 0.5 ? 'array' : 'object';
  const deep = deepJson(depth, shape);
  let text: string;
  if (rand() < 0.3) text = deep;
  else {
    const copy = structuredClone(seed.value);
    const spot = randomSpot(rand, copy);
    const marker = 'probe-deep-nesting-goes-here';
    if (spot) {
      if (Array.isArray(spot.holder)) spot.holder[Number(spot.key)] = marker;
      else setOwn(spot.holder, spot.key, marker);
    }
    text = JSON.stringify(copy).replace(`"${marker}"`, deep);
  }
  return {
    method: 'POST',
    path: seed.route,
    contentType: 'application/json',
    body: Buffer.from(text),
    mutation: `${depth} levels of ${shape}s in ${seed.name}`,
  };
}

/** Case `index` of `seed`: the same two numbers always give the same request. */
export function probeCase(seed: number, index: number, seeds: readonly SeedBody[]): ProbeCase {
  const rand = prng(seed, index);
  const base = pick(rand, seeds);
  // Mostly the body's own route; sometimes another hook's, a probe, or no route at all.
  const r = rand();
  const path =
    r < 0.8
      ? base.route
      : r < 0.9
        ? pick(rand, HOOK_ROUTES)
        : r < 0.95
          ? pick(rand, PROBE_ROUTES)
          : pick(rand, [
              '/stack',
              '/stack/sync/',
              '/stack/sync?x=1&x=2',
              '/%00',
              '/stack/%2e%2e/program/sync',
              '/__proto__',
            ]);
  const kind = rand();
  if (kind < 0.005) {
    const size = BODY_LIMIT + intIn(rand, 1, 64 * 1024);
    return {
      method: 'POST',
      path,
      contentType: 'application/json',
      body: Buffer.alloc(size, 0x20),
      mutation: `oversized ${size} B`,
      oversized: true,
    };
  }
  if (kind < 0.02) return nestingCase(rand, seeds, intIn(rand, 1_000, 20_000));
  if (kind < 0.07) {
    const method = pick(rand, ['GET', 'PUT', 'DELETE'] as const);
    return {
      method,
      path,
      contentType: 'application/json',
      body: method === 'GET' ? undefined : Buffer.from('{}'),
      mutation: `method ${method}`,
    };
  }
  if (kind < 0.22) return classCase(rand, seeds);
  let value = base.value;
  const whats: string[] = [];
  // One to three structural mutations, then maybe damage to the text.
  for (let n = intIn(rand, 1, 3); n > 0; n--) {
    const m = structuralMutation(rand, value);
    value = m.value;
    whats.push(m.what);
  }
  let body: Buffer = Buffer.from(JSON.stringify(value) ?? 'null');
  if (rand() < 0.3) {
    const t = textMutation(rand, body.toString());
    body = t.body;
    whats.push(t.what);
  }
  let contentType: string | undefined = 'application/json';
  if (rand() < 0.08) {
    contentType = pick(rand, CONTENT_TYPES) || undefined;
    whats.push(`content type ${contentType ?? 'none'}`);
  }
  return { method: 'POST', path, contentType, body, mutation: `${base.name}: ${whats.join('; ')}` };
}

/** The soak's fixed mix: the real bodies unchanged, each to its own route, in turn. */
export function soakCase(index: number, seeds: readonly SeedBody[]): ProbeCase {
  const seed = seeds[index % seeds.length]!;
  return {
    method: 'POST',
    path: seed.route,
    contentType: 'application/json',
    body: Buffer.from(JSON.stringify(seed.value)),
    mutation: `soak ${seed.name}`,
  };
}
