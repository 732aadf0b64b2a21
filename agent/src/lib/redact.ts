import { SECRET_MASK } from '../../../contract';

/** Secret values shorter than this are not searched for: they would garble ordinary text. */
export const MIN_REDACTED_LENGTH = 4;

/**
 * Replaces known secret values (secret config, secret outputs, credentials) by "[secret]" in any
 * text the agent prints, streams or writes. A second line of defence: secret values are never
 * put into messages on purpose.
 */
export class Redactor {
  private readonly values = new Set<string>();
  private sorted: string[] = [];

  /** Adds a secret: strings, and every string (and the JSON text) inside structured values. */
  add(value: unknown): void {
    const before = this.values.size;
    this.collect(value, 0);
    if (this.values.size !== before) this.sorted = [...this.values].sort((a, b) => b.length - a.length);
  }

  private addString(s: string): void {
    if (s.length < MIN_REDACTED_LENGTH) return;
    this.values.add(s);
    // As it appears inside JSON text (quotes, backslashes, newlines escaped).
    const escaped = JSON.stringify(s).slice(1, -1);
    if (escaped !== s) this.values.add(escaped);
    // Values read from files often end with a newline that the printed form lacks.
    const trimmed = s.trim();
    if (trimmed !== s && trimmed.length >= MIN_REDACTED_LENGTH) this.values.add(trimmed);
  }

  private collect(value: unknown, depth: number): void {
    if (depth > 32 || value === null || value === undefined) return;
    if (typeof value === 'string') {
      this.addString(value);
      return;
    }
    if (typeof value === 'number' || typeof value === 'boolean') {
      this.addString(String(value));
      return;
    }
    if (Array.isArray(value)) {
      for (const v of value) this.collect(v, depth + 1);
    } else if (typeof value === 'object') {
      for (const v of Object.values(value as Record<string, unknown>)) this.collect(v, depth + 1);
    }
    if (depth === 0) this.addString(JSON.stringify(value));
  }

  get size(): number {
    return this.values.size;
  }

  redact(text: string): string {
    if (this.sorted.length === 0 || text === '') return text;
    let out = text;
    for (const s of this.sorted) {
      if (out.includes(s)) out = out.split(s).join(SECRET_MASK);
    }
    return out;
  }

  /** Redacts every string inside a JSON-like value (a copy). */
  redactValue<T>(value: T): T {
    if (this.sorted.length === 0) return value;
    return JSON.parse(this.redact(JSON.stringify(value))) as T;
  }
}

/** The process-wide redactor every log line goes through. */
export const redactor = new Redactor();

/** Userinfo in a URL (https://user:token@host/...) must never be printed. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    // An https user name may be a token; an ssh one (git@…) is not a credential.
    if (u.protocol === 'ssh:' || u.protocol === 'git+ssh:') {
      if (u.password) u.password = '***';
      return u.toString();
    }
    if (u.username || u.password) {
      u.username = u.username ? '***' : '';
      u.password = u.password ? '***' : '';
    }
    return u.toString();
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//***@');
  }
}
