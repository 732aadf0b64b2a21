/** Paths and YAML helpers shared by the packaging scripts and tests. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as yaml from 'js-yaml';

/**
 * The repository root: the nearest directory above this file holding both package.json and
 * tsconfig.json (so it works from packaging/ under ts-jest and from dist/packaging/ when compiled).
 */
export function repoRoot(from: string = __dirname): string {
  let dir = from;
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json')) && fs.existsSync(path.join(dir, 'tsconfig.json'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error(`no repository root above ${from}`);
    dir = up;
  }
}

export const ROOT = repoRoot();

export function repoPath(...parts: string[]): string {
  return path.join(ROOT, ...parts);
}

export function readRepoFile(rel: string): string {
  return fs.readFileSync(repoPath(rel), 'utf8');
}

/** A Kubernetes object as parsed from YAML. */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [k: string]: unknown;
  };
  [key: string]: unknown;
}

/** Every non-empty document of a multi-document YAML text. */
export function loadAll(text: string): unknown[] {
  return yaml.loadAll(text).filter((d) => d !== null && d !== undefined);
}

export function loadObjects(text: string, what = 'YAML'): K8sObject[] {
  return loadAll(text).map((d, i) => {
    const o = d as Partial<K8sObject>;
    if (
      typeof o !== 'object' ||
      typeof o.apiVersion !== 'string' ||
      typeof o.kind !== 'string' ||
      typeof o.metadata?.name !== 'string'
    ) {
      throw new Error(`${what}: document ${i + 1} is not a Kubernetes object (apiVersion, kind, metadata.name)`);
    }
    return o as K8sObject;
  });
}

export function objectKey(o: K8sObject): string {
  return `${o.kind}/${o.metadata.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata.name}`;
}

/** `Kind/name` lookup that fails with the list of what there is. */
export function findObject(objects: K8sObject[], kind: string, name: string): K8sObject {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind}/${name} among: ${objects.map(objectKey).join(', ')}`);
  return o;
}

/** The items of a path through plain objects/arrays, or undefined. */
export function at(value: unknown, ...keys: (string | number)[]): any {
  let cur: any = value;
  for (const k of keys) {
    if (cur === null || cur === undefined) return undefined;
    cur = cur[k];
  }
  return cur;
}
