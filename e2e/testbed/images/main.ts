/**
 * `npm run testbed:images [-- [--force] [--import <containerd socket>] [--skip <image>]... [image ...]]`:
 * builds the test bed's images (all, or the ones named and what they need), prints what was built or
 * reused and how long it took; with --force the named images are rebuilt; with --import the archives
 * are then imported into that containerd; --skip leaves an image out of "all" (.ci/run builds the
 * older CLIs' images later, beside the e2e suite, when the CLIs are built). Images: debian node pause pulumi pulumiNonroot pulumiBase
 * pulumiOld pulumiOldStructured userPulumi hooks agent.
 */
import { buildImages, type ImageResult } from './build';
import { importImages } from './containerd';
import { IMAGE_NAMES, type ImageName } from './refs';

interface Args {
  images: ImageName[];
  skip: ImageName[];
  force: boolean;
  importTo?: string;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { images: [], skip: [], force: false };
  const image = (a: string | undefined): ImageName => {
    if ((IMAGE_NAMES as readonly string[]).includes(a ?? '')) return a as ImageName;
    throw new Error(`unknown image ${a} (images: ${IMAGE_NAMES.join(' ')})`);
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--force') args.force = true;
    else if (a === '--import') {
      const socket = argv[++i];
      if (socket === undefined) throw new Error('--import needs the containerd socket');
      args.importTo = socket;
    } else if (a === '--skip') args.skip.push(image(argv[++i]));
    else if (!a.startsWith('-')) args.images.push(image(a));
    else throw new Error(`unknown argument ${a} (flags: --force, --import <socket>, --skip <image>)`);
  }
  return args;
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

function table(results: ImageResult[]): string {
  const rows = results.map((r) => [
    r.name,
    r.reused ? 'reused' : 'built',
    `${r.seconds.toFixed(1)} s`,
    mb(r.bytes),
    r.ref,
    r.archive,
  ]);
  const widths = rows[0]?.map((_c, i) => Math.max(...rows.map((row) => row[i]!.length))) ?? [];
  return rows.map((row) => row.map((c, i) => c.padEnd(widths[i]!)).join('  ')).join('\n');
}

async function main(argv: string[]): Promise<void> {
  const args = parseArgs(argv);
  const started = Date.now();
  if (args.images.length > 0 && args.skip.length > 0)
    throw new Error('--skip leaves images out of all of them: name no images with it');
  const wanted = args.images.length > 0 ? args.images : IMAGE_NAMES.filter((n) => !args.skip.includes(n));
  const results = await buildImages({
    only: wanted,
    force: args.force ? wanted : [],
    progress: (line) => console.log(line),
  });
  console.log(`\n${table(results)}\ntotal ${((Date.now() - started) / 1000).toFixed(1)} s`);
  if (args.importTo !== undefined) {
    const imported = await importImages(args.importTo, args.images.length > 0 ? { images: args.images } : {});
    for (const r of imported) console.log(`imported ${r.ref} in ${r.seconds.toFixed(1)} s`);
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
