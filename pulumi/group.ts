/** The API group `pulumi.com`, by version (crd2pulumi names the group's module after its first label). */
export * as v1 from '../schemas/generated/pulumi-v1';
