/** The render command's exit codes (docs/render.md lists them; CI scripts match on them). */
export const ExitCode = {
  /** Everything rendered; some Stacks may still be Stalled for other reasons (an unresolved branch). */
  rendered: 0,
  /** A Stack or Program is Stalled with reason SpecInvalid: the hooks would refuse to act on it. */
  specInvalid: 1,
  /** The command line is wrong (unknown flag, bad --ref or --now). */
  usage: 2,
  /** The input cannot be read: a missing file, bad YAML, a document that is no object, an unknown kind. */
  unreadableInput: 3,
} as const;

/** A problem with the command line: exit {@link ExitCode.usage}. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** A problem with the input documents: exit {@link ExitCode.unreadableInput}. */
export class InputError extends Error {
  override readonly name = 'InputError';
}
