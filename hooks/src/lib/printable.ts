/**
 * Control characters (C0, DEL, C1) escaped: `\n`, `\r`, `\t`, else `\xHH`. What the hooks write
 * into conditions and Events quotes spec keys, agents' reports and Jobs' results; raw, an ESC or a
 * BEL would reach the terminal of whoever runs `kubectl describe`, and a newline would forge lines
 * of its output. Idempotent (the result has none left), so a condition fed back is unchanged.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const CONTROLS = new RegExp(CONTROL.source, 'g');
const NAMED: Readonly<Record<string, string>> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

export function printable(text: string): string {
  if (!CONTROL.test(text)) return text;
  return text.replace(CONTROLS, (c) => NAMED[c] ?? `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
}
