/**
 * Flux artifact extraction against hostile tarballs: the entry cap, and hard links classified by
 * our own scan before anything is written (whatever the tar library would do with them).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fluxSettingsFromEnv } from '../src/fetch/flux';
import {
  DEFAULT_MAX_UNTAR_BYTES,
  DEFAULT_MAX_UNTAR_ENTRIES,
  safeExtract,
  scanArchive,
  UnsafeArchiveError,
  type ArchiveLimits,
} from '../src/fetch/untar';
import { AgentError } from '../src/lib/errors';
import { tarGz, type TarEntry } from './tarball';

const PROJECT = 'name: archived\nruntime: yaml\n';
const NO_LIMITS: ArchiveLimits = { maxBytes: -1, maxEntries: -1 };

let tmp: string;
let target: string;
beforeEach(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pko-untar-'));
  target = path.join(tmp, 'source');
});
afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

function archive(entries: TarEntry[]): string {
  const file = path.join(tmp, 'artifact.tar.gz');
  fs.writeFileSync(file, tarGz(entries));
  return file;
}

async function refusal(entries: TarEntry[], limits: ArchiveLimits = NO_LIMITS): Promise<string> {
  const e: unknown = await safeExtract(archive(entries), target, limits).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(UnsafeArchiveError);
  // Refused by the scan: nothing was extracted, not even the target directory.
  expect(fs.existsSync(target)).toBe(false);
  return (e as Error).message;
}

const files = (n: number): TarEntry[] =>
  Array.from({ length: n }, (_, i) => ({ path: i === 0 ? 'Pulumi.yaml' : `f${i}.txt`, content: String(i) }));

describe('entry cap', () => {
  it('extracts an archive with as many entries as the cap', async () => {
    const stats = await safeExtract(archive(files(10)), target, { maxBytes: -1, maxEntries: 10 });
    expect(stats.entries).toBe(10);
    expect(fs.readdirSync(target)).toHaveLength(10);
  });

  it('refuses one entry more, whatever their size', async () => {
    expect(await refusal(files(11), { maxBytes: -1, maxEntries: 10 })).toBe(
      'the archive has more than 10 entries (the entry limit)',
    );
    const empties: TarEntry[] = Array.from({ length: 5000 }, (_, i) => ({ path: `d${i}/`, type: 'dir' }));
    expect(await refusal(empties, { maxBytes: 1024, maxEntries: 100 })).toMatch(/more than 100 entries/);
  });

  it('has no cap at -1', async () => {
    expect((await scanArchive(archive(files(50)), NO_LIMITS)).entries).toBe(50);
  });

  it('reads FLUX_MAX_UNTAR_ENTRIES (default 100000, -1 for none) and refuses a bad value', () => {
    const base = { FLUX_URL: 'https://example.com/a.tar.gz', FLUX_DIGEST: 'sha256:00' };
    expect(fluxSettingsFromEnv(base)).toMatchObject({
      maxBytes: DEFAULT_MAX_UNTAR_BYTES,
      maxEntries: DEFAULT_MAX_UNTAR_ENTRIES,
    });
    expect(DEFAULT_MAX_UNTAR_ENTRIES).toBe(100_000);
    expect(fluxSettingsFromEnv({ ...base, FLUX_MAX_UNTAR_ENTRIES: '-1' }).maxEntries).toBe(-1);
    expect(fluxSettingsFromEnv({ ...base, FLUX_MAX_UNTAR_ENTRIES: '25' }).maxEntries).toBe(25);
    for (const bad of ['many', '-2', '1.5']) {
      let e: unknown;
      try {
        fluxSettingsFromEnv({ ...base, FLUX_MAX_UNTAR_ENTRIES: bad });
      } catch (err) {
        e = err;
      }
      expect(e).toBeInstanceOf(AgentError);
      expect((e as AgentError).reason).toBe('SpecInvalid');
      expect((e as AgentError).message).toContain(`FLUX_MAX_UNTAR_ENTRIES must be an integer ≥ -1, not "${bad}"`);
    }
  });
});

describe('hard links', () => {
  it('extracts a hard link to a regular file extracted before it', async () => {
    await safeExtract(
      archive([
        { path: 'Pulumi.yaml', content: PROJECT },
        { path: 'copy.yaml', type: 'hardlink', linkpath: 'Pulumi.yaml' },
        { path: 'again.yaml', type: 'hardlink', linkpath: './copy.yaml' },
      ]),
      target,
      NO_LIMITS,
    );
    const inode = fs.statSync(path.join(target, 'Pulumi.yaml')).ino;
    expect(fs.statSync(path.join(target, 'copy.yaml')).ino).toBe(inode);
    expect(fs.statSync(path.join(target, 'again.yaml')).ino).toBe(inode);
  });

  const hostile: [string, TarEntry[], string][] = [
    [
      'to a symbolic link (even one pointing inside)',
      [
        { path: 'Pulumi.yaml', content: PROJECT },
        { path: 'sym', type: 'symlink', linkpath: 'Pulumi.yaml' },
        { path: 'hard', type: 'hardlink', linkpath: 'sym' },
      ],
      'hard link "hard" -> "sym" points to a symbolic link',
    ],
    [
      'to a path that a symbolic link replaced',
      [
        { path: 'f', content: 'x' },
        { path: 'f', type: 'symlink', linkpath: '.' },
        { path: 'hard', type: 'hardlink', linkpath: 'f' },
      ],
      'hard link "hard" -> "f" points to a symbolic link',
    ],
    [
      'through a symbolic link',
      [
        { path: 'd/', type: 'dir' },
        { path: 'd/f', content: 'x' },
        { path: 'l', type: 'symlink', linkpath: 'd' },
        { path: 'hard', type: 'hardlink', linkpath: 'l/f' },
      ],
      'hard link "hard" -> "l/f" goes through the symbolic link "l"',
    ],
    [
      'to an entry that comes after it',
      [
        { path: 'hard', type: 'hardlink', linkpath: 'later.txt' },
        { path: 'later.txt', content: 'x' },
      ],
      'hard link "hard" -> "later.txt" points to no file extracted before it',
    ],
    [
      'to a path the archive does not have (which tar would look up on the disk)',
      [{ path: 'hard', type: 'hardlink', linkpath: 'etc/shadow' }],
      'hard link "hard" -> "etc/shadow" points to no file extracted before it',
    ],
    [
      'to a directory',
      [
        { path: 'dir/', type: 'dir' },
        { path: 'hard', type: 'hardlink', linkpath: 'dir' },
      ],
      'hard link "hard" -> "dir" points to a directory',
    ],
    [
      'to itself',
      [{ path: 'hard', type: 'hardlink', linkpath: 'hard' }],
      'hard link "hard" -> "hard" points to itself',
    ],
    [
      'outside the root',
      [{ path: 'hard', type: 'hardlink', linkpath: '../outside' }],
      'hard link "hard" -> "../outside" points outside the target directory',
    ],
    [
      'to an absolute path',
      [{ path: 'hard', type: 'hardlink', linkpath: '/etc/passwd' }],
      'hard link "hard" -> "/etc/passwd" points outside the target directory',
    ],
    [
      'to a hard link that was refused',
      [
        { path: 'sym', type: 'symlink', linkpath: '.' },
        { path: 'h1', type: 'hardlink', linkpath: 'sym' },
        { path: 'h2', type: 'hardlink', linkpath: 'h1' },
      ],
      'hard link "h2" -> "h1" points to no file extracted before it',
    ],
  ];

  it.each(hostile)('refuses a hard link %s before extracting anything', async (_name, entries, message) => {
    expect(await refusal([{ path: 'Pulumi.yaml', content: PROJECT }, ...entries])).toContain(message);
  });
});
