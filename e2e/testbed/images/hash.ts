/** Content hashes for the images' cache keys. */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

export function sha256(data: string | Buffer): string {
  return crypto.createHash('sha256').update(data).digest('hex');
}

/** sha256 of a file's content, streamed (the Node.js binary is 127 MB). */
export function hashFile(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = crypto.createHash('sha256');
    fs.createReadStream(file)
      .on('data', (c) => h.update(c))
      .on('error', reject)
      .on('end', () => resolve(h.digest('hex')));
  });
}

/**
 * One hash over a set of files under `root` (relative paths, sorted): each file's path, whether
 * it is executable (COPY keeps the mode) and content hash. A symlink counts by its target text.
 */
export async function hashTree(root: string, files: readonly string[]): Promise<string> {
  const h = crypto.createHash('sha256');
  for (const rel of [...files].sort()) {
    const abs = path.join(root, rel);
    const st = fs.lstatSync(abs);
    const content = st.isSymbolicLink() ? `link:${fs.readlinkSync(abs)}` : await hashFile(abs);
    h.update(`${rel}\0${st.mode & 0o111 ? 'x' : '-'}\0${content}\n`);
  }
  return h.digest('hex');
}

/** The Subresource Integrity string (`sha512-<base64>`) npm records for a package tarball. */
export function integrityOf(file: string): string {
  return `sha512-${crypto.createHash('sha512').update(fs.readFileSync(file)).digest('base64')}`;
}
