import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { InputText } from './documents';
import { InputError } from './exit-codes';
import { errorMessage } from '../lib/errors';

const MANIFEST_FILE = /\.(ya?ml|json)$/;

/** The files of a directory that hold manifests, recursively, in a fixed order. */
function manifestFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return manifestFiles(path);
      return entry.isFile() && MANIFEST_FILE.test(entry.name) ? [path] : [];
    });
}

/** The texts of the paths given (files, directories, `-` for stdin), each read once. */
export function readInputs(paths: readonly string[], readStdin: () => string): InputText[] {
  return paths.flatMap((path): InputText[] => {
    if (path === '-') return [{ name: '<stdin>', text: readStdin() }];
    try {
      const files = statSync(path).isDirectory() ? manifestFiles(path) : [path];
      return files.map((file) => ({ name: file, text: readFileSync(file, 'utf8') }));
    } catch (err) {
      throw new InputError(`${path}: cannot read: ${errorMessage(err)}`);
    }
  });
}
