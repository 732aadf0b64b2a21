/**
 * The toolchain's older Pulumi CLIs (OLD_PULUMI_VERSIONS) by what they are for, chosen against the
 * agent's structured-config floor (agent/src/serve/cli-version.ts) rather than by their order:
 *
 *   tooOld      the newest one older than structured config needs (v3.197.0): PulumiVersionTooLow
 *   structured  the oldest one that has it (v3.203.0): the floor is not set too high
 */
import { PULUMI_CLI_VERSIONS } from '../../agent/src/serve/cli-version';
import { compareVersions } from '../../agent/src/serve/config';
import { versions, VERSIONS_FILE } from './toolchain';

export interface OlderClis {
  tooOld: string;
  structured: string;
}

export function olderClis(
  oldPulumi: readonly string[],
  floor: string = PULUMI_CLI_VERSIONS.structuredConfig,
): OlderClis {
  const sorted = [...oldPulumi].sort(compareVersions);
  const tooOld = sorted.filter((v) => compareVersions(v, floor) < 0).at(-1);
  const structured = sorted.find((v) => compareVersions(v, floor) >= 0);
  if (tooOld === undefined || structured === undefined) {
    throw new Error(
      `${VERSIONS_FILE}: OLD_PULUMI_VERSIONS (${oldPulumi.join(',')}) needs a version older than ${floor} ` +
        'and one not older (structured config)',
    );
  }
  return { tooOld, structured };
}

export const OLDER_CLIS: OlderClis = olderClis(versions.oldPulumi);
