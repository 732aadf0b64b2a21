import { rfc3339 } from '../../../contract';
import { redactor } from './redact';

type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

const isLevel = (v: string | undefined): v is Level => v !== undefined && Object.hasOwn(ORDER, v);
const configuredLevel = process.env.PKO_AGENT_LOG_LEVEL;
const threshold: Level = isLevel(configuredLevel) ? configuredLevel : 'info';

function fmt(fields: Record<string, unknown> | undefined): string {
  if (!fields) return '';
  const parts: string[] = [];
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    const s = typeof v === 'string' ? v : JSON.stringify(v);
    parts.push(`${k}=${/[\s"=]/.test(s) ? JSON.stringify(s) : s}`);
  }
  return parts.length ? ` ${parts.join(' ')}` : '';
}

/**
 * Line logger: `<time> <level> <message> key=value…` on stderr (stdout stays free for the runner's
 * progress lines). Every line goes through the redactor.
 */
function log(level: Level, message: string, fields?: Record<string, unknown>): void {
  if (ORDER[level] < ORDER[threshold]) return;
  const line = `${rfc3339(new Date(), 'milliseconds')} ${level.padEnd(5)} ${message}${fmt(fields)}`;
  process.stderr.write(redactor.redact(line) + '\n');
}

export const logger = {
  debug: (m: string, f?: Record<string, unknown>) => log('debug', m, f),
  info: (m: string, f?: Record<string, unknown>) => log('info', m, f),
  warn: (m: string, f?: Record<string, unknown>) => log('warn', m, f),
  error: (m: string, f?: Record<string, unknown>) => log('error', m, f),
};

/** A progress line for humans on stdout (the runner's log), redacted. */
export function say(line: string): void {
  process.stdout.write(redactor.redact(line) + '\n');
}
