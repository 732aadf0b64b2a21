import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AgentError, errorCode } from '../lib/errors';
import { hostPath, safeSubdir } from '../lib/paths';
import { Paths } from '../../../contract';

/** Where fetch puts things (the contract's paths, under PKO_AGENT_ROOT when set). */
export interface FetchLayout {
  share: string;
  source: string;
  workspace: string;
}

export function layout(env: NodeJS.ProcessEnv = process.env): FetchLayout {
  return {
    share: hostPath(Paths.share, env),
    source: hostPath(Paths.source, env),
    workspace: hostPath(Paths.workspace, env),
  };
}

/** A failure of one source: "fetch <kind>: <what>: <cause>". */
export function fetchError(kind: string, what: string, cause: string, reason = 'SourceUnavailable'): AgentError {
  return new AgentError(`fetch ${kind}: ${what}: ${cause}`, { reason });
}

/** Replaces whatever is at `link` by a symlink to `target`. */
export function replaceWithSymlink(target: string, link: string): void {
  fs.mkdirSync(path.dirname(link), { recursive: true });
  try {
    const st = fs.lstatSync(link);
    if (st.isDirectory()) fs.rmSync(link, { recursive: true, force: true });
    else fs.unlinkSync(link);
  } catch (e) {
    if (errorCode(e) !== 'ENOENT') throw e;
  }
  fs.symlinkSync(target, link);
}

/**
 * Points the workspace at `<source>/<dir>` after checking that the directory exists and holds a
 * Pulumi project.
 */
export function linkWorkspace(kind: string, what: string, l: FetchLayout, dir: string | undefined): string {
  let sub: string;
  try {
    sub = safeSubdir(dir);
  } catch (e) {
    throw fetchError(kind, what, e instanceof Error ? e.message : String(e), 'SpecInvalid');
  }
  const projectDir = sub === '' ? l.source : path.join(l.source, sub);
  let real: string;
  try {
    real = fs.realpathSync(projectDir);
  } catch {
    throw fetchError(kind, what, `directory "${sub}" does not exist in the source`);
  }
  const realSource = fs.realpathSync(l.source);
  const rel = path.relative(realSource, real);
  if (rel.startsWith('..') || path.isAbsolute(rel))
    throw fetchError(kind, what, `directory "${sub}" leads outside the source`);
  if (!fs.statSync(real).isDirectory()) throw fetchError(kind, what, `"${sub}" is not a directory`);
  if (!['Pulumi.yaml', 'Pulumi.yml', 'Pulumi.json'].some((f) => fs.existsSync(path.join(real, f)))) {
    throw fetchError(kind, what, `no Pulumi.yaml in ${sub === '' ? 'the root directory' : `directory "${sub}"`}`);
  }
  replaceWithSymlink(projectDir, l.workspace);
  return projectDir;
}

/** A private temp dir (0700), preferably in the system temp dir, else under /share. */
export function privateTempDir(prefix: string, l: FetchLayout): string {
  for (const base of [os.tmpdir(), l.share]) {
    try {
      fs.mkdirSync(base, { recursive: true });
      const d = fs.mkdtempSync(path.join(base, prefix));
      fs.chmodSync(d, 0o700);
      return d;
    } catch {
      /* try the next */
    }
  }
  throw new AgentError('no writable temp directory');
}
