/**
 * A minimal ustar writer for tests: it writes exactly the entries it is given (names with `..`,
 * absolute names, links anywhere), which real archivers refuse to produce.
 */
import * as zlib from 'node:zlib';

export interface TarEntry {
  path: string;
  type?: 'file' | 'dir' | 'symlink' | 'hardlink' | 'fifo';
  content?: string | Buffer;
  linkpath?: string;
  mode?: number;
}

const TYPEFLAG = { file: '0', hardlink: '1', symlink: '2', dir: '5', fifo: '6' } as const;

function header(e: TarEntry, size: number): Buffer {
  const h = Buffer.alloc(512, 0);
  const write = (s: string, off: number, len: number): void => {
    h.write(s.slice(0, len), off, len, 'utf8');
  };
  const octal = (n: number, off: number, len: number): void =>
    write(n.toString(8).padStart(len - 1, '0') + '\0', off, len);
  let name = e.path;
  let prefix = '';
  if (Buffer.byteLength(name) > 100) {
    const i = name.lastIndexOf('/', 155);
    prefix = name.slice(0, i);
    name = name.slice(i + 1);
  }
  const type = e.type ?? 'file';
  write(name, 0, 100);
  octal(e.mode ?? (type === 'dir' ? 0o755 : 0o644), 100, 8);
  octal(0, 108, 8);
  octal(0, 116, 8);
  octal(size, 124, 12);
  octal(Math.floor(Date.now() / 1000), 136, 12);
  h.fill(' ', 148, 156);
  write(TYPEFLAG[type], 156, 1);
  write(e.linkpath ?? '', 157, 100);
  write('ustar\0', 257, 6);
  write('00', 263, 2);
  write(prefix, 345, 155);
  let sum = 0;
  for (const b of h) sum += b;
  write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8);
  return h;
}

export function tarGz(entries: TarEntry[]): Buffer {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const data = e.type === undefined || e.type === 'file' ? Buffer.from(e.content ?? '') : Buffer.alloc(0);
    blocks.push(header(e, data.length));
    if (data.length) {
      blocks.push(data);
      const pad = (512 - (data.length % 512)) % 512;
      if (pad) blocks.push(Buffer.alloc(pad));
    }
  }
  blocks.push(Buffer.alloc(1024));
  return zlib.gzipSync(Buffer.concat(blocks));
}
