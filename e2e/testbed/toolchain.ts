/**
 * Paths of the e2e toolchain built by e2e/toolchain/build.sh.
 *
 * The versions live in one place, e2e/toolchain/versions.env (sourced by build.sh, parsed here);
 * the cache directory is `$PKO_TOOLCHAIN_DIR`, default `~/.cache/pko-toolchain`, with one
 * directory per component and version (`etcd-v3.6.14/bin/etcd`, ...), exactly as build.sh lays it
 * out. Nothing here builds anything: `requireToolchain()` throws when a binary is missing.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/**
 * The repository's root: the first directory up from here holding e2e/toolchain/versions.env, so
 * the test bed finds its files both from the sources (jest) and from the build in dist/ (scripts
 * such as bench/capture-sync-request.ts, run with node).
 */
export const REPO_ROOT = ((): string => {
  for (let dir = __dirname; ; dir = path.dirname(dir)) {
    if (fs.existsSync(path.join(dir, 'e2e', 'toolchain', 'versions.env'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no e2e/toolchain/versions.env above ${__dirname}`);
  }
})();
export const VERSIONS_FILE = path.join(REPO_ROOT, 'e2e', 'toolchain', 'versions.env');

export interface ToolchainVersions {
  etcd: string;
  kubernetes: string;
  pulumi: string;
  pulumiNodejsCommit: string;
  pulumiYaml: string;
  pulumiCommand: string;
  pulumiCommandCommit: string;
  /** The Pulumi Kubernetes provider's release (v4.25.0) and the Go module version it is built from. */
  pulumiKubernetes: string;
  pulumiKubernetesModule: string;
  helm: string;
  coredns: string;
  crictl: string;
  /** Flux's source-controller (SOURCE_CONTROLLER_VERSION). */
  sourceController: string;
  /** Flux's kustomize-controller (KUSTOMIZE_CONTROLLER_VERSION). */
  kustomizeController: string;
  /** distribution's registry (DISTRIBUTION_VERSION): the OCI registry of Flux's OCIRepository. */
  distribution: string;
  /** gofakes3 (GOFAKES3_VERSION): the S3 stand-in of Flux's Bucket. */
  gofakes3: string;
  /** OLD_PULUMI_VERSIONS: older Pulumi CLIs, for the stand-in images of those releases. */
  oldPulumi: readonly string[];
}

/** build.sh's component of each older CLI (OLD_PULUMI_VERSIONS), `oldpulumi-v3.197.0`. */
export type OldPulumiComponent = `oldpulumi-${string}`;
export type Component =
  | 'etcd'
  | 'kubernetes'
  | 'pulumi'
  | 'command'
  | 'kubernetes-provider'
  | 'helm'
  | 'coredns'
  | 'crictl'
  | 'source-controller'
  | 'kustomize-controller'
  | 'distribution'
  | 'gofakes3'
  | OldPulumiComponent;
export const oldPulumiComponent = (version: string): OldPulumiComponent => `oldpulumi-${version}`;

/** The key of an older CLI's `pulumi` in ToolchainBinaries, `oldPulumi-v3.197.0`. */
export type OldPulumiBinary = `oldPulumi-${string}`;
export const oldPulumiBinary = (version: string): OldPulumiBinary => `oldPulumi-${version}`;

export interface ToolchainBinaries {
  etcd: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  kubeProxy: string;
  kubelet: string;
  kubectl: string;
  pulumi: string;
  pulumiLanguageNodejs: string;
  pulumiLanguageYaml: string;
  /** Our shim: runs @pulumi/pulumi's dynamic provider from the program's node_modules. */
  pulumiResourcePulumiNodejs: string;
  pulumiResourceCommand: string;
  /** The Pulumi Kubernetes provider plugin. */
  pulumiResourceKubernetes: string;
  helm: string;
  coredns: string;
  crictl: string;
  /** Flux's source-controller; its CRDs and ClusterRole are in sourceControllerManifests(). */
  sourceController: string;
  /** Flux's kustomize-controller; its CRD and RBAC are next to its bin directory. */
  kustomizeController: string;
  /** distribution's `registry`, an OCI registry. */
  registry: string;
  /** gofakes3, an S3 stand-in. */
  gofakes3: string;
  /** `pulumi` of each OLD_PULUMI_VERSIONS entry: not on toolchainEnv()'s PATH, where it would hide the current one. */
  [old: OldPulumiBinary]: string;
}

export interface Toolchain {
  dir: string;
  versions: ToolchainVersions;
  /** The bin directory of each component. */
  binDirs: Record<Component, string>;
  binaries: ToolchainBinaries;
  /** Which component each binary belongs to. */
  componentOf: Record<keyof ToolchainBinaries, Component>;
}

/** Parses versions.env: `KEY=value` lines, `#` comments, no quoting or expansion. */
export function parseVersionsEnv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([A-Z][A-Z0-9_]*)=(\S+)$/.exec(line);
    if (!m) throw new Error(`${VERSIONS_FILE}: cannot parse line ${JSON.stringify(raw)}`);
    out[m[1]!] = m[2]!;
  }
  return out;
}

export function readVersions(file = VERSIONS_FILE): ToolchainVersions {
  const env = parseVersionsEnv(fs.readFileSync(file, 'utf8'));
  const get = (key: string): string => {
    const v = env[key];
    if (v === undefined) throw new Error(`${file}: ${key} is not set`);
    return v;
  };
  return {
    etcd: get('ETCD_VERSION'),
    kubernetes: get('KUBERNETES_VERSION'),
    pulumi: get('PULUMI_VERSION'),
    pulumiNodejsCommit: get('PULUMI_NODEJS_COMMIT'),
    pulumiYaml: get('PULUMI_YAML_VERSION'),
    pulumiCommand: get('PULUMI_COMMAND_VERSION'),
    pulumiCommandCommit: get('PULUMI_COMMAND_COMMIT'),
    pulumiKubernetes: get('PULUMI_KUBERNETES_VERSION'),
    pulumiKubernetesModule: get('PULUMI_KUBERNETES_MODULE_VERSION'),
    helm: get('HELM_VERSION'),
    coredns: get('COREDNS_VERSION'),
    crictl: get('CRICTL_VERSION'),
    sourceController: get('SOURCE_CONTROLLER_VERSION'),
    kustomizeController: get('KUSTOMIZE_CONTROLLER_VERSION'),
    distribution: get('DISTRIBUTION_VERSION'),
    gofakes3: get('GOFAKES3_VERSION'),
    oldPulumi: get('OLD_PULUMI_VERSIONS').split(','),
  };
}

/** The cache directory, as build.sh computes it. */
export function toolchainDir(env: NodeJS.ProcessEnv = process.env): string {
  const fromEnv = env.PKO_TOOLCHAIN_DIR;
  if (fromEnv !== undefined && fromEnv !== '') return path.resolve(fromEnv);
  return path.join(env.HOME !== undefined && env.HOME !== '' ? env.HOME : os.homedir(), '.cache', 'pko-toolchain');
}

export function resolveToolchain(env: NodeJS.ProcessEnv = process.env): Toolchain {
  const dir = toolchainDir(env);
  const versions = readVersions();
  const binDirs: Record<Component, string> = {
    etcd: path.join(dir, `etcd-${versions.etcd}`, 'bin'),
    kubernetes: path.join(dir, `kubernetes-${versions.kubernetes}`, 'bin'),
    pulumi: path.join(dir, `pulumi-${versions.pulumi}`, 'bin'),
    command: path.join(dir, `pulumi-command-${versions.pulumiCommand}`, 'bin'),
    'kubernetes-provider': path.join(dir, `pulumi-kubernetes-${versions.pulumiKubernetes}`, 'bin'),
    helm: path.join(dir, `helm-${versions.helm}`, 'bin'),
    coredns: path.join(dir, `coredns-${versions.coredns}`, 'bin'),
    crictl: path.join(dir, `crictl-${versions.crictl}`, 'bin'),
    'source-controller': path.join(dir, `source-controller-${versions.sourceController}`, 'bin'),
    'kustomize-controller': path.join(dir, `kustomize-controller-${versions.kustomizeController}`, 'bin'),
    distribution: path.join(dir, `distribution-${versions.distribution}`, 'bin'),
    gofakes3: path.join(dir, `gofakes3-${versions.gofakes3}`, 'bin'),
  };
  for (const v of versions.oldPulumi) binDirs[oldPulumiComponent(v)] = path.join(dir, `oldpulumi-${v}`, 'bin');
  const componentOf: Record<keyof ToolchainBinaries, Component> = {
    etcd: 'etcd',
    kubeApiserver: 'kubernetes',
    kubeControllerManager: 'kubernetes',
    kubeScheduler: 'kubernetes',
    kubeProxy: 'kubernetes',
    kubelet: 'kubernetes',
    kubectl: 'kubernetes',
    pulumi: 'pulumi',
    pulumiLanguageNodejs: 'pulumi',
    pulumiLanguageYaml: 'pulumi',
    pulumiResourcePulumiNodejs: 'pulumi',
    pulumiResourceCommand: 'command',
    pulumiResourceKubernetes: 'kubernetes-provider',
    helm: 'helm',
    coredns: 'coredns',
    crictl: 'crictl',
    sourceController: 'source-controller',
    kustomizeController: 'kustomize-controller',
    registry: 'distribution',
    gofakes3: 'gofakes3',
  };
  for (const v of versions.oldPulumi) componentOf[oldPulumiBinary(v)] = oldPulumiComponent(v);
  const binaries: ToolchainBinaries = {
    etcd: path.join(binDirs.etcd, 'etcd'),
    kubeApiserver: path.join(binDirs.kubernetes, 'kube-apiserver'),
    kubeControllerManager: path.join(binDirs.kubernetes, 'kube-controller-manager'),
    kubeScheduler: path.join(binDirs.kubernetes, 'kube-scheduler'),
    kubeProxy: path.join(binDirs.kubernetes, 'kube-proxy'),
    kubelet: path.join(binDirs.kubernetes, 'kubelet'),
    kubectl: path.join(binDirs.kubernetes, 'kubectl'),
    pulumi: path.join(binDirs.pulumi, 'pulumi'),
    pulumiLanguageNodejs: path.join(binDirs.pulumi, 'pulumi-language-nodejs'),
    pulumiLanguageYaml: path.join(binDirs.pulumi, 'pulumi-language-yaml'),
    pulumiResourcePulumiNodejs: path.join(binDirs.pulumi, 'pulumi-resource-pulumi-nodejs'),
    pulumiResourceCommand: path.join(binDirs.command, 'pulumi-resource-command'),
    pulumiResourceKubernetes: path.join(binDirs['kubernetes-provider'], 'pulumi-resource-kubernetes'),
    helm: path.join(binDirs.helm, 'helm'),
    coredns: path.join(binDirs.coredns, 'coredns'),
    crictl: path.join(binDirs.crictl, 'crictl'),
    sourceController: path.join(binDirs['source-controller'], 'source-controller'),
    kustomizeController: path.join(binDirs['kustomize-controller'], 'kustomize-controller'),
    registry: path.join(binDirs.distribution, 'registry'),
    gofakes3: path.join(binDirs.gofakes3, 'gofakes3'),
  };
  for (const v of versions.oldPulumi) binaries[oldPulumiBinary(v)] = path.join(dir, `oldpulumi-${v}`, 'bin', 'pulumi');
  return { dir, versions, binDirs, binaries, componentOf };
}

/**
 * The bin dir of component `c` and the path of binary `b`: an older CLI's (`oldpulumi-<version>`)
 * exists only for the versions OLD_PULUMI_VERSIONS lists.
 */
export function binDirOf(c: Component, tc: Toolchain = toolchain): string {
  const dir = tc.binDirs[c];
  if (dir === undefined)
    throw new Error(`${VERSIONS_FILE}: OLD_PULUMI_VERSIONS does not list ${c.replace(/^oldpulumi-/, '')}`);
  return dir;
}
export function binaryPath(b: keyof ToolchainBinaries, tc: Toolchain = toolchain): string {
  const file = tc.binaries[b];
  if (file === undefined)
    throw new Error(`${VERSIONS_FILE}: OLD_PULUMI_VERSIONS does not list ${b.replace(/^oldPulumi-/, '')}`);
  return file;
}
function componentOfBinary(b: keyof ToolchainBinaries, tc: Toolchain): Component {
  const c = tc.componentOf[b];
  if (c === undefined)
    throw new Error(`${VERSIONS_FILE}: OLD_PULUMI_VERSIONS does not list ${b.replace(/^oldPulumi-/, '')}`);
  return c;
}

/** The toolchain as the current environment names it (resolved when this module is loaded). */
export const toolchain: Toolchain = resolveToolchain();
export const versions: ToolchainVersions = toolchain.versions;
/** build.sh's components, in its order: the fixed ones, then one per older CLI. */
export const COMPONENTS: readonly Component[] = [
  'etcd',
  'kubernetes',
  'pulumi',
  'command',
  'kubernetes-provider',
  'helm',
  'coredns',
  'crictl',
  'source-controller',
  'kustomize-controller',
  'distribution',
  'gofakes3',
  ...versions.oldPulumi.map(oldPulumiComponent),
];

/** The variable build.sh --print-env exports for a component's bin dir: PKO_TOOLCHAIN_OLDPULUMI_V3_197_0_BIN. */
export const binDirVariable = (c: Component): string =>
  `PKO_TOOLCHAIN_${c.toUpperCase().replace(/[^A-Z0-9]/g, '_')}_BIN`;

export class ToolchainMissingError extends Error {
  constructor(
    readonly missing: string[],
    readonly components: Component[],
    /** Binaries build.sh could not build because the Go module proxy did not serve them. */
    readonly unavailable: Record<string, string> = {},
  ) {
    const notServed = Object.entries(unavailable).map(
      ([bin, why]) => `\n  ${bin} is not available on this machine: ${why}`,
    );
    super(
      `toolchain not built: run e2e/toolchain/build.sh ${components.join(' ')}` +
        `\n  (missing or not executable: ${missing.join(', ')})${notServed.join('')}`,
    );
    this.name = 'ToolchainMissingError';
  }
}

/**
 * Binaries that build.sh recorded as not served by the Go module proxy (in
 * <component dir>/.unavailable, "binary: reason" lines), for the given components.
 */
export function unavailableBinaries(
  components: readonly Component[] = COMPONENTS,
  tc: Toolchain = toolchain,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const c of components) {
    let text: string;
    try {
      text = fs.readFileSync(path.join(path.dirname(binDirOf(c, tc)), '.unavailable'), 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n')) {
      const i = line.indexOf(': ');
      if (i > 0) out[line.slice(0, i)] = line.slice(i + 2);
    }
  }
  return out;
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/**
 * Checks that every binary of the given components (default: all) exists and is executable, and
 * returns the toolchain. Pass only the components a test needs: on a machine whose Go module proxy
 * does not serve pulumi-resource-command or pulumi-language-nodejs, those are missing. Throws ToolchainMissingError ("toolchain not built: run
 * e2e/toolchain/build.sh ...") otherwise.
 */
export function requireToolchain(components: readonly Component[] = COMPONENTS, tc: Toolchain = toolchain): Toolchain {
  const missing: string[] = [];
  const missingComponents = new Set<Component>();
  for (const [name, file] of Object.entries(tc.binaries) as [keyof ToolchainBinaries, string][]) {
    const component = componentOfBinary(name, tc);
    if (!components.includes(component)) continue;
    if (!isExecutable(file)) {
      missing.push(file);
      missingComponents.add(component);
    }
  }
  if (missing.length > 0) {
    const names = new Set(missing.map((f) => path.basename(f)));
    const unavailable = Object.fromEntries(
      Object.entries(unavailableBinaries([...missingComponents], tc)).filter(([bin]) => names.has(bin)),
    );
    throw new ToolchainMissingError(missing, [...missingComponents], unavailable);
  }
  return tc;
}

/**
 * Environment for processes that use the toolchain: every bin dir but the older CLIs' first on PATH
 * (pulumi's first, so its bundled plugins are found next to it) and the PKO_TOOLCHAIN_* variables
 * that `build.sh --print-env` prints.
 */
export function toolchainEnv(tc: Toolchain = toolchain, basePath = process.env.PATH ?? ''): Record<string, string> {
  const order: Component[] = [
    'pulumi',
    'command',
    'kubernetes-provider',
    'kubernetes',
    'etcd',
    'helm',
    'coredns',
    'crictl',
    'source-controller',
    'kustomize-controller',
    'distribution',
    'gofakes3',
  ];
  const env: Record<string, string> = {
    PKO_TOOLCHAIN_DIR: tc.dir,
    PATH: [...order.map((c) => tc.binDirs[c]), ...(basePath === '' ? [] : [basePath])].join(path.delimiter),
  };
  const components: Component[] = [...order, ...tc.versions.oldPulumi.map(oldPulumiComponent)];
  for (const c of components) env[binDirVariable(c)] = binDirOf(c, tc);
  return env;
}

/**
 * Like requireToolchain, for individual binaries: e.g. requireBinaries(['pulumi',
 * 'pulumiLanguageYaml']) for a YAML-only test on a machine without pulumi-language-nodejs.
 */
export function requireBinaries(
  names: readonly (keyof ToolchainBinaries)[],
  tc: Toolchain = toolchain,
): ToolchainBinaries {
  const missing = names.filter((n) => !isExecutable(binaryPath(n, tc)));
  if (missing.length > 0) {
    const components = [...new Set(missing.map((n) => componentOfBinary(n, tc)))];
    const files = missing.map((n) => binaryPath(n, tc));
    const names2 = new Set(files.map((f) => path.basename(f)));
    const unavailable = Object.fromEntries(
      Object.entries(unavailableBinaries(components, tc)).filter(([bin]) => names2.has(bin)),
    );
    throw new ToolchainMissingError(files, components, unavailable);
  }
  return tc.binaries;
}
