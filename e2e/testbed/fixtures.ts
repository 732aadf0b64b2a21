/**
 * Fixtures of the e2e tests: the usual Stack spec and Program, and reads of what a run left (a file
 * backend's checkpoint, the agent's report).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type * as k8s from '@kubernetes/client-node';
import type { StackSpec } from '../../schemas/generated/types';
import { parseWorkspaceStatus, WORKSPACE_STATUS_KEY, type WorkspaceStatus } from '../../contract';
import { exists } from './cluster';

/** The resources of a stack's checkpoint in a file backend (`<state>/.pulumi/stacks/<project>/<stack>.json`). */
export interface CheckpointResource {
  urn: string;
  type: string;
  outputs?: Record<string, unknown>;
}

/** The resources of a file backend's checkpoint, undefined when the file does not exist. */
export function checkpointResources(
  stateDir: string,
  project: string,
  stack: string,
): CheckpointResource[] | undefined {
  const file = join(stateDir, '.pulumi', 'stacks', project, `${stack}.json`);
  if (!existsSync(file)) return undefined;
  const doc = JSON.parse(readFileSync(file, 'utf8')) as {
    checkpoint?: { latest?: { resources?: CheckpointResource[] } };
  };
  return doc.checkpoint?.latest?.resources ?? [];
}

/**
 * What the agent of the workspace `<workspace>-workspace` reported last: the report in its status
 * ConfigMap (`<workspace>-workspace-status`), undefined while there is none.
 */
export async function workspaceReport(
  op: { core: k8s.CoreV1Api },
  namespace: string,
  workspace: string,
): Promise<WorkspaceStatus | undefined> {
  const read = () => op.core.readNamespacedConfigMap({ namespace, name: `${workspace}-workspace-status` });
  if (!(await exists(read))) return undefined;
  return parseWorkspaceStatus((await read()).data?.[WORKSPACE_STATUS_KEY]);
}

/** A Pulumi YAML Program with a plain output `greeting` and a secret one, `secretWord` (swordfish). */
export function greetingProgram(name: string, namespace: string, greeting: string): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name, namespace },
    program: {
      configuration: { secretWord: { type: 'String', default: 'swordfish' } },
      variables: { greeting },
      outputs: { greeting: '${greeting}', secretWord: { 'fn::secret': '${secretWord}' } },
    },
  } as k8s.KubernetesObject;
}

/**
 * A Pulumi YAML Program with one resource that lives only in the backend's state: a
 * `pulumi:index:Stash` of `input` (with resource `options`), and `outputs` (by default the Stash's
 * output, which keeps the value the Stash was created with).
 */
export function stashProgram(
  name: string,
  namespace: string,
  input: string,
  { outputs = { value: '${stash.output}' }, options }: { outputs?: object; options?: object } = {},
): k8s.KubernetesObject & { program: object } {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name, namespace },
    program: {
      resources: { stash: { type: 'pulumi:index:Stash', properties: { input }, ...(options ? { options } : {}) } },
      outputs,
    },
  };
}

/** The Stack `name` of the Program of the same name, stack `dev`, with e2eStackSpec's settings and `spec`. */
export function programStack(name: string, namespace: string, spec: Partial<StackSpec> = {}): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace },
    spec: e2eStackSpec({ stack: 'dev', programRef: { name }, ...spec }),
  } as k8s.KubernetesObject;
}

/** The usual settings of an e2e Stack: a file backend on the namespace's PVC and a passphrase. */
export function e2eStackSpec(extra: Partial<StackSpec> & Pick<StackSpec, 'stack'>): StackSpec {
  return {
    serviceAccountName: 'pulumi',
    backend: 'file:///state',
    envRefs: { PULUMI_CONFIG_PASSPHRASE: { type: 'Literal', literal: { value: 'e2e-passphrase' } } },
    workspaceTemplate: {
      spec: {
        podTemplate: {
          spec: {
            volumes: [{ name: 'state', persistentVolumeClaim: { claimName: 'pulumi-state' } }],
            containers: [{ name: 'pulumi', volumeMounts: [{ name: 'state', mountPath: '/state' }] }],
          },
        },
      },
    },
    ...extra,
  };
}
