/**
 * Where the test bed's images live, next to the toolchain:
 *
 *   ${PKO_TOOLCHAIN_DIR:-~/.cache/pko-toolchain}/images/
 *     storage/          buildah's storage root (--root), overlay driver
 *     run/              buildah's run root (--runroot): locks and mount state
 *     archives/         <image>.tar (docker-archive) + <image>.json (cache key, ref, size, time)
 *     downloads/        registry packages the recipes use (npm's tarball)
 *     work/<image>/     scratch space of one build, removed after it
 *     tmp/              TMPDIR of buildah (layer blobs while pushing)
 *     logs/<image>.log  every command of the last build of that image, with its output
 *     .lock             held by one build at a time
 */
import * as path from 'node:path';
import { toolchainDir } from '../toolchain';

export interface ImageDirs {
  root: string;
  storage: string;
  runroot: string;
  archives: string;
  downloads: string;
  work: string;
  tmp: string;
  logs: string;
  lock: string;
}

export function imageDirs(env: NodeJS.ProcessEnv = process.env): ImageDirs {
  const root = path.join(toolchainDir(env), 'images');
  return {
    root,
    storage: path.join(root, 'storage'),
    runroot: path.join(root, 'run'),
    archives: path.join(root, 'archives'),
    downloads: path.join(root, 'downloads'),
    work: path.join(root, 'work'),
    tmp: path.join(root, 'tmp'),
    logs: path.join(root, 'logs'),
    lock: path.join(root, '.lock'),
  };
}
