/**
 * Writes every file packaging/ generates: manifests/install.yaml (from manifests/kustomization.yaml)
 * and docs/api-reference.md (from schemas/). `--check` writes nothing and exits 1 when one is stale.
 *
 *   npm run build && node dist/packaging/generate.js [--check]
 */
import { main as buildApiReference } from './build-api-reference';
import { main as buildInstall } from './build-install';

if (require.main === module) {
  const argv = process.argv.slice(2);
  process.exitCode = Math.max(buildInstall(argv), buildApiReference(argv));
}
