/**
 * Typed views of the children the hooks return, for assertions: the hooks build each kind as
 * client-node's model of it (in its JSON form), and a missing part fails the test here.
 */
import type { V1Container, V1JobSpec, V1PodSpec, V1PodTemplateSpec, V1StatefulSetSpec } from '@kubernetes/client-node';
import type { Json, KObject } from '../src/lib/k8s';

function present<T>(value: T | undefined | null, what: string): T {
  if (value === undefined || value === null) throw new Error(`no ${what}`);
  return value;
}

export function statefulSetSpec(o: KObject | undefined): Json<V1StatefulSetSpec> {
  return present(o?.spec as Json<V1StatefulSetSpec> | undefined, `spec of ${o?.kind}`);
}

export function jobSpec(o: KObject | undefined): Json<V1JobSpec> {
  return present(o?.spec as Json<V1JobSpec> | undefined, `spec of ${o?.kind}`);
}

/** The pod template of a StatefulSet or a Job. */
export function templateOf(o: KObject | undefined): Json<V1PodTemplateSpec> {
  return present((o?.spec as { template?: Json<V1PodTemplateSpec> } | undefined)?.template, `template of ${o?.kind}`);
}

export function podOf(o: KObject | undefined): Json<V1PodSpec> {
  return present(templateOf(o).spec, `pod spec of ${o?.kind}`);
}

/** The pod's `i`th container, or init container. */
export function containerOf(o: KObject | undefined, i = 0, init = false): Json<V1Container> {
  const list = init ? podOf(o).initContainers : podOf(o).containers;
  return present(list?.[i], `${init ? 'init ' : ''}container ${i} of ${o?.kind}`);
}

/** The value of a container's `i`th env var. */
export function envValue(c: Json<V1Container>, i = 0): string {
  return present(c.env?.[i]?.value, `value of env var ${i} of ${c.name}`);
}
