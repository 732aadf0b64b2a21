/**
 * What a container is launched with: its environment (the kubelet's order), its command (the
 * image's entrypoint/cmd when unset, `$(VAR)` expanded), working dir, credentials and mounts.
 */
import * as fs from 'node:fs';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { ContainerConfigError, containerEnv, expandCommand } from './env';
import type { ImageConfig } from './images';
import { ensureHostMountPoint, mountTargetProblem } from './mountpoints';
import type { LaunchSpec } from './process';
import type { RunnerContext } from './runner-context';
import { buildMounts, containerCredentials } from './container-setup';
import { type PodVolumes, readConfigMap, readSecret } from './volumes';

/** A container's launch spec but for its log file and output stream (those are per run). */
export type ContainerLaunch = Omit<LaunchSpec, 'logFile' | 'onOutput'>;

/** Why the pod is refused (a mount target over a protected path or the runner's own dirs), if it is. */
export function admissionProblem(
  pod: V1Pod,
  ctx: Pick<RunnerContext, 'image' | 'protectedPaths' | 'ownDirs'>,
): { reason: string; message: string } | undefined {
  for (const c of [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])]) {
    const targets = (c.volumeMounts ?? []).map((m) => m.mountPath);
    const img = ctx.image(c.image ?? '');
    if (typeof img !== 'string') targets.push(...Object.keys(img.binds ?? {}), ...Object.keys(img.writableDirs ?? {}));
    for (const t of targets) {
      const problem = mountTargetProblem(t, ctx.protectedPaths, ctx.ownDirs);
      if (problem) return { reason: 'UnsafeMountPath', message: `pod runner refuses container ${c.name}: ${problem}` };
    }
  }
  return undefined;
}

/** The pod's hostname: spec.hostname or the pod's name, cut to a DNS label. */
export function podHostname(pod: V1Pod): string {
  const h = pod.spec?.hostname || pod.metadata!.name!;
  return h.slice(0, 63).replace(/[-.]+$/, '');
}

/**
 * The launch spec of container `spec` (all but its log file). Throws ContainerConfigError
 * (CreateContainerConfigError) or another error (CreateContainerError).
 */
export async function prepareLaunch(
  ctx: RunnerContext,
  pod: V1Pod,
  spec: V1Container,
  image: ImageConfig,
  dirs: { podDir: string; containerDir: string; volumes: PodVolumes['prepared'] },
): Promise<ContainerLaunch> {
  const hostname = podHostname(pod);
  const creds = containerCredentials(pod, spec, image);
  const list = await containerEnv({
    pod,
    container: spec,
    nodeName: ctx.nodeName,
    capacity: ctx.capacity,
    serviceEnv: ctx.serviceEnv,
    objects: {
      secret: async (ns, name) => {
        const m = await readSecret(ctx.api, ns, name);
        return m && Object.fromEntries([...m].map(([k, v]) => [k, v.toString('utf8')]));
      },
      configMap: async (ns, name) => {
        const m = await readConfigMap(ctx.api, ns, name);
        return m && Object.fromEntries([...m].map(([k, v]) => [k, v.toString('utf8')]));
      },
    },
  });
  const basePath = image.basePath ?? process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
  const env: Record<string, string> = {
    PATH: [...(image.path ?? []), basePath].filter((x) => x !== '').join(':'),
    HOSTNAME: hostname,
    HOME: creds.uid === 0 ? '/root' : '/',
    ...(image.env ?? {}),
  };
  for (const [k, v] of list) env[k] = v;
  const command = spec.command?.length ? spec.command : (image.entrypoint ?? []);
  const args = spec.command?.length ? (spec.args ?? []) : spec.args?.length ? spec.args : (image.cmd ?? []);
  const argv = [...expandCommand(command, env), ...expandCommand(args, env)];
  if (argv.length === 0)
    throw new ContainerConfigError('no command specified (the image has no ENTRYPOINT/CMD in the pod runner registry)');
  const workingDir = spec.workingDir || image.workingDir || '/';
  const mounts = buildMounts(spec, image, env, creds, dirs.containerDir, {
    podDir: dirs.podDir,
    hostsFile: await ctx.hostsFile(pod),
    volumes: dirs.volumes,
  });
  // A working dir outside every mount and missing on the host is created (and remembered).
  if (
    !mounts.some((m) => workingDir === m.target || workingDir.startsWith(`${m.target}/`)) &&
    !fs.existsSync(workingDir)
  ) {
    ensureHostMountPoint(workingDir, 'dir');
  }
  return { argv, env, workingDir, mounts, hostname, creds };
}
