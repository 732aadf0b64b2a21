// json-schema-to-typescript loads prettier, whose module body uses dynamic import(), which jest
// refuses without --experimental-vm-modules. The generator does not format with prettier anyway.
jest.mock('prettier', () => ({}));

import * as fs from 'fs';
import * as path from 'path';
import * as yaml from 'js-yaml';
import {
  createAjv,
  formatErrors,
  metacontrollerSchema,
  programSchema,
  stackSchema,
  updateSchema,
  validateCompositeSyncRequest,
  validateCustomizeRequest,
  validateDecoratorSyncRequest,
  validateProgram,
  validateStack,
  validateUpdate,
  validateWorkspace,
  workspaceSchema,
  type FieldError,
  type JsonSchema,
  type ValidationResult,
} from './index';
import {
  CRD_DIRS,
  CRD_HEADER,
  PROGRAM_CRD_FILE,
  STACK_CRD_FILE,
  TYPES_FILE,
  UPDATE_CRD_FILE,
  WORKSPACE_CRD_FILE,
  generateAll,
  repoRoot,
} from './generate';
import { PULUMI_CLASSES_FILE } from './pulumi-classes';

type Obj = { [key: string]: unknown };

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isList(value: unknown): value is unknown[] {
  return Array.isArray(value);
}

/** A keyword's value in a problem message: strings as they are, anything else as JSON. */
function show(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function obj(value: unknown, what = 'value'): Obj {
  if (!isObj(value)) throw new Error(`${what} is not an object`);
  return value;
}

const root = repoRoot();
const readRepoFile = (file: string): string => fs.readFileSync(path.join(root, file), 'utf8');
const loadYaml = (file: string): Obj => obj(yaml.load(readRepoFile(file)), file);

function errorsOf(result: ValidationResult): FieldError[] {
  return result.ok ? [] : result.errors;
}

function expectValid(result: ValidationResult): void {
  if (!result.ok) throw new Error(`expected valid, got: ${formatErrors(result.errors)}`);
}

/** The schemas of the API's kinds (workspace and update completed with their shared definitions). */
const API_SCHEMAS: Array<[string, JsonSchema]> = [
  ['stack', stackSchema],
  ['program', programSchema],
  ['workspace', workspaceSchema],
  ['update', updateSchema],
];
const ALL_SCHEMAS: Array<[string, JsonSchema]> = [...API_SCHEMAS, ['metacontroller', metacontrollerSchema]];
const CRD_FILES = [STACK_CRD_FILE, PROGRAM_CRD_FILE, WORKSPACE_CRD_FILE, UPDATE_CRD_FILE];

function defsOf(schema: JsonSchema): Obj {
  return isObj(schema.$defs) ? schema.$defs : {};
}

function refTarget(schema: JsonSchema, ref: string): Obj {
  const name = /^#\/\$defs\/(\w+)$/.exec(ref)?.[1];
  if (name === undefined) throw new Error(`unexpected $ref ${ref}`);
  return obj(defsOf(schema)[name], `$defs/${name}`);
}

// ---------------------------------------------------------------------------------------------

describe('generated files', () => {
  let generated: Map<string, string>;
  beforeAll(async () => {
    generated = await generateAll();
  });

  it('are up to date (run `npm run generate` after changing schemas/)', () => {
    const stale: string[] = [];
    for (const [file, content] of generated) {
      const target = path.join(root, file);
      if (!fs.existsSync(target) || fs.readFileSync(target, 'utf8') !== content) stale.push(file);
    }
    if (stale.length > 0) {
      throw new Error(`stale generated files: ${stale.join(', ')}. Run \`npm run generate\` and commit the result.`);
    }
  });

  it('include every CRD in every CRD folder, byte-identical, plus the types and the Pulumi classes', () => {
    const expected = CRD_DIRS.flatMap((dir) => CRD_FILES.map((file) => `${dir}/${file}`));
    expect([...generated.keys()].sort()).toEqual([...expected, TYPES_FILE, PULUMI_CLASSES_FILE].sort());
    for (const file of CRD_FILES) {
      const copies = new Set(CRD_DIRS.map((dir) => generated.get(`${dir}/${file}`)));
      expect(copies.size).toBe(1);
    }
  });

  it('are deterministic', async () => {
    const again = await generateAll();
    expect(again).toEqual(generated);
  });

  it('start with the generated-file notice and end with a newline', () => {
    for (const [file, content] of generated) {
      if (file.endsWith('.yaml')) expect(content.startsWith(CRD_HEADER)).toBe(true);
      else expect(content).toMatch(/^\/\*\*\n \* Generated from schemas/);
      // Generated code passes the linter like any other file: no blanket eslint-disable.
      expect(content).not.toContain('eslint-disable');
      expect(content.endsWith('\n')).toBe(true);
      expect(content.endsWith('\n\n')).toBe(false);
    }
  });

  it('have no YAML 1.1 boolean look-alikes left unquoted (the API server reads YAML 1.1)', () => {
    for (const [file, content] of generated) {
      if (!file.endsWith('.yaml')) continue;
      expect(content).not.toMatch(/:\s+(y|n|yes|no|on|off)\s*$/im);
      expect(content).not.toMatch(/^\s*-\s+(y|n|yes|no|on|off)\s*$/im);
    }
  });

  it('type every schema definition under its title, once', () => {
    const types = generated.get(TYPES_FILE) ?? '';
    const exported = [...types.matchAll(/^export (?:interface|type) (\w+)/gm)].map((m) => m[1]);
    expect(new Set(exported).size).toBe(exported.length);
    const titles = new Set<string>();
    for (const [, schema] of ALL_SCHEMAS) {
      titles.add(String(schema.title));
      for (const def of Object.values(defsOf(schema))) titles.add(String(obj(def).title));
    }
    expect(new Set(exported)).toEqual(titles);
  });
});

// ---------------------------------------------------------------------------------------------
// Structural schema checks (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema)

const STRUCTURAL_KEYS = new Set([
  'type',
  'description',
  'default',
  'properties',
  'items',
  'additionalProperties',
  'required',
  'enum',
  'format',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'minItems',
  'maxItems',
  'anyOf',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
  'x-kubernetes-list-type',
  'x-kubernetes-list-map-keys',
  'x-kubernetes-map-type',
  'x-kubernetes-validations',
]);
const TYPES = new Set(['object', 'array', 'string', 'integer', 'number', 'boolean']);
const FORMATS = new Set(['date-time', 'int32', 'int64']);

function structuralProblems(node: unknown, at: string): string[] {
  if (!isObj(node)) return [`${at}: not an object`];
  const problems: string[] = [];
  for (const key of Object.keys(node)) {
    if (!STRUCTURAL_KEYS.has(key)) problems.push(`${at}: keyword ${key} is not allowed`);
  }
  const intOrString = node['x-kubernetes-int-or-string'] === true;
  const preserve = node['x-kubernetes-preserve-unknown-fields'] === true;
  if (node.type === undefined && !intOrString && !preserve) problems.push(`${at}: no type`);
  if (node.type !== undefined && !(typeof node.type === 'string' && TYPES.has(node.type)))
    problems.push(`${at}: bad type ${show(node.type)}`);
  if (node.anyOf !== undefined) {
    const expected = [{ type: 'integer' }, { type: 'string' }];
    if (!intOrString || JSON.stringify(node.anyOf) !== JSON.stringify(expected))
      problems.push(`${at}: anyOf other than int-or-string`);
    if (node.type !== undefined) problems.push(`${at}: int-or-string with a type`);
  }
  if (node.additionalProperties !== undefined && node.properties !== undefined)
    problems.push(`${at}: properties and additionalProperties`);
  if (typeof node.additionalProperties === 'boolean') problems.push(`${at}: boolean additionalProperties`);
  if (node.format !== undefined && !(typeof node.format === 'string' && FORMATS.has(node.format)))
    problems.push(`${at}: format ${show(node.format)}`);
  if (node.type === 'array' && node.items === undefined) problems.push(`${at}: array without items`);
  if ((node.properties !== undefined || node.additionalProperties !== undefined) && node.type !== 'object') {
    problems.push(`${at}: properties on a non-object`);
  }
  if (node['x-kubernetes-list-type'] === 'map') {
    const keys = node['x-kubernetes-list-map-keys'];
    const items = isObj(node.items) ? node.items : {};
    const required = Array.isArray(items.required) ? items.required : [];
    if (!Array.isArray(keys) || keys.length === 0) problems.push(`${at}: list-type map without keys`);
    else
      for (const key of keys)
        if (!required.includes(key)) problems.push(`${at}: list-map key ${String(key)} is not required`);
  }
  if (Array.isArray(node.required) && isObj(node.properties)) {
    for (const name of node.required)
      if (!(String(name) in node.properties)) problems.push(`${at}: required ${String(name)} is not a property`);
  }
  if (isObj(node.properties)) {
    for (const [name, sub] of Object.entries(node.properties))
      problems.push(...structuralProblems(sub, `${at}.${name}`));
  }
  if (node.items !== undefined) problems.push(...structuralProblems(node.items, `${at}[]`));
  if (isObj(node.additionalProperties)) problems.push(...structuralProblems(node.additionalProperties, `${at}{}`));
  return problems;
}

function crdVersions(crd: Obj): Obj[] {
  const versions = obj(crd.spec).versions;
  if (!Array.isArray(versions)) throw new Error('no versions');
  return versions.map((v) => obj(v));
}

function openAPI(version: Obj): Obj {
  return obj(obj(version.schema).openAPIV3Schema);
}

function at(schema: Obj, fieldPath: string): Obj {
  let node: Obj = schema;
  for (const segment of fieldPath.split('.')) node = obj(obj(node.properties, fieldPath)[segment], fieldPath);
  return node;
}

describe('CRDs', () => {
  const stacks = loadYaml(`manifests/crds/${STACK_CRD_FILE}`);
  const programs = loadYaml(`manifests/crds/${PROGRAM_CRD_FILE}`);
  const workspaces = loadYaml(`manifests/crds/${WORKSPACE_CRD_FILE}`);
  const updates = loadYaml(`manifests/crds/${UPDATE_CRD_FILE}`);

  it.each([
    ['stacks', stacks],
    ['programs', programs],
    ['workspaces', workspaces],
    ['updates', updates],
  ])('%s: every version has a structural schema', (_name, crd) => {
    for (const version of crdVersions(crd)) {
      const schema = openAPI(version);
      expect(structuralProblems(schema, `${String(version.name)}:`)).toEqual([]);
      expect(obj(schema.properties).metadata).toEqual({ type: 'object' });
      expect(JSON.stringify(schema)).not.toMatch(/"\$ref"|"\$defs"|"title"|"deprecated"/);
      // Metacontroller writes status.observedGeneration (through the stored version); a pruned field
      // would make it rewrite the status forever.
      if (version.storage === true)
        expect(at(schema, 'status.observedGeneration')).toMatchObject({ type: 'integer', format: 'int64' });
    }
  });

  it('stacks: group, names, scope, category, no short names', () => {
    expect(stacks.apiVersion).toBe('apiextensions.k8s.io/v1');
    expect(stacks.kind).toBe('CustomResourceDefinition');
    expect(obj(stacks.metadata).name).toBe('stacks.pulumi.com');
    const spec = obj(stacks.spec);
    expect(spec.group).toBe('pulumi.com');
    expect(spec.scope).toBe('Namespaced');
    expect(spec.names).toEqual({
      categories: ['pulumi'],
      kind: 'Stack',
      listKind: 'StackList',
      plural: 'stacks',
      singular: 'stack',
    });
  });

  it('stacks: v1 is stored, v1alpha1 is served (deprecated, reduced status, no columns)', () => {
    const [v1, v1alpha1] = crdVersions(stacks);
    expect(v1).toMatchObject({ name: 'v1', served: true, storage: true, subresources: { status: {} } });
    expect(v1alpha1).toMatchObject({ name: 'v1alpha1', served: true, storage: false, subresources: { status: {} } });
    expect(v1alpha1?.additionalPrinterColumns).toBeUndefined();
    const alpha = openAPI(obj(v1alpha1));
    expect(String(alpha.description)).toMatch(/^Deprecated/);
    expect(Object.keys(obj(at(alpha, 'status').properties)).sort()).toEqual(['lastUpdate', 'outputs']);
    expect(at(alpha, 'spec')).toEqual(at(openAPI(obj(v1)), 'spec'));
  });

  it('stacks: the 42-character name rule is a CEL validation on the root', () => {
    for (const version of crdVersions(stacks)) {
      expect(openAPI(version)['x-kubernetes-validations']).toEqual([
        { rule: 'size(self.metadata.name) <= 42', message: 'Stack name must be no more than 42 characters in length.' },
      ]);
    }
  });

  it('stacks: only spec.stack is required in spec; conditions are a map keyed by type', () => {
    const v1 = openAPI(crdVersions(stacks)[0] ?? {});
    expect(at(v1, 'spec').required).toEqual(['stack']);
    expect(at(v1, 'spec.workspaceReclaimPolicy').enum).toEqual(['Retain', 'Delete']);
    expect(at(v1, 'status.conditions')).toMatchObject({
      'x-kubernetes-list-type': 'map',
      'x-kubernetes-list-map-keys': ['type'],
    });
    expect(at(v1, 'spec.environment')['x-kubernetes-list-type']).toBe('atomic');
    expect(obj(at(v1, 'spec.config').additionalProperties)).toEqual({ 'x-kubernetes-preserve-unknown-fields': true });
    expect(obj(at(v1, 'status.outputs').additionalProperties)).toEqual({
      'x-kubernetes-preserve-unknown-fields': true,
    });
  });

  it('describe every field (kubectl explain)', () => {
    const missing: string[] = [];
    const walk = (node: Obj, where: string): void => {
      if (isObj(node.properties)) {
        for (const [name, sub] of Object.entries(node.properties)) {
          const child = obj(sub);
          if (typeof child.description !== 'string' && !(where === '' && name === 'metadata'))
            missing.push(`${where}.${name}`);
          walk(child, `${where}.${name}`);
        }
      }
      if (isObj(node.items)) walk(node.items, `${where}[]`);
      if (isObj(node.additionalProperties)) walk(node.additionalProperties, `${where}{}`);
    };
    for (const crd of [stacks, programs, workspaces, updates])
      for (const version of crdVersions(crd)) walk(openAPI(version), '');
    expect(missing).toEqual([]);
  });

  it('programs: group, names, printer columns', () => {
    expect(obj(programs.metadata).name).toBe('programs.pulumi.com');
    expect(obj(programs.spec).names).toEqual({
      categories: ['pulumi'],
      kind: 'Program',
      listKind: 'ProgramList',
      plural: 'programs',
      singular: 'program',
    });
    const [v1] = crdVersions(programs);
    expect(v1).toMatchObject({ name: 'v1', served: true, storage: true, subresources: { status: {} } });
    expect(at(openAPI(obj(v1)), 'program.resources').additionalProperties).toMatchObject({ required: ['type'] });
  });

  it.each([
    ['workspaces', workspaces, 'Workspace'],
    ['updates', updates, 'Update'],
  ])('%s: group auto.pulumi.com, names, one stored version v1alpha1', (plural, crd, kind) => {
    expect(obj(crd.metadata).name).toBe(`${plural}.auto.pulumi.com`);
    const spec = obj(crd.spec);
    expect(spec.group).toBe('auto.pulumi.com');
    expect(spec.scope).toBe('Namespaced');
    expect(spec.names).toEqual({
      categories: ['pulumi'],
      kind,
      listKind: `${kind}List`,
      plural,
      singular: kind.toLowerCase(),
    });
    expect(crdVersions(crd)).toEqual([
      expect.objectContaining({ name: 'v1alpha1', served: true, storage: true, subresources: { status: {} } }),
    ]);
  });

  it('workspaces: stacks, their config and env are maps keyed as upstream; defaults as upstream', () => {
    const v1alpha1 = openAPI(crdVersions(workspaces)[0] ?? {});
    const listMap = (keys: string[]) => ({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': keys });
    expect(at(v1alpha1, 'spec.stacks')).toMatchObject(listMap(['name']));
    expect(obj(at(v1alpha1, 'spec.stacks').items).required).toEqual(['name']);
    const config = obj(obj(at(v1alpha1, 'spec.stacks').items).properties).config;
    expect(config).toMatchObject(listMap(['key']));
    expect(at(v1alpha1, 'spec.env')).toMatchObject(listMap(['name']));
    expect(at(v1alpha1, 'spec.envFrom')['x-kubernetes-list-type']).toBe('atomic');
    expect(at(v1alpha1, 'spec.projectInfo').required).toEqual(['name', 'runtime']);
    expect(at(v1alpha1, 'spec.serviceAccountName').default).toBe('default');
    expect(at(v1alpha1, 'spec.securityProfile').default).toBe('restricted');
    expect(at(v1alpha1, 'status.conditions')).toMatchObject(listMap(['type']));
  });

  it("updates: this operator's output fields are in the status", () => {
    const v1alpha1 = openAPI(crdVersions(updates)[0] ?? {});
    // Each value kept as it is (as the Stack's status.outputs): a preserve-unknown-fields object
    // without this was stored as {} by the API server (found by e2e/program-stack.e2e.ts).
    expect(at(v1alpha1, 'status.outputValues')).toMatchObject({
      type: 'object',
      additionalProperties: { 'x-kubernetes-preserve-unknown-fields': true },
    });
    expect(at(v1alpha1, 'status.outputsOmitted').type).toBe('boolean');
    expect(at(v1alpha1, 'status.outputsTotal').type).toBe('integer');
    expect(at(v1alpha1, 'status.outputs').type).toBe('string');
    expect(at(v1alpha1, 'spec.type').enum).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// Field-for-field comparison with upstream's CRDs (facts only, see testdata/upstream-crd-facts.json).

describe('compatibility with upstream pulumi.com CRDs', () => {
  const facts = obj(JSON.parse(readRepoFile('schemas/testdata/upstream-crd-facts.json')));
  const crds: Obj = {
    stacks: loadYaml(`manifests/crds/${STACK_CRD_FILE}`),
    programs: loadYaml(`manifests/crds/${PROGRAM_CRD_FILE}`),
    workspaces: loadYaml(`manifests/crds/${WORKSPACE_CRD_FILE}`),
    updates: loadYaml(`manifests/crds/${UPDATE_CRD_FILE}`),
  };
  /** Where each CRD embeds a PodSpec, below which only top-level fields are compared. */
  const POD_SPECS: Record<string, string> = {
    stacks: '.spec.workspaceTemplate.spec.podTemplate.spec.',
    workspaces: '.spec.podTemplate.spec.',
  };
  const COMPARED = [
    'type',
    'format',
    'enum',
    'required',
    'pattern',
    'minLength',
    'maxLength',
    'minimum',
    'x-kubernetes-preserve-unknown-fields',
    'x-kubernetes-int-or-string',
    'x-kubernetes-list-type',
    'x-kubernetes-list-map-keys',
    'x-kubernetes-map-type',
    'x-kubernetes-validations',
  ];
  /** Where we differ on purpose: path -> keywords -> why. */
  const DEVIATIONS: Record<string, Record<string, string>> = {
    'stacks/v1 .': { required: 'a Stack without spec is rejected up front instead of failing later' },
    'stacks/v1alpha1 .': {
      required: 'as v1',
      'x-kubernetes-validations': 'the 42-character name rule applies to v1alpha1 writes too',
    },
    'stacks/v1 .spec.workspaceTemplate.spec.podTemplate.spec': {
      'x-kubernetes-preserve-unknown-fields':
        'the PodSpec is described at the top level only; the API server validates the pod',
    },
    'stacks/v1 .spec.config': {
      type: 'a map (values stay schemaless), which is what the controller can decode',
      'x-kubernetes-preserve-unknown-fields': 'moved to the map values',
    },
    // Required names that cannot work empty: refused when applied rather than failing later.
    ...Object.fromEntries(
      [
        '.spec.stack',
        '.spec.programRef.name',
        '.spec.fluxSource.sourceRef.apiVersion',
        '.spec.fluxSource.sourceRef.kind',
        '.spec.fluxSource.sourceRef.name',
        '.spec.prerequisites[].name',
        '.spec.configRef{}.name',
      ].map((path) => [`stacks/v1 ${path}`, { minLength: 'an empty name is refused when applied' }]),
    ),
    'stacks/v1 .spec.workspaceTemplate.spec.imagePullPolicy': {
      enum: 'the pull policies Kubernetes knows; another is refused when applied, not by the pod later',
    },
    'workspaces/v1alpha1 .spec.podTemplate.spec': {
      'x-kubernetes-preserve-unknown-fields': 'as for the Stack: the PodSpec is described at the top level only',
    },
    'workspaces/v1alpha1 .spec.imagePullPolicy': { enum: 'as for the Stack' },
  };
  /** Fields of ours that upstream lacks: in every CRD version, and in some. */
  const ADDED = [/^\.spec\.config\{\}$/, /^\.status\.conditions/];
  const ADDED_TO: Record<string, RegExp[]> = {
    'stacks/v1': [
      /^\.spec\.updateTemplate\.spec\.activeDeadlineSeconds$/, // bounded operations
      /^\.(spec|status)\.outputsTo(\.|\[|$)/, // outputs to a Secret or ConfigMap (docs/outputs-to.md)
      /^\.spec\.driftDetection(\.|$)/, // drift detection (docs/drift-detection.md)
      /^\.status\.lastDriftCheck(\.|\[|$)/,
      /^\.spec\.approval(\.|$)/, // the approval gate (docs/approval.md)
      /^\.status\.plan(\.|$)/,
      /^\.spec\.selfHealing$/, // self-healing (docs/self-healing.md)
      /^\.status\.childDigests(\{\})?$/, // how children are kept (docs/design.md#how-children-are-kept)
      /^\.status\.stalls$/, // the count that names stall events (docs/design.md#events)
    ],
    'programs/v1': [/^\.status\.childDigests(\{\})?$/],
    'workspaces/v1alpha1': [/^\.status\.childDigests(\{\})?$/, /^\.status\.stalls$/],
    'stacks/v1alpha1': [/^\.spec(\.|$)/, /^\.status\.plan(\.|$)/], // upstream's v1alpha1 spec is v1's, which is compared
    'updates/v1alpha1': [
      /^\.status\.(outputValues(\{\})?|outputsOmitted|outputsTotal)$/, // this operator's extension
      /^\.spec\.activeDeadlineSeconds$/, // bounded operations (docs/bounded-operations.md)
      /^\.status\.outputsTo(\.|$)/, // outputs to a Secret or ConfigMap (docs/outputs-to.md)
      /^\.spec\.previewOnly$/, // drift detection (docs/drift-detection.md)
      /^\.status\.changedResource(s|Urns(\[\])?)$/,
      /^\.spec\.(savePlan|plan)$/, // update plans of the approval gate (docs/approval.md)
      /^\.status\.resourceChanges(\{\})?$/,
      /^\.spec\.selfHealing$/, // self-healing (docs/self-healing.md)
    ],
  };

  function flatten(schema: Obj): Map<string, Obj> {
    const out = new Map<string, Obj>();
    const walk = (node: Obj, p: string): void => {
      out.set(p === '' ? '.' : p, node);
      if (isObj(node.properties)) for (const [k, v] of Object.entries(node.properties)) walk(obj(v), `${p}.${k}`);
      if (isObj(node.items)) walk(node.items, `${p}[]`);
      if (isObj(node.additionalProperties)) walk(node.additionalProperties, `${p}{}`);
    };
    walk(schema, '');
    return out;
  }

  it('names, scope, versions, subresources and printer columns match', () => {
    const sortKeys = (v: unknown): unknown =>
      Array.isArray(v)
        ? v.map(sortKeys)
        : isObj(v)
          ? Object.fromEntries(
              Object.keys(v)
                .sort()
                .map((k) => [k, sortKeys(v[k])]),
            )
          : v;
    for (const [plural, expected] of Object.entries(obj(facts.crds))) {
      const ours = obj(crds[plural]);
      const spec = obj(ours.spec);
      const want = obj(expected);
      expect(spec.names).toEqual(want.names);
      expect(spec.scope).toEqual(want.scope);
      const versions = crdVersions(ours).map((v) => ({
        name: v.name,
        served: v.served,
        storage: v.storage,
        subresources: v.subresources,
        additionalPrinterColumns: v.additionalPrinterColumns ?? [],
      }));
      expect(sortKeys(versions)).toEqual(sortKeys(want.versions));
    }
  });

  it('every upstream field exists with the same type, format, enum, required fields and validations', () => {
    const problems: string[] = [];
    for (const [key, fields] of Object.entries(obj(facts.fields))) {
      const [plural, versionName] = key.split('/');
      const version = crdVersions(obj(crds[plural ?? ''])).find((v) => v.name === versionName);
      const ours = flatten(openAPI(obj(version, key)));
      const podSpec = POD_SPECS[plural ?? ''];
      const inPodSpec = (fieldPath: string): boolean => podSpec !== undefined && fieldPath.startsWith(podSpec);
      for (const [fieldPath, upstreamValue] of Object.entries(obj(fields))) {
        const upstream = obj(upstreamValue);
        const mine = ours.get(fieldPath);
        if (mine === undefined) {
          problems.push(`${key} ${fieldPath}: missing`);
          continue;
        }
        // Below the PodSpec we describe only top-level fields and keep the rest as given.
        const keywords = inPodSpec(fieldPath) ? ['type', 'format'] : COMPARED;
        for (const keyword of keywords) {
          if (DEVIATIONS[`${key} ${fieldPath}`]?.[keyword]) continue;
          const a = JSON.stringify(upstream[keyword]);
          const b = JSON.stringify(
            keyword === 'required' && isList(mine.required) ? [...mine.required].sort() : mine[keyword],
          );
          if (a !== b) problems.push(`${key} ${fieldPath}: ${keyword} upstream ${a ?? '-'} ours ${b ?? '-'}`);
        }
      }
      // And we add nothing upstream does not have, except:
      for (const fieldPath of ours.keys()) {
        if (inPodSpec(fieldPath)) continue;
        const added = [...ADDED, ...(ADDED_TO[key] ?? [])];
        if (!(fieldPath in obj(fields)) && !added.some((re) => re.test(fieldPath)))
          problems.push(`${key} ${fieldPath}: not upstream`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('the documented deviations are still real', () => {
    const v1 = flatten(openAPI(crdVersions(obj(crds.stacks))[0] ?? {}));
    expect(v1.get('.')?.required).toEqual(['spec']);
    expect(v1.get('.spec.config')?.type).toBe('object');
    expect(v1.get('.spec.stack')?.minLength).toBe(1);
    expect(v1.get('.spec.workspaceTemplate.spec.imagePullPolicy')?.enum).toEqual(['Always', 'IfNotPresent', 'Never']);
    const workspace = flatten(openAPI(crdVersions(obj(crds.workspaces))[0] ?? {}));
    expect(workspace.get('.spec.imagePullPolicy')?.enum).toEqual(['Always', 'IfNotPresent', 'Never']);
    expect(workspace.get('.spec.podTemplate.spec')?.['x-kubernetes-preserve-unknown-fields']).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------

describe('JSON Schemas', () => {
  it('compile in ajv strict mode', () => {
    const ajv = createAjv();
    for (const [, schema] of ALL_SCHEMAS) expect(ajv.getSchema(String(schema.$id))).toBeDefined();
    const responses = ['CompositeSyncResponse', 'CustomizeResponse', 'DecoratorSyncResponse'];
    for (const name of responses)
      expect(ajv.getSchema(`${String(metacontrollerSchema.$id)}#/$defs/${name}`)).toBeDefined();
  });

  it.each(ALL_SCHEMAS)('%s: every object with properties is a titled definition', (_name, schema) => {
    const problems: string[] = [];
    const walk = (node: unknown, where: string, isDefRoot: boolean): void => {
      if (!isObj(node)) return;
      if (isObj(node.properties) && !isDefRoot && node.$ref === undefined) problems.push(where);
      if (isDefRoot && typeof node.title !== 'string') problems.push(`${where}: no title`);
      if (!isDefRoot && node.title !== undefined) problems.push(`${where}: title outside $defs`);
      if (isObj(node.properties)) for (const [k, v] of Object.entries(node.properties)) walk(v, `${where}.${k}`, false);
      if (node.items !== undefined) walk(node.items, `${where}[]`, false);
      if (isObj(node.additionalProperties)) walk(node.additionalProperties, `${where}{}`, false);
      if (Array.isArray(node.anyOf)) node.anyOf.forEach((v, i) => walk(v, `${where}|${i}`, false));
    };
    walk(schema, '#', true);
    for (const [name, def] of Object.entries(defsOf(schema))) walk(def, `#/$defs/${name}`, true);
    expect(problems).toEqual([]);
  });

  it('every property of the API schemas has a description', () => {
    const missing: string[] = [];
    for (const [name, schema] of API_SCHEMAS) {
      const walk = (node: unknown, where: string): void => {
        if (!isObj(node)) return;
        if (isObj(node.properties)) {
          for (const [k, v] of Object.entries(node.properties)) {
            const child = obj(v);
            const described =
              typeof child.description === 'string' ||
              (child.$ref !== undefined && typeof refTarget(schema, show(child.$ref)).description === 'string');
            if (!described) missing.push(`${name} ${where}.${k}`);
          }
        }
      };
      walk(schema, '#');
      for (const [defName, def] of Object.entries(defsOf(schema))) walk(def, `$defs/${defName}`);
    }
    expect(missing).toEqual([]);
  });
});

/**
 * The (definition title, property) pairs reachable from a schema's root, and those an example sets.
 * Definitions in `skip` (stock Kubernetes types) are neither required nor walked into.
 */
function fieldCoverage(
  schema: JsonSchema,
  example: unknown,
  skip: Set<string>,
): { reachable: Set<string>; used: Set<string> } {
  const reachable = new Set<string>();
  const seenDefs = new Set<string>();
  const collect = (node: unknown, owner: string): void => {
    if (!isObj(node)) return;
    if (typeof node.$ref === 'string') {
      const def = refTarget(schema, node.$ref);
      const title = String(def.title);
      if (skip.has(title) || seenDefs.has(title)) return;
      seenDefs.add(title);
      collect(def, title);
      return;
    }
    if (isObj(node.properties)) {
      for (const [k, v] of Object.entries(node.properties)) {
        reachable.add(`${owner}.${k}`);
        collect(v, owner);
      }
    }
    if (node.items !== undefined) collect(node.items, owner);
    if (isObj(node.additionalProperties)) collect(node.additionalProperties, owner);
  };
  collect(schema, String(schema.title));

  const used = new Set<string>();
  const visit = (node: unknown, value: unknown, owner: string): void => {
    if (!isObj(node)) return;
    if (typeof node.$ref === 'string') {
      const def = refTarget(schema, node.$ref);
      if (skip.has(String(def.title))) return;
      visit(def, value, String(def.title));
      return;
    }
    if (isObj(value)) {
      const properties = isObj(node.properties) ? node.properties : {};
      for (const [k, v] of Object.entries(value)) {
        if (k in properties) {
          used.add(`${owner}.${k}`);
          visit(properties[k], v, owner);
        } else if (isObj(node.additionalProperties)) {
          visit(node.additionalProperties, v, owner);
        }
      }
    }
    if (Array.isArray(value) && node.items !== undefined) for (const v of value) visit(node.items, v, owner);
  };
  visit(schema, example, String(schema.title));
  return { reachable, used };
}

const KUBERNETES_CORE = new Set([
  'ObjectMeta',
  'OwnerReference',
  'PodSpec',
  'Container',
  'Volume',
  'VolumeMount',
  'LocalObjectReference',
  'EnvVar',
  'EnvVarSource',
  'SecretKeySelector',
  'ConfigMapKeySelector',
  'ObjectFieldSelector',
  'ResourceFieldSelector',
  'FileKeySelector',
  'EnvFromSource',
  'ConfigMapEnvSource',
  'SecretEnvSource',
  'ResourceRequirements',
  'ResourceClaim',
  'Quantity',
]);

describe('Stack schema', () => {
  const example = loadYaml('schemas/testdata/stack-full.yaml');

  it('accepts an upstream-style Stack that sets every field', () => {
    expectValid(validateStack(example));
  });

  it('the example covers every Stack field (stock Kubernetes types aside)', () => {
    const { reachable, used } = fieldCoverage(stackSchema, example, KUBERNETES_CORE);
    expect([...reachable].filter((f) => !used.has(f))).toEqual([]);
    expect(reachable.size).toBeGreaterThan(150);
  });

  it('accepts every Stack manifest in examples/', () => {
    const dir = path.join(root, 'examples');
    const files = fs.existsSync(dir) ? fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }) : [];
    for (const file of files.filter((f) => f.endsWith('.yaml') || f.endsWith('.yml'))) {
      for (const doc of yaml.loadAll(fs.readFileSync(path.join(dir, file), 'utf8'))) {
        if (isObj(doc) && doc.kind === 'Stack' && String(doc.apiVersion).startsWith('pulumi.com/')) {
          const result = validateStack(doc);
          if (!result.ok) throw new Error(`examples/${file}: ${formatErrors(result.errors)}`);
        }
      }
    }
  });

  it('rejects a Stack without spec.stack, naming the field', () => {
    const stack = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: { name: 's' },
      spec: { projectRepo: 'https://x' },
    };
    expect(errorsOf(validateStack(stack))).toEqual([{ path: 'spec.stack', message: 'is required' }]);
  });

  it('rejects a Stack without spec', () => {
    expect(errorsOf(validateStack({ metadata: { name: 's' } }))).toEqual([{ path: 'spec', message: 'is required' }]);
  });

  it('names nested fields, map keys and list indexes in errors', () => {
    const stack = {
      metadata: { name: 'x'.repeat(43) },
      spec: {
        stack: 'dev',
        envRefs: { FOO: { literal: { value: 'bar' } } },
        prerequisites: [{ name: 'a' }, { requirement: {} }],
        workspaceReclaimPolicy: 'Keep',
        resyncFrequencySeconds: 'often',
        refresh: 'yes',
        bogus: true,
      },
    };
    const errors = errorsOf(validateStack(stack));
    expect(errors).toEqual(
      expect.arrayContaining([
        { path: 'metadata.name', message: 'must NOT have more than 42 characters' },
        { path: 'spec.envRefs.FOO.type', message: 'is required' },
        { path: 'spec.prerequisites[1].name', message: 'is required' },
        { path: 'spec.workspaceReclaimPolicy', message: 'must be one of "Retain", "Delete"' },
        { path: 'spec.resyncFrequencySeconds', message: 'must be integer' },
        { path: 'spec.refresh', message: 'must be boolean' },
        { path: 'spec.bogus', message: 'is not a known field' },
      ]),
    );
    expect(errors).toHaveLength(7);
  });

  it('accepts ResourceRef types beyond the known ones (the hooks reject them with a clear message)', () => {
    expectValid(validateStack({ metadata: { name: 's' }, spec: { stack: 'dev', envRefs: { A: { type: 'Vault' } } } }));
  });

  it('keeps pod spec fields it does not describe', () => {
    const stack = {
      metadata: { name: 's' },
      spec: {
        stack: 'dev',
        workspaceTemplate: {
          spec: { podTemplate: { spec: { containers: [{ name: 'pulumi', futureField: 1 }], futureSpecField: {} } } },
        },
      },
    };
    expectValid(validateStack(stack));
  });

  it('checks quantities', () => {
    const withMemory = (memory: unknown) => ({
      metadata: { name: 's' },
      spec: { stack: 'dev', workspaceTemplate: { spec: { resources: { requests: { memory } } } } },
    });
    expectValid(validateStack(withMemory('512Mi')));
    expectValid(validateStack(withMemory(1)));
    expect(errorsOf(validateStack(withMemory('lots'))).map((e) => e.path)).toContain(
      'spec.workspaceTemplate.spec.resources.requests.memory',
    );
  });
});

describe('Program schema', () => {
  const example = loadYaml('schemas/testdata/program-full.yaml');

  it('accepts a Program that sets every field', () => {
    expectValid(validateProgram(example));
  });

  it('the example covers every Program field', () => {
    const { reachable, used } = fieldCoverage(programSchema, example, new Set(['ObjectMeta', 'OwnerReference']));
    expect([...reachable].filter((f) => !used.has(f))).toEqual([]);
  });

  it('rejects a resource with an empty type', () => {
    const program = { metadata: { name: 'p' }, program: { resources: { site: { type: '' } } } };
    expect(errorsOf(validateProgram(program))).toEqual([
      { path: 'program.resources.site.type', message: 'must NOT have fewer than 1 characters' },
    ]);
  });

  it('rejects a get without id, an unknown configuration type and a bad digest', () => {
    const program = {
      metadata: { name: 'p' },
      program: { configuration: { a: { type: 'Boolean' } }, resources: { r: { type: 't', get: {} } } },
      status: {
        artifact: { path: 'p', url: 'u', revision: '1', lastUpdateTime: '2024-01-01T00:00:00Z', digest: 'nope' },
      },
    };
    expect(
      errorsOf(validateProgram(program))
        .map((e) => e.path)
        .sort(),
    ).toEqual(['program.configuration.a.type', 'program.resources.r.get.id', 'status.artifact.digest']);
  });
});

describe('Workspace schema', () => {
  const example = loadYaml('schemas/testdata/workspace-full.yaml');
  const workspace = (spec: Obj): Obj => ({ metadata: { name: 'w' }, spec });

  it('accepts a Workspace that sets every field', () => {
    expectValid(validateWorkspace(example));
  });

  it('the example covers every Workspace field (stock Kubernetes types aside)', () => {
    const { reachable, used } = fieldCoverage(workspaceSchema, example, KUBERNETES_CORE);
    expect([...reachable].filter((f) => !used.has(f))).toEqual([]);
    expect(reachable.size).toBeGreaterThan(60);
  });

  it("uses the Stack schema's definitions of the shared types, not copies", () => {
    const own = obj(
      (JSON.parse(readRepoFile('schemas/workspace.schema.json')) as Obj).$defs,
      'workspace.schema.json $defs',
    );
    for (const shared of [
      'ObjectMeta',
      'PodSpec',
      'EnvVar',
      'EnvFromSource',
      'ResourceRequirements',
      'SecretKeySelector',
    ])
      expect(Object.keys(own)).not.toContain(shared);
    expect(defsOf(workspaceSchema).PodSpec).toEqual(defsOf(stackSchema).PodSpec);
    expect(defsOf(workspaceSchema).EmbeddedPodTemplate).toEqual(defsOf(stackSchema).EmbeddedPodTemplate);
  });

  it('rejects stacks without name, config items without key, incomplete GitHub App credentials', () => {
    const errors = errorsOf(
      validateWorkspace(
        workspace({
          git: { url: 'https://x', auth: { githubApp: { appID: { key: 'id' } } } },
          stacks: [{ config: [{ value: 1 }] }],
          imagePullPolicy: 'Sometimes',
          projectInfo: { name: 'p' },
          bogus: 1,
        }),
      ),
    );
    expect(errors).toEqual(
      expect.arrayContaining([
        { path: 'spec.stacks[0].name', message: 'is required' },
        { path: 'spec.stacks[0].config[0].key', message: 'is required' },
        { path: 'spec.git.auth.githubApp.installationID', message: 'is required' },
        { path: 'spec.git.auth.githubApp.privateKey', message: 'is required' },
        { path: 'spec.imagePullPolicy', message: 'must be one of "Always", "IfNotPresent", "Never"' },
        { path: 'spec.projectInfo.runtime', message: 'is required' },
        { path: 'spec.bogus', message: 'is not a known field' },
      ]),
    );
    expect(errors).toHaveLength(7);
  });

  it('keeps structured config values and pod spec fields it does not describe', () => {
    expectValid(
      validateWorkspace(
        workspace({
          stacks: [{ name: 'dev', config: [{ key: 'a', value: { nested: [1, true, null] } }] }],
          podTemplate: { spec: { containers: [{ name: 'pulumi', futureField: 1 }], futureSpecField: {} } },
        }),
      ),
    );
  });
});

describe('Update schema', () => {
  const example = loadYaml('schemas/testdata/update-full.yaml');

  it('accepts an Update that sets every field', () => {
    expectValid(validateUpdate(example));
  });

  it('the example covers every Update field', () => {
    const { reachable, used } = fieldCoverage(updateSchema, example, KUBERNETES_CORE);
    expect([...reachable].filter((f) => !used.has(f))).toEqual([]);
  });

  it('accepts any operation type (upstream has no enum) and any output values', () => {
    const update = { metadata: { name: 'u' }, spec: { type: 'import' }, status: { outputValues: { a: { b: [1] } } } };
    expectValid(validateUpdate(update));
  });

  it('rejects wrong types, bad times and unknown fields, naming them', () => {
    const update = {
      metadata: { name: 'u' },
      spec: { parallel: 'many', replace: 'urn', remove: 'yes', extra: true },
      status: { startTime: 'yesterday', outputsTotal: -1, conditions: [{ type: 'Complete', status: 'Maybe' }] },
    };
    const errors = errorsOf(validateUpdate(update));
    expect(errors).toEqual(
      expect.arrayContaining([
        { path: 'spec.parallel', message: 'must be integer' },
        { path: 'spec.replace', message: 'must be array' },
        { path: 'spec.remove', message: 'must be boolean' },
        { path: 'spec.extra', message: 'is not a known field' },
        { path: 'status.startTime', message: 'must match format "date-time"' },
        { path: 'status.outputsTotal', message: 'must be >= 0' },
        { path: 'status.conditions[0].status', message: 'must be one of "True", "False", "Unknown"' },
        { path: 'status.conditions[0].reason', message: 'is required' },
      ]),
    );
  });
});

describe('Metacontroller request schemas', () => {
  const stack = {
    apiVersion: 'pulumi.com/v1',
    kind: 'Stack',
    metadata: { name: 's', namespace: 'default', uid: 'u1' },
    spec: { stack: 'dev' },
  };

  it('accept a realistic sync request, with extra fields', () => {
    expectValid(
      validateCompositeSyncRequest({
        controller: {
          apiVersion: 'metacontroller.k8s.io/v1alpha1',
          kind: 'CompositeController',
          metadata: { name: 'stacks' },
        },
        parent: stack,
        children: {
          'StatefulSet.apps/v1': {
            'default/s-workspace': {
              apiVersion: 'apps/v1',
              kind: 'StatefulSet',
              metadata: { name: 's-workspace' },
              spec: {},
            },
          },
          'Job.batch/v1': {},
        },
        related: {},
        finalizing: false,
        somethingNew: 1,
      }),
    );
    expectValid(validateCompositeSyncRequest({ parent: stack }));
  });

  it('reject a request without parent, naming the field', () => {
    expect(errorsOf(validateCompositeSyncRequest({ children: {} }))).toEqual([
      { path: 'parent', message: 'is required' },
    ]);
    expect(errorsOf(validateCompositeSyncRequest('nope'))).toEqual([{ path: '(root)', message: 'must be object' }]);
  });

  it('reject malformed parents, children and flags', () => {
    const errors = errorsOf(
      validateCompositeSyncRequest({
        parent: { apiVersion: 'pulumi.com/v1', kind: 'Stack', metadata: { namespace: 'default' } },
        children: { 'Job.batch/v1': { 'default/j': { kind: 'Job' } }, 'Service.v1': [] },
        finalizing: 'no',
      }),
    );
    expect(errors).toEqual(
      expect.arrayContaining([
        { path: 'parent.metadata.name', message: 'is required' },
        { path: 'children.Job.batch/v1.default/j.apiVersion', message: 'is required' },
        { path: 'children.Job.batch/v1.default/j.metadata', message: 'is required' },
        { path: 'children.Service.v1', message: 'must be object' },
        { path: 'finalizing', message: 'must be boolean' },
      ]),
    );
  });

  it('customize and decorator requests', () => {
    expectValid(validateCustomizeRequest({ controller: {}, parent: stack }));
    expect(errorsOf(validateCustomizeRequest({ controller: {} }))).toEqual([
      { path: 'parent', message: 'is required' },
    ]);
    const program = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: { name: 'p', namespace: 'default' },
      program: {},
    };
    expectValid(
      validateDecoratorSyncRequest({
        controller: {},
        object: program,
        attachments: { 'ConfigMap.v1': {} },
        related: {},
        finalizing: false,
      }),
    );
    expect(errorsOf(validateDecoratorSyncRequest({ parent: program }))).toEqual([
      { path: 'object', message: 'is required' },
    ]);
  });

  it('responses are typed and checkable', () => {
    const ajv = createAjv();
    const id = String(metacontrollerSchema.$id);
    const composite = ajv.getSchema(`${id}#/$defs/CompositeSyncResponse`);
    expect(composite?.({ status: { observedGeneration: 1 }, children: [stack], resyncAfterSeconds: 30 })).toBe(true);
    expect(composite?.({ status: null, children: [], extra: 1 })).toBe(false);
    const customize = ajv.getSchema(`${id}#/$defs/CustomizeResponse`);
    expect(
      customize?.({
        relatedResources: [{ apiVersion: 'v1', resource: 'secrets', namespace: 'default', names: ['a'] }],
      }),
    ).toBe(true);
    const decorator = ajv.getSchema(`${id}#/$defs/DecoratorSyncResponse`);
    expect(decorator?.({ labels: { a: null }, status: { observedGeneration: 1 }, attachments: [] })).toBe(true);
  });
});
