/**
 * The build context Docker would send for this repository: `.dockerignore` patterns with Docker's
 * rules (moby/patternmatcher): patterns are matched against slash-separated paths relative to the
 * context root; `*` and `?` do not cross `/`, `**` matches any number of directories; a pattern
 * that matches a directory matches everything below it; `!` re-includes; the last matching
 * pattern decides.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

interface Pattern {
  negate: boolean;
  re: RegExp;
  source: string;
}

function toRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]!;
    if (c === '*') {
      if (pattern[i + 1] === '*') {
        // `**/` = any number of directories (also none); a trailing `**` = anything.
        if (pattern[i + 2] === '/') {
          re += '(?:.*/)?';
          i += 2;
        } else {
          re += '.*';
          i += 1;
        }
      } else {
        re += '[^/]*';
      }
    } else if (c === '?') {
      re += '[^/]';
    } else {
      re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${re}$`);
}

export function parseDockerignore(text: string): Pattern[] {
  const out: Pattern[] = [];
  for (const raw of text.split('\n')) {
    let line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    if (negate) line = line.slice(1).trim();
    line = path.posix.normalize(line).replace(/^\/+/, '').replace(/\/+$/, '');
    if (line === '.' || line === '') continue;
    out.push({ negate, re: toRegExp(line), source: raw.trim() });
  }
  return out;
}

/** True when `rel` (slash-separated, relative to the context) is excluded from the context. */
export function isExcluded(patterns: Pattern[], rel: string): boolean {
  const parents: string[] = [];
  const parts = rel.split('/');
  for (let i = 1; i <= parts.length; i++) parents.push(parts.slice(0, i).join('/'));
  let excluded = false;
  for (const p of patterns) {
    if (parents.some((candidate) => p.re.test(candidate))) excluded = !p.negate;
  }
  return excluded;
}

/** Every file of the build context (relative paths), walking the directory tree under `root`. */
export function contextFiles(root: string, dockerignore: string): string[] {
  const patterns = parseDockerignore(dockerignore);
  const mayReinclude = (dir: string) =>
    patterns.some(
      (p) =>
        p.negate && (p.source.slice(1).trim().replace(/^\/+/, '').startsWith(`${dir}/`) || p.source.includes('**')),
    );
  const out: string[] = [];
  const walk = (rel: string) => {
    const abs = path.join(root, rel);
    for (const entry of fs.readdirSync(abs, { withFileTypes: true })) {
      const child = rel === '' ? entry.name : `${rel}/${entry.name}`;
      if (entry.isDirectory()) {
        // Skip whole excluded trees unless a later `!` pattern could bring something back.
        if (isExcluded(patterns, child) && !mayReinclude(child)) continue;
        walk(child);
      } else if (!isExcluded(patterns, child)) {
        out.push(child);
      }
    }
  };
  walk('');
  return out.sort();
}
