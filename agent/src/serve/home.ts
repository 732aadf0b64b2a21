import * as fs from 'node:fs';
import { Paths } from '../../../contract';
import { logger } from '../lib/log';
import { hostPath } from '../lib/paths';

function writableDir(dir: string): boolean {
  try {
    fs.accessSync(dir, fs.constants.W_OK);
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/**
 * Pulumi writes its state, plugins and workspace settings under `~/.pulumi`. The official `-nonroot`
 * images have a home for uid 1000 (/home/pulumi), and a user's image built FROM them keeps what it
 * pre-installed there; an image without a passwd entry for the pod's uid gets HOME=/, which is not
 * writable: then the workspace (and the Pulumi processes it starts) use /share/home.
 */
export function ensureWritableHome(env: NodeJS.ProcessEnv = process.env): string {
  const home = env.HOME;
  if (home && writableDir(home)) return home;
  const fallback = hostPath(Paths.fallbackHome, env);
  fs.mkdirSync(fallback, { recursive: true });
  logger.warn('HOME is not a writable directory: using the shared volume instead', {
    home: home ?? '(unset)',
    fallback,
  });
  env.HOME = fallback;
  return fallback;
}
