import * as fs from 'node:fs';
import { errorCode } from './errors';

/**
 * Parses a dotenv file the way upstream's godotenv does for the cases that matter: `KEY=VALUE`
 * lines, optional `export `, `#` comments, single-quoted (literal) and double-quoted (with \n, \",
 * \\ escapes) values, inline comments after unquoted values.
 */
export function parseEnvFile(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  const lines = text.replace(/\r\n?/g, '\n').split('\n');
  for (let i = 0; i < lines.length; i++) {
    let line = lines[i]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('export ')) line = line.slice(7).trim();
    const eq = line.search(/[=:]/);
    if (eq <= 0) continue;
    const key = line.slice(0, eq).trim();
    if (!/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(key)) continue;
    let rest = line.slice(eq + 1).trimStart();
    let value: string;
    if (rest.startsWith('"') || rest.startsWith("'")) {
      const q = rest[0]!;
      // A quoted value may span lines.
      let body = rest.slice(1);
      let end = findClosing(body, q);
      while (end < 0 && i + 1 < lines.length) {
        body += '\n' + lines[++i];
        end = findClosing(body, q);
      }
      value = end < 0 ? body : body.slice(0, end);
      if (q === '"') {
        value = value.replace(/\\([nrt"\\$])/g, (_, c: string) => ({ n: '\n', r: '\r', t: '\t' })[c as 'n'] ?? c);
      }
    } else {
      const hash = rest.search(/\s#/);
      if (hash >= 0) rest = rest.slice(0, hash);
      value = rest.trim();
    }
    out[key] = value;
  }
  return out;
}

function findClosing(s: string, q: string): number {
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '\\' && q === '"') {
      i++;
      continue;
    }
    if (s[i] === q) return i;
  }
  return -1;
}

/** Reads an env file; a missing file is no error (upstream). */
export function readEnvFile(file: string): Record<string, string> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if (errorCode(e) === 'ENOENT') return {};
    throw e;
  }
  return parseEnvFile(text);
}

/** Like godotenv.Load: sets variables that are not already set. Returns the names it set. */
export function loadEnvFile(file: string, env: NodeJS.ProcessEnv = process.env): string[] {
  const vars = readEnvFile(file);
  const set: string[] = [];
  for (const [k, v] of Object.entries(vars)) {
    if (env[k] === undefined) {
      env[k] = v;
      set.push(k);
    }
  }
  return set;
}
