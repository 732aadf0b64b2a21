/**
 * The Argo CD health check of docs/observability.md, executed as Argo CD executes it: by gopher-lua
 * (main.go here, built with the machine's Go from the module proxy), on Stacks as the API server
 * returned them at each phase of an e2e run (fixtures/, captured by e2e/flux-source.e2e.ts with
 * PKO_E2E_CAPTURE_DIR set; fixtures/README.md says which run).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load } from 'js-yaml';
import type { Stack } from '../../schemas/generated/types';
import { REPO_ROOT } from '../testbed/toolchain';
import { condition } from '../../hooks/test/builders';

const HERE = join(REPO_ROOT, 'e2e', 'argocd-health');
const FIXTURES = join(HERE, 'fixtures');

interface Health {
  file: string;
  status: string;
  message?: string;
}

/** The Stack script as docs/observability.md has it in its argocd-cm ConfigMap. */
function stackHealthScript(): string {
  const doc = readFileSync(join(REPO_ROOT, 'docs', 'observability.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Argo CD health check'));
  const block = /```yaml\n([\s\S]*?)```/.exec(section);
  if (!block) throw new Error('docs/observability.md: no yaml block under "Argo CD health check"');
  const cm = load(block[1]!) as { data: Record<string, string> };
  const script = cm.data['resource.customizations.health.pulumi.com_Stack'];
  if (!script)
    throw new Error('docs/observability.md: argocd-cm has no resource.customizations.health.pulumi.com_Stack');
  return script;
}

const fixture = (phase: string): Stack => JSON.parse(readFileSync(join(FIXTURES, `${phase}.json`), 'utf8')) as Stack;

let dir: string;
let bin: string;
let script: string;

/** What Argo CD would show for each object. */
function healthOf(...objects: Stack[]): Health[] {
  const files = objects.map((o, i) => {
    const f = join(dir, `object-${i}.json`);
    writeFileSync(f, JSON.stringify(o));
    return f;
  });
  const out = execFileSync(bin, [script, ...files], { encoding: 'utf8' });
  return out
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Health);
}
const healthOfOne = (o: Stack): Omit<Health, 'file'> => {
  const h: Partial<Health> = { ...healthOf(o)[0]! };
  delete h.file;
  return h as Omit<Health, 'file'>;
};

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'pko-argocd-health-'));
  bin = join(dir, 'argocd-health');
  execFileSync('go', ['build', '-o', bin, '.'], {
    cwd: HERE,
    env: { ...process.env, GOTOOLCHAIN: 'local', GOFLAGS: '-mod=readonly', CGO_ENABLED: '0' },
    stdio: 'pipe',
  });
  script = join(dir, 'stack-health.lua');
  writeFileSync(script, stackHealthScript());
}, 300_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("Argo CD's health of a Stack, from the health check in docs/observability.md", () => {
  it('Ready: Healthy, with the Ready message', () => {
    const s = fixture('ready');
    expect(condition(s, 'Ready')?.status).toBe('True');
    expect(healthOfOne(s)).toEqual({ status: 'Healthy', message: condition(s, 'Ready')!.message });
  });

  it('an update running: Progressing, with the Reconciling message', () => {
    const s = fixture('progressing');
    expect(condition(s, 'Reconciling')?.status).toBe('True');
    expect(healthOfOne(s)).toEqual({ status: 'Progressing', message: condition(s, 'Reconciling')!.message });
  });

  it('Stalled (its Flux source failed): Degraded, with the Stalled message', () => {
    const s = fixture('stalled');
    expect(condition(s, 'Stalled')).toMatchObject({ status: 'True', reason: 'SourceUnavailable' });
    expect(healthOfOne(s)).toEqual({ status: 'Degraded', message: condition(s, 'Stalled')!.message });
  });

  it('a failed update being retried: Progressing, with the retry message, not Healthy', () => {
    const s = fixture('failed');
    expect(s.status?.lastUpdate?.state).toBe('failed');
    expect(condition(s, 'Reconciling')).toMatchObject({ status: 'True', reason: 'RetryingAfterFailure' });
    expect(healthOfOne(s)).toEqual({ status: 'Progressing', message: condition(s, 'Reconciling')!.message });
  });

  it('being deleted (destroy running): Progressing, "Pending deletion", as Argo CD says before any script', () => {
    const s = fixture('deleting');
    expect(s.metadata.deletionTimestamp).toBeDefined();
    expect(healthOfOne(s)).toEqual({ status: 'Progressing', message: 'Pending deletion' });
  });

  it('a status older than the spec (Ready of the previous generation): Progressing, not Healthy', () => {
    const s = fixture('ready');
    const changed = { ...s, metadata: { ...s.metadata, generation: (s.metadata.generation ?? 1) + 1 } };
    expect(healthOfOne(changed)).toEqual({ status: 'Progressing', message: 'Waiting for the Stack to be processed' });
  });

  it('no status yet: Progressing', () => {
    const fresh = fixture('ready');
    delete fresh.status;
    expect(healthOfOne(fresh)).toEqual({
      status: 'Progressing',
      message: 'Waiting for the Stack to be processed',
    });
  });

  it('the runner reports what Argo CD reports for a script that fails or returns no health code', () => {
    const bad = join(dir, 'bad.lua');
    writeFileSync(bad, 'return { status = "Fine" }');
    const s = fixture('ready');
    const f = join(dir, 'ready.json');
    writeFileSync(f, JSON.stringify(s));
    const run = (file: string) => JSON.parse(execFileSync(bin, [file, f], { encoding: 'utf8' })) as Health;
    expect(run(bad)).toMatchObject({ status: 'Unknown', message: 'Lua returned an invalid health status' });
    writeFileSync(bad, 'return string.upper("x")');
    // Argo CD opens no string library for a resource.customizations script.
    const failed = run(bad);
    expect(failed.status).toBe('Unknown');
    expect(failed.message).toContain('string');
  });
});
