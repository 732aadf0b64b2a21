/**
 * Go/Kubernetes duration strings (metav1.Duration): "90s", "1h30m", "1.5h", "300ms", "24h".
 * Returns milliseconds, or undefined when the string is not a valid duration (or, as in Go, longer than
 * an int64 of nanoseconds).
 */
const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

/** Go's longest duration (an int64 of nanoseconds, about 292 years): longer ones are invalid there, and here. */
const MAX_DURATION_MS = 9_223_372_036_854.775;

export function parseDuration(text: string): number | undefined {
  const s = text.trim();
  if (s === '0') return 0;
  const re = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  let sign = 1;
  let rest = s;
  if (rest.startsWith('-') || rest.startsWith('+')) {
    sign = rest.startsWith('-') ? -1 : 1;
    rest = rest.slice(1);
  }
  if (rest.length === 0) return undefined;
  re.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(rest)) !== null) {
    const [, amount = '', unit = ''] = m;
    const unitMs = UNIT_MS[unit];
    if (unitMs === undefined) return undefined;
    total += parseFloat(amount) * unitMs;
    matched = re.lastIndex;
    if (matched === rest.length) break;
  }
  if (matched !== rest.length || total > MAX_DURATION_MS) return undefined;
  return sign * total;
}

/** Formats milliseconds the way Go's time.Duration.String() does for whole seconds: "1m0s", "10s", "1h30m0s". */
export function formatDuration(ms: number): string {
  let secs = Math.round(ms / 1000);
  if (secs === 0) return '0s';
  const h = Math.floor(secs / 3600);
  secs -= h * 3600;
  const m = Math.floor(secs / 60);
  secs -= m * 60;
  if (h > 0) return `${h}h${m}m${secs}s`;
  if (m > 0) return `${m}m${secs}s`;
  return `${secs}s`;
}
