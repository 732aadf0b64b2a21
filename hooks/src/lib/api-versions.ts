/** The API versions of the operator's kinds: one constant each. */

/** Stack and Program. */
export const PULUMI_API_VERSION = 'pulumi.com/v1';

/** Workspace and Update. */
export const AUTO_API_VERSION = 'auto.pulumi.com/v1alpha1';
