import * as fs from 'node:fs';
import * as path from 'node:path';

/**
 * The language runtime a project's `runtime` (Pulumi.yaml) needs in the workspace image, and how to
 * tell that an image lacks it. The workspace runs in the user's choice of image, and
 * `pulumi/pulumi-base` (or any CLI-only image) has the language hosts but no Node.js, Python, …:
 * there `pulumi install` fails with the language host's own words ("could not read plugin …: exit
 * status 127", "could not find npm on the $PATH"), which do not say to change the image.
 */
interface LanguageRuntime {
  /** The runtime as people call it. */
  name: string;
  /** Executables the language host looks up on PATH; the runtime is there when any of them is. */
  executables: string[];
}

const RUNTIMES: Readonly<Record<string, LanguageRuntime>> = {
  nodejs: { name: 'Node.js', executables: ['node'] },
  python: { name: 'Python', executables: ['python3', 'python'] },
  go: { name: 'Go', executables: ['go'] },
  dotnet: { name: '.NET', executables: ['dotnet'] },
  java: { name: 'Java', executables: ['java'] },
};

/** Whether `name` is an executable file in one of PATH's directories (as the shell finds it). */
function onPath(name: string, pathEnv: string): boolean {
  return pathEnv
    .split(path.delimiter)
    .filter((dir) => dir !== '')
    .some((dir) => {
      const file = path.join(dir, name);
      try {
        fs.accessSync(file, fs.constants.X_OK);
        return fs.statSync(file).isFile();
      } catch {
        return false;
      }
    });
}

/**
 * What to tell the user when the project's language runtime is not in the workspace image (none of
 * its executables on `pathEnv`), else undefined. `pulumiVersion` is the image's CLI, so that the
 * image suggested is the official one of that same release.
 */
export function missingRuntime(runtime: string, pathEnv: string, pulumiVersion?: string): string | undefined {
  const lang = RUNTIMES[runtime];
  if (!lang || lang.executables.some((e) => onPath(e, pathEnv))) return undefined;
  const which = lang.executables.length === 1 ? lang.executables[0] : `any of ${lang.executables.join(', ')}`;
  const image = `pulumi/pulumi:${pulumiVersion ?? '<version>'}-nonroot`;
  return (
    `the project's runtime is ${runtime}, but this workspace image has no ${lang.name} ` +
    `(no ${which} on PATH ${pathEnv || '(empty)'}): set workspaceTemplate.spec.image to an image with ` +
    `${lang.name}, such as ${image} or an image built FROM it`
  );
}
