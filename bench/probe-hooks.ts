/**
 * The hook server the probe attacks: the real one (buildServer), configured as deployed, except
 * that its git lookups go to a stand-in that answers every lookup with an error and never touches
 * the network (the probe stays on 127.0.0.1; a mutated Stack may name any repository).
 */
import { configFromEnv } from '../hooks/src/config';
import { GitResolver } from '../hooks/src/git/ls-remote';
import type { RefLookup, RefLookupRequest } from '../hooks/src/stack/source';
import { buildServer, type HookServer } from '../hooks/src/server';

/** Stand-in for the git lookups: no network, every branch unresolvable. */
class OfflineGitResolver extends GitResolver {
  override resolve(req: RefLookupRequest): Promise<RefLookup> {
    return Promise.resolve({ error: req.unsupported ?? 'the probe makes no git lookups (stand-in)' });
  }
}

export function buildProbeServer(logStream: NodeJS.WritableStream): HookServer {
  const config = configFromEnv({ LOG_LEVEL: 'info' });
  return buildServer(
    { ...config, host: '127.0.0.1', port: 0 },
    { logStream, git: new OfflineGitResolver({ timeoutMs: 1, cacheTtlMs: 1 }) },
  );
}
