/**
 * Stack objects captured during an e2e run, one file per phase, for the Argo CD health check's
 * fixtures (e2e/argocd-health/fixtures, docs/observability.md). Written only when
 * PKO_E2E_CAPTURE_DIR names a directory; a run without it captures nothing.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Stack } from '../../schemas/generated/types';

export function captureStack(phase: string, stack: Stack): void {
  const dir = process.env.PKO_E2E_CAPTURE_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  // managedFields say who wrote what, not what the Stack is: left out.
  const metadata: Record<string, unknown> = { ...stack.metadata };
  delete metadata.managedFields;
  writeFileSync(join(dir, `${phase}.json`), `${JSON.stringify({ ...stack, metadata }, null, 2)}\n`);
}
