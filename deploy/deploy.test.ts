/**
 * What `npm test` can check of the install programs without a cluster: the TypeScript one
 * type-checks against @pulumi/kubernetes and the typed classes, it and the Go one register the same
 * resources under Pulumi's mocks (the Go one through `go test`), the Python one byte-compiles, the
 * YAML one refers only to what it declares and uses resource types Pulumi YAML supports. The YAML
 * one runs for real in e2e/install-with-pulumi.e2e.ts.
 */
import { execFile, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { promisify } from 'util';
import * as yaml from 'js-yaml';
import * as ts from 'typescript';
import { jest } from '@jest/globals';
import type { MockResourceArgs } from '@pulumi/pulumi/runtime';

const deploy = __dirname;

type Obj = { [key: string]: unknown };
const isObj = (value: unknown): value is Obj => typeof value === 'object' && value !== null && !Array.isArray(value);
const loadProject = (dir: string): Obj => {
  const project = yaml.load(fs.readFileSync(path.join(deploy, dir, 'Pulumi.yaml'), 'utf8'));
  if (!isObj(project)) throw new Error(`${dir}/Pulumi.yaml is not a mapping`);
  return project;
};
const configOf = (project: Obj): Obj => (isObj(project.config) ? project.config : {});

describe('deploy/typescript', () => {
  it('type-checks against @pulumi/kubernetes and the typed Stack class', () => {
    const configFile = path.join(deploy, 'typescript', 'tsconfig.json');
    const parsed = ts.getParsedCommandLineOfConfigFile(
      configFile,
      {},
      {
        ...ts.sys,
        onUnRecoverableConfigFileDiagnostic: (d) => {
          throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
        },
      },
    );
    if (parsed === undefined) throw new Error(`cannot read ${configFile}`);
    const program = ts.createProgram(parsed.fileNames, parsed.options);
    const errors = ts.getPreEmitDiagnostics(program).map((d) => {
      const where = d.file ? `${path.relative(deploy, d.file.fileName)}: ` : '';
      return where + ts.flattenDiagnosticMessageText(d.messageText, '\n');
    });
    expect(errors).toEqual([]);
    // The package export resolved to the generated classes (a missing module would be an error above).
    const files = program.getSourceFiles().map((f) => path.relative(path.dirname(deploy), f.fileName));
    expect(files).toContain(path.join('schemas', 'generated', 'pulumi-v1.ts'));
    expect(files).toContain(path.join('node_modules', '@pulumi', 'kubernetes', 'index.d.ts'));
  }, 120_000);
});

/** The config the CLI would give the program in `dir`: Pulumi.yaml's defaults, then `overrides`, keyed `<project>:<key>`. */
function programConfig(dir: string, overrides: Record<string, string>): Record<string, string> {
  const project = loadProject(dir);
  const name = String(project.name);
  const config: Record<string, string> = {};
  for (const [key, spec] of Object.entries(configOf(project)))
    if (isObj(spec) && (typeof spec.default === 'string' || typeof spec.default === 'boolean'))
      config[`${name}:${key}`] = String(spec.default);
  for (const [key, value] of Object.entries(overrides)) config[`${name}:${key}`] = value;
  return config;
}

/** What a program registered under Pulumi's mocks: the fields both languages' mocks report. */
type Registered = Pick<MockResourceArgs, 'type' | 'name' | 'inputs'>;

/** What deploy/typescript registers under Pulumi's mocks, with the config of Pulumi.yaml's defaults and `overrides`. */
async function runTypeScriptProgram(overrides: Record<string, string>): Promise<Registered[]> {
  const registered: MockResourceArgs[] = [];
  await jest.isolateModulesAsync(async () => {
    const pulumi = await import('@pulumi/pulumi');
    const project = loadProject('typescript');
    const name = String(project.name);
    await pulumi.runtime.setMocks(
      {
        newResource: (args) => {
          registered.push(args);
          const inputs = args.inputs as Obj;
          const metadata = isObj(inputs.metadata) ? inputs.metadata : {};
          return { id: `${args.name}-id`, state: { ...inputs, metadata: { ...metadata, name: `${args.name}-abc` } } };
        },
        call: () => ({}),
      },
      name,
      'dev',
      false,
    );
    // The CLI applies Pulumi.yaml's defaults; under mocks the test does.
    pulumi.runtime.setAllConfig(programConfig('typescript', overrides), [`${name}:pulumiAccessToken`]);
    const program = (await import('./typescript/index')) as { stackName: import('@pulumi/pulumi').Output<string> };
    await new Promise<void>((resolve) => program.stackName.apply(() => resolve()));
  });
  return registered;
}

/**
 * What deploy/go registers under Pulumi's mocks (`go test` of its main_test.go, which writes them to
 * a file), with the config of Pulumi.yaml's defaults and `overrides`. Needs Go; the SDKs come from
 * the Go module proxy into the module cache on the first run (docs/install-with-pulumi.md#go).
 */
async function runGoProgram(overrides: Record<string, string>): Promise<Registered[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-go-'));
  try {
    const out = path.join(dir, 'registered.json');
    const name = String(loadProject('go').name);
    await promisify(execFile)('go', ['test', '-count=1', '-run', '^TestInstallUnderMocks$', '.'], {
      cwd: path.join(deploy, 'go'),
      env: {
        ...process.env,
        REGISTERED_JSON: out,
        PULUMI_CONFIG: JSON.stringify(programConfig('go', overrides)),
        PULUMI_CONFIG_SECRET_KEYS: JSON.stringify([`${name}:pulumiAccessToken`]),
      },
      maxBuffer: 16 * 1024 * 1024,
    }).catch((e: NodeJS.ErrnoException & { stdout?: string; stderr?: string }) => {
      if (e.code === 'ENOENT') throw new Error(`go is required to check deploy/go (${e.message}); install Go`);
      throw new Error(`go test failed:\n${e.stdout ?? ''}\n${e.stderr ?? e.message}`);
    });
    return JSON.parse(fs.readFileSync(out, 'utf8')) as Registered[];
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A first `go test` downloads the SDKs and compiles them (about 5 CPU minutes: 9 minutes on 2 busy
 * cores, docs/install-with-pulumi.md#go); the bound leaves room for a machine much busier than that.
 */
const GO_COLD_TIMEOUT_MS = 30 * 60_000;

describe.each([
  ['deploy/typescript', runTypeScriptProgram],
  ['deploy/go', runGoProgram],
])('%s under Pulumi mocks', (_, runProgram) => {
  const ofType = (registered: Registered[], type: string): Registered[] => registered.filter((r) => r.type === type);

  it(
    'installs Metacontroller, the operator, the account, the token Secret and a Stack on the branch',
    async () => {
      const registered = await runProgram({ pulumiAccessToken: 'token-value' });
      expect(ofType(registered, 'kubernetes:kustomize/v2:Directory').map((r) => r.inputs as unknown)).toEqual([
        { directory: '../metacontroller/true' },
      ]);
      expect(ofType(registered, 'kubernetes:yaml/v2:ConfigFile').map((r) => r.inputs as unknown)).toEqual([
        { file: '../../manifests/install.yaml' },
      ]);
      const [binding] = ofType(registered, 'kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding');
      expect(binding?.inputs).toMatchObject({
        roleRef: { name: 'system:auth-delegator' },
        subjects: [{ kind: 'ServiceAccount', name: 'pulumi-abc', namespace: 'default' }],
      });
      const [secret] = ofType(registered, 'kubernetes:core/v1:Secret');
      expect(JSON.stringify(secret?.inputs)).toContain('token-value');
      const [stack] = ofType(registered, 'kubernetes:pulumi.com/v1:Stack');
      expect(stack?.inputs).toEqual({
        apiVersion: 'pulumi.com/v1',
        kind: 'Stack',
        metadata: { namespace: 'default' },
        spec: {
          stack: 'dev',
          projectRepo: 'https://github.com/pulumi/examples',
          repoDir: 'random-yaml',
          branch: 'refs/heads/master',
          serviceAccountName: 'pulumi-abc',
          envRefs: {
            PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: 'pulumi-api-secret-abc', key: 'accessToken' } },
          },
          destroyOnFinalize: true,
        },
      });
    },
    GO_COLD_TIMEOUT_MS,
  );

  it(
    'installs no Metacontroller with installMetacontroller false, and pins a commit when set',
    async () => {
      const registered = await runProgram({
        pulumiAccessToken: 'token-value',
        installMetacontroller: 'false',
        commit: '0123456789abcdef0123456789abcdef01234567',
      });
      expect(ofType(registered, 'kubernetes:kustomize/v2:Directory')).toEqual([]);
      expect(ofType(registered, 'kubernetes:yaml/v2:ConfigFile')).toHaveLength(1);
      const [stack] = ofType(registered, 'kubernetes:pulumi.com/v1:Stack');
      const spec = isObj(stack?.inputs) && isObj(stack.inputs.spec) ? stack.inputs.spec : {};
      expect(spec.commit).toBe('0123456789abcdef0123456789abcdef01234567');
      expect(spec).not.toHaveProperty('branch');
    },
    GO_COLD_TIMEOUT_MS,
  );
});

describe('deploy/python', () => {
  const cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'pycache-'));
  afterAll(() => fs.rmSync(cacheDir, { recursive: true, force: true }));

  /** `python3 -m py_compile <file>`, byte code kept out of the repository; python3 must exist. */
  const pyCompile = (file: string): { status: number | null; stderr: string } => {
    const result = spawnSync('python3', ['-m', 'py_compile', file], {
      encoding: 'utf8',
      env: { ...process.env, PYTHONPYCACHEPREFIX: cacheDir },
    });
    if (result.error) {
      throw new Error(`python3 is required to check deploy/python (${result.error.message}); install Python 3`);
    }
    return { status: result.status, stderr: result.stderr };
  };

  it('byte-compiles with python3', () => {
    const { status, stderr } = pyCompile(path.join(deploy, 'python', '__main__.py'));
    expect(stderr).toBe('');
    expect(status).toBe(0);
  });

  it('would fail on a syntax error (the check is not vacuous)', () => {
    const broken = path.join(cacheDir, 'broken.py');
    fs.writeFileSync(broken, 'stack = k8s.apiextensions.CustomResource("app",\n');
    const { status, stderr } = pyCompile(broken);
    expect(status).not.toBe(0);
    expect(stderr).toMatch(/SyntaxError/);
  });

  it('declares the same config as the TypeScript program, and its requirements', () => {
    expect(configOf(loadProject('python'))).toEqual(configOf(loadProject('typescript')));
    expect(fs.readFileSync(path.join(deploy, 'python', 'requirements.txt'), 'utf8')).toMatch(
      /^pulumi-kubernetes>=4\.13/m,
    );
  });
});

describe('deploy/go', () => {
  it('declares the same config as the TypeScript program, and the Go SDKs from the module proxy', () => {
    expect(configOf(loadProject('go'))).toEqual(configOf(loadProject('typescript')));
    expect(loadProject('go').runtime).toBe('go');
    const goMod = fs.readFileSync(path.join(deploy, 'go', 'go.mod'), 'utf8');
    expect(goMod).toMatch(/^\s+github\.com\/pulumi\/pulumi\/sdk\/v3 v3\.\d+\.\d+$/m);
    expect(goMod).toMatch(/^\s+github\.com\/pulumi\/pulumi-kubernetes\/sdk\/v4 v4\.\d+\.\d+$/m);
    // go.sum pins every module the build downloads.
    expect(fs.existsSync(path.join(deploy, 'go', 'go.sum'))).toBe(true);
  });
});

describe('deploy/yaml', () => {
  const project = loadProject('yaml');
  const config = configOf(project);
  const resources = isObj(project.resources) ? project.resources : {};

  /** Every `${name...}` in a value: the root names it refers to. */
  const references = (value: unknown): string[] => {
    if (typeof value === 'string') return [...value.matchAll(/\$\{([A-Za-z0-9_]+)/g)].map((m) => m[1] ?? '');
    if (Array.isArray(value)) return value.flatMap(references);
    if (isObj(value)) return Object.values(value).flatMap(references);
    return [];
  };

  it('refers only to its own config keys and resources', () => {
    const declared = new Set([...Object.keys(config), ...Object.keys(resources)]);
    const undeclared = [...new Set(references([project.resources, project.outputs]))].filter((r) => !declared.has(r));
    expect(undeclared).toEqual([]);
    // Config keys and resources share one namespace in Pulumi YAML.
    expect(Object.keys(config).filter((k) => k in resources)).toEqual([]);
  });

  it('names every resource as Kubernetes accepts auto-named objects (lower case), as the other programs do', () => {
    // A resource's `name`, else its key, is the prefix of its objects' names.
    const names = Object.entries(resources).map(([key, r]) => (isObj(r) && typeof r.name === 'string' ? r.name : key));
    expect(names.filter((n) => !/^[a-z0-9]([-a-z0-9:.]*[a-z0-9])?$/.test(n))).toEqual([]);
    expect(names.sort()).toEqual([
      'app',
      'metacontroller',
      'pulumi',
      'pulumi-api-secret',
      'pulumi-mc-operator',
      'pulumi:auth-delegator',
    ]);
  });

  it('uses only resource types Pulumi YAML supports (no SDK-side CustomResource, ConfigFile v1 or Chart)', () => {
    const types = Object.values(resources).map((r) => (isObj(r) ? r.type : undefined));
    expect(types.sort()).toEqual([
      'kubernetes:core/v1:Secret',
      'kubernetes:core/v1:ServiceAccount',
      'kubernetes:kustomize/v2:Directory',
      'kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding',
      'kubernetes:yaml/v2:ConfigFile',
      'kubernetes:yaml/v2:ConfigGroup',
    ]);
  });

  it('has a Metacontroller kustomization for each value of installMetacontroller, and the operator manifest', () => {
    expect(config.installMetacontroller).toEqual({ type: 'boolean', default: true });
    for (const value of ['true', 'false']) {
      expect(fs.existsSync(path.join(deploy, 'metacontroller', value, 'kustomization.yaml'))).toBe(true);
    }
    const manifest = isObj(config.operatorManifest) ? String(config.operatorManifest.default) : '';
    expect(fs.existsSync(path.join(deploy, 'yaml', manifest))).toBe(true);
  });

  it('creates a Stack following refs/heads/master with the token Secret in envRefs and destroyOnFinalize', () => {
    const app = resources.app;
    const objs = isObj(app) && isObj(app.properties) && Array.isArray(app.properties.objs) ? app.properties.objs : [];
    expect(objs).toEqual([
      expect.objectContaining({
        apiVersion: 'pulumi.com/v1',
        kind: 'Stack',
        spec: expect.objectContaining({
          branch: '${branch}',
          envRefs: {
            PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: '${apiSecret.metadata.name}', key: 'accessToken' } },
          },
          destroyOnFinalize: true,
        }) as unknown,
      }),
    ]);
    expect(config.branch).toEqual({ type: 'string', default: 'refs/heads/master' });
    expect(config.pulumiAccessToken).toEqual({ type: 'string', secret: true });
  });
});
