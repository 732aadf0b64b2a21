import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import type { Stack, Workspace } from '../../../schemas/generated/types';
import type { UpdateResult } from '../../../contract';
import type { HookConfig } from '../config';
import { deepFreeze, MAX_NESTING, nestedDeeperThan } from '../lib/json';
import type { SyncSteps } from '../stack/sync';
import { validateStackObject } from '../stack/validate';
import { readUpdateResult } from '../stack/update-result';
import { desiredWorkspace, type DesiredStackWorkspace } from '../stack/workspace';
import { desiredWorkspace as desiredWorkspacePod, type DesiredWorkspace } from '../workspace/pod';
import type { FetchSource } from '../workspace/source';
import { contentTokens } from './snapshot';

/**
 * Answers of pure functions, remembered by content in a bounded LRU (lru-cache). Answers are frozen,
 * because they are shared between requests: a caller that tried to edit one would throw rather
 * than corrupt the next answer. Forgetting an entry changes no answer, only its cost.
 */
export class FrozenCache<V> {
  private readonly entries: LRUCache<string, { value: V }>;

  /** `counted` hears of every lookup, hit or not (the hooks' cache metrics). */
  constructor(
    options: LRUCache.Options<string, { value: V }, unknown>,
    private readonly counted: (hit: boolean) => void = () => {},
  ) {
    this.entries = new LRUCache(options);
  }

  /** The remembered answer for `key`, else `compute()`, frozen and remembered. */
  get(key: string, compute: () => V): V {
    const hit = this.entries.get(key);
    this.counted(hit !== undefined);
    if (hit) return hit.value;
    const value = deepFreeze(compute());
    this.entries.set(key, { value });
    return value;
  }
}

const MAX_ENTRIES = 2048;

/** The caches of a {@link SyncCache}, as named in pulumi_hook_cache_requests_total. */
export type SyncCacheName = 'stack_validation' | 'stack_workspace' | 'workspace_pod' | 'update_result';

/** Hears of each lookup in a SyncCache's caches: which cache, and whether it was a hit. */
export type CacheLookupCounter = (cache: SyncCacheName, hit: boolean) => void;
/** Parsed update results are bounded by the size of their text; a larger one is parsed every time. */
const MAX_RESULT_BYTES = 16 * 1024 * 1024;
const MAX_CACHED_RESULT_BYTES = 1024 * 1024;

/**
 * The hook server's memory between requests: the sync's costly pure steps, remembered by content.
 * Metacontroller calls the sync hook for every Stack on every resync and child event, and at rest
 * the answers do not change (docs/benchmarks.md has what each step cost). The domain code does not
 * know about it: syncStack asks its {@link SyncSteps}, and the Stack routes hand this in with the
 * request.
 *
 * A Stack's spec stands in the keys as a short content token (./snapshot.ts), one slot per Stack.
 * A spec nested deeper than MAX_NESTING gets no token (snapshots are recursive) and is not
 * cached: validation reports it.
 */
export class SyncCache implements SyncSteps {
  private readonly specTokens = contentTokens({
    max: MAX_ENTRIES,
    admit: (spec: unknown) => !nestedDeeperThan(spec, MAX_NESTING),
  });
  private readonly validations: FrozenCache<readonly string[]>;
  private readonly workspaces: FrozenCache<DesiredStackWorkspace>;
  /** A Workspace's spec and labels, as a content token per Workspace (what its pod is built from). */
  private readonly workspaceTokens = contentTokens({
    max: MAX_ENTRIES,
    admit: (value: unknown) => !nestedDeeperThan(value, MAX_NESTING),
  });
  private readonly pods: FrozenCache<DesiredWorkspace>;
  private readonly results: FrozenCache<UpdateResult | undefined>;
  /** JSON of the frozen answers above (they cannot change, so neither can their JSON); see jsonOf. */
  private readonly json = new WeakMap<object, string>();
  /** A digest of each HookConfig's JSON, in keys (one per server, never changed once made). */
  private readonly configKeys = new WeakMap<HookConfig, string>();

  constructor(counted: CacheLookupCounter = () => {}) {
    this.validations = new FrozenCache({ max: MAX_ENTRIES }, (hit) => counted('stack_validation', hit));
    this.workspaces = new FrozenCache({ max: MAX_ENTRIES }, (hit) => counted('stack_workspace', hit));
    this.pods = new FrozenCache({ max: MAX_ENTRIES }, (hit) => counted('workspace_pod', hit));
    this.results = new FrozenCache(
      { maxSize: MAX_RESULT_BYTES, sizeCalculation: (_value, text) => Math.max(1, text.length) },
      (hit) => counted('update_result', hit),
    );
  }

  validate(stack: Stack): readonly string[] {
    const token = this.specToken(stack);
    if (token === undefined) return validateStackObject(stack);
    const key = `${JSON.stringify([stack.apiVersion, stack.kind, stack.metadata.name, stack.metadata.namespace])}\n${token}`;
    return this.validations.get(key, () => validateStackObject(stack));
  }

  workspace(stack: Stack, source: FetchSource, config: HookConfig): DesiredStackWorkspace {
    const token = this.specToken(stack);
    if (token === undefined) return desiredWorkspace(stack, source, config);
    const key = `${JSON.stringify([stack.metadata.name, stack.metadata.namespace, source])}\n${this.configKey(config)}\n${token}`;
    return this.workspaces.get(key, () => desiredWorkspace(stack, source, config));
  }

  /** The Workspace controller's StatefulSet and Service for a Workspace (workspace/pod.ts). */
  workspacePod = (ws: Workspace, config: HookConfig): DesiredWorkspace => {
    const { name, namespace, labels } = ws.metadata;
    const token = this.workspaceTokens(`${namespace}/${name}`, { spec: ws.spec ?? null, labels: labels ?? null });
    if (token === undefined) return desiredWorkspacePod(ws, config);
    const key = `${JSON.stringify([name, namespace])}\n${this.configKey(config)}\n${token}`;
    return this.pods.get(key, () => desiredWorkspacePod(ws, config));
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
