import type { Stack } from '../../../schemas/generated/types';
import { posix } from 'node:path';
import { Paths } from '../../../contract';
import { localSourceDir } from '../workspace/source';

/**
 * Fields of `workspaceTemplate` and `updateTemplate` that the operator derives from the Stack
 * itself. Upstream strategic-merges the templates onto the Workspace and Update it generates
 * (https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/stack_controller.go#L1720),
 * so these fields override what the Stack says, and most combinations break there: a second
 * source adds a second init container named `fetch` (the StatefulSet is invalid), a `stacks`
 * entry for the Stack's own stack duplicates the key of a map list (the Workspace cannot be
 * applied), a `type` turns the destroy on deletion into another operation. Here each is either
 * given upstream's meaning where the Stack has one (`local`, and `stackName`/`workspaceName`
 * equal to what the operator sets) or stalls the Stack with a message naming the field and what
 * to use instead; none is silently ignored.
 *
 * `hasGit`: whether the Stack sets any inline git field (validate.ts's hasGitSource).
 */
export function templateFieldProblems(stack: Stack, hasGit: boolean): string[] {
  return [...workspaceTemplateProblems(stack, hasGit), ...updateTemplateProblems(stack)];
}

const WS = 'spec.workspaceTemplate.spec';
const UPD = 'spec.updateTemplate.spec';

function workspaceTemplateProblems(stack: Stack, hasGit: boolean): string[] {
  const spec = stack.spec;
  const ws = spec.workspaceTemplate?.spec;
  if (!ws) return [];
  const problems: string[] = [];
  if (ws.git !== undefined) {
    problems.push(
      `${WS}.git: the workspace's git source is the Stack's: set spec.projectRepo, spec.commit or spec.branch, spec.repoDir, spec.gitAuth and spec.shallow instead, and remove git`,
    );
  }
  if (ws.flux !== undefined) {
    problems.push(
      `${WS}.flux: the workspace's artifact is the Stack's: set spec.fluxSource (its dir for the project directory) or spec.programRef instead, and remove flux`,
    );
  }
  if (ws.projectInfo !== undefined) {
    problems.push(
      `${WS}.projectInfo: the operator sets it itself, from status.projectInfo, to destroy a deleted Stack whose source is gone; for a project inside the workspace image use ${WS}.local, and remove projectInfo`,
    );
  }
  if (ws.stacks !== undefined && ws.stacks.length > 0) {
    problems.push(
      `${WS}.stacks: the workspace's one stack is the Stack's own: name it with spec.stack, set its config with spec.config, spec.configRef and spec.secretsRef (not stacks[].config), its secrets provider, ESC environments and creation with spec.secretsProvider, spec.environment and spec.useLocalStackOnly, and remove stacks`,
    );
  }
  if (ws.local !== undefined) {
    const other = otherSources(stack, hasGit);
    if (other.length > 0) {
      problems.push(
        `${WS}.local: a Stack has one source and this one also sets ${other.join(', ')}; remove local, or remove ${other.length > 1 ? 'those' : 'that'}`,
      );
    } else if (!ws.local.dir) {
      problems.push(
        `${WS}.local.dir: missing; set the path of the project directory (holding Pulumi.yaml) in the image`,
      );
    } else if (within(localSourceDir(ws.local.dir), Paths.workspace)) {
      problems.push(
        `${WS}.local.dir: "${ws.local.dir}" is ${Paths.workspace} itself or inside it, where the project is linked to; use the project's own directory`,
      );
    }
  }
  return problems;
}

/** The Stack's own source fields, which `local` would compete with. */
function otherSources(stack: Stack, hasGit: boolean): string[] {
  const spec = stack.spec;
  const found: string[] = [];
  if (hasGit) found.push('spec.projectRepo');
  if (spec.fluxSource !== undefined) found.push('spec.fluxSource');
  if (spec.programRef !== undefined) found.push('spec.programRef');
  return found;
}

function updateTemplateProblems(stack: Stack): string[] {
  const t = stack.spec.updateTemplate?.spec;
  if (!t) return [];
  const problems: string[] = [];
  if (t.type !== undefined) {
    problems.push(
      `${UPD}.type: the Stack chooses each operation (up; preview with spec.preview; destroy on deletion with spec.destroyOnFinalize), so a fixed type would replace the destroy on deletion too; remove type`,
    );
  }
  // Equal to what upstream sets itself, the merge changes nothing: a copied Update stays usable.
  if (t.stackName !== undefined && t.stackName !== stack.spec.stack) {
    problems.push(
      `${UPD}.stackName: "${t.stackName}" is not spec.stack ("${stack.spec.stack}"), the only stack the workspace selects and configures; set spec.stack instead, and remove stackName`,
    );
  }
  if (t.workspaceName !== undefined && t.workspaceName !== stack.metadata.name) {
    problems.push(
      `${UPD}.workspaceName: "${t.workspaceName}" is not this Stack's workspace ("${stack.metadata.name}"); each Stack runs its operations in its own workspace, so remove workspaceName`,
    );
  }
  return problems;
}

function within(dir: string, parent: string): boolean {
  const d = posix.resolve(dir);
  return d === parent || d.startsWith(`${parent}/`);
}
