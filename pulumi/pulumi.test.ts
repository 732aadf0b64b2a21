import * as path from 'path';
import * as ts from 'typescript';
import * as pulumi from '@pulumi/pulumi';
import * as crds from './index';

const root = path.resolve(__dirname, '..');

/**
 * Type-checks TypeScript snippets as a user's Pulumi program would be: strict, node16 resolution,
 * importing this package's `./pulumi` export by name (files inside the repository resolve it as a
 * self-reference). Returns each snippet's error messages.
 */
function typeCheck(snippets: Record<string, string>): Record<string, string[]> {
  const files = new Map(
    Object.entries(snippets).map(([name, code]) => [path.join(root, 'pulumi', '.snippets', `${name}.ts`), code]),
  );
  const options: ts.CompilerOptions = {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.Node16,
    moduleResolution: ts.ModuleResolutionKind.Node16,
    types: ['node'],
    skipLibCheck: true,
    noEmit: true,
  };
  const host = ts.createCompilerHost(options);
  const onDisk = {
    fileExists: host.fileExists.bind(host),
    readFile: host.readFile.bind(host),
    getSourceFile: host.getSourceFile.bind(host),
  };
  host.fileExists = (file) => files.has(file) || onDisk.fileExists(file);
  host.readFile = (file) => files.get(file) ?? onDisk.readFile(file);
  host.getSourceFile = (file, language, onError) => {
    const code = files.get(file);
    return code !== undefined
      ? ts.createSourceFile(file, code, language)
      : onDisk.getSourceFile(file, language, onError);
  };
  const program = ts.createProgram([...files.keys()], options, host);
  const result: Record<string, string[]> = {};
  for (const [file] of files) {
    const name = path.basename(file, '.ts');
    result[name] = ts
      .getPreEmitDiagnostics(program, program.getSourceFile(file))
      .map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  }
  return result;
}

const header = `
import * as pulumi from '@pulumi/pulumi';
import * as crds from 'pulumi-metacontroller-operator/pulumi';
const token = pulumi.secret('t');
const name: pulumi.Output<string> = pulumi.output('api-secret');
`;

describe('the typed Pulumi classes', () => {
  let errors: Record<string, string[]>;
  beforeAll(() => {
    errors = typeCheck({
      correct: `${header}
const flag: pulumi.Output<boolean> = pulumi.output(true);
const stack = new crds.pulumi.v1.Stack('app', {
  metadata: { namespace: 'default', labels: { team: 'infra' } },
  spec: {
    stack: 'dev',
    projectRepo: pulumi.output('https://github.com/pulumi/examples'),
    repoDir: 'random-yaml',
    branch: 'refs/heads/master',
    envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name, key: 'accessToken' } } },
    destroyOnFinalize: flag,
    config: { 'aws:region': 'us-east-1' },
    prerequisites: [{ name: 'base', requirement: { succeededWithinDuration: '1h' } }],
  },
});
new crds.pulumi.v1.Stack('pinned', { spec: { stack: 'dev', projectRepo: 'https://example.com/r.git', commit: 'abc123' } });
new crds.pulumi.v1.Program('pet', {
  program: { resources: { pet: { type: 'random:RandomPet', properties: { length: 2 } } } },
});
const state: pulumi.Output<string | undefined> = stack.status.apply((s) => s?.lastUpdate?.state);
const repo: pulumi.Output<string | undefined> = stack.spec.apply((s) => s.projectRepo);
const read: crds.pulumi.v1.Stack = crds.pulumi.v1.Stack.get('existing', 'default/app');
export { state, repo, read, token };
`,
      misspeltSpecField: `${header}
new crds.pulumi.v1.Stack('app', { spec: { stack: 'dev', projectRepoo: 'https://github.com/pulumi/examples' } });
`,
      misspeltNestedField: `${header}
new crds.pulumi.v1.Stack('app', {
  spec: { stack: 'dev', envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name, kee: 'accessToken' } } } },
});
`,
      unknownEnumValue: `${header}
new crds.pulumi.v1.Stack('app', { spec: { stack: 'dev', workspaceReclaimPolicy: 'Keep' } });
`,
      missingRequiredField: `${header}
new crds.pulumi.v1.Stack('app', { spec: { projectRepo: 'https://github.com/pulumi/examples', branch: 'main' } });
`,
      wrongFieldType: `${header}
new crds.pulumi.v1.Stack('app', { spec: { stack: 'dev', destroyOnFinalize: 'yes' } });
`,
      misspeltOutput: `${header}
const stack = new crds.pulumi.v1.Stack('app', { spec: { stack: 'dev' } });
export const x = stack.status.apply((s) => s?.lastUpdat);
export { token };
`,
    });
  }, 120_000);

  it('accept a correct program: Outputs at any depth, pinned commit or branch, a Program, typed outputs', () => {
    expect(errors.correct).toEqual([]);
  });

  it.each([
    ['misspeltSpecField', /'projectRepoo' does not exist/],
    ['misspeltNestedField', /'kee' does not exist/],
    ['unknownEnumValue', /'"Keep"' is not assignable/],
    ['missingRequiredField', /Property 'stack' is missing/],
    ['wrongFieldType', /'string' is not assignable to type 'Input<boolean> \| undefined'/],
    ['misspeltOutput', /Property 'lastUpdat' does not exist/],
  ])('reject %s', (snippet, message) => {
    expect(errors[snippet]?.join('\n')).toMatch(message);
  });
});

describe('the typed classes at run time', () => {
  const registered: pulumi.runtime.MockResourceArgs[] = [];
  beforeAll(async () => {
    await pulumi.runtime.setMocks(
      {
        newResource: (args) => {
          registered.push(args);
          return {
            id: `${args.name}-id`,
            state: { ...(args.inputs as Record<string, unknown>), status: { observedGeneration: 1 } },
          };
        },
        call: () => ({}),
      },
      'project',
      'stack',
      false,
    );
  });

  const value = <T>(output: pulumi.Output<T>): Promise<T> =>
    new Promise((resolve) => {
      output.apply((v) => {
        resolve(v);
        return v;
      });
    });

  it('register a Stack with the token crd2pulumi uses, apiVersion, kind and the spec, and fill spec and status', async () => {
    const token = pulumi.output('api-secret');
    const stack = new crds.pulumi.v1.Stack('app', {
      metadata: { namespace: 'default' },
      spec: {
        stack: 'dev',
        projectRepo: 'https://github.com/pulumi/examples',
        branch: pulumi.output('refs/heads/master'),
        envRefs: { PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: token, key: 'accessToken' } } },
        destroyOnFinalize: true,
      },
    });
    expect(await value(stack.spec.apply((s) => s.branch))).toBe('refs/heads/master');
    expect(await value(stack.status)).toEqual({ observedGeneration: 1 });
    expect(await value(stack.kind)).toBe('Stack');
    const args = registered.find((r) => r.name === 'app');
    expect(args?.type).toBe('kubernetes:pulumi.com/v1:Stack');
    expect(args?.inputs).toMatchObject({
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { namespace: 'default' },
      spec: { stack: 'dev', destroyOnFinalize: true, branch: 'refs/heads/master' },
    });
    expect(crds.pulumi.v1.Stack.isInstance(stack)).toBe(true);
    expect(crds.pulumi.v1.Program.isInstance(stack)).toBe(false);
  });

  it('register a Program under kubernetes:pulumi.com/v1:Program with its program', async () => {
    const program = new crds.pulumi.v1.Program('pet', {
      program: { resources: { pet: { type: 'random:RandomPet' } } },
    });
    expect(await value(program.program.apply((p) => p.resources))).toEqual({ pet: { type: 'random:RandomPet' } });
    const args = registered.find((r) => r.name === 'pet');
    expect(args?.type).toBe('kubernetes:pulumi.com/v1:Program');
    expect(args?.inputs).toMatchObject({ apiVersion: 'pulumi.com/v1', kind: 'Program' });
  });
});
