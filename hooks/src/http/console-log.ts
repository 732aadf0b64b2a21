/**
 * LOG_FORMAT=console (the chart's `hooks.logFormat`, upstream's `controller.logFormat`): the log as
 * upstream's operator writes it with `--zap-encoder=console`, one tab-separated line per entry:
 * ISO 8601 time, level, message, then the entry's other fields as JSON. pino writes JSON lines;
 * each is rewritten here as it is written. pid and hostname are left out, as zap has neither.
 */
import { isRecord } from '../lib/json';

const LEVELS: Readonly<Record<number, string>> = {
  10: 'trace',
  20: 'debug',
  30: 'info',
  40: 'warn',
  50: 'error',
  60: 'fatal',
};

/** What the line's own columns hold, and what zap has no such thing as. */
const OWN_COLUMNS = ['level', 'time', 'msg', 'pid', 'hostname'];

/** One pino JSON line as a console line; anything else (not a JSON object) unchanged. */
export function consoleLine(line: string): string {
  let entry: unknown;
  try {
    entry = JSON.parse(line);
  } catch {
    return line;
  }
  if (!isRecord(entry)) return line;
  const { level, time, msg } = entry;
  const fields: Record<string, unknown> = { ...entry };
  for (const key of OWN_COLUMNS) delete fields[key];
  const when = typeof time === 'number' ? new Date(time).toISOString() : String(time);
  const name = typeof level === 'number' ? (LEVELS[level] ?? String(level)) : String(level);
  const columns = [when, name, typeof msg === 'string' ? msg : ''];
  if (Object.keys(fields).length > 0) columns.push(JSON.stringify(fields));
  return `${columns.join('\t')}\n`;
}

/** A pino destination writing console lines to `out`. */
export function consoleLogStream(out: NodeJS.WritableStream): { write(line: string): void } {
  return {
    write(line: string): void {
      out.write(consoleLine(line));
    },
  };
}
