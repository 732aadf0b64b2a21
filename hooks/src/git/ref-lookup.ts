/** What the (I/O) lookup phase resolves before a Stack's pure sync: a git ref, with its credentials. */

/** The result of resolving a git ref, produced by the (I/O) lookup phase before the pure sync. */
export type RefLookup = { sha: string } | { error: string };

/** What a branch resolution needs: the repository, the ref and the credentials (from related Secrets). */
export interface RefLookupRequest {
  url: string;
  ref: string;
  /** HTTP basic credentials, when the repository is private. */
  username?: string;
  password?: string;
  /** GitHub App credentials: exchanged for an installation token, used like an access token. */
  githubApp?: { appId: string; installationId: string; privateKey: string };
  /** An SSH key (gitAuth.sshAuth, or a legacy gitAuthSecret's sshPrivateKey), for SSH URLs. */
  ssh?: { privateKey: string; passphrase?: string };
  /** Set when the hooks cannot resolve this ref themselves; the message says why. */
  unsupported?: string;
}

export function refLookupKey(url: string, ref: string): string {
  return `${url}#${ref}`;
}
