/** The key-derivation rounds of OpenSSH private keys, read without decrypting them. */
import { generateKeyPairSync } from 'node:crypto';
import { utils } from 'ssh2';
import { encryptedKey, withKeyRounds } from '../hooks/test/ssh-git-server';
import { MAX_SSH_KEY_ROUNDS, sshKeyRounds, sshKeyRoundsProblem } from './ssh-key';

describe('sshKeyRounds', () => {
  it('reads the bcrypt rounds of an encrypted OpenSSH key, whatever they claim', () => {
    const key = encryptedKey('pass', 4);
    expect(sshKeyRounds(key)).toBe(4);
    expect(sshKeyRounds(withKeyRounds(key, 2 ** 32 - 1))).toBe(2 ** 32 - 1);
    expect(sshKeyRounds(withKeyRounds(key, 400).replace(/\n/g, '\r\n'))).toBe(400);
  });

  it('is 0 for keys without bcrypt: unencrypted OpenSSH keys, PEM keys, anything else', () => {
    expect(sshKeyRounds(utils.generateKeyPairSync('ed25519').private)).toBe(0);
    const pem = generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ type: 'pkcs1', format: 'pem' });
    expect(sshKeyRounds(pem.toString())).toBe(0);
    const cut = encryptedKey('pass', 4).slice(0, 80);
    for (const text of [
      '',
      'not a key',
      cut,
      '-----BEGIN OPENSSH PRIVATE KEY-----\n!!!\n-----END OPENSSH PRIVATE KEY-----',
    ])
      expect(sshKeyRounds(text)).toBe(0);
  });

  it('says why a key is refused, and what to do, only past the cap', () => {
    const key = encryptedKey('pass', 4);
    expect(sshKeyRoundsProblem(withKeyRounds(key, MAX_SSH_KEY_ROUNDS))).toBeUndefined();
    expect(sshKeyRoundsProblem(withKeyRounds(key, MAX_SSH_KEY_ROUNDS + 1))).toBe(
      'the SSH private key of gitAuth.sshAuth is encrypted with 129 bcrypt rounds, more than the 128 the operator ' +
        'decrypts: encrypt it again with fewer (ssh-keygen -p -a 16 -f <key file>, the default) and update its Secret',
    );
  });
});
