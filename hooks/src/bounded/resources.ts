import type { V1ResourceRequirements } from '@kubernetes/client-node';
import type { EphemeralStorage } from './settings';

const KEY = 'ephemeral-storage';

/**
 * `resources` with the configured ephemeral-storage request and limit where they set none: a
 * default, so a container's own ephemeral-storage values win. No settings: `resources` unchanged.
 */
export function withEphemeralStorage(
  resources: V1ResourceRequirements,
  storage: EphemeralStorage | undefined,
): V1ResourceRequirements {
  if (!storage) return resources;
  const out: V1ResourceRequirements = { ...resources };
  if (storage.request !== undefined && resources.requests?.[KEY] === undefined)
    out.requests = { ...resources.requests, [KEY]: storage.request };
  if (storage.limit !== undefined && resources.limits?.[KEY] === undefined)
    out.limits = { ...resources.limits, [KEY]: storage.limit };
  return out;
}
