/**
 * The hook server the probe attacks: the real one (buildServer), configured as deployed, except
 * that its git lookups go to a stand-in that never touches the network (the probe stays on
 * 127.0.0.1; a mutated Stack may name any repository), and its Events go to a stand-in that checks
 * each one instead of an API server.
 */
import { configFromEnv } from '../hooks/src/config';
import { MAX_MESSAGE_BYTES } from '../hooks/src/events/event';
import type { EventBody } from '../hooks/src/events/recorder';
import { GitResolver } from '../hooks/src/git/ls-remote';
import { decryptSshKey } from '../hooks/src/git/ssh-key';
import type { RefLookup, RefLookupRequest } from '../hooks/src/stack/source';
import { buildServer, type HookServer } from '../hooks/src/server';
import { hasControlCharacter } from '../hooks/test/answers';

/**
 * Stand-in for the git lookups: every branch unresolvable, and no network. An SSH key is
 * decrypted first, as the real lookup does (its rounds checked, in a worker thread, within its
 * time budget), so the probe's keys reach that code.
 */
class OfflineGitResolver extends GitResolver {
  override async resolve(req: RefLookupRequest): Promise<RefLookup> {
    if (req.unsupported) return { error: req.unsupported };
    if (req.ssh) {
      try {
        await decryptSshKey(req.ssh.privateKey, req.ssh.passphrase);
      } catch (err) {
        return { error: `cannot resolve "${req.ref}": ${(err as Error).message}` };
      }
    }
    return { error: 'the probe makes no git lookups (stand-in)' };
  }
}

/** What was wrong with the Events the server wrote: raw control characters, or too long a message. */
export class EventChecks {
  readonly problems: string[] = [];
  written = 0;

  readonly api = {
    create: (event: EventBody): Promise<void> => {
      this.written++;
      if (hasControlCharacter(event.message))
        this.problems.push(
          `event ${event.reason}: control characters in ${JSON.stringify(event.message.slice(0, 120))}`,
        );
      if (Buffer.byteLength(event.message, 'utf8') > MAX_MESSAGE_BYTES)
        this.problems.push(`event ${event.reason}: a message of more than ${MAX_MESSAGE_BYTES} bytes`);
      return Promise.resolve();
    },
  };
}

export function buildProbeServer(logStream: NodeJS.WritableStream, events: EventChecks): HookServer {
  const config = configFromEnv({ LOG_LEVEL: 'info' });
  return buildServer(
    { ...config, host: '127.0.0.1', port: 0 },
    {
      logStream,
      git: new OfflineGitResolver({ timeoutMs: 1, cacheTtlMs: 1 }),
      events: { api: events.api, via: 'the probe (a stand-in that checks each event)' },
    },
  );
}
