import * as fs from 'node:fs';
import type { ConfigItem } from '../../../contract';
import { AgentError, errorCode } from '../lib/errors';
import { hostPath } from '../lib/paths';

/** A config item with its value read and its key qualified. */
export interface ResolvedConfig {
  key: string;
  /** Plain values: the string. Structured values: the JSON value. */
  value: unknown;
  structured: boolean;
  secret: boolean;
  /** Set with `--path` (a Workspace's `path: true`). */
  path: boolean;
}

/** Keys without a namespace get the project's (upstream). Keys are property paths only with `path: true`. */
export function qualifyKey(key: string, project: string): string {
  return key.includes(':') ? key : `${project}:${key}`;
}

/** Whether any item needs structured config (a non-string inline value, or valueFrom.json). */
export function hasStructuredConfig(items: ConfigItem[]): boolean {
  return items.some(
    (i) =>
      i.valueFrom?.json === true || (i.valueFrom === undefined && i.value !== undefined && typeof i.value !== 'string'),
  );
}

/**
 * Reads every item's value (inline, a mounted file, or an env var), as upstream's SetAllConfig.
 * A later item with the same key replaces an earlier one.
 */
export function resolveConfig(
  items: ConfigItem[],
  project: string,
  env: NodeJS.ProcessEnv = process.env,
): ResolvedConfig[] {
  const byKey = new Map<string, ResolvedConfig>();
  for (const item of items) {
    if (typeof item.key !== 'string' || item.key === '')
      throw new AgentError('a config item has no key', { reason: 'InitializationFailed' });
    const key = qualifyKey(item.key, project);
    let raw: unknown;
    let json = false;
    if (item.valueFrom) {
      json = item.valueFrom.json === true;
      if (item.valueFrom.path) {
        try {
          raw = fs.readFileSync(hostPath(item.valueFrom.path, env), 'utf8');
        } catch (e) {
          throw new AgentError(
            `config "${item.key}": cannot read ${item.valueFrom.path} (${errorCode(e) ?? 'error'})`,
            { reason: 'InitializationFailed' },
          );
        }
      } else if (item.valueFrom.env) {
        const v = env[item.valueFrom.env];
        if (v === undefined)
          throw new AgentError(`config "${item.key}": environment variable ${item.valueFrom.env} is not set`, {
            reason: 'InitializationFailed',
          });
        raw = v;
      } else {
        throw new AgentError(`config "${item.key}": valueFrom needs a path or an env`, {
          reason: 'InitializationFailed',
        });
      }
      if (json) {
        try {
          raw = JSON.parse(raw as string);
        } catch {
          // Never echo the content: it may be a secret.
          throw new AgentError(`config "${item.key}": ${item.valueFrom.path ?? item.valueFrom.env} is not valid JSON`, {
            reason: 'InitializationFailed',
          });
        }
      }
    } else {
      raw = item.value ?? '';
    }
    const structured = json || typeof raw !== 'string';
    const path = item.path === true;
    if (path && structured)
      throw new AgentError(`config "${item.key}": a property path (path: true) takes a string value`, {
        reason: 'InitializationFailed',
      });
    byKey.set(key, { key, value: raw, structured, secret: item.secret === true, path });
  }
  return [...byKey.values()];
}

/** The `pulumi config --json` shape `config set-all --json` reads. */
export function configJson(items: ResolvedConfig[]): string {
  const out: Record<string, { value: string; objectValue?: unknown; secret: boolean }> = {};
  for (const i of items) {
    if (i.structured) out[i.key] = { value: JSON.stringify(i.value), objectValue: i.value, secret: i.secret };
    else out[i.key] = { value: String(i.value), secret: i.secret };
  }
  return JSON.stringify(out);
}

/** Compares dotted versions (`v3.248.0`, `3.202.0-dev`): negative, zero or positive. */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string): number[] =>
    v
      .replace(/^v/, '')
      .split(/[-+]/)[0]!
      .split('.')
      .map((x) => Number(x) || 0);
  const pa = parse(a);
  const pb = parse(b);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}
