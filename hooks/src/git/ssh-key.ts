/**
 * The SSH private key of a Stack's gitAuth.sshAuth, made usable by ssh2 for branch lookups.
 * Decrypting an OpenSSH-format key runs bcrypt_pbkdf for as many rounds as the key asks (in
 * JavaScript: about 25 ms a round on a loaded core), so the key's rounds are read first and a key
 * asking for more than MAX_SSH_KEY_ROUNDS is refused (contract/ssh-key.ts); the rest is decrypted
 * in a worker thread, one key at a time, within DECRYPT_TIMEOUT_MS, so the event loop, /healthz
 * included, never waits for it. The worker hands back the key as PEM; ssh2 signs with it through an
 * agent of one key (ssh2's own agent interface), since a parsed key cannot cross threads.
 */
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { BaseAgent, utils, type IdentityCallback, type ParsedKey, type SignCallback } from 'ssh2';
import { sshKeyRoundsProblem } from '../../../contract';
import { asError, errorMessage } from '../lib/errors';

/** How long one key may take to decrypt. At MAX_SSH_KEY_ROUNDS it takes about 1.5 to 3.5 s. */
const DECRYPT_TIMEOUT_MS = 5000;
/** Keys waiting for the worker at most; more are refused for now (their lookups are retried). */
const MAX_WAITING = 64;
/** The worker's heap: a key is a few kB. */
const WORKER_HEAP_MB = 32;

/**
 * A key that cannot be used; the message says why in words for the Stack's status (never the key).
 * `retryAfterMs`: it may decrypt another time (the machine was busy), so try again after that long.
 */
export class SshKeyError extends Error {
  constructor(
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

/** When a key that took too long to decrypt is tried again. */
const RETRY_SLOW_KEY_MS = 10 * 60_000;

/** A decrypted key: its public half as ssh2 reads it, and the private half for signing. */
export interface SshIdentity {
  publicKey: ParsedKey;
  privateKey: KeyObject;
  /** The key's SSH type: ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa, … */
  type: string;
}

/** What the worker sends back: the key, or why it cannot be used. */
type WorkerAnswer = { type: string; privatePem: string; publicSsh: string } | { error: string };

/** Runs in the worker (plain JavaScript: it is evaluated, not compiled). */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const { utils } = require(workerData.ssh2);
const parsed = utils.parseKey(workerData.privateKey, workerData.passphrase);
const key = Array.isArray(parsed) ? parsed[0] : parsed;
if (key instanceof Error || key === undefined || !key.isPrivateKey()) {
  parentPort.postMessage({ error: key instanceof Error ? key.message : 'not a private key' });
} else {
  parentPort.postMessage({
    type: key.type,
    privatePem: key.getPrivatePEM(),
    publicSsh: key.getPublicSSH().toString('base64'),
  });
}
`;

const SSH2_PATH = require.resolve('ssh2');

function cannotUse(why: string): SshKeyError {
  const hint = /passphrase|decrypt|encrypted/i.test(why) ? ' (the passphrase is gitAuth.sshAuth.password)' : '';
  return new SshKeyError(`the SSH private key of gitAuth.sshAuth cannot be used: ${why}${hint}`);
}

/** One decryption at a time; the others wait their turn (at most MAX_WAITING of them). */
let running = false;
const waiting: (() => void)[] = [];

async function turn<T>(work: () => Promise<T>): Promise<T> {
  if (running) {
    if (waiting.length >= MAX_WAITING)
      throw new SshKeyError(
        `${MAX_WAITING} SSH keys are waiting to be decrypted already; this one is tried again later`,
        0,
      );
    await new Promise<void>((resolve) => waiting.push(resolve));
  }
  running = true;
  try {
    return await work();
  } finally {
    const next = waiting.shift();
    if (next) next();
    else running = false;
  }
}

function inWorker(privateKey: string, passphrase: string | undefined, timeoutMs: number): Promise<WorkerAnswer> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { ssh2: SSH2_PATH, privateKey, passphrase },
      resourceLimits: { maxOldGenerationSizeMb: WORKER_HEAP_MB },
      stdout: true,
      stderr: true,
    });
    let settled = false;
    const settle = (f: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      void worker.terminate();
      f();
    };
    const timer = setTimeout(
      () =>
        settle(() =>
          reject(
            new SshKeyError(
              `the SSH private key of gitAuth.sshAuth took longer than ${timeoutMs / 1000} s to decrypt: ` +
                'encrypt it again with fewer rounds (ssh-keygen -p -a 16 -f <key file>) and update its Secret',
              RETRY_SLOW_KEY_MS,
            ),
          ),
        ),
      timeoutMs,
    );
    worker.once('message', (answer: WorkerAnswer) => settle(() => resolve(answer)));
    worker.once('error', (err: Error) => settle(() => reject(cannotUse(err.message))));
    worker.once('exit', (code) => settle(() => reject(cannotUse(`its decryption stopped (exit code ${code})`))));
  });
}

/**
 * Decrypts (with `passphrase`, if any) and reads a private key (OpenSSH or PEM format), off the
 * event loop. Rejects with an SshKeyError saying why a key cannot be used.
 */
export async function decryptSshKey(
  privateKey: string,
  passphrase: string | undefined,
  timeoutMs = DECRYPT_TIMEOUT_MS,
): Promise<SshIdentity> {
  const tooCostly = sshKeyRoundsProblem(privateKey);
  if (tooCostly !== undefined) throw new SshKeyError(tooCostly);
  const answer = await turn(() => inWorker(privateKey, passphrase, timeoutMs));
  if ('error' in answer) throw cannotUse(answer.error);
  const publicKey = utils.parseKey(`${answer.type} ${answer.publicSsh}`);
  if (publicKey instanceof Error || Array.isArray(publicKey)) throw cannotUse('its public key cannot be read');
  try {
    return { publicKey, privateKey: createPrivateKey(answer.privatePem), type: answer.type };
  } catch (e) {
    throw cannotUse(errorMessage(e));
  }
}

/** The hash each key type signs with when ssh2 names none (RSA's it always names). */
function defaultHash(type: string): string | null {
  if (type === 'ssh-ed25519') return null;
  if (type === 'ecdsa-sha2-nistp384') return 'sha384';
  if (type === 'ecdsa-sha2-nistp521') return 'sha512';
  if (type === 'ecdsa-sha2-nistp256') return 'sha256';
  return 'sha1';
}

/** ssh2's agent interface over one decrypted key: ssh2 offers its public half and asks it to sign. */
export class KeyAgent extends BaseAgent<ParsedKey> {
  constructor(private readonly identity: SshIdentity) {
    super();
  }

  getIdentities(cb: IdentityCallback<ParsedKey>): void {
    cb(null, [this.identity.publicKey]);
  }

  sign(_pubKey: ParsedKey, data: Buffer, options: { hash?: string } | SignCallback, cb?: SignCallback): void {
    const done = typeof options === 'function' ? options : cb;
    const hash = (typeof options === 'function' ? undefined : options.hash) ?? defaultHash(this.identity.type);
    try {
      done?.(null, sign(hash, data, this.identity.privateKey));
    } catch (e) {
      done?.(asError(e));
    }
  }
}
