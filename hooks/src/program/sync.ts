import type { Program, ProgramStatus } from '../../../schemas/generated/types';
import { MAX_PROGRAM_BYTES, programPath, rfc3339 } from '../../../contract';
import { formatErrors, validateProgram } from '../../../schemas';
import { applyMark } from '../lib/conditions';
import { MAX_NESTING, pathNestedDeeperThan, tooDeepMessage } from '../lib/json';
import type { KObject, ObjectMap } from '../lib/k8s';
import { renderProgram } from './render';

export interface ProgramSyncRequest {
  object: Program;
  attachments?: ObjectMap;
  finalizing?: boolean;
}

export interface ProgramSyncResponse {
  status: ProgramStatus;
  attachments: KObject[];
}

/** Stalled reason of a Program while the hook server does not serve Programs (PROGRAM_SERVER_URL unset). */
export const PROGRAM_SERVER_OFF = 'ProgramServerNotConfigured';

/**
 * The Program decorator: validates the Program, renders it, and reports an upstream-shaped artifact
 * (revision = generation, the sha256 digest of the rendered Pulumi.yaml, the URL the hook server
 * serves it at: program/serve.ts) that Stacks consume like a Flux artifact. It attaches nothing: the
 * hook server renders the Program again when a workspace downloads it, and the workspace checks the
 * digest. An invalid Program has no artifact and its status says why, so Stacks using it stall
 * (SourceUnavailable, with the Program's message) instead of deploying garbage or an old program.
 */
export function syncProgram(req: ProgramSyncRequest, now: Date, serverUrl: string | undefined): ProgramSyncResponse {
  const program = req.object;
  const name = program.metadata.name;
  const namespace = program.metadata.namespace ?? '';
  const generation = program.metadata.generation;
  const previous = program.status ?? {};
  const stalled = (reason: string, message: string): ProgramSyncResponse => ({
    status: {
      observedGeneration: generation,
      conditions: applyMark(previous.conditions, { kind: 'stalled', reason, message }, generation, now),
    },
    attachments: [],
  });
  const message = programProblem(program);
  if (message !== undefined) return stalled('SpecInvalid', message);
  if (serverUrl === undefined)
    return stalled(
      PROGRAM_SERVER_OFF,
      'the hook server does not serve Programs: set PROGRAM_SERVER_URL and PROGRAM_SERVER_CA_FILE (docs/design.md)',
    );

  const rendered = renderProgram(program);
  if (rendered.size > MAX_PROGRAM_BYTES)
    return stalled(
      'SpecInvalid',
      `Program ${namespace}/${name} renders to a Pulumi.yaml of ${rendered.size} bytes, more than the ${MAX_PROGRAM_BYTES} bytes the hook server serves`,
    );
  const revision = String(generation);
  const unchanged = previous.artifact?.revision === revision && previous.artifact?.digest === rendered.digest;
  return {
    status: {
      observedGeneration: generation,
      conditions: applyMark(
        previous.conditions,
        { kind: 'ready', message: 'the program has been rendered' },
        generation,
        now,
      ),
      artifact: {
        path: `programs/${namespace}/${name}/${revision}`,
        url: `${serverUrl}${programPath(namespace, name)}`,
        revision,
        digest: rendered.digest,
        size: rendered.size,
        lastUpdateTime:
          unchanged && typeof previous.artifact?.lastUpdateTime === 'string'
            ? previous.artifact.lastUpdateTime
            : rfc3339(now),
      },
    },
    attachments: [],
  };
}

/** What is wrong with a Program, or undefined. Nesting first: validation and rendering walk it recursively. */
export function programProblem(program: Program): string | undefined {
  const tooDeep = pathNestedDeeperThan(program.program, MAX_NESTING, 'program');
  if (tooDeep !== undefined) return tooDeepMessage(tooDeep, 'program');
  const check = validateProgram(program);
  return check.ok ? undefined : formatErrors(check.errors);
}
