/**
 * The plaintext of an `up`'s secret stack outputs without one more CLI process (`pulumi stack
 * output --show-secrets`, which pays the secrets provider's key derivation on every call:
 * docs/agent.md#speed). The operation's own output cannot serve: the engine events blind every
 * secret, and `--show-secrets` puts plaintext only into the human display, where the outputs cannot
 * be told apart from the resources' secret properties.
 *
 * For stacks using the **passphrase** secrets provider the agent decrypts the outputs itself, with
 * Pulumi's own scheme (AES-256-GCM, key = PBKDF2-SHA256(passphrase, salt, 1e6), the salt state's
 * check value must decrypt to "pulumi"), deriving the key once per workspace:
 *
 * - the checkpoint comes from the state file itself when `PULUMI_BACKEND_URL` is a `file://` URL
 *   (the DIY backend's layout: `.pulumi/meta.yaml`, `.pulumi/stacks/[<project>/]<stack>.json[.gz]`),
 *   else from `pulumi stack export` (one CLI start, no key derivation);
 * - it must be the one this `up` wrote (manifest time not before the operation started), hold the
 *   stack resource of the event's URN, and agree with the engine event's outputs on every key and
 *   every non-secret value, with a secret exactly where the event has one.
 *
 * Anything else (another secrets provider, no passphrase in the environment, zstd state, a
 * mismatch, a value with another special marker) answers with a reason, and the caller falls back
 * to the CLI. Plaintext never leaves this module except in the returned outputs, and no reason
 * carries a value.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as zlib from 'node:zlib';
import { runPulumi } from './pulumi';
import { isRecord } from '../lib/json';

/** Pulumi's marker of a special value (secret, asset, archive, resource reference…) in serialized state and events. */
export const SIG_KEY = '4dabf18193072939515e22adb298388d';
/** The marker's value for a secret. */
export const SECRET_SIG = '1b47061264138c4ac30d75fd1eb44270';
export const STACK_TYPE = 'pulumi:pulumi:Stack';

const PBKDF2_ITERATIONS = 1_000_000;
const KEY_BYTES = 32;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const MAX_DEPTH = 64;

/** The parts of a deployment (apitype DeploymentV3, as in a checkpoint or `stack export`) used here. */
export interface Deployment {
  manifest?: { time?: string };
  secrets_providers?: { type?: string; state?: { salt?: string } };
  resources?: Array<{ urn?: string; type?: string; delete?: boolean; outputs?: Record<string, unknown> }>;
}

type Json = unknown;

const asDeployment = (v: unknown): Deployment | undefined => (isRecord(v) ? v : undefined);

/** Whether every special marker in a value is a secret's (a value without markers qualifies). */
export function onlySecretMarkers(v: Json, depth = 0): boolean {
  if (depth > MAX_DEPTH) return false;
  if (Array.isArray(v)) return v.every((x) => onlySecretMarkers(x, depth + 1));
  if (!isRecord(v)) return true;
  if (SIG_KEY in v) return v[SIG_KEY] === SECRET_SIG;
  return Object.values(v).every((x) => onlySecretMarkers(x, depth + 1));
}

/** Whether a value carries any special marker (nested too deeply to tell counts as one). */
export function hasMarker(v: Json, depth = 0): boolean {
  if (depth > MAX_DEPTH) return true;
  if (Array.isArray(v)) return v.some((x) => hasMarker(x, depth + 1));
  if (!isRecord(v)) return false;
  return SIG_KEY in v || Object.values(v).some((x) => hasMarker(x, depth + 1));
}

/** Whether a value holds a secret anywhere (an output that does is a secret output). */
export function containsSecret(v: Json, depth = 0): boolean {
  if (depth > MAX_DEPTH) return false;
  if (Array.isArray(v)) return v.some((x) => containsSecret(x, depth + 1));
  if (!isRecord(v)) return false;
  return v[SIG_KEY] === SECRET_SIG || Object.values(v).some((x) => containsSecret(x, depth + 1));
}

/** The passphrase the CLI would use (PULUMI_CONFIG_PASSPHRASE, else the trimmed PULUMI_CONFIG_PASSPHRASE_FILE), or undefined. */
export function passphraseFromEnv(env: NodeJS.ProcessEnv, cwd: string): string | undefined {
  if (env.PULUMI_CONFIG_PASSPHRASE !== undefined) return env.PULUMI_CONFIG_PASSPHRASE;
  const file = env.PULUMI_CONFIG_PASSPHRASE_FILE;
  if (!file) return undefined;
  try {
    return fs.readFileSync(path.resolve(cwd, file), 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** Decrypts one `v1:<nonce>:<ciphertext+tag>` value (base64 parts, AES-256-GCM); undefined when it does not authenticate. */
export function decryptV1(key: Buffer, value: string): string | undefined {
  const [version, nonceText, sealedText, ...rest] = value.split(':');
  if (version !== 'v1' || nonceText === undefined || sealedText === undefined || rest.length > 0) return undefined;
  try {
    const nonce = Buffer.from(nonceText, 'base64');
    const sealed = Buffer.from(sealedText, 'base64');
    if (nonce.length !== NONCE_BYTES || sealed.length < TAG_BYTES) return undefined;
    const d = crypto.createDecipheriv('aes-256-gcm', key, nonce);
    d.setAuthTag(sealed.subarray(sealed.length - TAG_BYTES));
    return Buffer.concat([d.update(sealed.subarray(0, sealed.length - TAG_BYTES)), d.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}

/** Passphrase keys by salt state, derived once (PBKDF2 runs on libuv's pool, not the event loop). */
export class PassphraseKeys {
  private readonly cache = new Map<string, Promise<Buffer | undefined>>();

  /** The key for a salt state `v1:<salt>:<check>`, or undefined when the state is malformed or the passphrase is wrong. */
  key(saltState: string, passphrase: string): Promise<Buffer | undefined> {
    const id = `${saltState}\0${crypto.createHash('sha256').update(passphrase).digest('hex')}`;
    let p = this.cache.get(id);
    if (!p) {
      p = derive(saltState, passphrase);
      if (this.cache.size >= 8) this.cache.clear();
      this.cache.set(id, p);
    }
    return p;
  }
}

async function derive(saltState: string, passphrase: string): Promise<Buffer | undefined> {
  const i = saltState.indexOf(':');
  const j = saltState.indexOf(':', i + 1);
  if (i < 0 || j < 0 || saltState.slice(0, i) !== 'v1') return undefined;
  const salt = Buffer.from(saltState.slice(i + 1, j), 'base64');
  if (salt.length === 0) return undefined;
  const key = await new Promise<Buffer | undefined>((resolve) =>
    crypto.pbkdf2(passphrase, salt, PBKDF2_ITERATIONS, KEY_BYTES, 'sha256', (err, k) => resolve(err ? undefined : k)),
  );
  if (!key || decryptV1(key, saltState.slice(j + 1)) !== 'pulumi') return undefined;
  return key;
}

/**
 * The DIY backend's state file of a stack for a `file://` backend URL, as the CLI finds it: the
 * layout from `.pulumi/meta.yaml` (version 1: `stacks/<project>/<stack>`, 0: `stacks/<stack>`), the
 * most recently written of `.json`, `.json.gz`, `.json.zst`. Undefined when it cannot be told.
 */
export function diyStateFile(
  backendUrl: string,
  project: string | undefined,
  stack: string,
  cwd: string,
  home = os.homedir(),
): string | undefined {
  if (!backendUrl.startsWith('file://')) return undefined;
  let [dir = ''] = backendUrl.slice('file://'.length).split('?');
  if (dir === '~') dir = home;
  else if (dir.startsWith('~/')) dir = path.join(home, dir.slice(2));
  else if (dir.startsWith('~')) return undefined;
  dir = path.resolve(cwd, dir);
  let meta: string;
  try {
    meta = fs.readFileSync(path.join(dir, '.pulumi', 'meta.yaml'), 'utf8');
  } catch {
    return undefined;
  }
  const version = /^version:\s*(\d+)\s*$/m.exec(meta)?.[1];
  const parts = stack.split('/');
  if (parts.length > 3 || parts.some((p) => !/^[A-Za-z0-9_.-]+$/.test(p))) return undefined;
  if (parts.length > 1 && parts[0] !== 'organization') return undefined;
  // split gives at least one part, and each passed the name check above.
  const name = parts.at(-1) ?? '';
  let base: string;
  if (version === '1') {
    const proj = parts.length === 3 ? parts[1] : project;
    if (!proj || !/^[A-Za-z0-9_.-]+$/.test(proj)) return undefined;
    base = path.join(dir, '.pulumi', 'stacks', proj, name);
  } else if (version === '0' && parts.length === 1) {
    base = path.join(dir, '.pulumi', 'stacks', name);
  } else {
    return undefined;
  }
  let best: { file: string; mtime: number } | undefined;
  for (const ext of ['.json', '.json.gz', '.json.zst']) {
    try {
      const mtime = fs.statSync(base + ext).mtimeMs;
      if (!best || mtime >= best.mtime) best = { file: base + ext, mtime };
    } catch {
      /* absent */
    }
  }
  return best?.file;
}

/** The latest deployment of a DIY state file (`.json` or `.json.gz`); undefined for anything else. */
export function readStateFile(file: string): Deployment | undefined {
  try {
    let bytes = fs.readFileSync(file);
    if (file.endsWith('.json.gz')) bytes = zlib.gunzipSync(bytes);
    else if (!file.endsWith('.json')) return undefined;
    const cp: unknown = JSON.parse(bytes.toString('utf8'));
    return asDeployment(isRecord(cp) && isRecord(cp.checkpoint) ? cp.checkpoint.latest : undefined);
  } catch {
    return undefined;
  }
}

class Mismatch extends Error {}

/**
 * The event's outputs with each secret replaced by its plaintext from the state. Throws Mismatch
 * (with a message naming no value) when the state does not hold exactly the event's outputs.
 */
function reveal(event: Json, state: Json, key: Buffer, where: string, depth = 0): Json {
  if (depth > MAX_DEPTH) throw new Mismatch(`${where}: nested too deeply`);
  if (isRecord(event) && SIG_KEY in event) {
    if (event[SIG_KEY] !== SECRET_SIG) throw new Mismatch(`${where}: a special value other than a secret`);
    if (!isRecord(state) || state[SIG_KEY] !== SECRET_SIG || typeof state.ciphertext !== 'string')
      throw new Mismatch(`${where}: not a secret in the state`);
    const plaintext = decryptV1(key, state.ciphertext);
    if (plaintext === undefined) throw new Mismatch(`${where}: cannot decrypt`);
    let value: Json;
    try {
      value = JSON.parse(plaintext);
    } catch {
      throw new Mismatch(`${where}: the decrypted value is not JSON`);
    }
    if (hasMarker(value)) throw new Mismatch(`${where}: the secret holds special values`);
    return value;
  }
  if (Array.isArray(event)) {
    if (!Array.isArray(state) || state.length !== event.length) throw new Mismatch(`${where}: differs from the state`);
    return event.map((x, i) => reveal(x, state[i], key, where, depth + 1));
  }
  if (isRecord(event)) {
    if (!isRecord(state) || SIG_KEY in state) throw new Mismatch(`${where}: differs from the state`);
    const keys = Object.keys(event);
    if (keys.length !== Object.keys(state).length || keys.some((k) => !(k in state)))
      throw new Mismatch(`${where}: differs from the state`);
    return Object.fromEntries(keys.map((k) => [k, reveal(event[k], state[k], key, where, depth + 1)]));
  }
  if (event !== state) throw new Mismatch(`${where}: differs from the state`);
  return event;
}

export type Revealed = { outputs: Record<string, Json> } | { reason: string };

/**
 * The stack outputs of `deployment` with plaintext secrets, checked against the engine event's
 * (blinded) outputs of the stack resource `stackUrn`. `notBefore`: when the operation started.
 */
export function revealOutputs(
  eventOutputs: Record<string, Json>,
  stackUrn: string,
  deployment: Deployment,
  key: Buffer,
  notBefore: Date,
): Revealed {
  const written = Date.parse(deployment.manifest?.time ?? '');
  if (!(written >= Math.floor(notBefore.getTime()))) return { reason: 'the state was not written by this operation' };
  const stack = (deployment.resources ?? []).filter((r) => r.type === STACK_TYPE && r.urn === stackUrn && !r.delete);
  const [only] = stack;
  if (stack.length !== 1 || !only || !isRecord(only.outputs))
    return { reason: 'the state has no single stack resource of that URN with outputs' };
  try {
    const state = only.outputs;
    const keys = Object.keys(eventOutputs);
    if (keys.length !== Object.keys(state).length || keys.some((k) => !(k in state)))
      return { reason: 'the state has other output names' };
    // Output names are not secret (the events show them); values never go into a reason.
    return {
      outputs: Object.fromEntries(
        keys.map((k) => [k, reveal(eventOutputs[k], state[k], key, `output ${JSON.stringify(k)}`)]),
      ),
    };
  } catch (e) {
    if (e instanceof Mismatch) return { reason: e.message };
    throw e;
  }
}

export interface StateRequest {
  workDir: string;
  stack: string;
  project?: string;
  /** The engine event's outputs of the stack resource (secrets blinded). */
  eventOutputs: Record<string, Json>;
  stackUrn: string;
  /** When the operation started. */
  since: Date;
}

/** Reads secret stack outputs from the state; one per workspace (it keeps the derived keys). */
export class StackStateReader {
  private readonly keys = new PassphraseKeys();
  /** Set once a deployment showed another secrets provider: the CLI is used from then on. */
  private otherProvider = false;

  constructor(private readonly env: NodeJS.ProcessEnv = process.env) {}

  /** The outputs with plaintext secrets and where the state came from, or why not; never throws. */
  async read(req: StateRequest): Promise<Revealed & { source?: 'state file' | 'stack export' }> {
    try {
      return await this.readState(req);
    } catch (e) {
      // No message: nothing thrown while plaintext is at hand may reach a log.
      return { reason: `unexpected ${e instanceof Error ? e.name : 'error'}` };
    }
  }

  private async readState(req: StateRequest): Promise<Revealed & { source?: 'state file' | 'stack export' }> {
    if (this.otherProvider) return { reason: 'the stack does not use the passphrase secrets provider' };
    if (!onlySecretMarkers(req.eventOutputs)) return { reason: 'an output holds a special value other than a secret' };
    const passphrase = passphraseFromEnv(this.env, req.workDir);
    if (passphrase === undefined) return { reason: 'no passphrase in the environment' };
    let deployment: Deployment | undefined;
    let source: 'state file' | 'stack export' = 'state file';
    const url = this.env.PULUMI_BACKEND_URL ?? '';
    const file = url ? diyStateFile(url, req.project, req.stack, req.workDir) : undefined;
    if (file) deployment = readStateFile(file);
    if (!deployment) {
      source = 'stack export';
      const r = await runPulumi({
        args: ['stack', 'export', '--stack', req.stack, '--non-interactive'],
        cwd: req.workDir,
      });
      if (r.code !== 0) return { reason: 'pulumi stack export failed' };
      try {
        const exported: unknown = JSON.parse(r.stdout);
        deployment = asDeployment(isRecord(exported) ? exported.deployment : undefined);
      } catch {
        return { reason: 'pulumi stack export did not print JSON' };
      }
      if (!deployment) return { reason: 'pulumi stack export printed no deployment' };
    }
    const sp = deployment.secrets_providers;
    if (sp?.type !== 'passphrase') {
      if (typeof sp?.type === 'string' && sp.type !== '') this.otherProvider = true;
      return { reason: 'the stack does not use the passphrase secrets provider' };
    }
    const salt = sp.state?.salt;
    if (typeof salt !== 'string') return { reason: 'the state has no passphrase salt' };
    const key = await this.keys.key(salt, passphrase);
    if (!key) return { reason: 'the passphrase does not open the state' };
    return { ...revealOutputs(req.eventOutputs, req.stackUrn, deployment, key, req.since), source };
  }
}
