/**
 * Typed Stack and Program resources for TypeScript Pulumi programs, laid out as crd2pulumi lays out
 * upstream's CRDs: `pulumi.v1.Stack`, `pulumi.v1.Program` (API group `pulumi.com`, version `v1`).
 *
 *   import * as crds from 'pulumi-metacontroller-operator/pulumi';
 *   new crds.pulumi.v1.Stack('app', { spec: { stack: 'dev', projectRepo: '...', branch: 'refs/heads/main' } });
 *
 * The classes are generated from schemas/ (schemas/pulumi-classes.ts); see docs/install-with-pulumi.md.
 */
export * as pulumi from './group';
