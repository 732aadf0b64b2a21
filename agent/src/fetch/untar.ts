import * as fs from 'node:fs';
import * as path from 'node:path';
import { Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as zlib from 'node:zlib';
import * as tar from 'tar';
import { isInside } from '../lib/paths';

/** Upstream's default cap on the bytes an artifact may extract to (100 MiB). */
export const DEFAULT_MAX_UNTAR_BYTES = 100 * 1024 * 1024;

/**
 * The default cap on an artifact's entries: far more than a project's sources (a vendored
 * node_modules included), far fewer than an archive of empty files built to exhaust inodes.
 */
export const DEFAULT_MAX_UNTAR_ENTRIES = 100_000;

/** What an archive may expand to; -1 lifts a cap. */
export interface ArchiveLimits {
  maxBytes: number;
  maxEntries: number;
}

export class UnsafeArchiveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnsafeArchiveError';
  }
}

const ALLOWED_TYPES = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

function hasDotDot(p: string): boolean {
  return p.split(/[\\/]+/).some((seg) => seg === '..');
}

function isAbsoluteAny(p: string): boolean {
  return p.startsWith('/') || p.startsWith('\\') || /^[A-Za-z]:/.test(p);
}

function normalizeEntry(p: string): string {
  return path.posix
    .normalize(p.replace(/\\/g, '/'))
    .replace(/^\.\/+/, '')
    .replace(/\/+$/, '');
}

class Counter extends Transform {
  bytes = 0;
  constructor(private readonly limit: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.limit >= 0 && this.bytes > this.limit) {
      cb(new UnsafeArchiveError(`the archive expands beyond the size limit of ${this.limit} bytes`));
      return;
    }
    cb(null, chunk);
  }
}

async function isGzip(file: string): Promise<boolean> {
  const fd = await fs.promises.open(file, 'r');
  try {
    const buf = Buffer.alloc(2);
    const { bytesRead } = await fd.read(buf, 0, 2, 0);
    return bytesRead === 2 && buf[0] === 0x1f && buf[1] === 0x8b;
  } finally {
    await fd.close();
  }
}

type EntryKind = 'file' | 'dir' | 'symlink';

/**
 * What a hard link may point to, decided from the entries before it (tar creates a hard link when
 * it reaches it, so its target must already be there): only a regular file of the archive, not a
 * symbolic link (the link would share the symlink's inode, and a later write through it would
 * follow wherever the symlink points), a directory, the link itself, or a path the archive has not
 * created yet (which tar would look up on the disk, outside what this scan saw).
 */
function hardLinkProblem(raw: string, p: string, target: string, kinds: Map<string, EntryKind>): string | undefined {
  if (target === '' || isAbsoluteAny(target) || hasDotDot(target))
    return `hard link "${raw}" -> "${target}" points outside the target directory`;
  const t = normalizeEntry(target);
  if (t === p) return `hard link "${raw}" -> "${target}" points to itself`;
  const parts = t.split('/');
  for (let i = 1; i < parts.length; i++) {
    const prefix = parts.slice(0, i).join('/');
    if (kinds.get(prefix) === 'symlink')
      return `hard link "${raw}" -> "${target}" goes through the symbolic link "${prefix}"`;
  }
  const kind = kinds.get(t);
  if (kind === 'symlink') return `hard link "${raw}" -> "${target}" points to a symbolic link`;
  if (kind === 'dir') return `hard link "${raw}" -> "${target}" points to a directory`;
  if (kind === undefined) return `hard link "${raw}" -> "${target}" points to no file extracted before it`;
  return undefined;
}

/**
 * Lists the archive and rejects it, before anything is written, when an entry is absolute, has a
 * `..` segment, is a device or FIFO, lies under (or hard-links through) a symbolic link of the
 * archive, is a hard link to anything but a regular file extracted before it (see
 * hardLinkProblem), or is a symbolic link whose target is absolute or leaves the root; or when the
 * files add up to more than `maxBytes`, or the entries number more than `maxEntries` (-1: no limit).
 */
export async function scanArchive(file: string, limits: ArchiveLimits): Promise<{ entries: number; bytes: number }> {
  const { maxBytes, maxEntries } = limits;
  const problems: string[] = [];
  const symlinks = new Set<string>();
  /** The kind each path has at this point of the archive (a later entry replaces an earlier one). */
  const kinds = new Map<string, EntryKind>();
  const pathsToCheck: { entry: string; path: string }[] = [];
  const links: { entry: string; path: string; target: string }[] = [];
  let total = 0;
  let entries = 0;
  const tooMany = new AbortController();
  const parser = new tar.Parser({
    strict: true,
    onReadEntry: (entry) => {
      entries++;
      entry.resume();
      if (maxEntries >= 0 && entries > maxEntries) {
        // Nothing more to learn: stop reading instead of listing a million entries.
        if (!tooMany.signal.aborted) tooMany.abort();
        return;
      }
      const raw = entry.path;
      const type = entry.type;
      if (!ALLOWED_TYPES.has(type)) {
        problems.push(`entry "${raw}" has unsupported type ${type}`);
      } else if (isAbsoluteAny(raw)) {
        problems.push(`entry "${raw}" has an absolute path`);
      } else if (hasDotDot(raw)) {
        problems.push(`entry "${raw}" leaves the target directory (..)`);
      } else {
        const p = normalizeEntry(raw);
        pathsToCheck.push({ entry: raw, path: p });
        if (type === 'SymbolicLink') {
          const target = entry.linkpath ?? '';
          symlinks.add(p);
          kinds.set(p, 'symlink');
          if (target === '' || isAbsoluteAny(target)) {
            problems.push(`symbolic link "${raw}" points to the absolute path "${target}"`);
          } else {
            links.push({ entry: raw, path: p, target });
          }
        } else if (type === 'Link') {
          const target = entry.linkpath ?? '';
          const problem = hardLinkProblem(raw, p, target, kinds);
          if (problem) {
            problems.push(problem);
            kinds.delete(p);
          } else {
            pathsToCheck.push({ entry: raw, path: normalizeEntry(target) });
            kinds.set(p, 'file');
          }
        } else if (type === 'Directory') {
          kinds.set(p, 'dir');
        } else {
          kinds.set(p, 'file');
          total += entry.size;
          if (maxBytes >= 0 && total > maxBytes)
            problems.push(`the archive expands beyond the size limit of ${maxBytes} bytes`);
        }
      }
    },
  });
  parser.on('warn', (code: string, message: string | Error) => {
    problems.push(`${code}: ${typeof message === 'string' ? message : message.message}`);
  });
  // Headers and padding add to the file bytes; a stream much larger than the limit is a bomb.
  const streamLimit = maxBytes < 0 ? -1 : Math.floor(maxBytes * 1.1) + 16 * 1024 * 1024;
  const stages: NodeJS.ReadWriteStream[] = [];
  if (await isGzip(file)) stages.push(zlib.createGunzip());
  stages.push(new Counter(streamLimit));
  try {
    await pipeline(
      [fs.createReadStream(file), ...stages, parser] as unknown as [NodeJS.ReadableStream, NodeJS.WritableStream],
      { signal: tooMany.signal },
    );
  } catch (e) {
    if (tooMany.signal.aborted)
      throw new UnsafeArchiveError(`the archive has more than ${maxEntries} entries (the entry limit)`);
    if (e instanceof UnsafeArchiveError) throw e;
    throw new UnsafeArchiveError(`not a valid tar archive (${e instanceof Error ? e.message : String(e)})`);
  }
  // Nothing may be written through a symbolic link of the archive (tar would refuse, or worse, follow).
  for (const { entry, path: p } of pathsToCheck) {
    const parts = p.split('/');
    for (let i = 1; i < parts.length; i++) {
      const prefix = parts.slice(0, i).join('/');
      if (symlinks.has(prefix)) {
        problems.push(`entry "${entry}" goes through the symbolic link "${prefix}"`);
        break;
      }
    }
  }
  // A link's target, resolved from the link's directory, must stay inside and must not go through
  // another link of the archive (a `..` after a link would climb from the link's real target).
  for (const l of links) {
    const parts = [...path.posix.dirname(l.path).split('/'), ...l.target.replace(/\\/g, '/').split('/')].filter(
      (x) => x !== '' && x !== '.',
    );
    const stack: string[] = [];
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      if (part === '..') {
        if (stack.length === 0) {
          problems.push(`symbolic link "${l.entry}" -> "${l.target}" points outside the target directory`);
          break;
        }
        stack.pop();
        continue;
      }
      stack.push(part);
      if (i < parts.length - 1 && symlinks.has(stack.join('/'))) {
        problems.push(
          `symbolic link "${l.entry}" -> "${l.target}" goes through the symbolic link "${stack.join('/')}"`,
        );
        break;
      }
    }
  }
  if (problems.length) {
    const first = problems.slice(0, 3).join('; ');
    throw new UnsafeArchiveError(problems.length > 3 ? `${first}; and ${problems.length - 3} more` : first);
  }
  return { entries, bytes: total };
}

/** Resolves `p` as far as it exists on disk, then lexically. */
function realish(p: string): string {
  let head = p;
  const tail: string[] = [];
  for (;;) {
    try {
      return path.join(fs.realpathSync(head), ...tail);
    } catch {
      const parent = path.dirname(head);
      if (parent === head) return p;
      tail.unshift(path.basename(head));
      head = parent;
    }
  }
}

/** After extraction: every symbolic link must resolve, on the real file system, inside `root`. */
export function checkSymlinks(root: string): void {
  const realRoot = fs.realpathSync(root);
  const walk = (dir: string): void => {
    for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, d.name);
      if (d.isSymbolicLink()) {
        const target = fs.readlinkSync(p);
        let resolved: string;
        try {
          resolved = fs.realpathSync(p);
        } catch {
          resolved = realish(path.resolve(fs.realpathSync(dir), target));
        }
        if (!isInside(realRoot, resolved)) {
          throw new UnsafeArchiveError(
            `symbolic link "${path.relative(root, p)}" -> "${target}" points outside the target directory`,
          );
        }
      } else if (d.isDirectory()) {
        walk(p);
      }
    }
  };
  walk(root);
}

/** Checks, then extracts a (gzipped) tar archive into `target` (created; must not hold anything else). */
export async function safeExtract(
  file: string,
  target: string,
  limits: ArchiveLimits,
): Promise<{ entries: number; bytes: number }> {
  const stats = await scanArchive(file, limits);
  fs.mkdirSync(target, { recursive: true });
  await tar.x({ file, cwd: target, strict: true, preservePaths: false, preserveOwner: false, noChmod: false });
  try {
    checkSymlinks(target);
  } catch (e) {
    fs.rmSync(target, { recursive: true, force: true });
    throw e;
  }
  return stats;
}
