import type { ResourceRef, Stack, StackSpec } from '../../../schemas/generated/types';
import { validateStack } from '../../../schemas';
import { parseDuration } from '../lib/duration';
import { MAX_NESTING, pathNestedDeeperThan, tooDeepMessage } from '../lib/json';
import { parseDriftSchedule } from '../lib/drift-schedule';
import { isDataKey } from '../../../contract';
import { templateFieldProblems } from './template-fields';

/** Flux source kinds a Stack may reference, with their resource names (customize needs the plural). */
export const FLUX_KINDS: Record<string, string> = {
  GitRepository: 'gitrepositories',
  OCIRepository: 'ocirepositories',
  Bucket: 'buckets',
  HelmChart: 'helmcharts',
  ExternalArtifact: 'externalartifacts',
};
export const FLUX_GROUP = 'source.toolkit.fluxcd.io';

/** Whether `kind` is one of FLUX_KINDS: an own key, so `toString` or `constructor` is no kind. */
export function isFluxKind(kind: unknown): boolean {
  return typeof kind === 'string' && Object.hasOwn(FLUX_KINDS, kind);
}

const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;

/** The inline git fields: any of them makes a git source (upstream: the embedded GitSource is non-nil). */
const GIT_FIELDS = ['projectRepo', 'commit', 'branch', 'repoDir', 'gitAuth', 'gitAuthSecret', 'shallow'] as const;

/** True when any inline git field is present (upstream: the embedded GitSource is non-nil). */
export function hasGitSource(spec: StackSpec): boolean {
  return GIT_FIELDS.some((field) => spec[field] !== undefined);
}

/**
 * The program sources a spec sets, each as the field that sets it: git (`projectRepo` or the first
 * git field present), `fluxSource`, `programRef`. Upstream's controller takes the first of several
 * (git, then Flux, then Program) without a word; here more than one is SpecInvalid
 * (docs/migration.md says why).
 */
function programSources(spec: StackSpec): string[] {
  const sources: string[] = [];
  const git = GIT_FIELDS.find((field) => spec[field] !== undefined);
  if (git !== undefined) sources.push(`spec.${spec.projectRepo !== undefined ? 'projectRepo' : git}`);
  if (spec.fluxSource !== undefined) sources.push('spec.fluxSource');
  if (spec.programRef !== undefined) sources.push('spec.programRef');
  return sources;
}

/** Optional names that, when given, must not be empty (upstream would take "" for "not set"). */
const NAMES_IF_SET = [
  ['spec.serviceAccountName', (spec: StackSpec) => spec.serviceAccountName],
  [
    'spec.workspaceTemplate.spec.serviceAccountName',
    (spec: StackSpec) => spec.workspaceTemplate?.spec?.serviceAccountName,
  ],
  ['spec.workspaceTemplate.spec.image', (spec: StackSpec) => spec.workspaceTemplate?.spec?.image],
] as const;

/**
 * Everything wrong with a Stack, each as one sentence naming the field and what to do.
 * Empty when the Stack is valid. Checks the nesting first (the checks after it walk the spec
 * recursively), then the schema (the API server may not have: an older CRD, or a request made up
 * by hand) and then upstream's controller-side rules.
 *
 * The checks depend on the apiVersion, kind, name, namespace and spec only: the status is the
 * hooks' own output (an unexpected status must never stall a Stack), and the rest of the metadata
 * is the API server's to validate.
 */
export function validateStackObject(stack: Stack): readonly string[] {
  const tooDeep = pathNestedDeeperThan(stack.spec, MAX_NESTING, 'spec');
  if (tooDeep !== undefined) return [tooDeepMessage(tooDeep, 'Stack')];
  return checkStack({
    apiVersion: stack.apiVersion,
    kind: stack.kind,
    metadata: { name: stack.metadata.name, namespace: stack.metadata.namespace },
    spec: stack.spec,
  });
}

function checkStack(stack: Stack): string[] {
  const schema = validateStack(stack);
  if (!schema.ok) return schema.errors.map((e) => `${e.path} ${e.message}`);
  const spec = stack.spec;
  const namespace = stack.metadata.namespace;
  const problems: string[] = [];

  const checkRef = (field: string, ref: ResourceRef, secretOnly: boolean) => {
    switch (ref.type) {
      case 'Secret': {
        if (!ref.secret?.name || !ref.secret.key) {
          problems.push(`${field}: a Secret reference needs secret.name and secret.key`);
        } else if (ref.secret.namespace && ref.secret.namespace !== namespace) {
          problems.push(
            `${field}: cross-namespace refs are not allowed (Secret ${ref.secret.namespace}/${ref.secret.name}); use a Secret in namespace ${namespace ?? 'of the Stack'}`,
          );
        }
        break;
      }
      case 'Literal':
        if (secretOnly) {
          problems.push(
            `${field}: "Literal" selectors are no longer supported in v2, please use a secret reference instead`,
          );
        } else if (ref.literal?.value === undefined) {
          problems.push(`${field}: a Literal reference needs literal.value`);
        }
        break;
      case 'Env':
      case 'FS':
        problems.push(
          secretOnly
            ? `${field}: "${ref.type}" selectors are no longer supported in v2, please use a secret reference instead`
            : `${field}: ref type "${ref.type}" is deprecated; use type Secret (or Literal) instead`,
        );
        break;
      default:
        problems.push(`${field}: unknown ref type "${ref.type}"; use Secret or Literal`);
    }
  };

  for (const [name, ref] of Object.entries(spec.envRefs ?? {})) {
    if (!ENV_NAME.test(name)) problems.push(`spec.envRefs.${name}: "${name}" is not a valid environment variable name`);
    checkRef(`spec.envRefs.${name}`, ref, false);
  }
  for (const [key, ref] of Object.entries(spec.secretsRef ?? {})) checkRef(`spec.secretsRef.${key}`, ref, false);

  const sources = programSources(spec);
  if (sources.length > 1) {
    problems.push(
      `${sources.join(', ')}: a Stack deploys one program, so set exactly one of projectRepo (with commit or branch), fluxSource and programRef; keep the one you mean and remove the others`,
    );
  }
  for (const [field, name] of NAMES_IF_SET) {
    if (name(spec) === '')
      problems.push(`${field}: must not be empty; name one, or leave the field out for the default`);
  }

  if (hasGitSource(spec)) {
    if (!spec.projectRepo) problems.push('spec.projectRepo: missing "projectRepo"; set the git repository URL');
    if (spec.commit && spec.branch) {
      problems.push('spec.commit, spec.branch: only one of "commit" or "branch" should be specified');
    } else if (!spec.commit && !spec.branch) {
      problems.push('spec.commit, spec.branch: missing "commit" or "branch"; set one of them');
    }
    const auth = spec.gitAuth;
    if (auth) {
      if (auth.sshAuth) {
        checkRef('spec.gitAuth.sshAuth.sshPrivateKey', auth.sshAuth.sshPrivateKey, true);
        if (auth.sshAuth.password) checkRef('spec.gitAuth.sshAuth.password', auth.sshAuth.password, true);
      } else if (auth.accessToken) {
        checkRef('spec.gitAuth.accessToken', auth.accessToken, true);
      } else if (auth.githubApp) {
        checkRef('spec.gitAuth.githubApp.appID', auth.githubApp.appID, true);
        checkRef('spec.gitAuth.githubApp.installationID', auth.githubApp.installationID, true);
        checkRef('spec.gitAuth.githubApp.privateKey', auth.githubApp.privateKey, true);
      } else if (auth.basicAuth) {
        checkRef('spec.gitAuth.basicAuth.userName', auth.basicAuth.userName, true);
        checkRef('spec.gitAuth.basicAuth.password', auth.basicAuth.password, true);
      } else {
        problems.push(
          "spec.gitAuth: gitAuth config must specify exactly one of 'personalAccessToken', 'sshPrivateKey', 'basicAuth', or 'githubApp'",
        );
      }
    }
  } else if (spec.fluxSource) {
    const ref = spec.fluxSource.sourceRef;
    const [group, version] = ref.apiVersion.split('/');
    if (group !== FLUX_GROUP || !version) {
      problems.push(
        `spec.fluxSource.sourceRef.apiVersion: "${ref.apiVersion}" is not a Flux source API version; use ${FLUX_GROUP}/v1 (or v1beta2)`,
      );
    }
    if (!isFluxKind(ref.kind)) {
      problems.push(
        `spec.fluxSource.sourceRef.kind: unknown Flux source kind "${ref.kind}"; use one of ${Object.keys(FLUX_KINDS).join(', ')}`,
      );
    }
  }

  for (const [i, p] of (spec.prerequisites ?? []).entries()) {
    const d = p.requirement?.succeededWithinDuration;
    if (d !== undefined && (parseDuration(d) ?? -1) < 0) {
      problems.push(
        `spec.prerequisites[${i}].requirement.succeededWithinDuration: "${d}" is not a duration like "1h" or "30m"`,
      );
    }
  }
  const ttl = spec.updateTemplate?.spec?.ttlAfterCompleted;
  if (ttl !== undefined && (parseDuration(ttl) ?? -1) < 0) {
    problems.push(`spec.updateTemplate.spec.ttlAfterCompleted: "${ttl}" is not a duration like "24h"`);
  }
  problems.push(...templateFieldProblems(stack, hasGitSource(spec)));
  problems.push(...outputsToProblems(spec));
  const schedule = spec.driftDetection?.schedule;
  const parsedSchedule = schedule === undefined ? undefined : parseDriftSchedule(schedule);
  if (typeof parsedSchedule === 'string') problems.push(`spec.driftDetection.schedule: ${parsedSchedule}`);
  problems.push(...approvalProblems(stack));
  const profile = spec.workspaceTemplate?.spec?.securityProfile;
  if (profile !== undefined && profile !== 'restricted' && profile !== 'baseline') {
    problems.push(
      `spec.workspaceTemplate.spec.securityProfile: "${profile}" is not a profile; use "restricted" or "baseline"`,
    );
  }
  return problems;
}

/** Semantic checks of `spec.approval` (the schema checks the types and the duration's form). */
function approvalProblems(stack: Stack): string[] {
  const after = stack.spec?.approval?.expiresAfter;
  if (after === undefined) return [];
  const ms = parseDuration(after);
  if (ms === undefined || ms <= 0)
    return [`spec.approval.expiresAfter: "${after}" is not a positive duration like "24h"`];
  return [];
}

/** What is wrong with spec.outputsTo beyond the schema, each naming the field. */
function outputsToProblems(spec: StackSpec): string[] {
  const entries = spec.outputsTo?.outputs;
  if (entries === undefined) return [];
  const problems: string[] = [];
  const keys = new Map<string, number>();
  for (const [i, entry] of entries.entries()) {
    const field = `spec.outputsTo.outputs[${i}]`;
    const key = entry.key ?? entry.name;
    if (!isDataKey(key)) {
      problems.push(
        entry.key === undefined
          ? `${field}.name: "${entry.name}" is not a valid key (letters, digits, "-", "_" and "."; not "." or ".."), so give it one: set ${field}.key`
          : `${field}.key: "${entry.key}" is not a valid key; use letters, digits, "-", "_" and ".", and not "." or ".."`,
      );
      continue;
    }
    const first = keys.get(key);
    if (first !== undefined) {
      problems.push(
        `${field}: key "${key}" is already used by spec.outputsTo.outputs[${first}]; each output needs a key of its own`,
      );
    } else {
      keys.set(key, i);
    }
  }
  return problems;
}
