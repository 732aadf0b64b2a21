import type { Socket } from 'node:net';
import { Client, utils, type AgentAuthMethod, type ClientChannel, type ServerHostKeyAlgorithm } from 'ssh2';
import { fingerprint, hostKeyAlgorithms, isKnownHostKey, knownHostKeys } from './known-hosts';
import { sshHostLabel, uploadPackCommand, type SshRemote } from '../../../contract';
import { egressDenied, type EgressPolicy } from './egress';
import { egressSocket } from './egress-connect';
import { KeyAgent, type SshIdentity } from './ssh-key';
import { asError, errorMessage } from '../lib/errors';

/** Host key algorithms ssh2 can verify; others in known_hosts (security keys, certificates) are not offered. */
const SSH2_HOST_KEY_ALGORITHMS = new Set<string>([
  'ssh-ed25519',
  'ecdsa-sha2-nistp256',
  'ecdsa-sha2-nistp384',
  'ecdsa-sha2-nistp521',
  'rsa-sha2-512',
  'rsa-sha2-256',
  'ssh-rsa',
  'ssh-dss',
]);
/** What of the server's stderr a message quotes. */
const MAX_STDERR_BYTES = 4096;

export interface SshAdvertisementRequest {
  remote: SshRemote;
  /** The private key of gitAuth.sshAuth, decrypted (ssh-key.ts). */
  key: SshIdentity;
  /** The trusted host keys (known_hosts text, SSH_KNOWN_HOSTS of the hooks). */
  knownHosts: string;
  /** Where connections may go: the server's name is resolved and checked here, and ssh2 gets the socket. */
  egress: EgressPolicy;
  timeoutMs: number;
  maxBytes: number;
}

/** A failed SSH lookup; the message says why in words for the Stack's status (never the key). */
export class SshLookupError extends Error {}

/** Follows pkt-lines (4 hex digits of length, then the payload) across chunks, to the first flush-pkt. */
class FlushFinder {
  private header = '';
  private remaining = 0;

  /** The offset in `chunk` just after the first flush-pkt, or -1 while there is none yet. */
  feed(chunk: Buffer): number {
    let i = 0;
    while (i < chunk.length) {
      if (this.remaining > 0) {
        const n = Math.min(this.remaining, chunk.length - i);
        i += n;
        this.remaining -= n;
        continue;
      }
      this.header += String.fromCharCode(chunk[i++]!);
      if (this.header.length < 4) continue;
      const len = /^[0-9a-fA-F]{4}$/.test(this.header) ? parseInt(this.header, 16) : NaN;
      this.header = '';
      if (len === 0) return i;
      if (!(len >= 4)) throw new SshLookupError('the server did not answer as git-upload-pack');
      this.remaining = len - 4;
    }
    return -1;
  }
}

function firstLine(stderr: Buffer): string {
  const line = stderr
    .toString('utf8')
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l !== '');
  return line ? line.slice(0, 300) : '';
}

/**
 * Reads a repository's ref advertisement over SSH, as `git ls-remote` does: authenticates with the
 * key, checks the server's host key against known_hosts (no key accepted on first use), runs
 * `git-upload-pack '<path>'` and reads its pkt-lines up to the first flush, then sends a flush
 * (no wants: upload-pack ends without a pack) and closes. One deadline covers all of it.
 */
export function sshAdvertisement(req: SshAdvertisementRequest): Promise<Buffer> {
  const { remote } = req;
  const server = sshHostLabel(remote);
  const known = knownHostKeys(req.knownHosts, remote.host, remote.port);
  const offered = hostKeyAlgorithms(known)?.filter((a): a is ServerHostKeyAlgorithm => SSH2_HOST_KEY_ALGORITHMS.has(a));

  // The key signs through an agent of one key: it was decrypted in a worker thread (ssh-key.ts).
  const keyAuth: AgentAuthMethod = { type: 'agent', username: remote.user, agent: new KeyAgent(req.key) };
  return new Promise<Buffer>((resolve, reject) => {
    const conn = new Client();
    let sock: Socket | undefined;
    let hostKeyProblem: string | undefined;
    let settled = false;
    const finish = (err: Error | undefined, value?: Buffer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      conn.end();
      // A server that ignores the end is cut off soon after: no lookup holds a socket for long.
      setTimeout(() => {
        conn.destroy();
        sock?.destroy();
      }, 1000).unref();
      if (err) reject(err);
      else resolve(value!);
    };
    const timer = setTimeout(
      () => finish(new SshLookupError(`timed out after ${req.timeoutMs} ms talking to ${server}`)),
      req.timeoutMs,
    );

    conn.on('error', (err: Error & { level?: string; code?: string }) => {
      if (hostKeyProblem) return finish(new SshLookupError(hostKeyProblem));
      if (err.level === 'client-authentication') {
        return finish(
          new SshLookupError(
            `${server} refused the SSH key of gitAuth.sshAuth for user "${remote.user}" (publickey authentication failed)`,
          ),
        );
      }
      if (err.level === 'client-timeout') {
        return finish(new SshLookupError(`timed out after ${req.timeoutMs} ms in the SSH handshake with ${server}`));
      }
      const cause = err.code ?? err.message;
      finish(new SshLookupError(`cannot reach ${server} over SSH: ${cause}`));
    });
    conn.on('ready', () => {
      conn.exec(uploadPackCommand(remote.path), (err, stream: ClientChannel) => {
        if (err) return finish(new SshLookupError(`${server} refused to run git-upload-pack: ${err.message}`));
        const flush = new FlushFinder();
        const out: Buffer[] = [];
        let size = 0;
        let stderr = Buffer.alloc(0);
        let exitCode: number | undefined;
        stream.on('exit', (code: number | null) => {
          if (typeof code === 'number') exitCode = code;
        });
        stream.stderr.on('data', (chunk: Buffer) => {
          if (stderr.length < MAX_STDERR_BYTES) stderr = Buffer.concat([stderr, chunk]);
        });
        stream.on('data', (chunk: Buffer) => {
          let end: number;
          try {
            end = flush.feed(chunk);
          } catch (e) {
            return finish(asError(e));
          }
          out.push(end >= 0 ? chunk.subarray(0, end) : chunk);
          size += chunk.length;
          if (end >= 0) {
            stream.end('0000');
            return finish(undefined, Buffer.concat(out));
          }
          if (size > req.maxBytes) finish(new SshLookupError(`the ref list is larger than ${req.maxBytes} bytes`));
        });
        stream.on('close', () => {
          const said = firstLine(stderr);
          const status = exitCode === undefined ? '' : ` (exit status ${exitCode})`;
          finish(
            new SshLookupError(
              said
                ? `git-upload-pack on ${server} failed${status}: ${said}`
                : `git-upload-pack on ${server} ended before the ref list${status}`,
            ),
          );
        });
      });
    });

    const connectOver = (socket: Socket) => {
      sock = socket;
      if (settled) {
        socket.destroy();
        return;
      }
      conn.connect({
        sock: socket,
        host: remote.host,
        port: remote.port,
        username: remote.user,
        authHandler: [keyAuth],
        readyTimeout: req.timeoutMs,
        ...(offered && offered.length > 0 ? { algorithms: { serverHostKey: offered } } : {}),
        hostVerifier: (key: Buffer) => {
          if (isKnownHostKey(known, key)) return true;
          const type = utils.parseKey(key);
          const what = `${type instanceof Error ? 'host' : type.type} key ${fingerprint(key)}`;
          hostKeyProblem =
            known.length === 0
              ? `the host key of ${server} is not known: add it to the hooks' known_hosts (SSH_KNOWN_HOSTS; the server offered ${what})`
              : known.some((k) => k.revoked && k.blob.equals(key))
                ? `the host key of ${server} (${what}) is revoked in the hooks' known_hosts`
                : `the host key of ${server} does not match the hooks' known_hosts (the server offered ${what}): a changed key or someone in between`;
          return false;
        },
      });
    };
    egressSocket(req.egress, remote.host, remote.port).then(
      (socket) => {
        try {
          connectOver(socket);
        } catch (e) {
          finish(new SshLookupError(`cannot connect to ${server}: ${errorMessage(e)}`));
        }
      },
      (err: Error & { code?: string }) => {
        const denied = egressDenied(err);
        finish(
          new SshLookupError(denied ? denied.message : `cannot reach ${server} over SSH: ${err.code ?? err.message}`),
        );
      },
    );
  });
}
