/**
 * Whether a Program's ConfigMap can be written at all. A ConfigMap's data may hold 1 MiB, but with
 * Metacontroller's default apply (dynamic apply) every attachment also carries a copy of itself, as
 * JSON, in the annotation `metacontroller.k8s.io/last-applied-configuration`, and Kubernetes allows
 * an object 256 KiB of annotations in all (keys and values). So that copy is the binding limit: a
 * ConfigMap over it is rejected by the API server on every sync. The hooks stall the Program instead.
 */
import { LAST_APPLIED_ANNOTATION, type KObject } from '../lib/k8s';

/** Kubernetes' limit on an object's annotations, keys and values together (TotalAnnotationSizeLimitB). */
export const MAX_ANNOTATIONS_BYTES = 256 * 1024;

/**
 * Room for what Metacontroller adds besides the copy: the annotation
 * `metacontroller.k8s.io/decorator-controller: <controller name>` (at most 38 + 253 bytes), on the
 * object and again inside the copy, with some to spare.
 */
const METACONTROLLER_ANNOTATIONS_BYTES = 1024;

/**
 * Bytes of `value` as Go's encoding/json writes it, which is how Metacontroller writes the copy: it
 * escapes `<`, `>` and `&` as `\u003c`… (6 bytes instead of 1) and U+2028, U+2029 (6 instead of 3).
 */
export function goJsonBytes(value: unknown): number {
  const text = JSON.stringify(value) ?? '';
  const html = text.match(/[<>&]/g)?.length ?? 0;
  const separators = text.match(/[\u2028\u2029]/g)?.length ?? 0;
  return Buffer.byteLength(text) + 5 * html + 3 * separators;
}

/** Bytes of annotations `attachment` has once Metacontroller applied it: its own, the copy, and Metacontroller's. */
export function appliedAnnotationsBytes(attachment: KObject): number {
  let own = 0;
  for (const [k, v] of Object.entries(attachment.metadata.annotations ?? {})) own += Buffer.byteLength(k + v);
  return own + Buffer.byteLength(LAST_APPLIED_ANNOTATION) + goJsonBytes(attachment) + METACONTROLLER_ANNOTATIONS_BYTES;
}

function kib(bytes: number): string {
  return `${Math.ceil(bytes / 1024)} KiB`;
}

/**
 * Why the ConfigMap of a Program (`program` = namespace/name) holding `yamlBytes` of Pulumi.yaml
 * cannot be written, or undefined when it can.
 */
export function configMapTooLarge(program: string, configMap: KObject, yamlBytes: number): string | undefined {
  const needed = appliedAnnotationsBytes(configMap);
  if (needed <= MAX_ANNOTATIONS_BYTES) return undefined;
  return (
    `Program ${program} renders to a Pulumi.yaml of ${kib(yamlBytes)} (${yamlBytes} bytes), too large for its ` +
    `ConfigMap ${configMap.metadata.name}: Metacontroller keeps a copy of the ConfigMap in an annotation, which ` +
    `would take ${needed} bytes, and Kubernetes allows ${MAX_ANNOTATIONS_BYTES} bytes (256 KiB) of annotations ` +
    `per object. Make the program smaller, split it into several Programs and Stacks, or deploy it from a git ` +
    `repository (spec.projectRepo) or a Flux source (spec.fluxSource), which have no such limit.`
  );
}
