/**
 * Issue 20, item 2: the workspace runs in the user's choice of Pulumi image, whose CLI may be older
 * than the Stack needs. A Program Stack with structured config in the stand-in of
 * pulumi/pulumi:3.197.0-nonroot (CLI v3.197.0, before `config set-all --json`) is Stalled
 * PulumiVersionTooLow with both versions in its message, and nothing runs; switching the image to
 * the stand-in of the oldest release with structured config that the test bed has
 * (pulumi/pulumi:3.203.0-nonroot; upstream's e2e uses 3.202.0, which the Go module proxy here
 * refuses) makes it Ready, with the structured value in its outputs: the floor is not too high.
 */
import * as k8s from '@kubernetes/client-node';
import { beforeAll } from '@jest/globals';
import { PULUMI_CLI_VERSIONS } from '../agent/src/serve/cli-version';
import type { Stack } from '../schemas/generated/types';
import { e2eStackSpec, eventually, condition, type Operator } from './harness';
import { e2eSuite } from './suite';
import { ensureImages } from './testbed/images/containerd';
import { IMAGE_REFS } from './testbed/images/refs';
import { requireTestbedEnvironment } from './testbed/node/environment';
import { OLDER_CLIS } from './testbed/older-clis';

const ns = 'pulumi-version';
let op: Operator;
const { recordTiming, getStack, readyStack } = e2eSuite('pulumi-version', ns, (started) => (op = started));

/** The image names as users write them (containerd resolves them on docker.io, where the stand-ins are). */
const short = (ref: string): string => ref.replace(/^docker\.io\//, '');
const OLD_IMAGE = short(IMAGE_REFS.pulumiOld);
const NEW_IMAGE = short(IMAGE_REFS.pulumiOldStructured);

beforeAll(async () => {
  // Not among the images every test file gets: only this file runs them.
  const imported = await ensureImages(requireTestbedEnvironment().containerdSocket, {
    images: ['pulumiOld', 'pulumiOldStructured'],
  });
  for (const i of imported) console.log(`imported ${i.ref} in ${i.seconds.toFixed(1)} s`);
}, 600_000);

describe('a workspace image whose Pulumi CLI is too old', () => {
  it('is Stalled PulumiVersionTooLow, naming both versions, and nothing runs', async () => {
    const started = Date.now();
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: 'ports', namespace: ns },
      program: {
        configuration: { ports: { type: 'List<Number>' } },
        outputs: { ports: '${ports}' },
      },
    } as k8s.KubernetesObject);
    const spec = e2eStackSpec({ stack: 'dev', programRef: { name: 'ports' }, config: { ports: [80, 443] } });
    spec.workspaceTemplate!.spec!.image = OLD_IMAGE;
    await op.objects.create({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 'ports', namespace: ns },
      spec,
    } as k8s.KubernetesObject);

    const stalled = await eventually(
      'the Stack to be Stalled PulumiVersionTooLow',
      async () => {
        const s = await getStack('ports');
        return condition(s, 'Stalled')?.reason === 'PulumiVersionTooLow' ? s : undefined;
      },
      240_000,
      500,
    );
    recordTiming('apply to Stalled PulumiVersionTooLow', started);
    const message = condition(stalled, 'Stalled')?.message ?? '';
    expect(message).toContain(`Pulumi CLI is ${OLDER_CLIS.tooOld}`);
    expect(message).toContain(`v${PULUMI_CLI_VERSIONS.structuredConfig} or newer`);
    expect(message).toContain('workspaceTemplate.spec.image');
    expect(condition(stalled, 'Ready')?.status).toBe('False');
    expect(stalled.status?.lastUpdate).toBeUndefined();
    expect(stalled.status?.currentUpdate).toBeUndefined();
    // The workspace ran in the image it was given.
    const pod = await op.core.readNamespacedPod({ namespace: ns, name: 'ports-workspace-0' });
    expect(pod.spec?.containers.find((c) => c.name === 'pulumi')?.image).toBe(OLD_IMAGE);
  });

  it('recovers to Ready once the image is switched to the oldest one with structured config', async () => {
    const started = Date.now();
    await op.patchStack(ns, 'ports', { spec: { workspaceTemplate: { spec: { image: NEW_IMAGE } } } });
    const ready: Stack = await readyStack('ports');
    recordTiming('image switch to Ready', started);
    expect(ready.status?.lastUpdate).toMatchObject({ type: 'up', state: 'succeeded' });
    expect(ready.status?.outputs).toEqual({ ports: [80, 443] });
    expect(condition(ready, 'Stalled')).toBeUndefined();
    const pod = await op.core.readNamespacedPod({ namespace: ns, name: 'ports-workspace-0' });
    expect(pod.spec?.containers.find((c) => c.name === 'pulumi')?.image).toBe(NEW_IMAGE);
  });
});
