/**
 * The test bed's images and their references. The base-image stand-ins carry exactly the names
 * the project's Dockerfile builds FROM (read from it, normalized as Docker does:
 * `node:24-bookworm-slim` → `docker.io/library/node:24-bookworm-slim`), so `buildah bud
 * --pull=never` finds them locally; the others live under `localhost/pko-testbed/`. Pods use them
 * with `imagePullPolicy: Never` after importImages() (containerd.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { type Dockerfile, parseDockerfile, stageNamed } from '../../../packaging/lib/dockerfile';
import { OLDER_CLIS } from '../older-clis';
import { REPO_ROOT, versions } from '../toolchain';

export type ImageName =
  | 'debian'
  | 'node'
  | 'pause'
  | 'pulumi'
  | 'pulumiNonroot'
  | 'pulumiBase'
  | 'pulumiOld'
  | 'pulumiOldStructured'
  | 'userPulumi'
  | 'hooks'
  | 'agent';

/** Build order: each image comes after the ones it is built from. */
export const IMAGE_NAMES: readonly ImageName[] = [
  'debian',
  'node',
  'pause',
  'pulumi',
  'pulumiNonroot',
  'pulumiBase',
  'pulumiOld',
  'pulumiOldStructured',
  'userPulumi',
  'hooks',
  'agent',
];

/**
 * The images a node needs, which importImages() imports unless told otherwise: the sandbox, the
 * project's two, the default workspace image (the stand-in of pulumi/pulumi:<version>-nonroot) and
 * the bases (tests may run plain Debian/Node pods).
 */
export const NODE_IMAGES: readonly ImageName[] = ['pause', 'debian', 'node', 'pulumiNonroot', 'hooks', 'agent'];

/** A Pulumi version as Pulumi's image tags spell it (3.274.1, no `v`). */
const imageTag = (version: string): string => version.replace(/^v/, '');
const PULUMI_TAG = imageTag(versions.pulumi);

/** Version of our pause program (pause.c), the tag of its image. */
export const PAUSE_VERSION = '1.0';

export const DOCKERFILE = path.join(REPO_ROOT, 'Dockerfile');

export function readDockerfile(): Dockerfile {
  return parseDockerfile(fs.readFileSync(DOCKERFILE, 'utf8'));
}

/** `name[:tag]` as Docker resolves a short name on Docker Hub. */
export function normalizeRef(ref: string): string {
  const slash = ref.indexOf('/');
  const first = slash < 0 ? '' : ref.slice(0, slash);
  const qualified = slash >= 0 && (first.includes('.') || first.includes(':') || first === 'localhost');
  const full = qualified ? ref : `docker.io/${slash < 0 ? `library/${ref}` : ref}`;
  return /:[^/]+$/.test(full) || full.includes('@') ? full : `${full}:latest`;
}

function imageRefs(df: Dockerfile): Record<ImageName, string> {
  return {
    debian: normalizeRef(stageNamed(df, 'pulumi-release').base),
    node: normalizeRef(stageNamed(df, 'build').base),
    pause: `localhost/pko-testbed/pause:${PAUSE_VERSION}`,
    pulumi: `localhost/pko-testbed/pulumi:${versions.pulumi}`,
    pulumiNonroot: `docker.io/pulumi/pulumi:${PULUMI_TAG}-nonroot`,
    pulumiBase: `docker.io/pulumi/pulumi-base:${PULUMI_TAG}-nonroot`,
    pulumiOld: `docker.io/pulumi/pulumi:${imageTag(OLDER_CLIS.tooOld)}-nonroot`,
    pulumiOldStructured: `docker.io/pulumi/pulumi:${imageTag(OLDER_CLIS.structured)}-nonroot`,
    userPulumi: 'localhost/pko-testbed/user-pulumi:1',
    hooks: 'localhost/pko-testbed/hooks:dev',
    agent: 'localhost/pko-testbed/agent:dev',
  };
}

/**
 * The reference of each image: `debian` and `node` are the Dockerfile's base images
 * (docker.io/library/debian:bookworm-slim, docker.io/library/node:24-bookworm-slim), `pause` the
 * pod sandbox image to set as containerd's `sandbox_image`, `pulumi` the toolchain's Pulumi
 * binaries (the agent's PULUMI_STAGE), `pulumiNonroot` and `pulumiBase` stand-ins of Pulumi's
 * docker.io/pulumi/pulumi and pulumi-base `<version>-nonroot` images (upstream-pulumi.ts),
 * `pulumiOld` and `pulumiOldStructured` of docker.io/pulumi/pulumi at the toolchain's older CLIs
 * (older-clis.ts: 3.197.0-nonroot, older than structured config needs, and 3.203.0-nonroot, the
 * oldest that has it), `userPulumi` a user's image built FROM pulumiNonroot
 * (user-image.ts), `hooks` and `agent` the project's two images.
 */
export const IMAGE_REFS: Readonly<Record<ImageName, string>> = imageRefs(readDockerfile());
