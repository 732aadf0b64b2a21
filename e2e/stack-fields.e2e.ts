/**
 * Issue 38: Stack fields the hooks pass on to the workspace, seen where they take effect, with the
 * real agent and Pulumi CLI on the real node (a file backend on the namespace's PVC):
 * - `secretsProvider: passphrase`, the passphrase from a Secret: a secret config value is
 *   encrypted in the backend's state by that provider, and in plaintext nowhere in it;
 * - `workspaceTemplate.spec.serviceTemplate`: its labels and annotations on the workspace Service;
 * - `environment` (Pulumi ESC): the CLI refuses environments outside Pulumi Cloud, and the Stack is
 *   Stalled saying so; without the field it goes on (docs/troubleshooting.md#secrets-providers-and-esc-environments).
 */
import * as k8s from '@kubernetes/client-node';
import { readdirSync, readFileSync } from 'fs';
import { join } from 'path';
import type { Stack, StackSpec } from '../schemas/generated/types';
import { defined, e2eStackSpec, eventually, type Operator, condition } from './harness';
import { e2eSuite } from './suite';

let op: Operator;
const ns = 'stack-fields';
const { recordTiming, readyStack, getStack } = e2eSuite('stack-fields', ns, (started) => (op = started));

const PASSPHRASE = 'correct horse battery staple';
const TOKEN = 'plaintext-token-4f1c9a';
/** How the Pulumi engine marks a secret value in a checkpoint (sdk/go/common/resource/sig). */
const SECRET_SIG = '4dabf18193072939515e22adb298388d';

/** A YAML Program whose output `token` is its secret config value `token`. */
function tokenProgram(name: string): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Program',
    metadata: { name, namespace: ns },
    program: { configuration: { token: { type: 'String' } }, outputs: { token: '${token}', plain: 'visible' } },
  } as k8s.KubernetesObject;
}

function stack(name: string, spec: StackSpec): k8s.KubernetesObject {
  return {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name, namespace: ns },
    spec,
  } as k8s.KubernetesObject;
}

async function secret(name: string, data: Record<string, string>): Promise<void> {
  await op.core.createNamespacedSecret({ namespace: ns, body: { metadata: { name }, stringData: data } });
}

/** Every file under `dir` (the backend's state: checkpoints, their backups, the update history). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name));
}

interface Checkpoint {
  checkpoint?: {
    latest?: {
      secrets_providers?: { type?: string; state?: Record<string, unknown> };
      resources?: { type: string; outputs?: Record<string, unknown> }[];
    };
  };
}

describe('secretsProvider: passphrase, with the passphrase from a Secret', () => {
  it('reaches Ready; the state holds the secret config value encrypted by the passphrase provider, never in plaintext', async () => {
    const started = Date.now();
    await secret('passphrase', { passphrase: PASSPHRASE });
    await secret('app-secrets', { token: TOKEN });
    await op.objects.create(tokenProgram('vault'));
    const base = e2eStackSpec({ stack: 'dev', programRef: { name: 'vault' } });
    await op.objects.create(
      stack('vault', {
        ...base,
        secretsProvider: 'passphrase',
        envRefs: { PULUMI_CONFIG_PASSPHRASE: { type: 'Secret', secret: { name: 'passphrase', key: 'passphrase' } } },
        secretsRef: { token: { type: 'Secret', secret: { name: 'app-secrets', key: 'token' } } },
        workspaceTemplate: {
          spec: {
            ...base.workspaceTemplate?.spec,
            serviceTemplate: {
              metadata: {
                labels: { team: 'payments', 'pulumi.com/stack-name': 'forged' },
                annotations: { 'prometheus.io/scrape': 'false', 'example.com/owner': 'payments' },
              },
            },
          },
        },
      }),
    );
    const ready = await readyStack('vault');
    recordTiming('passphrase Stack apply to Ready', started);
    expect(ready.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });
    expect(ready.status?.outputs).toEqual({ token: '[secret]', plain: 'visible' });

    const file = join(op.stateDir(ns), '.pulumi', 'stacks', 'vault', 'dev.json');
    const doc = JSON.parse(readFileSync(file, 'utf8')) as Checkpoint;
    const latest = defined(doc.checkpoint?.latest, 'the checkpoint');
    // The passphrase provider, with its salt: the state is readable only with the passphrase.
    expect(latest.secrets_providers?.type).toBe('passphrase');
    expect(latest.secrets_providers?.state?.salt).toEqual(expect.stringMatching(/^v1:/));
    const root = defined(
      latest.resources?.find((r) => r.type === 'pulumi:pulumi:Stack'),
      'the root stack resource',
    );
    expect(root.outputs?.plain).toBe('visible');
    expect(root.outputs?.token).toEqual({
      [SECRET_SIG]: '1b47061264138c4ac30d75fd1eb44270',
      ciphertext: expect.stringMatching(/^v1:/) as unknown,
    });
    // Nowhere in the backend, nor in the Stack, is the value or the passphrase in plaintext.
    for (const f of filesUnder(op.stateDir(ns))) {
      const text = readFileSync(f, 'utf8');
      expect({ f, token: text.includes(TOKEN), passphrase: text.includes(PASSPHRASE) }).toEqual({
        f,
        token: false,
        passphrase: false,
      });
    }
    expect(JSON.stringify(await getStack('vault'))).not.toContain(TOKEN);
  }, 360_000);

  it("puts serviceTemplate's labels and annotations on the real workspace Service, the operator's own labels kept", async () => {
    const service = await op.core.readNamespacedService({ namespace: ns, name: 'vault-workspace' });
    expect(service.metadata?.labels).toMatchObject({ team: 'payments', 'pulumi.com/stack-name': 'vault' });
    expect(service.metadata?.annotations).toMatchObject({
      'prometheus.io/scrape': 'false',
      'example.com/owner': 'payments',
    });
    // Still the headless Service the Jobs reach the workspace through.
    expect(service.spec?.clusterIP).toBe('None');
    expect(service.spec?.ports?.map((p) => p.port)).toEqual([50051]);
  });
});

describe('environment (Pulumi ESC) on a self-managed backend', () => {
  it('is Stalled WorkspaceFailed with the CLI saying ESC needs Pulumi Cloud; without it the Stack goes on', async () => {
    const started = Date.now();
    await op.objects.create(tokenProgram('esc'));
    await op.objects.create(
      stack('esc', {
        ...e2eStackSpec({ stack: 'dev', programRef: { name: 'esc' } }),
        secretsRef: { token: { type: 'Secret', secret: { name: 'app-secrets', key: 'token' } } },
        environment: ['payments/prod'],
      }),
    );
    const stalled = await eventually(
      'the Stack to be Stalled by its workspace',
      async () => {
        const s = await getStack('esc');
        return condition(s, 'Stalled')?.status === 'True' ? s : undefined;
      },
      240_000,
      500,
    );
    const message = condition(stalled, 'Stalled')?.message ?? '';
    recordTiming('ESC environment Stack apply to Stalled', started, message);
    expect(condition(stalled, 'Stalled')?.reason).toBe('WorkspaceFailed');
    expect(message).toMatch(/^InitializationFailed: cannot add environments payments\/prod: /);
    expect(message).toMatch(/Pulumi ESC environments require the Pulumi Cloud backend/);
    expect(condition(stalled, 'Ready')?.status).toBe('False');
    expect(stalled.status?.lastUpdate).toBeUndefined();

    // Without environments (the values set with config, configRef or secretsRef instead), it goes on.
    await op.patchStack(ns, 'esc', { spec: { environment: null } });
    const ready: Stack = await readyStack('esc');
    expect(ready.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });
    expect(condition(ready, 'Stalled')).toBeUndefined();
  }, 480_000);
});
