/**
 * The test bed's images (e2e/testbed/images): the pause image is built with buildah, reused from
 * its archive on the next call, and imported into a throw-away containerd (own root, state and
 * socket in a temp dir, no CRI plugin, so no network set-up) with importImages(). The stand-ins
 * of Pulumi's nonroot images are checked in their archives (the config and layers containerd
 * imports): user 1000:1000, /pulumi/bin on PATH, Node.js only in pulumi/pulumi, and the CLI
 * version each carries.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildImages } from './images/build';
import { importImages } from './images/containerd';
import { run } from './images/exec';
import { mountsUnder } from './images/buildah';
import { IMAGE_REFS, type ImageName } from './images/refs';
import { eventually } from './helpers';
import { OLDER_CLIS } from './older-clis';
import { versions } from './toolchain';

interface ScratchContainerd {
  address: string;
  dir: string;
  log: string;
  stop(): Promise<void>;
}

async function startContainerd(): Promise<ScratchContainerd> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-ctrd-'));
  const address = path.join(dir, 'containerd.sock');
  const log = path.join(dir, 'containerd.log');
  const config = path.join(dir, 'config.toml');
  fs.writeFileSync(
    config,
    [
      'version = 2',
      `root = "${dir}/root"`,
      `state = "${dir}/state"`,
      `temp = "${dir}/tmp"`,
      'disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt",',
      '  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",',
      '  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",',
      '  "io.containerd.tracing.processor.v1.otlp"]',
      '[grpc]',
      `  address = "${address}"`,
      '[ttrpc]',
      `  address = "${address}.ttrpc"`,
      '',
    ].join('\n'),
  );
  fs.mkdirSync(path.join(dir, 'tmp'));
  const out = fs.openSync(log, 'a');
  const child: ChildProcess = spawn('containerd', ['--config', config], { stdio: ['ignore', out, out] });
  fs.closeSync(out);
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    for (const m of mountsUnder(dir)) await run('umount', [m], { log });
    fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    await eventually(
      'the containerd socket',
      () => {
        if (child.exitCode !== null) throw new Error(`containerd exited:\n${fs.readFileSync(log, 'utf8')}`);
        return fs.existsSync(address);
      },
      20_000,
    );
    await run('ctr', ['--address', address, 'version'], { log });
  } catch (err) {
    await stop();
    throw err;
  }
  return { address, dir, log, stop };
}

/** A file of a docker-archive tar. */
const fromArchive = (archive: string, member: string): string =>
  execFileSync('tar', ['-xOf', archive, member], { encoding: 'utf8', maxBuffer: 1 << 26 });

interface ArchiveImage {
  config: { User?: string; Env?: string[]; WorkingDir?: string; Cmd?: string[] };
  /** Every path in the image's layers, without a leading `./` or `/`. */
  paths: Set<string>;
  /** The layer and member name of each path (the topmost layer holding it). */
  members: Map<string, { layer: string; member: string }>;
}

function readArchiveImage(archive: string): ArchiveImage {
  const [manifest] = JSON.parse(fromArchive(archive, 'manifest.json')) as { Config: string; Layers: string[] }[];
  const { config } = JSON.parse(fromArchive(archive, manifest!.Config)) as { config: ArchiveImage['config'] };
  const paths = new Set<string>();
  const members = new Map<string, { layer: string; member: string }>();
  for (const layer of manifest!.Layers) {
    const list = execFileSync('sh', ['-c', 'tar -xOf "$1" "$2" | tar -t', 'sh', archive, layer], {
      encoding: 'utf8',
      maxBuffer: 1 << 28,
    });
    for (const member of list.split('\n')) {
      if (member === '') continue;
      const p = member.replace(/^\.?\//, '').replace(/\/$/, '');
      paths.add(p);
      members.set(p, { layer, member });
    }
  }
  return { config, paths, members };
}

/** Runs `pulumi version` with the pulumi binary of the image's /pulumi/bin. */
function pulumiVersionIn(archive: string, image: ArchiveImage): string {
  const where = image.members.get('pulumi/bin/pulumi');
  expect(where).toBeDefined();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-pulumi-'));
  try {
    const bin = path.join(dir, 'pulumi');
    execFileSync('sh', [
      '-c',
      'tar -xOf "$1" "$2" | tar -xO "$3" >"$4"',
      'sh',
      archive,
      where!.layer,
      where!.member,
      bin,
    ]);
    fs.chmodSync(bin, 0o755);
    return execFileSync(bin, ['version'], {
      encoding: 'utf8',
      env: { PATH: '/usr/bin:/bin', PULUMI_HOME: path.join(dir, 'home'), PULUMI_SKIP_UPDATE_CHECK: 'true' },
    }).trim();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('test-bed images', () => {
  test('the pause image is built once, then reused from its archive', async () => {
    const [first] = await buildImages({ only: ['pause'] });
    expect(first).toMatchObject({ name: 'pause', ref: IMAGE_REFS.pause });
    expect(fs.statSync(first!.archive).size).toBe(first!.bytes);
    const [again] = await buildImages({ only: ['pause'] });
    expect(again).toMatchObject({ name: 'pause', reused: true, key: first!.key, imageId: first!.imageId });
    expect(again!.seconds).toBeLessThan(5);
  }, 300_000);

  test('importImages() puts the archive into a containerd, config intact (/pause as 65535)', async () => {
    const containerd = await startContainerd();
    try {
      const [imported] = await importImages(containerd.address, { images: ['pause'] });
      expect(imported).toMatchObject({ name: 'pause', ref: IMAGE_REFS.pause });
      const ctr = (...args: string[]) =>
        run('ctr', ['--address', containerd.address, '--namespace', 'k8s.io', ...args], { log: containerd.log });
      // `images list`: REF TYPE DIGEST …; the manifest names the config blob.
      const line = (await ctr('images', 'list')).split('\n').find((l) => l.startsWith(`${IMAGE_REFS.pause} `));
      const digest = line?.split(/\s+/)[2];
      expect(digest).toMatch(/^sha256:/);
      const manifest = JSON.parse(await ctr('content', 'get', digest!)) as { config: { digest: string } };
      const config = JSON.parse(await ctr('content', 'get', manifest.config.digest)) as {
        config: { User?: string; Entrypoint?: string[] };
      };
      expect(config.config).toMatchObject({ User: '65535:65535', Entrypoint: ['/pause'] });
    } finally {
      await containerd.stop();
    }
    expect(fs.existsSync(containerd.dir)).toBe(false);
  }, 120_000);

  test.each<[ImageName, boolean, string]>([
    ['pulumiNonroot', true, versions.pulumi],
    ['pulumiBase', false, versions.pulumi],
    ['pulumiOld', true, OLDER_CLIS.tooOld],
    ['pulumiOldStructured', true, OLDER_CLIS.structured],
  ])(
    "%s: Pulumi's nonroot image stand-in (user 1000, /pulumi/bin on PATH, Node.js: %s, pulumi %s)",
    async (name, hasNode, pulumiVersion) => {
      const results = await buildImages({ only: [name] });
      const built = results.find((r) => r.name === name);
      expect(built).toMatchObject({ ref: IMAGE_REFS[name] });
      const image = readArchiveImage(built!.archive);
      expect(image.config).toMatchObject({ User: '1000:1000', WorkingDir: '/home/pulumi', Cmd: ['pulumi'] });
      const pathEnv = image.config.Env?.find((e) => e.startsWith('PATH='));
      expect(pathEnv?.slice('PATH='.length).split(':')).toContain('/pulumi/bin');
      expect(image.paths).toContain('pulumi/bin/pulumi');
      expect(image.paths).toContain('pulumi/bin/pulumi-language-yaml');
      // Both carry the Node.js language host, as Pulumi's images carry every host; only one can run it.
      expect(image.paths).toContain('pulumi/bin/pulumi-language-nodejs');
      expect(image.paths).toContain('home/pulumi');
      expect(pulumiVersionIn(built!.archive, image)).toBe(pulumiVersion);
      // Only the pulumi/pulumi stand-in has the Kubernetes provider installed (a user's `pulumi plugin install`).
      const kubernetesPlugin = `home/pulumi/.pulumi/plugins/resource-kubernetes-${versions.pulumiKubernetes}/pulumi-resource-kubernetes`;
      if (name === 'pulumiNonroot') expect(image.paths).toContain(kubernetesPlugin);
      else expect(image.paths).not.toContain(kubernetesPlugin);
      const passwd = [...image.paths].includes('etc/passwd');
      expect(passwd).toBe(true);
      const node = [...image.paths].filter((p) => /(^|\/)(node|nodejs)$/.test(p) && /bin\//.test(p));
      if (hasNode) {
        expect(node).toContain('usr/local/bin/node');
        expect(image.paths).toContain('pulumi/bin/pulumi-resource-pulumi-nodejs');
        expect(image.paths).toContain('usr/bin/git');
      } else {
        expect(node).toEqual([]);
        expect(image.paths).not.toContain('usr/local/lib/node_modules');
      }
    },
    900_000,
  );
});
