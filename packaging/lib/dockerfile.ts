/**
 * A small reader of our Dockerfile: enough of the syntax to know, for each stage, what it is built
 * from, what it copies from where, what it runs and how its image starts. packaging/dockerfile.test.ts
 * checks the stages, build arguments and context with it; the e2e test bed's image builder reads the
 * base images from it (e2e/testbed/images/refs.ts).
 *
 * Supported: comments, line continuations, parser directives, ARG (with defaults, global and per
 * stage), FROM … AS …, WORKDIR, COPY [--from=…] [--chown=…] [--chmod=…] (shell and JSON forms),
 * RUN, ENV (key=value pairs), USER, EXPOSE, ENTRYPOINT, CMD, LABEL. Anything else is an error, so
 * an instruction this reader does not understand cannot slip past the tests.
 */
import * as path from 'node:path';

export interface Instruction {
  keyword: string;
  /** The raw arguments, continuation lines joined with a space. */
  args: string;
  line: number;
}

export interface CopyInstruction {
  /** Stage name or index for `--from`; undefined when copying from the build context. */
  from?: string;
  sources: string[];
  /** Absolute destination, resolved against the stage's WORKDIR. */
  dest: string;
  /** True when dest names a directory (ends with `/`, or several sources). */
  destIsDir: boolean;
  chown?: string;
  chmod?: string;
  line: number;
}

export interface Stage {
  name: string;
  index: number;
  /** The base image with ARGs substituted (defaults), or the name of an earlier stage. */
  base: string;
  /** Working directory at the end of the stage (WORKDIR instructions, absolute). */
  workdir: string;
  /** Working directory in force at each instruction (same order as `instructions`). */
  instructions: { instruction: Instruction; workdir: string }[];
  copies: CopyInstruction[];
  runs: { command: string; line: number }[];
  env: Record<string, string>;
  /** `USER` as written (the last one wins); undefined when the stage sets none. */
  user?: string;
  entrypoint?: string[];
  cmd?: string[];
  expose: string[];
  args: Record<string, string | undefined>;
}

export interface Dockerfile {
  globalArgs: Record<string, string | undefined>;
  stages: Stage[];
}

const KNOWN = new Set(['FROM', 'ARG', 'WORKDIR', 'COPY', 'RUN', 'ENV', 'USER', 'EXPOSE', 'ENTRYPOINT', 'CMD', 'LABEL']);

/** Splits the file into instructions: comments dropped, `\` continuations joined. */
export function instructions(text: string): Instruction[] {
  const out: Instruction[] = [];
  const lines = text.split('\n');
  let i = 0;
  while (i < lines.length) {
    const raw = lines[i]!;
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#')) {
      i++;
      continue;
    }
    const start = i + 1;
    let logical = '';
    for (;;) {
      const cur = lines[i]!.trimEnd();
      const t = cur.trim();
      if (t.startsWith('#') && logical !== '') {
        // a comment line inside a continued instruction is skipped, as Docker does
        i++;
        continue;
      }
      if (cur.endsWith('\\')) {
        logical += cur.slice(0, -1).trim() + ' ';
        i++;
        if (i >= lines.length) break;
        continue;
      }
      logical += t;
      i++;
      break;
    }
    const m = /^(\S+)\s*(.*)$/s.exec(logical.trim());
    if (!m) continue;
    out.push({ keyword: m[1]!.toUpperCase(), args: m[2]!.trim(), line: start });
  }
  return out;
}

/** Shell-style words: whitespace separated, double or single quotes grouped. */
function words(s: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s)) !== null) out.push(m[1] ?? m[2] ?? m[3]!);
  return out;
}

/** The exec (JSON) form of ENTRYPOINT/CMD/COPY, or the shell form wrapped in `/bin/sh -c`. */
function execForm(args: string): string[] {
  if (args.startsWith('[')) {
    const parsed: unknown = JSON.parse(args);
    if (!Array.isArray(parsed) || !parsed.every((x) => typeof x === 'string'))
      throw new Error(`not a JSON string array: ${args}`);
    return parsed;
  }
  return ['/bin/sh', '-c', args];
}

function substitute(s: string, vars: Record<string, string | undefined>, line: number): string {
  return s.replace(
    /\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-+][^}]*)?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (_all, braced: string | undefined, mod: string | undefined, bare: string | undefined) => {
      const name = (braced ?? bare)!;
      const v = vars[name];
      if (mod) {
        const op = mod.replace(/^:/, '')[0];
        const word = mod.replace(/^:?[-+]/, '');
        if (op === '-') return v === undefined || v === '' ? word : v;
        return v === undefined || v === '' ? '' : word;
      }
      if (v === undefined)
        throw new Error(`Dockerfile line ${line}: \${${name}} has no value (declare ARG ${name} with a default)`);
      return v;
    },
  );
}

/** KEY=value pairs (ENV, LABEL, ARG); the legacy `ENV KEY value` form is rejected. */
function pairs(args: string, line: number): [string, string][] {
  const out: [string, string][] = [];
  for (const w of words(args)) {
    const eq = w.indexOf('=');
    if (eq <= 0) throw new Error(`Dockerfile line ${line}: expected KEY=value, got "${w}"`);
    out.push([w.slice(0, eq), w.slice(eq + 1)]);
  }
  return out;
}

export function parseDockerfile(text: string): Dockerfile {
  const globalArgs: Record<string, string | undefined> = {};
  const stages: Stage[] = [];
  let stage: Stage | undefined;
  for (const ins of instructions(text)) {
    if (!KNOWN.has(ins.keyword))
      throw new Error(
        `Dockerfile line ${ins.line}: instruction ${ins.keyword} is not understood by packaging/lib/dockerfile.ts`,
      );
    if (ins.keyword === 'ARG') {
      const [name, def] = ins.args.split('=', 2) as [string, string | undefined];
      if (!stage) {
        globalArgs[name] = def;
      } else {
        // A stage-level ARG without default inherits the global default.
        stage.args[name] = def ?? globalArgs[name];
      }
      stage?.instructions.push({ instruction: ins, workdir: stage.workdir });
      continue;
    }
    if (ins.keyword === 'FROM') {
      const w = words(ins.args).filter((x) => !x.startsWith('--platform'));
      const base = substitute(w[0]!, globalArgs, ins.line);
      const name = w.length >= 3 && w[1]!.toUpperCase() === 'AS' ? w[2]! : String(stages.length);
      const parent = stages.find((s) => s.name === base);
      stage = {
        name,
        index: stages.length,
        base,
        workdir: parent?.workdir ?? '/',
        instructions: [],
        copies: [],
        runs: [],
        env: { ...(parent?.env ?? {}) },
        expose: [],
        args: {},
      };
      if (parent?.user !== undefined) stage.user = parent.user;
      if (parent?.entrypoint) stage.entrypoint = [...parent.entrypoint];
      if (parent?.cmd) stage.cmd = [...parent.cmd];
      stages.push(stage);
      continue;
    }
    if (!stage) throw new Error(`Dockerfile line ${ins.line}: ${ins.keyword} before the first FROM`);
    const vars = { ...stage.args, ...stage.env };
    stage.instructions.push({ instruction: ins, workdir: stage.workdir });
    switch (ins.keyword) {
      case 'WORKDIR':
        stage.workdir = path.posix.resolve(stage.workdir, substitute(ins.args, vars, ins.line));
        break;
      case 'COPY': {
        const w = words(ins.args);
        const flags: Record<string, string> = {};
        while (w[0]?.startsWith('--')) {
          const [k, v] = w.shift()!.slice(2).split('=', 2) as [string, string | undefined];
          flags[k] = v ?? '';
        }
        const parts = ins.args.includes('[') && w[0]?.startsWith('[') ? execForm(w.join(' ')) : w;
        if (parts.length < 2) throw new Error(`Dockerfile line ${ins.line}: COPY needs a source and a destination`);
        for (const k of Object.keys(flags))
          if (!['from', 'chown', 'chmod'].includes(k))
            throw new Error(`Dockerfile line ${ins.line}: COPY --${k} is not understood`);
        const rawDest = substitute(parts[parts.length - 1]!, vars, ins.line);
        const sources = parts.slice(0, -1).map((s) => substitute(s, vars, ins.line));
        const copy: CopyInstruction = {
          sources,
          dest: path.posix.resolve(stage.workdir, rawDest),
          destIsDir: rawDest.endsWith('/') || rawDest === '.' || rawDest === './' || sources.length > 1,
          line: ins.line,
        };
        if (flags.from !== undefined) copy.from = flags.from;
        if (flags.chown !== undefined) copy.chown = flags.chown;
        if (flags.chmod !== undefined) copy.chmod = flags.chmod;
        stage.copies.push(copy);
        break;
      }
      case 'RUN':
        stage.runs.push({ command: ins.args, line: ins.line });
        break;
      case 'ENV':
        for (const [k, v] of pairs(ins.args, ins.line))
          stage.env[k] = substitute(v, { ...stage.args, ...stage.env }, ins.line);
        break;
      case 'USER':
        stage.user = substitute(ins.args, vars, ins.line);
        break;
      case 'EXPOSE':
        stage.expose.push(...words(ins.args));
        break;
      case 'ENTRYPOINT':
        stage.entrypoint = execForm(ins.args);
        // Docker resets an inherited CMD when ENTRYPOINT is set.
        delete stage.cmd;
        break;
      case 'CMD':
        stage.cmd = execForm(ins.args);
        break;
      case 'LABEL':
        pairs(ins.args, ins.line);
        break;
    }
  }
  return { globalArgs, stages };
}

export function stageNamed(df: Dockerfile, name: string): Stage {
  const s = df.stages.find((x) => x.name === name);
  if (!s) throw new Error(`the Dockerfile has no stage "${name}" (stages: ${df.stages.map((x) => x.name).join(', ')})`);
  return s;
}

/**
 * The stage that really provides a stage's files: a stage with no instructions of its own
 * (`FROM ${PULUMI_STAGE} AS pulumi`, with the build argument's default naming an earlier stage) is
 * an alias of that stage.
 */
export function effectiveStage(df: Dockerfile, name: string): Stage {
  let stage = stageNamed(df, name);
  for (;;) {
    const current = stage;
    const parent = df.stages.find((s) => s.name === current.base && s.index < current.index);
    if (!parent || current.instructions.length > 0) return current;
    stage = parent;
  }
}

/** Numeric uid and gid of a `USER uid[:gid]`; undefined when not numeric. */
export function numericUser(user: string | undefined): { uid: number; gid?: number } | undefined {
  const m = /^(\d+)(?::(\d+))?$/.exec(user ?? '');
  if (!m) return undefined;
  return m[2] === undefined ? { uid: Number(m[1]) } : { uid: Number(m[1]), gid: Number(m[2]) };
}
