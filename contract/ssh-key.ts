/**
 * The key-derivation rounds of an encrypted OpenSSH private key, read before anyone decrypts it.
 * An OpenSSH key encrypted with a passphrase names its own cost: bcrypt_pbkdf runs that many rounds
 * (`ssh-keygen -a`, 16 by default). The format allows 2^32-1, which is days of CPU, and the key
 * comes from a Stack's Secret: the hooks (branch lookups) and the fetch container (the clone) refuse
 * a key that asks for more than MAX_SSH_KEY_ROUNDS, before decrypting it.
 */

/** The most rounds decrypted: the default is 16, and guides that raise it suggest 100. */
export const MAX_SSH_KEY_ROUNDS = 128;

const BEGIN = '-----BEGIN OPENSSH PRIVATE KEY-----';
const END = '-----END OPENSSH PRIVATE KEY-----';
const MAGIC = 'openssh-key-v1\0';

/**
 * The bcrypt rounds of an OpenSSH-format private key; 0 when it is not encrypted with bcrypt, or
 * not in that format (PEM keys use a cheap derivation), or too malformed to say (decrypting it
 * fails at once).
 */
export function sshKeyRounds(privateKey: string): number {
  const begin = privateKey.indexOf(BEGIN);
  const end = begin < 0 ? -1 : privateKey.indexOf(END, begin);
  if (end < 0) return 0;
  // Base64 decoding skips the line breaks.
  const data = Buffer.from(privateKey.slice(begin + BEGIN.length, end), 'base64');
  if (data.toString('latin1', 0, MAGIC.length) !== MAGIC) return 0;
  let at = MAGIC.length;
  /** The next SSH `string` (uint32 length, bytes), or undefined past the end. */
  const next = (): Buffer | undefined => {
    if (at + 4 > data.length) return undefined;
    const length = data.readUInt32BE(at);
    if (at + 4 + length > data.length) return undefined;
    const value = data.subarray(at + 4, at + 4 + length);
    at += 4 + length;
    return value;
  };
  next(); // cipher name
  const kdf = next();
  const options = next();
  if (kdf?.toString('latin1') !== 'bcrypt' || options === undefined) return 0;
  // kdfoptions: string salt, uint32 rounds.
  if (options.length < 4) return 0;
  const saltLength = options.readUInt32BE(0);
  if (4 + saltLength + 4 > options.length) return 0;
  return options.readUInt32BE(4 + saltLength);
}

/**
 * Why the key is refused, for the Stack's status and the fetch container's report; undefined when
 * it asks for MAX_SSH_KEY_ROUNDS or fewer.
 */
export function sshKeyRoundsProblem(privateKey: string): string | undefined {
  const rounds = sshKeyRounds(privateKey);
  if (rounds <= MAX_SSH_KEY_ROUNDS) return undefined;
  return (
    `the SSH private key of gitAuth.sshAuth is encrypted with ${rounds} bcrypt rounds, more than the ` +
    `${MAX_SSH_KEY_ROUNDS} the operator decrypts: encrypt it again with fewer ` +
    `(ssh-keygen -p -a 16 -f <key file>, the default) and update its Secret`
  );
}
