/** What a container is started with, apart from its command and env: credentials and mounts. */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { sha } from './container-run';
import { ContainerConfigError, expand, mappingFor } from './env';
import type { ImageConfig } from './images';
import { ensureHostMountPoint } from './mountpoints';
import type { BindMount, Credentials } from './process';
import type { PodVolumes } from './volumes';

/** The runtime's default capabilities (containerd/CRI-O), lower case as setpriv wants them. */
const DEFAULT_CAPS = [
  'chown',
  'dac_override',
  'fsetid',
  'fowner',
  'mknod',
  'net_raw',
  'setgid',
  'setuid',
  'setfcap',
  'setpcap',
  'net_bind_service',
  'sys_chroot',
  'kill',
  'audit_write',
];

/** The user, groups and capabilities a container runs with (security contexts, image defaults). */
export function containerCredentials(pod: V1Pod, c: V1Container, image: ImageConfig): Credentials {
  const psc = pod.spec?.securityContext ?? {};
  const csc = c.securityContext ?? {};
  const explicitUser = csc.runAsUser ?? psc.runAsUser;
  const uid = explicitUser ?? image.user ?? 0;
  const gid =
    csc.runAsGroup ?? psc.runAsGroup ?? (explicitUser !== undefined && explicitUser !== null ? 0 : (image.group ?? 0));
  const nonRoot = csc.runAsNonRoot ?? psc.runAsNonRoot;
  if (nonRoot) {
    const who = `(pod: "${pod.metadata?.name}_${pod.metadata?.namespace ?? 'default'}(${pod.metadata?.uid})", container: ${c.name})`;
    if (explicitUser === 0) throw new ContainerConfigError(`container's runAsUser breaks non-root policy ${who}`);
    if ((explicitUser === undefined || explicitUser === null) && uid === 0)
      throw new ContainerConfigError(`container has runAsNonRoot and image will run as root ${who}`);
  }
  const groups = [
    ...new Set([
      ...(psc.fsGroup !== undefined && psc.fsGroup !== null ? [psc.fsGroup] : []),
      ...(psc.supplementalGroups ?? []),
    ]),
  ];
  let boundingSet: string | undefined;
  if (!csc.privileged) {
    const drop = (csc.capabilities?.drop ?? []).map((x) => x.toLowerCase().replace(/^cap_/, ''));
    const add = (csc.capabilities?.add ?? []).map((x) => x.toLowerCase().replace(/^cap_/, ''));
    let caps = drop.includes('all') ? [] : DEFAULT_CAPS.filter((x) => !drop.includes(x));
    if (add.includes('all')) boundingSet = undefined;
    else {
      caps = [...new Set([...caps, ...add])];
      boundingSet = ['-all', ...caps.map((x) => `+${x}`)].join(',');
    }
  }
  return { uid, gid, groups, boundingSet, noNewPrivs: csc.allowPrivilegeEscalation === false };
}

/** The bind mounts of a container: image binds and writable dirs, /etc/hosts, volume mounts (subPath), mount points. */
export function buildMounts(
  c: V1Container,
  image: ImageConfig,
  env: Record<string, string>,
  creds: Credentials,
  dir: string,
  pod: { podDir: string; hostsFile: string; volumes: PodVolumes['prepared'] },
): BindMount[] {
  const mounts: BindMount[] = [];
  for (const [target, b] of Object.entries(image.binds ?? {})) {
    const bind = typeof b === 'string' ? { hostPath: b } : b;
    if (!fs.existsSync(bind.hostPath))
      throw new ContainerConfigError(`image bind source ${bind.hostPath} does not exist`);
    mounts.push({ source: bind.hostPath, target, readOnly: bind.readOnly ?? true });
  }
  for (const [target, w] of Object.entries(image.writableDirs ?? {})) {
    const src = path.join(dir, 'writable', sha(target).slice(0, 12));
    fs.mkdirSync(src, { recursive: true });
    fs.chmodSync(src, w.mode ?? 0o755);
    fs.chownSync(src, w.uid ?? creds.uid, w.gid ?? creds.gid);
    mounts.push({ source: src, target, readOnly: false });
  }
  const hosts = path.join(pod.podDir, 'etc-hosts');
  fs.writeFileSync(hosts, pod.hostsFile, { mode: 0o644 });
  mounts.push({ source: hosts, target: '/etc/hosts', readOnly: false });

  const vms = [...(c.volumeMounts ?? [])].sort(
    (a, b) => path.resolve(a.mountPath).split('/').length - path.resolve(b.mountPath).split('/').length,
  );
  for (const vm of vms) {
    const vol = pod.volumes.get(vm.name);
    if (!vol) throw new ContainerConfigError(`cannot find volume "${vm.name}" to mount into container "${c.name}"`);
    let source = vol.hostPath;
    const sub = vm.subPath || (vm.subPathExpr ? expand(vm.subPathExpr, mappingFor(env)) : '');
    if (sub) {
      if (path.isAbsolute(sub) || sub.split('/').includes('..'))
        throw new ContainerConfigError(`invalid subPath ${sub}`);
      source = path.join(vol.hostPath, sub);
      if (!fs.existsSync(source)) {
        if (!vol.writable)
          throw new ContainerConfigError(
            `failed to prepare subPath for volumeMount "${vm.name}" of container "${c.name}": ${sub} does not exist`,
          );
        fs.mkdirSync(source, { recursive: true, mode: 0o755 });
        fs.chmodSync(source, 0o777);
      }
      const real = fs.realpathSync(source);
      const root = fs.realpathSync(vol.hostPath);
      if (real !== root && !real.startsWith(`${root}/`))
        throw new ContainerConfigError(`subPath ${sub} escapes volume "${vm.name}"`);
      source = real;
    }
    mounts.push({ source, target: path.resolve(vm.mountPath), readOnly: Boolean(vm.readOnly) || vol.alwaysReadOnly });
  }

  // Mount points: inside an earlier mount's source, else on the host (created and remembered).
  for (let i = 0; i < mounts.length; i++) {
    const m = mounts[i]!;
    const kind = fs.statSync(m.source).isDirectory() ? 'dir' : 'file';
    let parent: BindMount | undefined;
    for (let j = i - 1; j >= 0; j--) {
      const q = mounts[j]!;
      if (m.target.startsWith(`${q.target}/`)) {
        parent = q;
        break;
      }
    }
    if (parent) {
      const inParent = path.join(parent.source, path.relative(parent.target, m.target));
      try {
        fs.lstatSync(inParent);
      } catch {
        if (kind === 'dir') fs.mkdirSync(inParent, { recursive: true, mode: 0o755 });
        else {
          fs.mkdirSync(path.dirname(inParent), { recursive: true, mode: 0o755 });
          fs.writeFileSync(inParent, '');
        }
      }
    } else {
      try {
        ensureHostMountPoint(m.target, kind);
      } catch (e) {
        throw new ContainerConfigError((e as Error).message);
      }
    }
  }
  return mounts;
}
