/**
 * Serving Programs to the workspaces that run them, as upstream's operator serves them from its
 * file server (https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/program_controller.go,
 * the artifact URL `…/programs/<namespace>/<name>`). Unlike upstream, the answer is only for the
 * workspace of a Stack that uses the Program, and the workspace checks its digest:
 *
 * - who: the fetch container sends a projected token of its pod's ServiceAccount for the audience
 *   PROGRAM_TOKEN_AUDIENCE; a TokenReview says whose it is: `system:serviceaccount:<ns>:<sa>`, and,
 *   for a token bound to a pod, which pod;
 * - may it: `<ns>` is the Program's namespace, and a Workspace of that namespace, as the hooks'
 *   watch holds it, downloads this Program (its `spec.flux.url` is this Program's URL) and runs its
 *   pod as `<sa>`; a token bound to a pod must be that Workspace's pod (`<workspace>-workspace-0`);
 * - what: the Program as the API server holds it now, rendered as the Program hook renders it;
 *   the workspace refuses it unless its digest is the one the Stack handed over.
 */
import type { Program } from '../../../schemas/generated/types';
import { MAX_PROGRAM_BYTES } from '../../../contract';
import { isRecord } from '../lib/json';
import { ReviewUnavailable, type Reviewer, type UserInfo } from '../kube/token-review';
import { workspaceName } from '../workspace/pod';
import { programProblem } from './sync';
import { renderProgram } from './render';

/** A Workspace that downloads a Program, as the hooks' watch holds it (objects/gauges.ts). */
export interface ProgramReader {
  /** The Workspace's name. */
  workspace: string;
  /** The ServiceAccount its pod runs as. */
  serviceAccount: string;
}

/** The API calls of the program server (the real ones: kube/token-review.ts, objects/kubernetes.ts). */
export interface ProgramServerApi {
  /** TokenReview: the token's user, or undefined when it is not valid for the audience. */
  reviewer: Pick<Reviewer, 'authenticate'>;
  /** The Program, or undefined when there is none. */
  getProgram(namespace: string, name: string): Promise<Program | undefined>;
}

/** An answer of the program route: the status, and the Pulumi.yaml or why not. */
export type ProgramAnswer =
  { status: 200; yaml: string; digest: string } | { status: 401 | 403 | 404 | 409 | 429 | 503; message: string };

/**
 * The downloads served at once (each holds a rendered Program). A caller takes one only once it is
 * authorized, so made-up tokens, bounded by the reviewer's own cap on TokenReviews in flight,
 * cannot keep a workspace from its Program.
 */
export class DownloadSlots {
  private taken = 0;
  constructor(readonly max: number) {}
  /** Takes a slot if one is free. */
  take(): boolean {
    if (this.taken >= this.max) return false;
    this.taken++;
    return true;
  }
  give(): void {
    this.taken--;
  }
}

const POD_NAME = 'authentication.kubernetes.io/pod-name';
const SERVICE_ACCOUNT = /^system:serviceaccount:([^:]+):([^:]+)$/;

/**
 * Whether the token's holder may read the Program `namespace/name`, given the Workspaces that
 * download it. Undefined: it may; else why not (403).
 */
export function refusal(
  user: Pick<UserInfo, 'username' | 'extra'>,
  namespace: string,
  name: string,
  readers: readonly ProgramReader[],
): string | undefined {
  const account = SERVICE_ACCOUNT.exec(user.username);
  if (!account) return `only the ServiceAccount of a workspace may read Program ${namespace}/${name}`;
  const [, ns, sa] = account;
  if (ns !== namespace) return `a ServiceAccount of namespace ${ns} may not read Program ${namespace}/${name}`;
  const pods = user.extra[POD_NAME];
  const pod = Array.isArray(pods) && pods.length === 1 ? pods[0] : undefined;
  const allowed = readers.some(
    (r) => r.serviceAccount === sa && (pod === undefined || pod === `${workspaceName(r.workspace)}-0`),
  );
  if (allowed) return undefined;
  return `no Workspace of namespace ${namespace} that downloads Program ${name} runs ${pod ? `pod ${pod} ` : ''}as ServiceAccount ${sa}`;
}

/**
 * The answer to `GET /programs/<namespace>/<name>` with `token` (undefined: no bearer token): the
 * caller is authorized first, then waits for nothing: without a free slot it is told to retry (429).
 */
export async function answerProgram(
  api: ProgramServerApi,
  readersOf: (namespace: string, name: string) => readonly ProgramReader[] | undefined,
  slots: DownloadSlots,
  audience: string,
  namespace: string,
  name: string,
  token: string | undefined,
): Promise<ProgramAnswer> {
  if (token === undefined || token === '')
    return { status: 401, message: "send the workspace pod's projected ServiceAccount token as a bearer token" };
  let user: UserInfo | undefined;
  try {
    user = await api.reviewer.authenticate(token, [audience]);
  } catch (e) {
    if (e instanceof ReviewUnavailable) return { status: 503, message: e.message };
    throw e;
  }
  if (user === undefined) return { status: 401, message: `the token is not valid for the audience ${audience}` };
  const readers = readersOf(namespace, name);
  if (readers === undefined)
    return { status: 503, message: "the hook server's watch of Workspaces is not synced yet; retry" };
  const why = refusal(user, namespace, name, readers);
  if (why !== undefined) return { status: 403, message: why };
  if (!slots.take()) return { status: 429, message: 'too many Program downloads at once; retry' };
  try {
    return await readProgram(api, namespace, name);
  } finally {
    slots.give();
  }
}

/** The Program as the API server holds it now, rendered, or why not. */
async function readProgram(api: ProgramServerApi, namespace: string, name: string): Promise<ProgramAnswer> {
  let program: Program | undefined;
  try {
    program = await api.getProgram(namespace, name);
  } catch (e) {
    // Only the status code: a client error's message carries the API server's answer.
    const http = isRecord(e) && typeof e.code === 'number' ? ` (HTTP ${e.code})` : '';
    return { status: 503, message: `cannot read Program ${namespace}/${name} from the API server${http}; retry` };
  }
  if (program === undefined) return { status: 404, message: `Program ${namespace}/${name} not found` };
  const problem = programProblem(program);
  if (problem !== undefined) return { status: 409, message: `Program ${namespace}/${name} is invalid: ${problem}` };
  const rendered = renderProgram(program);
  if (rendered.size > MAX_PROGRAM_BYTES)
    return { status: 409, message: `Program ${namespace}/${name} renders to more than ${MAX_PROGRAM_BYTES} bytes` };
  return { status: 200, yaml: rendered.yaml, digest: rendered.digest };
}
