/**
 * The vendored upstream manifests are upstream's files, byte for byte (the blob ids their NOTICE
 * records), and are read as `kubectl apply -f <folder>` reads them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { gitBlobId, imagesNamed, manifestsIn, UPSTREAM_DIR, vendoredFiles } from './manifests';

function filesBelow(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => relative(UPSTREAM_DIR, join(e.parentPath, e.name)))
    .sort();
}

describe('vendored upstream manifests', () => {
  const listed = vendoredFiles();

  it('are unchanged: each file has the git blob id its NOTICE records', () => {
    expect(listed.length).toBeGreaterThan(0);
    for (const f of listed) {
      expect({ path: f.path, blob: gitBlobId(readFileSync(join(UPSTREAM_DIR, f.path))) }).toEqual(f);
    }
  });

  it('are all listed in the NOTICE (no file of ours among them)', () => {
    expect(filesBelow(UPSTREAM_DIR)).toEqual(['LICENSE', 'NOTICE', ...listed.map((f) => f.path)].sort());
  });

  it('compute blob ids as git does', () => {
    // `printf 'hello\n' | git hash-object --stdin`
    expect(gitBlobId(Buffer.from('hello\n'))).toBe('ce013625030ba8dba906f756967f9e9ca394464a');
  });

  it("are read per folder as kubectl does: the folder's own files, not its subfolders", () => {
    const step1 = manifestsIn('operator/e2e/testdata/structured-config-version');
    expect(step1.map((m) => `${m.kind}/${m.metadata.name}`)).toEqual([
      'Namespace/structured-config-version',
      'ServiceAccount/structured-config-version',
      'ClusterRoleBinding/structured-config-version:system:auth-delegator',
      'PersistentVolumeClaim/state',
      'Program/structured-config-version',
      'Stack/structured-config-version',
    ]);
    expect(imagesNamed(step1)).toEqual(['pulumi/pulumi:3.197.0-nonroot']);
    const step2 = manifestsIn('operator/e2e/testdata/structured-config-version/step2');
    expect(step2.map((m) => `${m.kind}/${m.metadata.name}`)).toEqual(['Stack/structured-config-version']);
    expect(imagesNamed(step2)).toEqual(['pulumi/pulumi:3.202.0-nonroot']);
  });
});
