/** Runs `render` in-process, as the bin would, capturing what it prints. */
import { join } from 'node:path';
import { runCli } from '../../src/cli/main';

export interface RenderRun {
  code: number;
  stdout: string;
  stderr: string;
}

/** The settings that shape the children, as a CI job would set them for both renders it diffs. */
export const RENDER_ENV = {
  AGENT_IMAGE: 'example.test/pko-agent:v0.1.0',
  WORKSPACE_IMAGE: 'example.test/pulumi:3-nonroot',
  WORKSPACE_IMAGE_BASELINE: 'example.test/pulumi:3',
  // Programs are served by the hook server (program/serve.ts); its URL and CA shape the workspace pod.
  PROGRAM_SERVER_URL: 'https://pulumi-mc-hooks.pulumi-system.svc',
  PROGRAM_SERVER_CA_FILE: join(__dirname, 'testdata', 'program-ca.pem'),
};

export function runRender(args: string[], stdin = '', env: NodeJS.ProcessEnv = RENDER_ENV): RenderRun {
  let stdout = '';
  let stderr = '';
  const code = runCli(['render', ...args], {
    stdout: (t) => (stdout += t),
    stderr: (t) => (stderr += t),
    readStdin: () => stdin,
    env,
  });
  return { code, stdout, stderr };
}

export interface RenderedEntry {
  namespace: string;
  name: string;
  response: { status: Record<string, unknown> & { conditions?: Record<string, unknown>[] } } & Record<string, unknown>;
}

/** The JSON output of a render, parsed. */
export function parseOutput(stdout: string): { programs: RenderedEntry[]; stacks: RenderedEntry[] } {
  return JSON.parse(stdout) as { programs: RenderedEntry[]; stacks: RenderedEntry[] };
}

/** A condition of a rendered status, by type. */
export function conditionIn(entry: RenderedEntry, type: string): Record<string, unknown> | undefined {
  return entry.response.status.conditions?.find((c) => c.type === type);
}

export const SHA = 'c0ffee'.padEnd(40, '0');

/** A Program and a Stack deploying it, with no namespace (kubectl apply's default applies). */
export const PROGRAM_STACK = `
apiVersion: pulumi.com/v1
kind: Program
metadata:
  name: hello-program
program:
  outputs:
    greeting: hello
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: hello
spec:
  stack: dev
  programRef:
    name: hello-program
  backend: file:///tmp
`;

/** A Stack tracking a branch of a private repository over HTTPS, with the Secret holding its token. */
export const GIT_STACK = `
apiVersion: v1
kind: Secret
metadata:
  name: git-credentials
data:
  accessToken: ${Buffer.from('not-a-real-token').toString('base64')}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: infra
spec:
  stack: dev
  projectRepo: https://git.example.test/infra.git
  branch: main
  gitAuth:
    accessToken:
      type: Secret
      secret: { name: git-credentials, key: accessToken }
  backend: file:///tmp
`;

/** A Stack tracking a branch over SSH, with its key in a Secret. */
export const SSH_STACK = `
apiVersion: v1
kind: Secret
metadata:
  name: ssh-key
data:
  key: ${Buffer.from('-----BEGIN OPENSSH PRIVATE KEY-----\nnot a key\n-----END OPENSSH PRIVATE KEY-----\n').toString('base64')}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: infra-ssh
spec:
  stack: dev
  projectRepo: git@git.example.test:org/infra.git
  branch: release
  gitAuth:
    sshAuth:
      sshPrivateKey:
        type: Secret
        secret: { name: ssh-key, key: key }
  backend: file:///tmp
`;
