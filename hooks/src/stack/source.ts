import type { Stack, StackSpec } from '../../../schemas/generated/types';
import type { V1Secret } from '@kubernetes/client-node';
import { isRecord } from '../lib/json';
import { conditionOf, findObject, type KObject, type ObjectMap } from '../lib/k8s';
import { hasGitSource } from './validate';
import { Reasons } from './conditions';
import { parseSshUrl } from '../../../contract';
import { localSourceDir, type FetchSource, type SecretEnv } from '../workspace/source';
import { PULUMI_API_VERSION } from '../lib/api-versions';
import { type RefLookup, type RefLookupRequest, refLookupKey } from '../git/ref-lookup';

/** The source a Stack's Workspace fetches (workspace/source.ts). */
export type WorkspaceSource = FetchSource;

export type SourceResolution =
  { ok: true; commit: string; source: WorkspaceSource } | { ok: false; reason: string; message: string };

const FULL_SHA = /^[0-9a-f]{40}$/;

/** Git credentials as secretKeyRef env vars for the fetch container (upstream's precedence). */
export function gitAuthEnv(spec: StackSpec): SecretEnv[] {
  const auth = spec.gitAuth;
  if (auth) {
    const ref = (env: string, r: { secret?: { name: string; key: string } } | undefined): SecretEnv[] =>
      r?.secret ? [{ env, secret: r.secret.name, key: r.secret.key }] : [];
    if (auth.sshAuth) {
      return [...ref('GIT_SSH_PRIVATE_KEY', auth.sshAuth.sshPrivateKey), ...ref('GIT_PASSWORD', auth.sshAuth.password)];
    }
    if (auth.accessToken) return ref('GIT_TOKEN', auth.accessToken);
    if (auth.githubApp) {
      return [
        ...ref('GIT_GITHUB_APP_ID', auth.githubApp.appID),
        ...ref('GIT_GITHUB_APP_INSTALLATION_ID', auth.githubApp.installationID),
        ...ref('GIT_GITHUB_APP_PRIVATE_KEY', auth.githubApp.privateKey),
      ];
    }
    if (auth.basicAuth) {
      return [...ref('GIT_USERNAME', auth.basicAuth.userName), ...ref('GIT_PASSWORD', auth.basicAuth.password)];
    }
    return [];
  }
  if (spec.gitAuthSecret) {
    // Legacy: every key optional; the agent applies the precedence sshPrivateKey > accessToken > username/password.
    const s = spec.gitAuthSecret;
    return [
      { env: 'GIT_SSH_PRIVATE_KEY', secret: s, key: 'sshPrivateKey', optional: true },
      { env: 'GIT_PASSWORD', secret: s, key: 'password', optional: true },
      { env: 'GIT_USERNAME', secret: s, key: 'username', optional: true },
      { env: 'GIT_TOKEN', secret: s, key: 'accessToken', optional: true },
    ];
  }
  return [];
}

/** The git ref the hooks must resolve, or undefined when the spec pins a full commit SHA. */
export function gitRefToResolve(spec: StackSpec): string | undefined {
  if (!hasGitSource(spec)) return undefined;
  if (spec.branch) return spec.branch;
  if (spec.commit && !FULL_SHA.test(spec.commit)) return spec.commit;
  return undefined;
}

/** Names of the Secrets the hooks need to resolve the git ref (none for public repos or pinned commits). */
export function secretsForLookup(spec: StackSpec): string[] {
  if (gitRefToResolve(spec) === undefined) return [];
  return [...new Set(gitAuthEnv(spec).map((e) => e.secret))].sort();
}

function secretValue(related: ObjectMap | undefined, namespace: string, name: string, key: string): string | undefined {
  const secret = findObject<V1Secret>(related, 'Secret', 'v1', namespace, name);
  // Own keys only, and only strings: a key named `constructor` is a missing key, not Object's.
  const data: unknown = secret?.data;
  const b64 = isRecord(data) && Object.hasOwn(data, key) ? data[key] : undefined;
  return typeof b64 === 'string' ? Buffer.from(b64, 'base64').toString('utf8') : undefined;
}

/** Builds the lookup the I/O phase must perform for this Stack, if any. */
export function planRefLookup(stack: Stack, related: ObjectMap | undefined): RefLookupRequest | undefined {
  const spec = stack.spec;
  const ref = gitRefToResolve(spec);
  if (ref === undefined || !spec.projectRepo) return undefined;
  const ns = stack.metadata?.namespace as string;
  const req: RefLookupRequest = { url: spec.projectRepo, ref };
  const auth = gitAuthEnv(spec);
  if (parseSshUrl(spec.projectRepo)) {
    const keyRef = auth.find((e) => e.env === 'GIT_SSH_PRIVATE_KEY');
    const privateKey = keyRef && secretValue(related, ns, keyRef.secret, keyRef.key);
    if (privateKey) {
      const passRef = auth.find((e) => e.env === 'GIT_PASSWORD');
      const passphrase = passRef && secretValue(related, ns, passRef.secret, passRef.key);
      req.ssh = passphrase ? { privateKey, passphrase } : { privateKey };
    } else if (keyRef && !keyRef.optional) {
      req.unsupported = `resolving "${ref}" needs the SSH key of gitAuth.sshAuth.sshPrivateKey: Secret ${ns}/${keyRef.secret} or its key "${keyRef.key}" is missing`;
    }
    return req;
  }
  const env = Object.fromEntries(auth.map((e) => [e.env, secretValue(related, ns, e.secret, e.key)]));
  if (env.GIT_SSH_PRIVATE_KEY !== undefined && env.GIT_TOKEN === undefined && env.GIT_USERNAME === undefined) {
    req.unsupported = `resolving "${ref}": an SSH key reads SSH URLs only (git@host:org/repo.git, ssh://…), not HTTP(S) ones; use an SSH URL, or gitAuth.accessToken or gitAuth.basicAuth`;
  } else if (
    env.GIT_GITHUB_APP_ID !== undefined ||
    env.GIT_GITHUB_APP_INSTALLATION_ID !== undefined ||
    env.GIT_GITHUB_APP_PRIVATE_KEY !== undefined
  ) {
    if (
      env.GIT_GITHUB_APP_ID === undefined ||
      env.GIT_GITHUB_APP_INSTALLATION_ID === undefined ||
      env.GIT_GITHUB_APP_PRIVATE_KEY === undefined
    ) {
      req.unsupported = `resolving "${ref}" needs gitAuth.githubApp's appID, installationID and privateKey: a referenced Secret or key is missing`;
    } else {
      req.githubApp = {
        appId: env.GIT_GITHUB_APP_ID,
        installationId: env.GIT_GITHUB_APP_INSTALLATION_ID,
        privateKey: env.GIT_GITHUB_APP_PRIVATE_KEY,
      };
    }
  } else if (env.GIT_TOKEN !== undefined) {
    req.username = 'git';
    req.password = env.GIT_TOKEN;
  } else if (env.GIT_USERNAME !== undefined || env.GIT_PASSWORD !== undefined) {
    req.username = env.GIT_USERNAME ?? '';
    req.password = env.GIT_PASSWORD ?? '';
  }
  return req;
}

/**
 * The commit the Stack should be at and the source the workspace fetches ("Step 1. Resolve the
 * source" in https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L671).
 * Validation lets only one source through (upstream would take git, then Flux, then Program).
 */
export function resolveSource(
  stack: Stack,
  related: ObjectMap | undefined,
  lookups: ReadonlyMap<string, RefLookup>,
  sourceLessDestroy: boolean,
  programsServed: boolean,
): SourceResolution {
  const spec = stack.spec;
  const ns = stack.metadata?.namespace;
  const projectInfo: unknown = stack.status?.projectInfo;
  // The observed status is not validated: strings only reach the workspace.
  if (
    sourceLessDestroy &&
    isRecord(projectInfo) &&
    typeof projectInfo.name === 'string' &&
    typeof projectInfo.runtime === 'string'
  ) {
    return {
      ok: true,
      commit: '',
      source: { kind: 'projectInfo', name: projectInfo.name, runtime: projectInfo.runtime },
    };
  }
  if (hasGitSource(spec)) {
    const url = spec.projectRepo!;
    const ref = gitRefToResolve(spec);
    let revision = spec.commit!;
    if (ref !== undefined) {
      const found = lookups.get(refLookupKey(url, ref));
      if (!found)
        return {
          ok: false,
          reason: Reasons.SourceUnavailable,
          message: `the commit of "${ref}" in ${url} is not known yet`,
        };
      if ('error' in found) return { ok: false, reason: Reasons.SourceUnavailable, message: found.error };
      revision = found.sha;
    }
    const source: WorkspaceSource = {
      kind: 'git',
      url,
      revision,
      shallow: spec.shallow === true,
      auth: gitAuthEnv(spec),
    };
    if (spec.repoDir) source.dir = spec.repoDir;
    return { ok: true, commit: revision, source };
  }
  if (spec.fluxSource) {
    const { kind, name, apiVersion } = spec.fluxSource.sourceRef;
    const obj = findObject(related, kind, apiVersion, ns, name);
    if (!obj) {
      return {
        ok: false,
        reason: Reasons.SourceUnavailable,
        message: `unable to retrieve Flux source ${kind} ${ns}/${name}: not found`,
      };
    }
    const artifact = artifactOf(obj);
    if (!artifact) {
      // Upstream says only "Flux source has no artifact"; when Flux has failed, its Ready message says why.
      const ready = conditionOf(obj, 'Ready');
      const why = ready?.status === 'False' && ready.message ? `: ${ready.message}` : '';
      return {
        ok: false,
        reason: Reasons.SourceUnavailable,
        message: `Flux source ${kind} ${ns}/${name} has no artifact${why}`,
      };
    }
    const source: WorkspaceSource = { kind: 'flux', url: artifact.url, digest: artifact.digest };
    if (spec.fluxSource.dir) source.dir = spec.fluxSource.dir;
    return { ok: true, commit: artifact.revision, source };
  }
  if (spec.programRef) {
    const name = spec.programRef.name;
    const program = findObject(related, 'Program', PULUMI_API_VERSION, ns, name);
    if (!program) {
      return {
        ok: false,
        reason: Reasons.SourceUnavailable,
        message: `unable to retrieve program for stack: Program ${ns}/${name} not found`,
      };
    }
    const artifact = artifactOf(program);
    const stalled = conditionOf(program, 'Stalled');
    const invalid = stalled?.status === 'True' ? stalled : undefined;
    if (!artifact || invalid) {
      const why = invalid?.message ? `: ${invalid.message}` : '';
      return { ok: false, reason: Reasons.SourceUnavailable, message: `Program ${ns}/${name} has no artifact${why}` };
    }
    if (!programsServed)
      return {
        ok: false,
        reason: Reasons.SourceUnavailable,
        message: `Program ${ns}/${name}: the hook server does not serve Programs (PROGRAM_SERVER_URL is unset)`,
      };
    // Only the digest and revision come from the Program's status: the URL is this server's own.
    return { ok: true, commit: artifact.revision, source: { kind: 'program', name, digest: artifact.digest } };
  }
  const local = spec.workspaceTemplate?.spec?.local?.dir;
  if (local) return { ok: true, commit: '', source: { kind: 'local', dir: localSourceDir(local) } };
  return { ok: true, commit: '', source: { kind: 'none' } };
}

/** A Flux source's or a Program's `status.artifact`, the same shape for both. */
function artifactOf(obj: KObject): { url: string; revision: string; digest: string } | undefined {
  const a = isRecord(obj.status) ? obj.status.artifact : undefined;
  if (!isRecord(a) || typeof a.url !== 'string' || typeof a.revision !== 'string') return undefined;
  const digest =
    typeof a.digest === 'string' ? a.digest : typeof a.checksum === 'string' ? `sha256:${a.checksum}` : undefined;
  if (digest === undefined) return undefined;
  return { url: a.url, revision: a.revision, digest };
}
