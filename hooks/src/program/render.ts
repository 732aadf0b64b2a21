import { createHash } from 'node:crypto';
import { dump } from 'js-yaml';
import type { Program } from '../../../schemas/generated/types';
import { isRecord } from '../lib/json';

export interface RenderedProgram {
  /** The Pulumi YAML project: name = the Program's name, runtime yaml. */
  yaml: string;
  /** `sha256:<hex>` of the bytes of `yaml`. */
  digest: string;
  size: number;
}

function sortDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortDeep);
  if (isRecord(value)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) if (value[k] !== undefined) out[k] = sortDeep(value[k]);
    return out;
  }
  return value;
}

/**
 * Renders a Program as a Pulumi YAML project (upstream's programToProject:
 * https://github.com/pulumi/pulumi-kubernetes-operator/blob/475dbc6c9d34ccab38ba1d3b16c924dd8a1c59b1/operator/internal/controller/pulumi/program_controller.go#L209):
 * deterministic bytes for the same Program, whatever order its maps arrive in, so the digest
 * identifies the content.
 */
export function renderProgram(program: Program): RenderedProgram {
  const spec = program.program ?? {};
  const project: Record<string, unknown> = { name: program.metadata.name, runtime: 'yaml' };
  for (const key of ['configuration', 'resources', 'variables', 'outputs', 'packages'] as const) {
    const v = (spec as Record<string, unknown>)[key];
    if (v !== undefined && !(isRecord(v) && Object.keys(v).length === 0)) project[key] = sortDeep(v);
  }
  const yaml = dump(project, { noRefs: true, lineWidth: -1, quotingType: '"' });
  const bytes = Buffer.from(yaml, 'utf8');
  return { yaml, digest: `sha256:${createHash('sha256').update(bytes).digest('hex')}`, size: bytes.length };
}
