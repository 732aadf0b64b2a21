/**
 * Which resources a refresh found different from the stack's state (drift), read from the engine
 * events of `pulumi refresh` (with `--preview-only`, a drift check that changes nothing). A refresh
 * step reports op `refresh` with the properties that differ (`diffs`, `detailedDiff`), or the op
 * the refresh amounts to (`update`, `delete`); its outputs event carries the state before (`old`)
 * and after (`new`: absent when the resource is gone). The stack itself and the providers are not
 * resources a user manages, so they never count.
 */
import { MAX_CHANGED_URNS } from '../../../contract';
import { STACK_TYPE } from './stack-state';
import { isRecord } from '../lib/json';

/** Ops that change a resource whatever else the event says. */
const CHANGING_OPS = new Set(['update', 'delete', 'replace', 'create-replacement', 'delete-replaced', 'discard']);

interface StepMetadata {
  op?: unknown;
  urn?: unknown;
  type?: unknown;
  old?: { outputs?: unknown } | null;
  new?: { outputs?: unknown } | null;
  diffs?: unknown;
  detailedDiff?: unknown;
}

/** JSON with object keys sorted, to compare two states whatever order their keys came in. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isRecord(value))
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`)
      .join(',')}}`;
  return JSON.stringify(value) ?? 'null';
}

/** Whether one step event says its resource differs from the state. */
function changed(meta: StepMetadata, outputsEvent: boolean): boolean {
  const op = typeof meta.op === 'string' ? meta.op : '';
  if (CHANGING_OPS.has(op)) return true;
  if (op !== 'refresh') return false;
  if (Array.isArray(meta.diffs) && meta.diffs.length > 0) return true;
  if (isRecord(meta.detailedDiff) && Object.keys(meta.detailedDiff).length > 0) return true;
  // Before the step ran (the pre event) the new state is not known yet; after it, compare.
  if (!outputsEvent || !isRecord(meta.old)) return false;
  if (!isRecord(meta.new)) return true; // the resource is gone
  return canonical(meta.old.outputs) !== canonical(meta.new.outputs);
}

/** Collects the changed resources of one refresh from its engine events, in the order they came. */
export class DriftCollector {
  private readonly urns = new Set<string>();
  private summaryChanges = 0;

  /** Feeds one engine event (any kind; those that are not steps or the summary are ignored). */
  add(event: Record<string, unknown>): void {
    const summary = event.summaryEvent;
    if (isRecord(summary) && isRecord(summary.resourceChanges)) {
      let n = 0;
      for (const [op, count] of Object.entries(summary.resourceChanges))
        if (CHANGING_OPS.has(op) && typeof count === 'number' && count > 0) n += count;
      this.summaryChanges = n;
    }
    for (const [key, outputsEvent] of [
      ['resourcePreEvent', false],
      ['resOutputsEvent', true],
    ] as const) {
      const step = event[key];
      if (!isRecord(step) || !isRecord(step.metadata)) continue;
      const meta = step.metadata as StepMetadata;
      if (typeof meta.urn !== 'string' || typeof meta.type !== 'string') continue;
      if (meta.type === STACK_TYPE || meta.type.startsWith('pulumi:providers:')) continue;
      if (changed(meta, outputsEvent)) this.urns.add(meta.urn);
    }
  }

  /** How many resources changed (the summary's count when it saw more than the steps), and the first URNs. */
  result(): { changedResources: number; changedUrns: string[] } {
    const urns = [...this.urns];
    return {
      changedResources: Math.max(urns.length, this.summaryChanges),
      changedUrns: urns.slice(0, MAX_CHANGED_URNS),
    };
  }
}
