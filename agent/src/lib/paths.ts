import * as path from 'node:path';

/**
 * Every absolute path the agent reads or writes (the contract's Paths, config files,
 * PULUMI_ENV, LOCAL_DIR, the projected token, the in-cluster ServiceAccount files) goes through
 * hostPath. In a pod it is the identity. For local runs and tests, PKO_AGENT_ROOT names a
 * directory that stands for the container's `/`.
 */
export function hostPath(p: string, env: NodeJS.ProcessEnv = process.env): string {
  const root = env.PKO_AGENT_ROOT;
  if (root === undefined || root === '' || !path.isAbsolute(p)) return p;
  return path.join(root, p);
}

/** The prefix hostPath applies ('' in a pod). */
export function hostRoot(env: NodeJS.ProcessEnv = process.env): string {
  return env.PKO_AGENT_ROOT ?? '';
}

/** Whether `child` is `parent` or inside it (both absolute, normalised). */
export function isInside(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** A relative directory from the user (repoDir, flux dir) that must stay inside its root. */
export function safeSubdir(dir: string | undefined): string {
  const d = (dir ?? '').trim();
  if (d === '' || d === '.' || d === './') return '';
  const norm = path.posix.normalize(d.replace(/\\/g, '/'));
  if (path.posix.isAbsolute(norm) || norm === '..' || norm.startsWith('../')) {
    throw new Error(`directory "${d}" must be relative and inside the source`);
  }
  return norm.replace(/\/+$/, '');
}
