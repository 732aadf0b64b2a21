import type { Program, ProgramStatus } from '../../../schemas/generated/types';
import { Annotations, rfc3339 } from '../../../contract';
import { formatErrors, validateProgram } from '../../../schemas';
import { MAX_NESTING, pathNestedDeeperThan } from '../lib/json';
import { objectsOf, type KObject, type ObjectMap } from '../lib/k8s';
import { checkAnswer, childDigest, keptChild, recordedDigests, digestKey } from '../lib/kept-children';
import { applyMark } from '../stack/conditions';
import { programConfigMapName } from '../stack/source';
import { tooDeepMessage } from '../stack/validate';
import { renderProgram } from './render';
import { configMapTooLarge } from './size';

export interface ProgramSyncRequest {
  object: Program;
  attachments?: ObjectMap;
  finalizing?: boolean;
}

export interface ProgramSyncResponse {
  status: ProgramStatus;
  attachments: KObject[];
}

const PROGRAM_LABEL = 'pulumi.com/program-name';

/** Stalled reason of a Program whose ConfigMap could not be written (size.ts). */
export const PROGRAM_TOO_LARGE = 'ProgramTooLarge';

/**
 * The Program decorator: validates the Program, renders it, attaches a ConfigMap holding the
 * project, and reports an upstream-shaped artifact (revision = generation, sha256 digest) that
 * Stacks consume like a Flux artifact. An invalid Program, or one too large for its ConfigMap,
 * keeps its last good attachment and artifact-less status says why, so Stacks using it stall
 * (SourceUnavailable, with the Program's message) instead of deploying garbage or an old program.
 */
export function syncProgram(req: ProgramSyncRequest, now: Date): ProgramSyncResponse {
  const program = req.object;
  const name = program.metadata.name;
  const namespace = program.metadata.namespace ?? '';
  const generation = program.metadata.generation;
  const cmName = programConfigMapName(name);
  const observed = objectsOf(req.attachments, 'ConfigMap', 'v1').find((o) => o.metadata.name === cmName);
  const previous = program.status ?? {};
  const answer = (status: ProgramStatus, attachment: { child: KObject; digest: string } | undefined) => {
    const attachments = attachment ? [attachment.child] : [];
    checkAnswer(`Program ${namespace}/${name}`, namespace, attachments, [
      { kind: 'ConfigMap', apiVersion: 'v1', name: (n) => n === cmName },
    ]);
    // What this answer asks of the attachment, for the keep path of the next syncs.
    status.childDigests = attachment ? { [digestKey('ConfigMap', cmName)]: attachment.digest } : {};
    return { status, attachments };
  };

  // A Program that cannot be delivered keeps its last good attachment, as last answered if the
  // status's digest says that is what its copy is (else 409); its status has no artifact.
  const stalled = (reason: string, message: string): ProgramSyncResponse =>
    answer(
      {
        observedGeneration: generation,
        conditions: applyMark(previous.conditions, { kind: 'stalled', reason, message }, generation, now),
      },
      observed
        ? keptChild(
            observed,
            { kind: 'ConfigMap', apiVersion: 'v1', name: cmName, namespace },
            recordedDigests(program.status),
            'attachments',
          )
        : undefined,
    );
  const message = programProblem(program);
  if (message !== undefined) return stalled('SpecInvalid', message);

  const rendered = renderProgram(program);
  const revision = String(generation);
  const unchanged = previous.artifact?.revision === revision && previous.artifact?.digest === rendered.digest;
  const status: ProgramStatus = {
    observedGeneration: generation,
    conditions: applyMark(
      previous.conditions,
      { kind: 'ready', message: 'the program has been rendered' },
      generation,
      now,
    ),
    artifact: {
      path: `programs/${namespace}/${name}/${revision}`,
      url: `configmap://${namespace}/${cmName}/Pulumi.yaml`,
      revision,
      digest: rendered.digest,
      size: rendered.size,
      lastUpdateTime:
        unchanged && typeof previous.artifact?.lastUpdateTime === 'string'
          ? previous.artifact.lastUpdateTime
          : rfc3339(now),
    },
  };
  const configMap: KObject = {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: cmName,
      namespace,
      labels: { [PROGRAM_LABEL]: name },
      annotations: { [Annotations.programRevision]: revision, [Annotations.programDigest]: rendered.digest },
    },
    data: { 'Pulumi.yaml': rendered.yaml },
  };
  const tooLarge = configMapTooLarge(`${namespace}/${name}`, configMap, rendered.size);
  if (tooLarge !== undefined) return stalled(PROGRAM_TOO_LARGE, tooLarge);
  return answer(status, { child: configMap, digest: childDigest(configMap, namespace) });
}

/** What is wrong with a Program, or undefined. Nesting first: validation and rendering walk it recursively. */
function programProblem(program: Program): string | undefined {
  const tooDeep = pathNestedDeeperThan(program.program, MAX_NESTING, 'program');
  if (tooDeep !== undefined) return tooDeepMessage(tooDeep, 'program');
  const check = validateProgram(program);
  return check.ok ? undefined : formatErrors(check.errors);
}
