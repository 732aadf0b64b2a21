/**
 * Pod volumes as per-pod host directories: emptyDir, configMap, secret, downwardAPI, projected
 * (serviceAccountToken through the TokenRequest API, configMap, secret, downwardAPI), hostPath and
 * persistentVolumeClaim (a directory per claim, kept for the runner's life). API-data volumes are
 * written the kubelet's way (AtomicWriter: `..<timestamp>` dir, `..data` symlink, one symlink per
 * top-level name) and refreshed while the pod runs, so updates reach the container.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type {
  V1ConfigMapProjection,
  V1DownwardAPIVolumeFile,
  V1KeyToPath,
  V1Pod,
  V1SecretProjection,
  V1ServiceAccountTokenProjection,
  V1Volume,
} from '@kubernetes/client-node';
import { type Api, isNotFound, p } from './api';
import { fieldRefValue, resourceFieldValue } from './env';

/** A volume could not be set up (FailedMount); the kubelet retries. */
export class VolumeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'VolumeError';
  }
}

export interface FileProjection {
  data: Buffer;
  mode: number;
  uid?: number;
}

interface ConfigMapObject {
  data?: Record<string, string>;
  binaryData?: Record<string, string>;
}
interface SecretObject {
  data?: Record<string, string>;
}

export async function readConfigMap(api: Api, ns: string, name: string): Promise<Map<string, Buffer> | undefined> {
  const cm = await api.getOptional<ConfigMapObject>(p`/api/v1/namespaces/${ns}/configmaps/${name}`);
  if (!cm) return undefined;
  const out = new Map<string, Buffer>();
  for (const [k, v] of Object.entries(cm.data ?? {})) out.set(k, Buffer.from(v, 'utf8'));
  for (const [k, v] of Object.entries(cm.binaryData ?? {})) out.set(k, Buffer.from(v, 'base64'));
  return out;
}

export async function readSecret(api: Api, ns: string, name: string): Promise<Map<string, Buffer> | undefined> {
  const s = await api.getOptional<SecretObject>(p`/api/v1/namespaces/${ns}/secrets/${name}`);
  if (!s) return undefined;
  const out = new Map<string, Buffer>();
  for (const [k, v] of Object.entries(s.data ?? {})) out.set(k, Buffer.from(v, 'base64'));
  return out;
}

// ---------------------------------------------------------------------------------------------
// AtomicWriter (pkg/volume/util/atomic_writer.go), simplified.

const DATA_DIR = '..data';

function validateRelPath(rel: string): void {
  if (rel === '' || path.isAbsolute(rel) || rel.split('/').some((s) => s === '..') || rel.startsWith('..')) {
    throw new VolumeError(`invalid path ${JSON.stringify(rel)} in volume payload`);
  }
}

const effectiveMode = (f: FileProjection, gid: number | undefined): number =>
  gid !== undefined ? f.mode | 0o440 : f.mode;

function currentPayloadMatches(dir: string, payload: Map<string, FileProjection>, gid: number | undefined): boolean {
  let target: string;
  try {
    target = fs.readlinkSync(path.join(dir, DATA_DIR));
  } catch {
    return false;
  }
  const base = path.join(dir, target);
  const files: string[] = [];
  const walk = (rel: string): void => {
    for (const e of fs.readdirSync(path.join(base, rel), { withFileTypes: true })) {
      const r = rel === '' ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) walk(r);
      else files.push(r);
    }
  };
  try {
    walk('');
  } catch {
    return false;
  }
  if (files.length !== payload.size) return false;
  for (const f of files) {
    const want = payload.get(f);
    if (!want) return false;
    const file = path.join(base, f);
    const st = fs.statSync(file);
    if ((st.mode & 0o7777) !== effectiveMode(want, gid)) return false;
    if (st.uid !== (want.uid ?? 0) || (gid !== undefined && st.gid !== gid)) return false;
    if (!fs.readFileSync(file).equals(want.data)) return false;
  }
  return true;
}

function timestampDir(): string {
  const d = new Date();
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `..${d.getUTCFullYear()}_${pad(d.getUTCMonth() + 1)}_${pad(d.getUTCDate())}_${pad(d.getUTCHours())}_${pad(d.getUTCMinutes())}_${pad(
    d.getUTCSeconds(),
  )}.${crypto.randomBytes(5).toString('hex')}`;
}

/**
 * Writes the payload into dir atomically. Returns true when something changed. `gid` (fsGroup)
 * gets group ownership and group read, as the kubelet's SetVolumeOwnership does for read-only
 * volumes.
 */
export function atomicWrite(dir: string, payload: Map<string, FileProjection>, gid?: number): boolean {
  for (const rel of payload.keys()) validateRelPath(rel);
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  if (currentPayloadMatches(dir, payload, gid)) return false;
  const oldTarget = (() => {
    try {
      return fs.readlinkSync(path.join(dir, DATA_DIR));
    } catch {
      return undefined;
    }
  })();
  const tsName = timestampDir();
  const tsDir = path.join(dir, tsName);
  fs.mkdirSync(tsDir, { mode: 0o755 });
  fs.chmodSync(tsDir, gid !== undefined ? 0o2755 : 0o755);
  if (gid !== undefined) fs.chownSync(tsDir, 0, gid);
  for (const [rel, f] of payload) {
    const file = path.join(tsDir, rel);
    const parent = path.dirname(file);
    if (!fs.existsSync(parent)) {
      fs.mkdirSync(parent, { recursive: true, mode: 0o755 });
      if (gid !== undefined) {
        for (let d = parent; d !== tsDir; d = path.dirname(d)) {
          fs.chownSync(d, 0, gid);
          fs.chmodSync(d, 0o2755);
        }
      }
    }
    fs.writeFileSync(file, f.data);
    fs.chmodSync(file, effectiveMode(f, gid));
    if (f.uid !== undefined || gid !== undefined) fs.chownSync(file, f.uid ?? 0, gid ?? 0);
  }
  const tmpLink = path.join(dir, '..data_tmp');
  fs.rmSync(tmpLink, { force: true });
  fs.symlinkSync(tsName, tmpLink);
  fs.renameSync(tmpLink, path.join(dir, DATA_DIR));
  const topLevel = new Set([...payload.keys()].map((rel) => rel.split('/')[0]!));
  for (const name of topLevel) {
    const link = path.join(dir, name);
    try {
      fs.lstatSync(link);
    } catch {
      fs.symlinkSync(path.join(DATA_DIR, name), link);
    }
  }
  // Remove the links of names no longer in the payload (only our own links into ..data).
  for (const e of fs.readdirSync(dir)) {
    if (e.startsWith('..') || topLevel.has(e)) continue;
    const link = path.join(dir, e);
    try {
      if (fs.lstatSync(link).isSymbolicLink() && fs.readlinkSync(link).startsWith(`${DATA_DIR}/`)) fs.unlinkSync(link);
    } catch {
      /* gone */
    }
  }
  if (oldTarget !== undefined && oldTarget !== tsName)
    fs.rmSync(path.join(dir, oldTarget), { recursive: true, force: true });
  return true;
}

// ---------------------------------------------------------------------------------------------

export interface VolumeContext {
  api: Api;
  pod: () => V1Pod;
  podDir: string;
  /** Directory for persistentVolumeClaim data: `<dir>/<namespace>/<claim>`. */
  claimsDir: string;
  nodeName: string;
  capacity: Record<string, string>;
}

export interface PreparedVolume {
  name: string;
  hostPath: string;
  kind: string;
  /** API-data volumes are always mounted read-only (as the kubelet does). */
  alwaysReadOnly: boolean;
  /** emptyDir, hostPath and claims: subPaths may be created. */
  writable: boolean;
}

interface TokenState {
  token: string;
  issuedAt: number;
  expiresAt: number;
}

const API_DATA_KINDS = new Set(['configMap', 'secret', 'downwardAPI', 'projected']);

function volumeKind(v: V1Volume): string {
  const kinds = Object.keys(v).filter(
    (k) =>
      k !== 'name' &&
      (v as unknown as Record<string, unknown>)[k] !== undefined &&
      (v as unknown as Record<string, unknown>)[k] !== null,
  );
  return kinds[0] ?? 'emptyDir';
}

/** The uid all of the pod's containers run as, if they agree (kubelet's FsUserFrom). */
export function commonRunAsUser(pod: V1Pod): number | undefined {
  const containers = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
  let uid: number | undefined;
  for (const c of containers) {
    const u = c.securityContext?.runAsUser ?? pod.spec?.securityContext?.runAsUser;
    if (u === undefined || u === null) return undefined;
    if (uid !== undefined && uid !== u) return undefined;
    uid = u;
  }
  return uid;
}

export class PodVolumes {
  readonly prepared = new Map<string, PreparedVolume>();
  private readonly tokens = new Map<string, TokenState>();

  constructor(private readonly ctx: VolumeContext) {}

  private get pod(): V1Pod {
    return this.ctx.pod();
  }

  private get ns(): string {
    return this.pod.metadata?.namespace ?? 'default';
  }

  private get fsGroup(): number | undefined {
    return this.pod.spec?.securityContext?.fsGroup ?? undefined;
  }

  volumeDir(name: string): string {
    return path.join(this.ctx.podDir, 'volumes', name);
  }

  /** Sets up every volume; throws VolumeError for the first that cannot be (kubelet: FailedMount). */
  async setup(): Promise<void> {
    for (const v of this.pod.spec?.volumes ?? []) {
      if (this.prepared.has(v.name)) {
        if (this.prepared.get(v.name)!.alwaysReadOnly) await this.writeApiData(v);
        continue;
      }
      this.prepared.set(v.name, await this.setupOne(v));
    }
  }

  /** Re-reads API-data volumes (ConfigMap/Secret updates, labels, token rotation). */
  async refresh(): Promise<void> {
    for (const v of this.pod.spec?.volumes ?? []) {
      const prepared = this.prepared.get(v.name);
      if (prepared?.alwaysReadOnly) await this.writeApiData(v);
    }
  }

  private async setupOne(v: V1Volume): Promise<PreparedVolume> {
    const kind = volumeKind(v);
    const dir = this.volumeDir(v.name);
    const fsGroup = this.fsGroup;
    switch (kind) {
      case 'emptyDir': {
        fs.mkdirSync(dir, { recursive: true });
        fs.chmodSync(dir, fsGroup !== undefined ? 0o2777 : 0o777);
        if (fsGroup !== undefined) fs.chownSync(dir, 0, fsGroup);
        return { name: v.name, hostPath: dir, kind, alwaysReadOnly: false, writable: true };
      }
      case 'hostPath': {
        const hp = v.hostPath!;
        const type = hp.type ?? '';
        const exists = fs.existsSync(hp.path);
        if (type === 'DirectoryOrCreate' && !exists) fs.mkdirSync(hp.path, { recursive: true, mode: 0o755 });
        else if (type === 'FileOrCreate' && !exists) {
          fs.mkdirSync(path.dirname(hp.path), { recursive: true, mode: 0o755 });
          fs.writeFileSync(hp.path, '', { mode: 0o644 });
        } else if ((type === 'Directory' || type === 'File' || type === 'Socket') && !exists) {
          throw new VolumeError(`hostPath type check failed: ${hp.path} is not a ${type}`);
        }
        return { name: v.name, hostPath: hp.path, kind, alwaysReadOnly: false, writable: true };
      }
      case 'persistentVolumeClaim': {
        const claim = v.persistentVolumeClaim!.claimName;
        const pvc = await this.ctx.api.getOptional(p`/api/v1/namespaces/${this.ns}/persistentvolumeclaims/${claim}`);
        if (!pvc) throw new VolumeError(`persistentvolumeclaim "${claim}" not found`);
        const cdir = path.join(this.ctx.claimsDir, this.ns, claim);
        if (!fs.existsSync(cdir)) {
          fs.mkdirSync(cdir, { recursive: true });
          fs.chmodSync(cdir, 0o777);
        }
        return { name: v.name, hostPath: cdir, kind, alwaysReadOnly: false, writable: true };
      }
      default:
        if (!API_DATA_KINDS.has(kind))
          throw new VolumeError(`pod runner: volume type ${kind} (volume "${v.name}") is not supported`);
        await this.writeApiData(v);
        return { name: v.name, hostPath: dir, kind, alwaysReadOnly: true, writable: false };
    }
  }

  private async writeApiData(v: V1Volume): Promise<void> {
    const payload = await this.payload(v);
    if (payload === undefined) return;
    atomicWrite(this.volumeDir(v.name), payload, this.fsGroup);
  }

  /** undefined: leave the volume as it is (an optional source disappeared after setup is kept). */
  private async payload(v: V1Volume): Promise<Map<string, FileProjection> | undefined> {
    const out = new Map<string, FileProjection>();
    if (v.configMap) {
      const src = v.configMap;
      const data = await readConfigMap(this.ctx.api, this.ns, src.name ?? '');
      if (!data) {
        if (src.optional) return out;
        throw new VolumeError(`configmap "${src.name ?? ''}" not found`);
      }
      this.project(
        out,
        data,
        src.items,
        src.defaultMode ?? 0o644,
        src.optional ?? false,
        `configmap "${src.name ?? ''}"`,
      );
    } else if (v.secret) {
      const src = v.secret;
      const data = await readSecret(this.ctx.api, this.ns, src.secretName ?? '');
      if (!data) {
        if (src.optional) return out;
        throw new VolumeError(`secret "${src.secretName ?? ''}" not found`);
      }
      this.project(
        out,
        data,
        src.items,
        src.defaultMode ?? 0o644,
        src.optional ?? false,
        `secret "${src.secretName ?? ''}"`,
      );
    } else if (v.downwardAPI) {
      this.downward(out, v.downwardAPI.items, v.downwardAPI.defaultMode ?? 0o644);
    } else if (v.projected) {
      const defaultMode = v.projected.defaultMode ?? 0o644;
      for (const [i, s] of (v.projected.sources ?? []).entries()) {
        if (s.configMap) await this.projectedConfigMap(out, s.configMap, defaultMode);
        else if (s.secret) await this.projectedSecret(out, s.secret, defaultMode);
        else if (s.downwardAPI) this.downward(out, s.downwardAPI.items, defaultMode);
        else if (s.serviceAccountToken) await this.token(out, `${v.name}/${i}`, s.serviceAccountToken, defaultMode);
        else
          throw new VolumeError(
            `pod runner: projected source ${Object.keys(s).join(',')} (volume "${v.name}") is not supported`,
          );
      }
    }
    return out;
  }

  private project(
    out: Map<string, FileProjection>,
    data: Map<string, Buffer>,
    items: V1KeyToPath[] | undefined,
    defaultMode: number,
    optional: boolean,
    what: string,
  ): void {
    if (!items || items.length === 0) {
      for (const [k, v] of data) out.set(k, { data: v, mode: defaultMode });
      return;
    }
    for (const it of items) {
      const v = data.get(it.key);
      if (v === undefined) {
        if (optional) continue;
        throw new VolumeError(`configuration of ${what}: no key ${it.key}`);
      }
      out.set(it.path, { data: v, mode: it.mode ?? defaultMode });
    }
  }

  private async projectedConfigMap(
    out: Map<string, FileProjection>,
    src: V1ConfigMapProjection,
    defaultMode: number,
  ): Promise<void> {
    const data = await readConfigMap(this.ctx.api, this.ns, src.name ?? '');
    if (!data) {
      if (src.optional) return;
      throw new VolumeError(`configmap "${src.name ?? ''}" not found`);
    }
    this.project(out, data, src.items, defaultMode, src.optional ?? false, `configmap "${src.name ?? ''}"`);
  }

  private async projectedSecret(
    out: Map<string, FileProjection>,
    src: V1SecretProjection,
    defaultMode: number,
  ): Promise<void> {
    const data = await readSecret(this.ctx.api, this.ns, src.name ?? '');
    if (!data) {
      if (src.optional) return;
      throw new VolumeError(`secret "${src.name ?? ''}" not found`);
    }
    this.project(out, data, src.items, defaultMode, src.optional ?? false, `secret "${src.name ?? ''}"`);
  }

  private downward(
    out: Map<string, FileProjection>,
    items: V1DownwardAPIVolumeFile[] | undefined,
    defaultMode: number,
  ): void {
    const pod = this.pod;
    for (const it of items ?? []) {
      let value: string;
      try {
        if (it.fieldRef) value = fieldRefValue(it.fieldRef, pod, { nodeName: this.ctx.nodeName, forVolume: true });
        else if (it.resourceFieldRef) {
          const name = it.resourceFieldRef.containerName;
          const c = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((x) => x.name === name);
          value = resourceFieldValue(it.resourceFieldRef, c, this.ctx.capacity);
        } else continue;
      } catch (e) {
        throw new VolumeError((e as Error).message);
      }
      out.set(it.path, { data: Buffer.from(value, 'utf8'), mode: it.mode ?? defaultMode });
    }
  }

  private async token(
    out: Map<string, FileProjection>,
    key: string,
    src: V1ServiceAccountTokenProjection,
    defaultMode: number,
  ): Promise<void> {
    const now = Date.now();
    let state = this.tokens.get(key);
    // kubelet: refresh when older than 80% of its lifetime.
    if (!state || now > state.issuedAt + 0.8 * (state.expiresAt - state.issuedAt)) {
      const pod = this.pod;
      const sa = pod.spec?.serviceAccountName ?? 'default';
      const spec: Record<string, unknown> = {
        expirationSeconds: src.expirationSeconds ?? 3600,
        boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.metadata?.name, uid: pod.metadata?.uid },
      };
      if (src.audience) spec.audiences = [src.audience];
      let tr: { status?: { token?: string; expirationTimestamp?: string } };
      try {
        tr = await this.ctx.api.request('POST', p`/api/v1/namespaces/${this.ns}/serviceaccounts/${sa}/token`, {
          apiVersion: 'authentication.k8s.io/v1',
          kind: 'TokenRequest',
          spec,
        });
      } catch (e) {
        if (isNotFound(e)) throw new VolumeError(`failed to fetch token: serviceaccount "${sa}" not found`);
        throw new VolumeError(`failed to fetch token: ${(e as Error).message}`);
      }
      const token = tr.status?.token;
      if (!token) throw new VolumeError('failed to fetch token: empty TokenRequest status');
      const exp = tr.status?.expirationTimestamp
        ? Date.parse(tr.status.expirationTimestamp)
        : now + (src.expirationSeconds ?? 3600) * 1000;
      state = { token, issuedAt: now, expiresAt: exp };
      this.tokens.set(key, state);
    }
    const fsUser = commonRunAsUser(this.pod);
    const mode = fsUser !== undefined || this.fsGroup !== undefined ? 0o600 : defaultMode;
    out.set(src.path, {
      data: Buffer.from(state.token, 'utf8'),
      mode,
      ...(fsUser !== undefined ? { uid: fsUser } : {}),
    });
  }
}
