import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Stack, Workspace } from '../../../schemas/generated/types';
import type { UpdateResult } from '../../../contract';
import type { HookConfig } from '../config';
import type { KObject } from '../lib/k8s';
import { deepFreeze, MAX_NESTING, nestedDeeperThan } from '../lib/json';
import type { SyncSteps } from '../stack/sync';
import { validateStackObject } from '../stack/validate';
import { stackWorkspace, type DesiredStackWorkspace } from '../stack/workspace';
import { desiredPod, type DesiredPod } from '../workspace/pod';
import type { FetchSource } from '../workspace/source';
import { hasRoomFor, IDLE_BEFORE_EVICTION_MS, type Used } from './admission';
import { contentTokens, type ContentTokens } from './snapshot';
import { readUpdateResult } from '../lib/operation-result';

/**
 * Answers of pure functions, remembered by content in a bounded LRU (lru-cache) that lets a new
 * entry in only when there is room or the entries it would push out are idle ({@link hasRoomFor}).
 * Answers are frozen, because they are shared between requests: a caller that tried to edit one
 * would throw rather than corrupt the next answer. Forgetting an entry, or not keeping one, changes
 * no answer, only its cost.
 */
export class FrozenCache<V> {
  private readonly entries: LRUCache<string, { value: V } & Used>;
  private readonly sizeOf: ((entry: { value: V } & Used, key: string) => number) | undefined;

  /** `counted` hears of every lookup, hit or not (the hooks' cache metrics); `now` is the clock of idleness. */
  constructor(
    options: LRUCache.Options<string, { value: V } & Used, unknown>,
    private readonly counted: (hit: boolean) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {
    this.entries = new LRUCache(options);
    this.sizeOf = options.sizeCalculation;
  }

  /** The remembered answer for `key`, else `compute()`, frozen and remembered if there is room. */
  get(key: string, compute: () => V): V {
    const hit = this.entries.get(key);
    this.counted(hit !== undefined);
    const now = this.now();
    if (hit) {
      hit.usedAt = now;
      return hit.value;
    }
    const entry = { value: deepFreeze(compute()), usedAt: now };
    const size = this.sizeOf ? this.sizeOf(entry, key) : 1;
    if (hasRoomFor(this.entries, size, now, IDLE_BEFORE_EVICTION_MS))
      this.entries.set(key, entry, this.sizeOf ? { size } : {});
    return entry.value;
  }

  /** The bytes held, as the cache's sizeCalculation counts them (0 for a cache bounded by count). */
  bytes(): number {
    return this.entries.calculatedSize;
  }
}

/** The default of SYNC_CACHE_MAX_BYTES: what all the caches of a SyncCache hold at most. */
export const DEFAULT_SYNC_CACHE_MAX_BYTES = 96 * 1024 * 1024;

/** The caches of a {@link SyncCache}, as named in pulumi_hook_cache_requests_total. */
export type SyncCacheName = 'stack_validation' | 'stack_workspace' | 'workspace_pod' | 'update_result';

/** Every cache of a {@link SyncCache}, as named in pulumi_hook_cache_bytes: the above and the spec snapshots. */
export type SyncCacheBytesName = SyncCacheName | 'stack_spec' | 'workspace_spec';

/**
 * Each cache's share of the budget, by what a typical Stack leaves in each (docs/benchmarks.md): a
 * Workspace's StatefulSet and Service are most of it.
 */
const SHARES: Readonly<Record<SyncCacheBytesName, number>> = {
  workspace_pod: 0.5,
  stack_workspace: 0.15,
  update_result: 0.15,
  stack_spec: 0.08,
  workspace_spec: 0.08,
  stack_validation: 0.04,
};

/** Hears of each lookup in a SyncCache's caches: which cache, and whether it was a hit. */
export type CacheLookupCounter = (cache: SyncCacheName, hit: boolean) => void;
/** Parsed update results larger than this are parsed every time, not kept. */
const MAX_CACHED_RESULT_BYTES = 1024 * 1024;

/**
 * A cache's bound in bytes: estimates of the heap an entry holds, from the length of its JSON
 * (docs/benchmarks.md has how they compare with the heap). An entry larger than an eighth of its
 * cache is not kept: one Stack cannot take a cache for itself.
 */
function bytesBound<V>(maxBytes: number, bytesOf: (value: V, key: string) => number) {
  return {
    maxSize: maxBytes,
    maxEntrySize: Math.max(1, Math.floor(maxBytes / 8)),
    sizeCalculation: (entry: { value: V }, key: string) => Math.max(1, Math.ceil(bytesOf(entry.value, key))),
  };
}

/**
 * Bytes per character of JSON that a frozen answer holds: its objects and, for children, the JSON
 * itself that jsonOf keeps (measured: docs/benchmarks.md).
 */
const HEAP_PER_JSON_BYTE = 4;

/**
 * The hook server's memory between requests: the sync's costly pure steps, remembered by content.
 * Metacontroller calls the sync hook for every Stack on every resync and child event, and at rest
 * the answers do not change (docs/benchmarks.md has what each step cost). The domain code does not
 * know about it: syncStack asks its {@link SyncSteps}, and the Stack routes hand this in with the
 * request.
 *
 * Bounded by bytes, not entries (a Stack's spec may be a megabyte): `maxBytes`
 * (SYNC_CACHE_MAX_BYTES) shared among its six caches (SHARES), each least recently used first out,
 * but only for a new entry when the ones it would push out have gone unasked a while
 * (./admission.ts: more Stacks than the caches hold must not make every entry go before its use).
 *
 * A Stack's spec stands in the keys as a short content token (./snapshot.ts), one slot per Stack.
 * A spec nested deeper than MAX_NESTING (snapshots are recursive; validation reports it), or too
 * large for its cache, gets no token, and nothing derived from it is cached.
 */
export class SyncCache implements SyncSteps {
  private readonly specTokens: ContentTokens;
  private readonly validations: FrozenCache<readonly string[]>;
  private readonly workspaces: FrozenCache<DesiredStackWorkspace>;
  /** A Workspace's spec and labels, as a content token per Workspace (what its pod is built from). */
  private readonly workspaceTokens: ContentTokens;
  private readonly pods: FrozenCache<DesiredPod>;
  private readonly results: FrozenCache<UpdateResult | undefined>;
  /** JSON of the frozen answers above (they cannot change, so neither can their JSON); see jsonOf. */
  private readonly json = new WeakMap<object, string>();
  /** A digest of each HookConfig's JSON, in keys (one per server, never changed once made). */
  private readonly configKeys = new WeakMap<HookConfig, string>();

  /** `now`: the clock that says how long an entry has gone unasked (cache/admission.ts). */
  constructor(options: { maxBytes?: number; counted?: CacheLookupCounter; now?: () => number } = {}) {
    const maxBytes = options.maxBytes ?? DEFAULT_SYNC_CACHE_MAX_BYTES;
    const now = options.now ?? Date.now;
    const share = (cache: SyncCacheBytesName) => Math.max(1, Math.floor(maxBytes * SHARES[cache]));
    const counted = options.counted ?? (() => {});
    const admit = (value: unknown) => !nestedDeeperThan(value, MAX_NESTING);
    this.specTokens = contentTokens({ maxBytes: share('stack_spec'), admit, now });
    this.workspaceTokens = contentTokens({ maxBytes: share('workspace_spec'), admit, now });
    const jsonBytes = (...children: KObject[]) =>
      HEAP_PER_JSON_BYTE * children.reduce((n, child) => n + this.jsonOf(child).length, 0);
    this.validations = new FrozenCache(
      bytesBound(share('stack_validation'), (problems: readonly string[], key) =>
        problems.reduce((n, p) => n + 64 + p.length, key.length),
      ),
      (hit) => counted('stack_validation', hit),
      now,
    );
    this.workspaces = new FrozenCache(
      bytesBound(share('stack_workspace'), (w: DesiredStackWorkspace, key) => jsonBytes(w.workspace) + key.length),
      (hit) => counted('stack_workspace', hit),
      now,
    );
    this.pods = new FrozenCache(
      bytesBound(share('workspace_pod'), (p: DesiredPod, key) => jsonBytes(p.statefulSet, p.service) + key.length),
      (hit) => counted('workspace_pod', hit),
      now,
    );
    // Keyed by the result's text itself: the text and the parsed result.
    this.results = new FrozenCache(
      bytesBound(
        share('update_result'),
        (_value: UpdateResult | undefined, text) => (1 + HEAP_PER_JSON_BYTE) * text.length,
      ),
      (hit) => counted('update_result', hit),
      now,
    );
  }

  /** The bytes each cache holds (its estimate), for pulumi_hook_cache_bytes. */
  bytes(): Record<SyncCacheBytesName, number> {
    return {
      stack_spec: this.specTokens.bytes(),
      stack_validation: this.validations.bytes(),
      stack_workspace: this.workspaces.bytes(),
      workspace_spec: this.workspaceTokens.bytes(),
      workspace_pod: this.pods.bytes(),
      update_result: this.results.bytes(),
    };
  }

  validate(stack: Stack): readonly string[] {
    const token = this.specToken(stack);
    if (token === undefined) return validateStackObject(stack);
    const key = `${JSON.stringify([stack.apiVersion, stack.kind, stack.metadata.name, stack.metadata.namespace])}\n${token}`;
    return this.validations.get(key, () => validateStackObject(stack));
  }

  workspace(stack: Stack, source: FetchSource, config: HookConfig): DesiredStackWorkspace {
    const token = this.specToken(stack);
    if (token === undefined) return stackWorkspace(stack, source, config);
    const key = `${JSON.stringify([stack.metadata.name, stack.metadata.namespace, source])}\n${this.configKey(config)}\n${token}`;
    return this.workspaces.get(key, () => stackWorkspace(stack, source, config));
  }

  /** The Workspace controller's StatefulSet and Service for a Workspace (workspace/pod.ts). */
  workspacePod = (ws: Workspace, config: HookConfig): DesiredPod => {
    const { name, namespace, labels } = ws.metadata;
    const token = this.workspaceTokens(`${namespace}/${name}`, { spec: ws.spec ?? null, labels: labels ?? null });
    if (token === undefined) return desiredPod(ws, config);
    const key = `${JSON.stringify([name, namespace])}\n${this.configKey(config)}\n${token}`;
    return this.pods.get(key, () => desiredPod(ws, config));
  };

  updateResult = (text: string | undefined): UpdateResult | undefined => {
    if (text === undefined) return undefined;
    if (text.length > MAX_CACHED_RESULT_BYTES) return readUpdateResult(text);
    return this.results.get(text, () => readUpdateResult(text));
  };

  /**
   * JSON.stringify(value), remembered for frozen values (this cache's answers, which are
   * returned again on every sync of an unchanged Stack).
   */
  jsonOf(value: unknown): string {
    if (value === null || typeof value !== 'object' || !Object.isFrozen(value)) return JSON.stringify(value);
    let json = this.json.get(value);
    if (json === undefined) {
      json = JSON.stringify(value);
      this.json.set(value, json);
    }
    return json;
  }

  private specToken(stack: Stack): string | undefined {
    return this.specTokens(`${stack.metadata.namespace}/${stack.metadata.name}`, stack.spec);
  }

  private configKey(config: HookConfig): string {
    let key = this.configKeys.get(config);
    if (key === undefined) {
      // Hashed: the config (known_hosts text included) would otherwise be repeated in every key.
      key = createHash('sha256').update(JSON.stringify(config)).digest('base64');
      this.configKeys.set(config, key);
    }
    return key;
  }
}
