/**
 * The sync requests recorded from a real cluster (bench/requests/, written by
 * ./capture-sync-request.ts), and the one clock at which they are at rest. The benches and
 * hooks/test/captured-request.test.ts read them here.
 */
import { readFileSync } from 'node:fs';
import { validateCompositeSyncRequest, type Validator } from '../schemas';
import { isRecord } from '../hooks/test/json';
import { repoPath } from '../packaging/lib/repo';

/** bench/requests/<file>: path of a recording. */
function recordingPath(file: string): string {
  return repoPath('bench', 'requests', file);
}

/** A recorded sync request and the agent image and program server the hooks that answered it were configured with. */
export interface Recording<R> {
  request: R;
  agentImage: string;
  /** The hooks' PROGRAM_SERVER_URL and the PEM of its CA: in the Workspace's URL and its pod's fetch container. */
  programServer: { url: string; ca: string };
}

/** A recording, checked: a Metacontroller sync request whose parent is valid against `parentSchema`. */
export function recording<R>(file: string, parentSchema: Validator): Recording<R> {
  const data: unknown = JSON.parse(readFileSync(recordingPath(file), 'utf8'));
  if (!isRecord(data) || typeof data.agentImage !== 'string') throw new Error(`${file} holds no agent image`);
  const server = data.programServer;
  if (!isRecord(server) || typeof server.url !== 'string' || typeof server.ca !== 'string')
    throw new Error(`${file} holds no program server`);
  const request = data.request;
  if (!validateCompositeSyncRequest(request).ok || !isRecord(request) || !parentSchema(request.parent).ok)
    throw new Error(`${file} holds no valid sync request for its kind`);
  return { request: request as R, agentImage: data.agentImage, programServer: { url: server.url, ca: server.ca } };
}

/** What the clock is read from: a recorded Stack sync request. */
export interface RecordedStack {
  parent: { status?: { lastUpdate?: { lastResyncTime?: string } } };
}

/**
 * The hooks' clock for a recorded Stack and the requests recorded with it: an hour after the
 * Stack's last update. The answers depend on the clock (an Update past its TTL is pruned, the
 * retention's resyncAfterSeconds counts down), so the wall clock would make a recording stop being
 * at rest some days after it was made; this one keeps every answer the same on any day.
 */
export function restingClock(stackRequest: RecordedStack): Date {
  const last = Date.parse(stackRequest.parent.status?.lastUpdate?.lastResyncTime ?? '');
  if (Number.isNaN(last)) throw new Error('the recorded Stack has no status.lastUpdate.lastResyncTime');
  return new Date(last + 3600_000);
}
