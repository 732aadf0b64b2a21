/**
 * Generated from schemas/*.schema.json by `npm run generate`. Do not edit.
 */

/**
 * A Kubernetes quantity: a number, optionally with a suffix such as `m`, `Ki`, `Mi`, `Gi` or `k`, `M`, `G`.
 */
export type Quantity = number | string;

/**
 * A Stack deploys a Pulumi stack from a git repository, a Flux source or a Program, and keeps it up to date. Its status reports the last operation, the stack outputs and kstatus-style conditions.
 */
export interface Stack {
  /**
   * API version: `pulumi.com/v1`.
   */
  apiVersion?: string;
  /**
   * Kind: `Stack`.
   */
  kind?: string;
  /**
   * Standard object metadata. The name may have at most 42 characters, since the names of the objects created for the Stack derive from it.
   */
  metadata: ObjectMeta;
  spec: StackSpec;
  status?: StackStatus;
}

/**
 * Standard Kubernetes object metadata. Only the fields used by the operator are listed; others are allowed.
 */
export interface ObjectMeta {
  /**
   * Name of the object, unique within its namespace.
   */
  name: string;
  /**
   * Prefix the API server uses to generate a name when `name` is empty.
   */
  generateName?: string;
  /**
   * Namespace of the object.
   */
  namespace?: string;
  /**
   * Unique ID the API server assigned to the object.
   */
  uid?: string;
  /**
   * Opaque version of the object, changed by every write.
   */
  resourceVersion?: string;
  /**
   * Incremented by the API server on every change to the desired state (spec).
   */
  generation?: number;
  /**
   * When the object was created.
   */
  creationTimestamp?: string;
  /**
   * Set when the object has been asked to be deleted and is waiting for its finalizers.
   */
  deletionTimestamp?: string;
  /**
   * Labels of the object.
   */
  labels?: {
    [k: string]: string;
  };
  /**
   * Annotations of the object.
   */
  annotations?: {
    [k: string]: string;
  };
  /**
   * Finalizers that must be removed before the object is deleted.
   */
  finalizers?: string[];
  /**
   * Objects this object belongs to.
   */
  ownerReferences?: OwnerReference[];
}

/**
 * A reference to an owning object.
 */
export interface OwnerReference {
  /**
   * API version of the owner.
   */
  apiVersion: string;
  /**
   * Kind of the owner.
   */
  kind: string;
  /**
   * Name of the owner.
   */
  name: string;
  /**
   * UID of the owner.
   */
  uid: string;
  /**
   * Whether the owner is the managing controller.
   */
  controller?: boolean;
  /**
   * Whether foreground deletion of the owner waits for this object.
   */
  blockOwnerDeletion?: boolean;
}

/**
 * Desired state of a Stack: which Pulumi stack, where its program comes from (exactly one of a git repository, `fluxSource` or `programRef`), its configuration and environment, and when and how to run operations.
 */
export interface StackSpec {
  /**
   * The Pulumi stack to deploy: `stack`, `org/stack` or `org/project/stack`. It is selected, or created when missing unless `useLocalStackOnly` is set.
   */
  stack: string;
  /**
   * State backend URL, for example `s3://my-bucket` or `gs://my-bucket`; passed to Pulumi as `PULUMI_BACKEND_URL`. Leave empty to use Pulumi Cloud.
   */
  backend?: string;
  /**
   * @deprecated
   * Deprecated: set `envRefs.PULUMI_ACCESS_TOKEN` to a `Secret` reference instead. Name of a Secret in the Stack's namespace whose `accessToken` key is passed to Pulumi as `PULUMI_ACCESS_TOKEN`.
   */
  accessTokenSecret?: string;
  /**
   * @deprecated
   * Deprecated: use `envRefs` (one variable at a time) or `workspaceTemplate.spec.envFrom` instead. Names of ConfigMaps in the Stack's namespace; every key of each becomes an environment variable of the workspace.
   */
  envs?: string[];
  /**
   * @deprecated
   * Deprecated: use `envRefs` (one variable at a time) or `workspaceTemplate.spec.envFrom` instead. Names of Secrets in the Stack's namespace; every key of each becomes an environment variable of the workspace.
   */
  envSecrets?: string[];
  /**
   * Environment variables for Pulumi, keyed by variable name (for example `PULUMI_ACCESS_TOKEN` or `AWS_ACCESS_KEY_ID`). Each value is a `Literal` (given inline) or a `Secret` reference (a key of a Secret in the Stack's namespace, passed to the pod by reference).
   */
  envRefs?: {
    [k: string]: ResourceRef;
  };
  /**
   * Stack configuration, keyed by config key (for example `aws:region` or `myproject:replicas`). A value may be a string or structured data (number, boolean, list or object). Keys not set here keep the values checked in with the project.
   */
  config?: {
    [k: string]: unknown;
  };
  /**
   * Stack configuration read from ConfigMaps in the Stack's namespace, keyed by config key.
   */
  configRef?: {
    [k: string]: ConfigMapRef;
  };
  /**
   * @deprecated
   * Deprecated: use `secretsRef` instead, which keeps the value out of the Stack object. Secret stack configuration given inline, keyed by config key; the values are stored encrypted in the stack.
   */
  secrets?: {
    [k: string]: string;
  };
  /**
   * Secret stack configuration, keyed by config key. Each value is a `Literal` or a `Secret` reference; Secret values reach the workspace as mounted files and are stored encrypted in the stack.
   */
  secretsRef?: {
    [k: string]: ResourceRef;
  };
  /**
   * Secrets provider used when the stack is created, for example `passphrase` or `awskms://alias/my-key`. It does not change the provider of an existing stack.
   */
  secretsProvider?: string;
  /**
   * Git source: clone URL of the repository holding the Pulumi project (https or ssh). Requires `commit` or `branch`.
   */
  projectRepo?: string;
  /**
   * @deprecated
   * Deprecated: use `gitAuth` instead. Git source: name of a Secret in the Stack's namespace holding git credentials, read in this order: `sshPrivateKey` (with optional `password`), `accessToken`, or `username` with `password`.
   */
  gitAuthSecret?: string;
  /**
   * Git source: credentials for a private repository.
   */
  gitAuth?: GitAuthConfig;
  /**
   * Git source: directory in the repository that holds `Pulumi.yaml`. Defaults to the repository root.
   */
  repoDir?: string;
  /**
   * Git source: commit SHA to deploy. Set either `commit` or `branch`, not both.
   */
  commit?: string;
  /**
   * Git source: branch to follow, short (`main`) or full (`refs/heads/main`). The branch is polled every `resyncFrequencySeconds` and each new commit is deployed. Set either `commit` or `branch`, not both.
   */
  branch?: string;
  /**
   * Git source: clone only the commit being deployed instead of the whole history.
   */
  shallow?: boolean;
  /**
   * Take the project from the artifact of a Flux source object (GitRepository, OCIRepository or Bucket) in the Stack's namespace.
   */
  fluxSource?: FluxSource;
  /**
   * Take the project from a Program object in the Stack's namespace.
   */
  programRef?: ProgramReference;
  /**
   * Resource URNs to limit `up` and `preview` to. Other resources are left as they are.
   */
  targets?: string[];
  /**
   * With `targets`: also update the resources that depend on the targeted ones.
   */
  targetDependents?: boolean;
  /**
   * Stacks in the same namespace that must have been deployed successfully before this Stack runs an operation.
   */
  prerequisites?: PrerequisiteRef[];
  /**
   * Run `up` again every `resyncFrequencySeconds` even when the source revision is unchanged, to undo drift in the deployed resources.
   */
  continueResyncOnCommitMatch?: boolean;
  /**
   * Refresh the stack's state from the actual resources before each `up` or `preview`.
   */
  refresh?: boolean;
  /**
   * @deprecated
   * Deprecated: has no effect. Accepted so that existing manifests stay valid.
   */
  expectNoRefreshChanges?: boolean;
  /**
   * When the Stack is deleted, first destroy the stack's resources. The Stack object remains until the destroy has succeeded.
   */
  destroyOnFinalize?: boolean;
  /**
   * Run the program during `destroy`, for programs whose providers are configured in code.
   */
  runProgram?: boolean;
  /**
   * @deprecated
   * Deprecated: has no effect; a failed update is retried with backoff anyway. Accepted so that existing manifests stay valid.
   */
  retryOnUpdateConflict?: boolean;
  /**
   * Fail instead of creating the stack when it does not exist in the backend.
   */
  useLocalStackOnly?: boolean;
  /**
   * Seconds between checks of a followed `branch` for new commits, and between re-runs with `continueResyncOnCommitMatch`. Values below 60, and no value, mean 60.
   */
  resyncFrequencySeconds?: number;
  /**
   * Service account of the workspace pod. Defaults to the namespace's `default` service account. `workspaceTemplate.spec.serviceAccountName` takes precedence.
   */
  serviceAccountName?: string;
  /**
   * Customizes the workspace, the pod in which Pulumi runs: image, resources, environment, security profile, log level, extra volumes, init containers and sidecars. It is merged onto the generated workspace like a strategic merge patch (containers, init containers, volumes and env vars merge by name).
   */
  workspaceTemplate?: WorkspaceTemplate;
  /**
   * What happens to the workspace after a successful operation: `Retain` keeps it for the next operation; `Delete` removes it, and it is created again when needed (hibernation: the Stack holds no pod at rest). Unset: the operator's default (WORKSPACE_RECLAIM_DEFAULT), `Retain` unless set otherwise.
   */
  workspaceReclaimPolicy?: "Retain" | "Delete";
  /**
   * Pulumi ESC environments to add to the stack, in order.
   */
  environment?: string[];
  /**
   * Customizes every operation the Stack runs (up, preview, refresh and destroy), for example `spec.ttlAfterCompleted` or `spec.parallel`.
   */
  updateTemplate?: UpdateTemplate;
  /**
   * This operator's addition: heal operations that were interrupted (the workspace pod deleted or evicted, the node lost, the operation's Job deleted). Before each operation the workspace removes a lock that an interrupted operation of its own left in the backend (never one of another host or of a `pulumi` process still running) and resolves the pending operations it left in the state; an interrupted operation counts as a failed attempt and is retried with the usual backoff, and the Reconciling condition says it was interrupted. Without it, nothing changes: a stale lock makes every retry fail until `pulumi cancel`. See docs/self-healing.md.
   */
  selfHealing?: boolean;
  /**
   * Longest wait, in seconds, between retries of a failed operation. Retries wait 10 s, 30 s, 90 s and so on, up to this limit. No value, or 0, means 24 hours.
   */
  retryMaxBackoffDurationSeconds?: number;
  /**
   * Run `preview` instead of `up`: report what would change without changing anything. A Stack in preview mode never destroys.
   */
  preview?: boolean;
  /**
   * This operator's addition: after each successful `up`, write the stack outputs to a Secret or ConfigMap of this name in the Stack's namespace, owned by the Stack, for pods to mount or read through env. An existing object of that name that is not this Stack's is never overwritten: the Stack is Stalled with reason `OutputsConflict`. Removing the field or changing the name deletes the object written before at the next `up`.
   */
  outputsTo?: OutputsTo;
  /**
   * This operator's addition: check the deployed resources for drift on a schedule, with a refresh preview that changes nothing, and optionally run `up` to undo it. See `status.lastDriftCheck` and the condition `Drifted`.
   */
  driftDetection?: DriftDetection;
  /**
   * This operator's addition: a manual approval gate. With `required: true`, each change (new commit, spec change, reconciliation request) first runs a `preview` that saves an update plan; the Stack waits with condition `AwaitingApproval` and the plan's summary in `status.plan` until `kubectl annotate stack <name> pulumi.com/approve=<plan id>` applies exactly that plan, or `pulumi.com/reject=<plan id>` discards it. Destroy on deletion is not gated. See docs/approval.md.
   */
  approval?: ApprovalSpec;
}

/**
 * Git credentials. Set exactly one of `sshAuth`, `accessToken`, `basicAuth` or `githubApp`. Every reference in it must be of type `Secret`, naming a Secret in the Stack's namespace.
 */
export interface GitAuthConfig {
  /**
   * A personal access token, sent over HTTPS as the password of user `git`.
   */
  accessToken?: ResourceRef;
  /**
   * An SSH private key, for `ssh://` and `git@host:` URLs (also for resolving `branch`). The server's host key must be in the hook server's known_hosts (`SSH_KNOWN_HOSTS`).
   */
  sshAuth?: SSHAuth;
  /**
   * A user name and password, sent over HTTPS.
   */
  basicAuth?: BasicAuth;
  /**
   * A GitHub App installation. Its private key is exchanged for a short-lived installation token each time the repository is read.
   */
  githubApp?: GitHubAppAuth;
}

/**
 * SSH key authentication.
 */
export interface SSHAuth {
  /**
   * The private key, in PEM or OpenSSH format.
   */
  sshPrivateKey: ResourceRef;
  /**
   * Passphrase of the private key, when it has one.
   */
  password?: ResourceRef;
}

/**
 * User name and password authentication.
 */
export interface BasicAuth {
  /**
   * The user name.
   */
  userName: ResourceRef;
  /**
   * The password or token.
   */
  password: ResourceRef;
}

/**
 * GitHub App authentication.
 */
export interface GitHubAppAuth {
  /**
   * The GitHub App's ID.
   */
  appID: ResourceRef;
  /**
   * ID of the App's installation that can read the repository.
   */
  installationID: ResourceRef;
  /**
   * The App's private key (PEM, PKCS#1 RSA).
   */
  privateKey: ResourceRef;
}

/**
 * Where a value comes from. `type` names the kind of reference and the field of the same kind holds its details: `Literal` uses `literal`, `Secret` uses `secret`. `Env` (`env`) and `FS` (`filesystem`) are no longer supported: a Stack using them stalls with reason SpecInvalid.
 */
export interface ResourceRef {
  /**
   * Kind of reference: `Literal` or `Secret` (`Env` and `FS` are no longer supported).
   */
  type: string;
  /**
   * @deprecated
   * Used with type `Env`, which is no longer supported.
   */
  env?: EnvSelector;
  /**
   * @deprecated
   * Used with type `FS`, which is no longer supported.
   */
  filesystem?: FSSelector;
  /**
   * Used with type `Secret`: a key of a Secret in the Stack's namespace.
   */
  secret?: SecretSelector;
  /**
   * Used with type `Literal`: the value itself.
   */
  literal?: LiteralRef;
}

/**
 * An environment variable of the operator (no longer supported).
 */
export interface EnvSelector {
  /**
   * Name of the environment variable.
   */
  name: string;
}

/**
 * A file in the operator's file system (no longer supported).
 */
export interface FSSelector {
  /**
   * Path of the file.
   */
  path: string;
}

/**
 * A key of a Secret.
 */
export interface SecretSelector {
  /**
   * @deprecated
   * Deprecated: leave empty. If set, it must be the Stack's own namespace; Secrets in other namespaces cannot be referenced.
   */
  namespace?: string;
  /**
   * Name of the Secret.
   */
  name: string;
  /**
   * Key in the Secret's data.
   */
  key: string;
}

/**
 * A value given inline.
 */
export interface LiteralRef {
  /**
   * The value.
   */
  value: string;
}

/**
 * A key of a ConfigMap in the Stack's namespace.
 */
export interface ConfigMapRef {
  /**
   * Name of the ConfigMap.
   */
  name: string;
  /**
   * Key in the ConfigMap's data.
   */
  key: string;
  /**
   * Parse the value as JSON and set it as structured configuration instead of a string.
   */
  json?: boolean;
}

/**
 * A Flux source whose artifact holds the Pulumi project.
 */
export interface FluxSource {
  /**
   * The Flux source object. It must be in the Stack's namespace and report an artifact in its status; each new artifact revision is deployed.
   */
  sourceRef: FluxSourceReference;
  /**
   * Directory in the artifact that holds `Pulumi.yaml`. Defaults to the artifact's root.
   */
  dir?: string;
}

/**
 * Identifies a Flux source object in the Stack's namespace.
 */
export interface FluxSourceReference {
  /**
   * API version of the source, for example `source.toolkit.fluxcd.io/v1`.
   */
  apiVersion: string;
  /**
   * Kind of the source: `GitRepository`, `OCIRepository` or `Bucket`.
   */
  kind: string;
  /**
   * Name of the source.
   */
  name: string;
}

/**
 * Identifies a Program in the Stack's namespace.
 */
export interface ProgramReference {
  /**
   * Name of the Program.
   */
  name: string;
}

/**
 * A Stack that must have been deployed successfully first.
 */
export interface PrerequisiteRef {
  /**
   * Name of the prerequisite Stack, in the same namespace.
   */
  name: string;
  /**
   * Extra conditions on the prerequisite.
   */
  requirement?: RequirementSpec;
}

/**
 * Conditions a prerequisite Stack must meet.
 */
export interface RequirementSpec {
  /**
   * The prerequisite's last successful update must be no older than this duration (for example `1h` or `30m`). If it is older, the prerequisite is asked to run again and this Stack waits.
   */
  succeededWithinDuration?: string;
}

/**
 * A partial Workspace (apiVersion `auto.pulumi.com/v1alpha1`) merged onto the workspace generated for the Stack. Usually only `spec` and `metadata` are set.
 */
export interface WorkspaceTemplate {
  /**
   * Optional; `auto.pulumi.com/v1alpha1` when set.
   */
  apiVersion?: string;
  /**
   * Optional; `Workspace` when set.
   */
  kind?: string;
  /**
   * Labels and annotations for the workspace.
   */
  metadata?: TemplateObjectMeta;
  /**
   * Settings of the workspace.
   */
  spec?: WorkspaceTemplateSpec;
  /**
   * Ignored.
   */
  status?: WorkspaceTemplateStatus;
}

/**
 * Object metadata in a template. Normally only `labels` and `annotations` are set; the operator chooses names, namespaces and owners itself.
 */
export interface TemplateObjectMeta {
  /**
   * Ignored; the operator names the objects it creates.
   */
  name?: string;
  /**
   * Ignored.
   */
  generateName?: string;
  /**
   * Ignored; objects are created in the Stack's namespace.
   */
  namespace?: string;
  /**
   * Ignored.
   */
  uid?: string;
  /**
   * Ignored.
   */
  resourceVersion?: string;
  /**
   * Ignored.
   */
  generation?: number;
  /**
   * Ignored.
   */
  creationTimestamp?: string;
  /**
   * Ignored.
   */
  deletionTimestamp?: string;
  /**
   * Ignored.
   */
  deletionGracePeriodSeconds?: number;
  /**
   * Labels to add.
   */
  labels?: {
    [k: string]: string;
  };
  /**
   * Annotations to add.
   */
  annotations?: {
    [k: string]: string;
  };
  /**
   * Ignored.
   */
  finalizers?: string[];
  /**
   * Ignored; the operator sets the owners.
   */
  ownerReferences?: TemplateOwnerReference[];
}

/**
 * An owner reference in a template (ignored).
 */
export interface TemplateOwnerReference {
  /**
   * API version of the owner.
   */
  apiVersion?: string;
  /**
   * Kind of the owner.
   */
  kind?: string;
  /**
   * Name of the owner.
   */
  name?: string;
  /**
   * UID of the owner.
   */
  uid?: string;
  /**
   * Whether the owner is the managing controller.
   */
  controller?: boolean;
  /**
   * Whether deleting the owner waits for this object.
   */
  blockOwnerDeletion?: boolean;
}

/**
 * Settings of the workspace, the pod in which Pulumi runs.
 */
export interface WorkspaceTemplateSpec {
  /**
   * Service account of the workspace pod; overrides the Stack's `serviceAccountName`.
   */
  serviceAccountName?: string;
  /**
   * Pod security settings: `restricted` (the default) runs as user and group 1000 without privilege escalation, with all capabilities dropped except NET_BIND_SERVICE and the RuntimeDefault seccomp profile, and meets the `restricted` Pod Security Standard; `baseline` leaves the image's own user (often root), for images or tools that need it.
   */
  securityProfile?: string;
  /**
   * Image of the `pulumi` container: the Pulumi CLI plus the language runtime the project needs. Any image with the Pulumi CLI on PATH and glibc: the agent is copied into the pod by the `bootstrap` init container. Defaults to the official image of the Pulumi release the operator supports, `pulumi/pulumi:3.274.1-nonroot` (restricted) or `pulumi/pulumi:3.274.1` (baseline); the hooks' WORKSPACE_IMAGE and WORKSPACE_IMAGE_BASELINE change the defaults.
   */
  image?: string;
  /**
   * Pull policy of `image`: `Always`, `IfNotPresent` or `Never`.
   */
  imagePullPolicy?: "Always" | "IfNotPresent" | "Never";
  /**
   * Not settable: the workspace's git source is the Stack's own (`projectRepo`, `commit` or `branch`, `repoDir`, `gitAuth`, `shallow`). Kept in the schema so that upstream manifests apply; when it is set, the Stack is Stalled (`SpecInvalid`) naming this field (upstream merges it over the source it generates).
   */
  git?: WorkspaceGitSource;
  /**
   * Not settable: the workspace's artifact is the Stack's own (`fluxSource` with its `dir`, or `programRef`). Kept in the schema so that upstream manifests apply; when it is set, the Stack is Stalled (`SpecInvalid`) naming this field (upstream merges it over the source it generates).
   */
  flux?: WorkspaceFluxSource;
  /**
   * Use a directory of the workspace image as the project instead of fetching a source (for images that contain the program), as upstream. Only for a Stack without `projectRepo`, `fluxSource` or `programRef`: with one of them too, the Stack is Stalled (`SpecInvalid`) naming this field. On deletion with `destroyOnFinalize`, the destroy runs from `status.projectInfo` as for any other source.
   */
  local?: WorkspaceLocalSource;
  /**
   * Not settable: the operator sets it itself, from `status.projectInfo`, to destroy a deleted Stack whose source is gone. Kept in the schema so that upstream manifests apply; when it is set, the Stack is Stalled (`SpecInvalid`) naming this field. For a project inside the image, use `local`.
   */
  projectInfo?: WorkspaceProjectInfo;
  /**
   * Extra environment variables of the `pulumi` container, taken from all keys of ConfigMaps or Secrets.
   */
  envFrom?: EnvFromSource[];
  /**
   * Extra environment variables of the `pulumi` container.
   */
  env?: EnvVar[];
  /**
   * CPU and memory of the `pulumi` container. Without requests, 64Mi of memory and 100m of CPU are requested.
   */
  resources?: ResourceRequirements;
  /**
   * Merged onto the workspace pod template like a strategic merge patch: add volumes, init containers, sidecars, tolerations, node selectors, pod labels; change the `pulumi` container by listing a container with that name.
   */
  podTemplate?: EmbeddedPodTemplate;
  /**
   * Labels and annotations for the workspace's Service.
   */
  serviceTemplate?: EmbeddedServiceTemplate;
  /**
   * Verbosity of Pulumi's logs for operations, as with `pulumi --verbose=N`. 0 (the default) disables verbose logging.
   */
  pulumiLogLevel?: number;
  /**
   * Not settable: the workspace's one stack is the Stack's own, from `stack`, `config`, `configRef`, `secrets`, `secretsRef`, `secretsProvider`, `environment` and `useLocalStackOnly` (config items go in `config`, `configRef` or `secretsRef`, not in `stacks[].config`). Kept in the schema so that upstream manifests apply; when the list is not empty, the Stack is Stalled (`SpecInvalid`) naming this field (upstream appends the Stack's own stack after these, and a second entry of the same name cannot be applied).
   */
  stacks?: WorkspaceStack[];
}

/**
 * Git source of a workspace.
 */
export interface WorkspaceGitSource {
  /**
   * Clone URL of the repository.
   */
  url?: string;
  /**
   * Commit SHA, branch or tag to check out.
   */
  ref?: string;
  /**
   * Directory in the repository that holds the project.
   */
  dir?: string;
  /**
   * Credentials for the repository.
   */
  auth?: WorkspaceGitAuth;
  /**
   * Clone only the requested commit.
   */
  shallow?: boolean;
}

/**
 * Git credentials of a workspace, as keys of Secrets.
 */
export interface WorkspaceGitAuth {
  /**
   * SSH private key.
   */
  sshPrivateKey?: SecretKeySelector;
  /**
   * User name for HTTPS.
   */
  username?: SecretKeySelector;
  /**
   * Password for HTTPS, or passphrase of the SSH key.
   */
  password?: SecretKeySelector;
  /**
   * Access token for HTTPS.
   */
  token?: SecretKeySelector;
  /**
   * GitHub App credentials.
   */
  githubApp?: WorkspaceGitHubAppAuth;
}

/**
 * GitHub App credentials of a workspace.
 */
export interface WorkspaceGitHubAppAuth {
  /**
   * The App's ID.
   */
  appID?: SecretKeySelector;
  /**
   * The installation's ID.
   */
  installationID?: SecretKeySelector;
  /**
   * The App's private key.
   */
  privateKey?: SecretKeySelector;
}

/**
 * A tar.gz artifact to download and unpack.
 */
export interface WorkspaceFluxSource {
  /**
   * URL of the artifact.
   */
  url?: string;
  /**
   * Expected digest of the artifact, `<algorithm>:<hex>`.
   */
  digest?: string;
  /**
   * Directory in the artifact that holds the project.
   */
  dir?: string;
}

/**
 * A project already present in the workspace image.
 */
export interface WorkspaceLocalSource {
  /**
   * Path of the project directory (the one holding `Pulumi.yaml`), required. An absolute path is in the workspace image; a relative one is relative to `/share`, as upstream's symbolic link makes it (for a project an init container of `podTemplate` writes there). It may not be `/share/workspace` or inside it.
   */
  dir?: string;
}

/**
 * Name and runtime of a Pulumi project.
 */
export interface WorkspaceProjectInfo {
  /**
   * Project name.
   */
  name?: string;
  /**
   * Project runtime, for example `nodejs`, `python`, `go` or `yaml`.
   */
  runtime?: string;
}

/**
 * A stack of a workspace.
 */
export interface WorkspaceStack {
  /**
   * Stack name.
   */
  name?: string;
  /**
   * Create the stack when it does not exist.
   */
  create?: boolean;
  /**
   * Secrets provider used when creating the stack.
   */
  secretsProvider?: string;
  /**
   * Configuration of the stack.
   */
  config?: WorkspaceConfigItem[];
  /**
   * ESC environments of the stack.
   */
  environment?: string[];
}

/**
 * One configuration value of a stack.
 */
export interface WorkspaceConfigItem {
  /**
   * Config key.
   */
  key?: string;
  /**
   * Treat the key as a property path into a structured value.
   */
  path?: boolean;
  /**
   * The value: a string or structured data.
   */
  value?: unknown;
  /**
   * Where to read the value from instead.
   */
  valueFrom?: WorkspaceConfigValueFrom;
  /**
   * Store the value encrypted.
   */
  secret?: boolean;
}

/**
 * Source of a configuration value inside the workspace pod.
 */
export interface WorkspaceConfigValueFrom {
  /**
   * Environment variable holding the value.
   */
  env?: string;
  /**
   * File holding the value.
   */
  path?: string;
  /**
   * Parse the value as JSON.
   */
  json?: boolean;
}

/**
 * Status of a Workspace; ignored in a template.
 */
export interface WorkspaceTemplateStatus {
  /**
   * Ignored.
   */
  observedGeneration?: number;
  /**
   * Ignored.
   */
  address?: string;
  /**
   * Ignored.
   */
  pulumiVersion?: string;
  /**
   * Ignored.
   */
  conditions?: TemplateCondition[];
}

/**
 * A condition in a template status (ignored).
 */
export interface TemplateCondition {
  /**
   * Condition type.
   */
  type?: string;
  /**
   * Condition status.
   */
  status?: string;
  /**
   * Reason of the last transition.
   */
  reason?: string;
  /**
   * Details of the last transition.
   */
  message?: string;
  /**
   * Time of the last transition.
   */
  lastTransitionTime?: string;
  /**
   * Generation the condition was computed from.
   */
  observedGeneration?: number;
}

/**
 * Additions to the workspace pod template.
 */
export interface EmbeddedPodTemplate {
  /**
   * Labels and annotations for the workspace pod.
   */
  metadata?: EmbeddedObjectMeta;
  /**
   * Pod spec fields to merge onto the workspace pod.
   */
  spec?: PodSpec;
}

/**
 * Additions to the workspace Service.
 */
export interface EmbeddedServiceTemplate {
  /**
   * Labels and annotations for the Service.
   */
  metadata?: EmbeddedObjectMeta;
}

/**
 * Labels and annotations to add to an object. Labels the operator sets itself cannot be overridden.
 */
export interface EmbeddedObjectMeta {
  /**
   * Labels to add.
   */
  labels?: {
    [k: string]: string;
  };
  /**
   * Annotations to add.
   */
  annotations?: {
    [k: string]: string;
  };
}

/**
 * A Kubernetes pod spec, as in `kubectl explain pod.spec`. Only its top-level fields and the main fields of containers are described here; nested settings are kept as given and checked by the API server when the pod is created. The workspace's own container is named `pulumi`.
 */
export interface PodSpec {
  /**
   * Containers of the pod. List the `pulumi` container to change it (for example to add volume mounts), or other names to add sidecars.
   */
  containers: Container[];
  /**
   * Init containers, run after the operator's own init containers (which fetch the source).
   */
  initContainers?: Container[];
  /**
   * Ephemeral debugging containers.
   */
  ephemeralContainers?: Container[];
  /**
   * Extra volumes of the pod.
   */
  volumes?: Volume[];
  /**
   * Service account of the pod.
   */
  serviceAccountName?: string;
  /**
   * @deprecated
   * Deprecated alias of `serviceAccountName`.
   */
  serviceAccount?: string;
  /**
   * Whether a service account token is mounted automatically.
   */
  automountServiceAccountToken?: boolean;
  /**
   * Node to run on, bypassing the scheduler.
   */
  nodeName?: string;
  /**
   * Labels a node must have to run the pod.
   */
  nodeSelector?: {
    [k: string]: string;
  };
  /**
   * Node and pod (anti-)affinity rules.
   */
  affinity?: {
    [k: string]: unknown;
  };
  /**
   * Taints the pod tolerates.
   */
  tolerations?: {
    [k: string]: unknown;
  }[];
  /**
   * How the pod is spread across topology domains.
   */
  topologySpreadConstraints?: {
    [k: string]: unknown;
  }[];
  /**
   * Scheduler that places the pod.
   */
  schedulerName?: string;
  /**
   * Gates that must be removed before the pod is scheduled.
   */
  schedulingGates?: {
    [k: string]: unknown;
  }[];
  /**
   * Priority value; normally set from `priorityClassName`.
   */
  priority?: number;
  /**
   * Priority class of the pod.
   */
  priorityClassName?: string;
  /**
   * `PreemptLowerPriority` or `Never`.
   */
  preemptionPolicy?: string;
  /**
   * Runtime class of the pod.
   */
  runtimeClassName?: string;
  /**
   * Pod-level security settings (user, group, fsGroup, seccomp, ...).
   */
  securityContext?: {
    [k: string]: unknown;
  };
  /**
   * Secrets used to pull the images.
   */
  imagePullSecrets?: LocalObjectReference[];
  /**
   * Extra entries for the pod's /etc/hosts.
   */
  hostAliases?: {
    [k: string]: unknown;
  }[];
  /**
   * Hostname of the pod.
   */
  hostname?: string;
  /**
   * Hostname to use instead of the pod's default hostname.
   */
  hostnameOverride?: string;
  /**
   * Subdomain of the pod.
   */
  subdomain?: string;
  /**
   * Use the fully qualified domain name as the hostname.
   */
  setHostnameAsFQDN?: boolean;
  /**
   * Use the node's network namespace.
   */
  hostNetwork?: boolean;
  /**
   * Use the node's process namespace.
   */
  hostPID?: boolean;
  /**
   * Use the node's IPC namespace.
   */
  hostIPC?: boolean;
  /**
   * Use the node's user namespace.
   */
  hostUsers?: boolean;
  /**
   * Share one process namespace between the containers.
   */
  shareProcessNamespace?: boolean;
  /**
   * DNS policy of the pod.
   */
  dnsPolicy?: string;
  /**
   * Extra DNS settings.
   */
  dnsConfig?: {
    [k: string]: unknown;
  };
  /**
   * Inject environment variables describing Services.
   */
  enableServiceLinks?: boolean;
  /**
   * Restart policy of the pod.
   */
  restartPolicy?: string;
  /**
   * Seconds the pod may take to stop after being asked to. The workspace defaults to 600 so that a running operation can finish.
   */
  terminationGracePeriodSeconds?: number;
  /**
   * Maximum lifetime of the pod in seconds.
   */
  activeDeadlineSeconds?: number;
  /**
   * Extra conditions for pod readiness.
   */
  readinessGates?: {
    [k: string]: unknown;
  }[];
  /**
   * Operating system of the pod's containers.
   */
  os?: {
    [k: string]: unknown;
  };
  /**
   * Resource overhead of the pod's runtime class.
   */
  overhead?: {
    [k: string]: Quantity;
  };
  /**
   * Pod-level resource requests and limits.
   */
  resources?: ResourceRequirements;
  /**
   * Dynamic resource claims of the pod.
   */
  resourceClaims?: {
    [k: string]: unknown;
  }[];
  [k: string]: unknown;
}

/**
 * A container, as in `kubectl explain pod.spec.containers`. Only the main fields are described here; others are kept as given.
 */
export interface Container {
  /**
   * Name of the container; `pulumi` is the workspace's own container.
   */
  name: string;
  /**
   * Container image.
   */
  image?: string;
  /**
   * `Always`, `IfNotPresent` or `Never`.
   */
  imagePullPolicy?: "Always" | "IfNotPresent" | "Never";
  /**
   * Entrypoint, replacing the image's.
   */
  command?: string[];
  /**
   * Arguments to the entrypoint.
   */
  args?: string[];
  /**
   * Working directory.
   */
  workingDir?: string;
  /**
   * Environment variables.
   */
  env?: EnvVar[];
  /**
   * Environment variables from all keys of ConfigMaps or Secrets.
   */
  envFrom?: EnvFromSource[];
  /**
   * Ports the container exposes.
   */
  ports?: {
    [k: string]: unknown;
  }[];
  /**
   * Volumes mounted into the container.
   */
  volumeMounts?: VolumeMount[];
  /**
   * Block devices used by the container.
   */
  volumeDevices?: {
    [k: string]: unknown;
  }[];
  /**
   * Resource requests and limits.
   */
  resources?: ResourceRequirements;
  /**
   * How each resource may be resized.
   */
  resizePolicy?: {
    [k: string]: unknown;
  }[];
  /**
   * Restart policy of this container (for sidecar init containers: `Always`).
   */
  restartPolicy?: string;
  /**
   * Rules deciding whether the container restarts after exiting.
   */
  restartPolicyRules?: {
    [k: string]: unknown;
  }[];
  /**
   * Container security settings.
   */
  securityContext?: {
    [k: string]: unknown;
  };
  /**
   * Actions on container start and stop.
   */
  lifecycle?: {
    [k: string]: unknown;
  };
  /**
   * Probe restarting the container when it fails.
   */
  livenessProbe?: {
    [k: string]: unknown;
  };
  /**
   * Probe deciding whether the container is ready.
   */
  readinessProbe?: {
    [k: string]: unknown;
  };
  /**
   * Probe that must succeed before the other probes start.
   */
  startupProbe?: {
    [k: string]: unknown;
  };
  /**
   * Allocate a buffer for stdin.
   */
  stdin?: boolean;
  /**
   * Close stdin after the first attach ends.
   */
  stdinOnce?: boolean;
  /**
   * Allocate a TTY.
   */
  tty?: boolean;
  /**
   * File the container writes its termination message to.
   */
  terminationMessagePath?: string;
  /**
   * `File` or `FallbackToLogsOnError`.
   */
  terminationMessagePolicy?: string;
  [k: string]: unknown;
}

/**
 * A pod volume, as in `kubectl explain pod.spec.volumes`: a name plus one volume source (`secret`, `configMap`, `emptyDir`, `projected`, `persistentVolumeClaim`, ...), kept as given.
 */
export interface Volume {
  /**
   * Name of the volume, used by volume mounts.
   */
  name: string;
  [k: string]: unknown;
}

/**
 * A volume mounted into a container.
 */
export interface VolumeMount {
  /**
   * Name of the volume.
   */
  name: string;
  /**
   * Path in the container.
   */
  mountPath: string;
  /**
   * Path inside the volume to mount instead of its root.
   */
  subPath?: string;
  /**
   * Mount read-only.
   */
  readOnly?: boolean;
  [k: string]: unknown;
}

/**
 * A reference to an object in the same namespace.
 */
export interface LocalObjectReference {
  /**
   * Name of the object.
   */
  name?: string;
}

/**
 * An environment variable.
 */
export interface EnvVar {
  /**
   * Name of the variable.
   */
  name: string;
  /**
   * Value of the variable.
   */
  value?: string;
  /**
   * Where to read the value from instead of `value`.
   */
  valueFrom?: EnvVarSource;
}

/**
 * Source of an environment variable's value. Set one field.
 */
export interface EnvVarSource {
  /**
   * A key of a Secret in the namespace.
   */
  secretKeyRef?: SecretKeySelector;
  /**
   * A key of a ConfigMap in the namespace.
   */
  configMapKeyRef?: ConfigMapKeySelector;
  /**
   * A field of the pod, such as `metadata.name`.
   */
  fieldRef?: ObjectFieldSelector;
  /**
   * A resource request or limit of a container.
   */
  resourceFieldRef?: ResourceFieldSelector;
  /**
   * A key of an env file in a volume.
   */
  fileKeyRef?: FileKeySelector;
}

/**
 * A key of a Secret.
 */
export interface SecretKeySelector {
  /**
   * Name of the Secret.
   */
  name?: string;
  /**
   * Key in the Secret.
   */
  key: string;
  /**
   * Do not fail when the Secret or key is missing.
   */
  optional?: boolean;
}

/**
 * A key of a ConfigMap.
 */
export interface ConfigMapKeySelector {
  /**
   * Name of the ConfigMap.
   */
  name?: string;
  /**
   * Key in the ConfigMap.
   */
  key: string;
  /**
   * Do not fail when the ConfigMap or key is missing.
   */
  optional?: boolean;
}

/**
 * A field of the pod.
 */
export interface ObjectFieldSelector {
  /**
   * API version the field path is written in; defaults to `v1`.
   */
  apiVersion?: string;
  /**
   * Path of the field, for example `metadata.namespace`.
   */
  fieldPath: string;
}

/**
 * A resource request or limit of a container.
 */
export interface ResourceFieldSelector {
  /**
   * Container name; defaults to the container being configured.
   */
  containerName?: string;
  /**
   * Resource, for example `limits.memory` or `requests.cpu`.
   */
  resource: string;
  /**
   * Unit the value is expressed in; defaults to 1.
   */
  divisor?: Quantity;
}

/**
 * A key of an env file in a volume.
 */
export interface FileKeySelector {
  /**
   * Name of the volume holding the file.
   */
  volumeName: string;
  /**
   * Path of the file in the volume.
   */
  path: string;
  /**
   * Key in the file.
   */
  key: string;
  /**
   * Do not fail when the file or key is missing.
   */
  optional?: boolean;
}

/**
 * A set of environment variables from all keys of a ConfigMap or Secret. Set one of `configMapRef` and `secretRef`.
 */
export interface EnvFromSource {
  /**
   * The ConfigMap to read.
   */
  configMapRef?: ConfigMapEnvSource;
  /**
   * The Secret to read.
   */
  secretRef?: SecretEnvSource;
  /**
   * Prefix added to every variable name.
   */
  prefix?: string;
}

/**
 * A ConfigMap in the namespace.
 */
export interface ConfigMapEnvSource {
  /**
   * Name of the ConfigMap.
   */
  name?: string;
  /**
   * Do not fail when the ConfigMap is missing.
   */
  optional?: boolean;
}

/**
 * A Secret in the namespace.
 */
export interface SecretEnvSource {
  /**
   * Name of the Secret.
   */
  name?: string;
  /**
   * Do not fail when the Secret is missing.
   */
  optional?: boolean;
}

/**
 * Compute resource requests and limits.
 */
export interface ResourceRequirements {
  /**
   * Minimum resources reserved, for example `cpu: 500m`, `memory: 1Gi`.
   */
  requests?: {
    [k: string]: Quantity;
  };
  /**
   * Maximum resources allowed, for example `memory: 2Gi`.
   */
  limits?: {
    [k: string]: Quantity;
  };
  /**
   * Dynamic resource claims used by this container.
   */
  claims?: ResourceClaim[];
}

/**
 * Use of a pod resource claim.
 */
export interface ResourceClaim {
  /**
   * Name of the claim in the pod's `resourceClaims`.
   */
  name: string;
  /**
   * Request within the claim to use.
   */
  request?: string;
}

/**
 * A partial Update (apiVersion `auto.pulumi.com/v1alpha1`) merged onto every operation the Stack runs. Usually only `spec` and `metadata` are set.
 */
export interface UpdateTemplate {
  /**
   * Optional; `auto.pulumi.com/v1alpha1` when set.
   */
  apiVersion?: string;
  /**
   * Optional; `Update` when set.
   */
  kind?: string;
  /**
   * Labels and annotations for the operations.
   */
  metadata?: TemplateObjectMeta;
  /**
   * Settings of the operations.
   */
  spec?: UpdateTemplateSpec;
  /**
   * Ignored.
   */
  status?: UpdateTemplateStatus;
}

/**
 * Settings applied to every operation.
 */
export interface UpdateTemplateSpec {
  /**
   * Set by the operator: each Stack runs its operations in its own workspace, named after the Stack as upstream. The Stack's own name changes nothing; any other value and the Stack is Stalled (`SpecInvalid`) naming this field.
   */
  workspaceName?: string;
  /**
   * Set by the operator: operations run against `spec.stack`, the only stack the workspace selects and configures. The value of `spec.stack` changes nothing; any other value and the Stack is Stalled (`SpecInvalid`) naming this field.
   */
  stackName?: string;
  /**
   * Not settable: the Stack chooses each operation (`up`; `preview` with `preview: true`; `destroy` on deletion with `destroyOnFinalize`). When it is set, the Stack is Stalled (`SpecInvalid`) naming this field (upstream would run this type for every operation, the destroy on deletion included).
   */
  type?: string;
  /**
   * How long a finished operation (its Job and outputs Secret) is kept before it is deleted, as a duration such as `1h` or `30m`, counted from when it finished; never before the Stack's status has its result. Defaults to 24h.
   */
  ttlAfterCompleted?: string;
  /**
   * This operator's addition: the most seconds each operation of the Stack may take. When it passes, the operation is cancelled (Pulumi stops after the steps in flight and unlocks the stack) and fails with reason `DeadlineExceeded`, then is retried like any failure. Without it, the hooks' OPERATION_DEADLINE_SECONDS applies, if set; else there is no deadline.
   */
  activeDeadlineSeconds?: number;
  /**
   * Maximum number of resource operations run at the same time.
   */
  parallel?: number;
  /**
   * Message recorded with the update in the stack's history.
   */
  message?: string;
  /**
   * Fail the operation if it would change anything.
   */
  expectNoChanges?: boolean;
  /**
   * URNs of resources to replace even when they have not changed.
   */
  replace?: string[];
  /**
   * URNs of the resources the operation is limited to.
   */
  target?: string[];
  /**
   * With `target`: include the resources that depend on the targeted ones.
   */
  targetDependents?: boolean;
  /**
   * Refresh the state from the actual resources before the operation.
   */
  refresh?: boolean;
  /**
   * Keep going after a resource fails, updating all resources that do not depend on it.
   */
  continueOnError?: boolean;
  /**
   * After a `destroy`, also remove the stack and its configuration from the backend.
   */
  remove?: boolean;
  /**
   * Run the program during `refresh` and `destroy`.
   */
  runProgram?: boolean;
}

/**
 * Status of an Update; ignored in a template.
 */
export interface UpdateTemplateStatus {
  /**
   * Ignored.
   */
  observedGeneration?: number;
  /**
   * Ignored.
   */
  startTime?: string;
  /**
   * Ignored.
   */
  endTime?: string;
  /**
   * Ignored.
   */
  permalink?: string;
  /**
   * Ignored.
   */
  message?: string;
  /**
   * Ignored.
   */
  outputs?: string;
  /**
   * Ignored.
   */
  conditions?: TemplateCondition[];
  /**
   * Ignored.
   */
  projectInfo?: WorkspaceProjectInfo;
}

/**
 * Observed state of a Stack, written by the operator.
 */
export interface StackStatus {
  /**
   * The `metadata.generation` this status was computed for.
   */
  observedGeneration?: number;
  /**
   * Value of the `pulumi.com/reconciliation-request` annotation this status was computed for.
   */
  observedReconcileRequest?: string;
  /**
   * Conditions `Ready`, `Reconciling` and `Stalled` (kstatus conventions). Ready is True when the last operation succeeded and nothing is left to do. Reconciling is True while an operation is pending, running or being retried. Stalled is True when the operator cannot go on until the spec, the source or the reconciliation request changes; its reason says why (SpecInvalid, SourceUnavailable, UpdateFailed, ...). OutputsTruncated is True when `outputs` holds only some of the outputs of the last successful up. Drifted (with `spec.driftDetection`) says what the last drift check found: True (DriftDetected, with the count and URNs), False (NoDrift), Unknown (CheckFailed).
   */
  conditions?: StackCondition[];
  /**
   * The operation in progress, if any.
   */
  currentUpdate?: CurrentStackUpdate;
  /**
   * Result of the last finished operation.
   */
  lastUpdate?: StackUpdateState;
  /**
   * Outputs of the stack after the last successful operation. Secret outputs are shown as the string `[secret]`. When they are larger than 64 KiB together, only those that fit, and the condition OutputsTruncated says so; all of them are in the Secret `<job>-stack-outputs` of that up's Job, which the condition names.
   */
  outputs?: {
    [k: string]: unknown;
  };
  /**
   * Name and runtime of the Pulumi project, as last seen; used to destroy the stack when its source is no longer available.
   */
  projectInfo?: StackProjectInfo;
  /**
   * This operator's addition, with `spec.outputsTo`: the Secret or ConfigMap the last successful `up` wrote the outputs to (`state: written`), or found held by something else (`state: conflict`).
   */
  outputsTo?: OutputsToStatus;
  /**
   * This operator's addition: the result of the last drift check (`spec.driftDetection`).
   */
  lastDriftCheck?: DriftCheckState;
  /**
   * This operator's addition, with `spec.approval.required`: the last update plan the approval gate previewed and what became of it.
   */
  plan?: StackPlan;
  /**
   * This operator's addition: how many times the Stack has become Stalled (newly, for another reason, or still after a spec change); absent until it first does. The Warning event of each stall is named by it, so that a sync repeated on a copy of the Stack older than its last written status names the same event. See docs/design.md#events.
   */
  stalls?: number;
  /**
   * This operator's addition: a digest (`sha256:<hex>` of its canonical JSON) of each child that Metacontroller updates in place (the Workspace, refresh requests), by `<Kind>/<name>`, as the last answer asked for it. While the operator cannot compute a child (an invalid spec, a running operation), it keeps the child only if its last-applied configuration has this digest. See docs/design.md#how-children-are-kept.
   */
  childDigests?: {
    [k: string]: string;
  };
}

/**
 * A condition of a Stack.
 */
export interface StackCondition {
  /**
   * Condition type, in CamelCase or `domain/CamelCase`.
   */
  type: string;
  /**
   * `True`, `False` or `Unknown`.
   */
  status: "True" | "False" | "Unknown";
  /**
   * Machine-readable reason for the last transition, in CamelCase.
   */
  reason: string;
  /**
   * Human-readable details about the last transition.
   */
  message: string;
  /**
   * When the status last changed.
   */
  lastTransitionTime: string;
  /**
   * The `metadata.generation` the condition was computed from.
   */
  observedGeneration?: number;
}

/**
 * An operation in progress.
 */
export interface CurrentStackUpdate {
  /**
   * Stack `metadata.generation` the operation was started for.
   */
  generation?: number;
  /**
   * Reconciliation request the operation was started for.
   */
  reconcileRequest?: string;
  /**
   * Name of the operation.
   */
  name?: string;
  /**
   * Source revision being deployed: a git commit SHA, a Flux artifact revision or a Program generation.
   */
  commit?: string;
}

/**
 * Result of a finished operation.
 */
export interface StackUpdateState {
  /**
   * Stack `metadata.generation` the operation ran for.
   */
  generation?: number;
  /**
   * Reconciliation request the operation ran for.
   */
  reconcileRequest?: string;
  /**
   * Name of the operation.
   */
  name?: string;
  /**
   * Kind of operation: `up`, `preview`, `refresh` or `destroy`.
   */
  type?: string;
  /**
   * `succeeded` or `failed`.
   */
  state?: string;
  /**
   * Details of the result, such as the error of a failed operation.
   */
  message?: string;
  /**
   * Source revision of this operation.
   */
  lastAttemptedCommit?: string;
  /**
   * Source revision of the last successful operation (kept when this one failed).
   */
  lastSuccessfulCommit?: string;
  /**
   * Link to the update in Pulumi Cloud, when the backend provides one.
   */
  permalink?: string;
  /**
   * When the operation finished.
   */
  lastResyncTime?: string;
  /**
   * Number of consecutive failed operations for the same generation and reconciliation request. After 3, the Stack stalls (reason UpdateFailed) until the spec, source or request changes.
   */
  failures?: number;
}

/**
 * Where the stack outputs go besides `status.outputs`: a Secret or ConfigMap in the Stack's namespace, and which outputs. Each output is one key: a string as is, any other value as JSON text.
 */
export interface OutputsTo {
  /**
   * `Secret` or `ConfigMap`. Secret outputs are only ever written to a Secret: a ConfigMap leaves them out, and the condition `OutputsSkipped` names them.
   */
  kind: "Secret" | "ConfigMap";
  /**
   * Name of the Secret or ConfigMap, in the Stack's namespace. Created by the operator; an object of that name that it did not create for this Stack is left untouched.
   */
  name: string;
  /**
   * The outputs to write, each with an optional key. Absent: all outputs, each under its own name (outputs whose names are not valid keys are left out, and named by the condition `OutputsSkipped`).
   *
   * @maxItems 256
   */
  outputs?: OutputsToEntry[];
}

/**
 * One stack output to write.
 */
export interface OutputsToEntry {
  /**
   * Name of the stack output.
   */
  name: string;
  /**
   * Key it is written under (letters, digits, `-`, `_` and `.`). Default: the output's name, which must then be a valid key.
   */
  key?: string;
}

/**
 * The object the last successful `up` wrote the outputs to, or found in the way.
 */
export interface OutputsToStatus {
  /**
   * `Secret` or `ConfigMap`.
   */
  kind: string;
  /**
   * Name of the object, in the Stack's namespace.
   */
  name: string;
  /**
   * `written`: it holds the outputs of that `up`. `conflict`: an object of that name that is not this Stack's exists; it was left untouched and the Stack is Stalled (`OutputsConflict`).
   */
  state: string;
}

/**
 * Name and runtime of a Pulumi project.
 */
export interface StackProjectInfo {
  /**
   * Project name from `Pulumi.yaml`.
   */
  name: string;
  /**
   * Project runtime from `Pulumi.yaml`, for example `nodejs` or `yaml`.
   */
  runtime: string;
}

/**
 * When to check a Stack for drift, and what to do when there is some.
 */
export interface DriftDetection {
  /**
   * How often to check: a duration such as `30m` or `6h` (at least `30s`), counted from the later of the last check and the last successful update, or a 5-field cron expression in UTC such as `0 * /6 * * *`, the next time it matches after that. A check runs only while the Stack is Ready and nothing else runs; an update that is due runs first.
   */
  schedule: string;
  /**
   * When a check finds drift, run `up` with refresh to bring the resources back to the program. Default false: report only.
   */
  remediate?: boolean;
}

/**
 * The result of a drift check.
 */
export interface DriftCheckState {
  /**
   * When the check ended.
   */
  time?: string;
  /**
   * The Update that ran the check (a `refresh` with `previewOnly`).
   */
  name?: string;
  /**
   * Whether the check itself ran (`succeeded`, whatever it found) or failed.
   */
  state?: "succeeded" | "failed";
  /**
   * True when resources differ from the stack's state. Absent when the check failed.
   */
  drifted?: boolean;
  /**
   * How many resources differ.
   */
  changedResources?: number;
  /**
   * The URNs of the first of them (at most 20).
   */
  urns?: string[];
  /**
   * The check's message (on failure, why).
   */
  message?: string;
}

/**
 * The manual approval gate of a Stack (this operator's addition).
 */
export interface ApprovalSpec {
  /**
   * Preview every change and apply it only once approved. Without it, or false, the Stack runs `up` as usual.
   */
  required?: boolean;
  /**
   * How long a plan awaits approval, as a duration such as `24h` or `30m`, counted from the end of its preview; then it is discarded (`AwaitingApproval` False, reason `PlanExpired`) until the next change or reconciliation request. Without it, a plan waits until it is approved, rejected or replaced.
   */
  expiresAfter?: string;
}

/**
 * An update plan of the approval gate. The plan itself stays in the workspace pod; only its summary is here.
 */
export interface StackPlan {
  /**
   * The plan's id: the name of the preview Update that saved it. An approval or rejection must name it.
   */
  id?: string;
  /**
   * `Previewing`, `AwaitingApproval`, `Approved` (its up runs), `Applied`, `Failed` (its up failed), `Rejected`, `Expired`, `Superseded` (a newer change replaced it) or `Lost` (the workspace pod was replaced before the up: a new preview follows).
   */
  state?: string;
  /**
   * Stack `metadata.generation` the plan was previewed for.
   */
  generation?: number;
  /**
   * Reconciliation request the plan was previewed for.
   */
  reconcileRequest?: string;
  /**
   * Source revision the plan was previewed at.
   */
  commit?: string;
  /**
   * `lastUpdate.name` when the plan was previewed: the plan applies on top of that operation.
   */
  previous?: string;
  /**
   * Resource changes the plan makes.
   */
  summary?: StackPlanSummary;
  /**
   * The preview's message, or what became of the plan.
   */
  message?: string;
  /**
   * When the preview finished.
   */
  createdAt?: string;
  /**
   * When the plan expires, with `spec.approval.expiresAfter`.
   */
  expiresAt?: string;
  /**
   * When the plan was approved, rejected, expired or replaced.
   */
  decidedAt?: string;
}

/**
 * Counts of resource changes in a plan (Pulumi's preview summary).
 */
export interface StackPlanSummary {
  /**
   * Resources to create.
   */
  create?: number;
  /**
   * Resources to update.
   */
  update?: number;
  /**
   * Resources to delete.
   */
  delete?: number;
  /**
   * Resources to replace.
   */
  replace?: number;
  /**
   * Resources unchanged.
   */
  same?: number;
}

/**
 * A Program is a Pulumi YAML program kept in the cluster. A Stack deploys it by naming it in `spec.programRef`.
 */
export interface Program {
  /**
   * API version: `pulumi.com/v1`.
   */
  apiVersion?: string;
  /**
   * Kind: `Program`.
   */
  kind?: string;
  /**
   * Standard object metadata. The name is also the name of the Pulumi project.
   */
  metadata: ObjectMeta;
  /**
   * The program.
   */
  program?: ProgramSpec;
  /**
   * Observed state, written by the operator.
   */
  status?: ProgramStatus;
}

/**
 * A Pulumi YAML program: the body of a `Pulumi.yaml` without `name` and `runtime` (the project is named after the Program and uses runtime `yaml`).
 */
export interface ProgramSpec {
  /**
   * Configuration keys the program reads, with their type and default value. Refer to them as `${key}`.
   */
  configuration?: {
    [k: string]: Configuration;
  };
  /**
   * Resources the program manages, keyed by logical name. Refer to a resource as `${name}` and to its outputs as `${name.property}`.
   */
  resources?: {
    [k: string]: Resource;
  };
  /**
   * Named values computed once (literals, expressions or function calls such as `fn::invoke`) and usable as `${name}`.
   */
  variables?: {
    [k: string]: unknown;
  };
  /**
   * Stack outputs: output name to value or expression.
   */
  outputs?: {
    [k: string]: unknown;
  };
  /**
   * Packages to install before the program runs: package name to a version or a source (for example a git URL).
   */
  packages?: {
    [k: string]: string;
  };
}

/**
 * Declares one configuration key.
 */
export interface Configuration {
  /**
   * Type of the value.
   */
  type?: "String" | "Number" | "List<Number>" | "List<String>";
  /**
   * Value used when the stack sets none.
   */
  default?: unknown;
}

/**
 * A resource of the program.
 */
export interface Resource {
  /**
   * Resource type token, for example `aws:s3:Bucket` or `kubernetes:core/v1:ConfigMap`.
   */
  type: string;
  /**
   * Input properties of the resource; values may contain expressions.
   */
  properties?: {
    [k: string]: unknown;
  };
  /**
   * Resource options.
   */
  options?: ResourceOptions;
  /**
   * Read an existing resource by ID instead of managing it. Do not combine with `properties`.
   */
  get?: Getter;
}

/**
 * Options that change how a resource is managed.
 */
export interface ResourceOptions {
  /**
   * Output properties to treat as secrets.
   */
  additionalSecretOutputs?: string[];
  /**
   * Earlier URNs of this resource, so that renaming it does not replace it.
   */
  aliases?: string[];
  /**
   * Time limits for creating, updating and deleting the resource.
   */
  customTimeouts?: CustomTimeouts;
  /**
   * When the resource must be replaced, delete the old one before creating the new one.
   */
  deleteBeforeReplace?: boolean;
  /**
   * Resources this one depends on beyond those its properties refer to, as expressions like `${other}`.
   */
  dependsOn?: unknown[];
  /**
   * Properties whose changes are ignored when updating.
   */
  ignoreChanges?: string[];
  /**
   * ID of an existing resource to adopt into the stack.
   */
  import?: string;
  /**
   * Parent resource, as an expression like `${component}`.
   */
  parent?: unknown;
  /**
   * Prevent the resource from being deleted.
   */
  protect?: boolean;
  /**
   * Provider resource to use, as an expression like `${myProvider}`.
   */
  provider?: unknown;
  /**
   * Provider resources to use for children, keyed by package name.
   */
  providers?: {
    [k: string]: unknown;
  };
  /**
   * Exact provider plugin version to use.
   */
  version?: string;
}

/**
 * Time limits of resource operations, as durations such as `5m` or `1h30m`.
 */
export interface CustomTimeouts {
  /**
   * Time limit for creating.
   */
  create?: string;
  /**
   * Time limit for updating.
   */
  update?: string;
  /**
   * Time limit for deleting.
   */
  delete?: string;
}

/**
 * Reads an existing resource.
 */
export interface Getter {
  /**
   * ID of the existing resource.
   */
  id: string;
  /**
   * Extra properties that identify the resource.
   */
  state?: {
    [k: string]: unknown;
  };
}

/**
 * Observed state of a Program, written by the operator.
 */
export interface ProgramStatus {
  /**
   * The `metadata.generation` this status was computed for.
   */
  observedGeneration?: number;
  /**
   * Conditions of the Program (kstatus conventions), such as `Ready`; when the program is invalid, the reason and message say what to fix.
   */
  conditions?: ProgramCondition[];
  /**
   * The rendered project (a single `Pulumi.yaml`), in the shape of a Flux artifact. Stacks that use this Program deploy it.
   */
  artifact?: Artifact;
  /**
   * This operator's addition: a digest (`sha256:<hex>` of its canonical JSON) of the attached ConfigMap, by `ConfigMap/<name>`, as the last answer asked for it. While the Program is invalid or too large, the operator keeps the ConfigMap only if its last-applied configuration has this digest. See docs/design.md#how-children-are-kept.
   */
  childDigests?: {
    [k: string]: string;
  };
}

/**
 * A condition of a Program.
 */
export interface ProgramCondition {
  /**
   * Condition type, in CamelCase or `domain/CamelCase`.
   */
  type: string;
  /**
   * `True`, `False` or `Unknown`.
   */
  status: "True" | "False" | "Unknown";
  /**
   * Machine-readable reason for the last transition, in CamelCase.
   */
  reason: string;
  /**
   * Human-readable details about the last transition.
   */
  message: string;
  /**
   * When the status last changed.
   */
  lastTransitionTime: string;
  /**
   * The `metadata.generation` the condition was computed from.
   */
  observedGeneration?: number;
}

/**
 * A rendered revision of the program.
 */
export interface Artifact {
  /**
   * Path of the artifact, relative to the server that stores it.
   */
  path: string;
  /**
   * Where the artifact can be read.
   */
  url: string;
  /**
   * Revision of the artifact: the Program's `metadata.generation`.
   */
  revision: string;
  /**
   * Digest of the content, `<algorithm>:<checksum>`, for example `sha256:...`.
   */
  digest?: string;
  /**
   * When this revision was produced.
   */
  lastUpdateTime: string;
  /**
   * Size of the content in bytes.
   */
  size?: number;
  /**
   * Extra information about the artifact.
   */
  metadata?: {
    [k: string]: string;
  };
}

/**
 * Any request body Metacontroller sends to a hook. Each hook validates against its own definition in `$defs`.
 */
export type MetacontrollerHookRequest = CompositeSyncRequest | CustomizeRequest | DecoratorSyncRequest;

/**
 * A Kubernetes object. Only `apiVersion`, `kind` and `metadata` are checked; other fields are passed through.
 */
export interface KubernetesObject {
  /**
   * API version of the object.
   */
  apiVersion: string;
  /**
   * Kind of the object.
   */
  kind: string;
  metadata: ObjectMeta;
  [k: string]: unknown;
}

/**
 * The CompositeController or DecoratorController that made the call.
 */
export interface ControllerObject {
  [k: string]: unknown;
}

/**
 * Objects grouped by type, then by key. The type key is `<Kind>.<version>` for the core group and `<Kind>.<group>/<version>` otherwise; the object key is `<namespace>/<name>` (hook version v2) or `<name>`.
 */
export interface ObjectsByType {
  [k: string]: {
    [k: string]: KubernetesObject;
  };
}

/**
 * Body of a CompositeController sync or finalize call.
 */
export interface CompositeSyncRequest {
  controller?: ControllerObject;
  /**
   * The parent object (a Stack), as Metacontroller sees it.
   */
  parent: KubernetesObject;
  /**
   * The children the parent owns, by type; every declared child type has an entry, possibly empty.
   */
  children?: ObjectsByType;
  /**
   * Related objects selected by the customize hook, by type.
   */
  related?: ObjectsByType;
  /**
   * True for a finalize call: the parent is being deleted.
   */
  finalizing?: boolean;
}

/**
 * Body of a customize call (CompositeController or DecoratorController).
 */
export interface CustomizeRequest {
  controller?: ControllerObject;
  /**
   * The parent or target object.
   */
  parent: KubernetesObject;
}

/**
 * Body of a DecoratorController sync or finalize call.
 */
export interface DecoratorSyncRequest {
  controller?: ControllerObject;
  /**
   * The target object (a Program).
   */
  object: KubernetesObject;
  /**
   * The attachments the target owns, by type.
   */
  attachments?: ObjectsByType;
  /**
   * Related objects selected by the customize hook, by type.
   */
  related?: ObjectsByType;
  /**
   * True for a finalize call.
   */
  finalizing?: boolean;
}

/**
 * Answer to a CompositeController sync or finalize call.
 */
export interface CompositeSyncResponse {
  /**
   * Replaces the whole status of the parent; Metacontroller adds `observedGeneration`. Null wipes it.
   */
  status: {
    [k: string]: unknown;
  } | null;
  /**
   * Every desired child. A child that exists but is not listed is deleted.
   */
  children: KubernetesObject[];
  /**
   * Call sync again after this many seconds (when greater than 0).
   */
  resyncAfterSeconds?: number;
  /**
   * For a finalize call: true when the parent may go.
   */
  finalized?: boolean;
}

/**
 * Answer to a customize call.
 */
export interface CustomizeResponse {
  /**
   * Rules selecting the related objects to send with each sync.
   */
  relatedResources: RelatedResourceRule[];
}

/**
 * Selects related objects of one type. `names` excludes `labelSelector` and `namespaceSelector`; `namespace` excludes `namespaceSelector`.
 */
export interface RelatedResourceRule {
  /**
   * API version of the objects, `<group>/<version>` or `v1`.
   */
  apiVersion: string;
  /**
   * Resource name (lower-case plural), for example `secrets`.
   */
  resource: string;
  /**
   * Select by labels; `{}` selects all.
   */
  labelSelector?: LabelSelector;
  /**
   * Select the namespaces by their labels.
   */
  namespaceSelector?: LabelSelector;
  /**
   * Namespace of the objects.
   */
  namespace?: string;
  /**
   * Names of the objects.
   */
  names?: string[];
}

/**
 * A Kubernetes label selector.
 */
export interface LabelSelector {
  /**
   * Labels that must all be present with these values.
   */
  matchLabels?: {
    [k: string]: string;
  };
  /**
   * Requirements that must all hold.
   */
  matchExpressions?: LabelSelectorRequirement[];
}

/**
 * One label requirement.
 */
export interface LabelSelectorRequirement {
  /**
   * Label key.
   */
  key: string;
  /**
   * `In`, `NotIn`, `Exists` or `DoesNotExist`.
   */
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  /**
   * Values for `In` and `NotIn`.
   */
  values?: string[];
}

/**
 * Answer to a DecoratorController sync or finalize call.
 */
export interface DecoratorSyncResponse {
  /**
   * Labels to set on the target; a null value removes the label. Labels not listed are left alone.
   */
  labels?: {
    [k: string]: string | null;
  };
  /**
   * Annotations to set on the target; a null value removes the annotation.
   */
  annotations?: {
    [k: string]: string | null;
  };
  /**
   * Replaces the whole status of the target; null or absent leaves it unchanged.
   */
  status?: {
    [k: string]: unknown;
  } | null;
  /**
   * Every desired attachment. One that exists but is not listed is deleted.
   */
  attachments: KubernetesObject[];
  /**
   * Call sync again after this many seconds (when greater than 0).
   */
  resyncAfterSeconds?: number;
  /**
   * For a finalize call: true when the target may go.
   */
  finalized?: boolean;
}

/**
 * A Workspace is the pod in which Pulumi runs for one project: it fetches the project (from git, a Flux artifact or a directory of the image), installs its dependencies, and selects and configures its stacks. Updates run operations in it. A Stack makes its own Workspace; one can also be created directly.
 */
export interface Workspace {
  /**
   * API version: `auto.pulumi.com/v1alpha1`.
   */
  apiVersion?: string;
  /**
   * Kind: `Workspace`.
   */
  kind?: string;
  /**
   * Standard object metadata. Updates name the workspace by this name.
   */
  metadata: ObjectMeta;
  /**
   * Desired state of the workspace.
   */
  spec?: WorkspaceSpec;
  /**
   * Observed state, written by the operator.
   */
  status?: WorkspaceStatus;
}

/**
 * Settings of a workspace: where the project comes from, the image and pod it runs in, and its stacks. Set one of `git`, `flux`, `local` or `projectInfo` as the source of the project.
 */
export interface WorkspaceSpec {
  /**
   * Service account of the workspace pod. Defaults to `default`.
   */
  serviceAccountName?: string;
  /**
   * Pod security settings: `restricted` (the default) runs as user and group 1000 without privilege escalation, with all capabilities dropped except NET_BIND_SERVICE and the RuntimeDefault seccomp profile, and meets the `restricted` Pod Security Standard; `baseline` leaves the image's own user (often root), for images or tools that need it.
   */
  securityProfile?: string;
  /**
   * Image of the `pulumi` container: the Pulumi CLI plus the language runtime the project needs. Defaults to the official Pulumi image of the release the operator supports, its `-nonroot` variant for the `restricted` profile.
   */
  image?: string;
  /**
   * Pull policy of `image`: `Always`, `IfNotPresent` or `Never`. Defaults as for any container (`Always` for a `:latest` tag, `IfNotPresent` otherwise).
   */
  imagePullPolicy?: "Always" | "IfNotPresent" | "Never";
  /**
   * Fetch the project from a git repository.
   */
  git?: WorkspaceSpecGitSource;
  /**
   * Fetch the project as a tar.gz artifact, such as one served by Flux's source-controller.
   */
  flux?: WorkspaceFluxSource;
  /**
   * Use a directory of the workspace image as the project instead of fetching one.
   */
  local?: WorkspaceLocalSource;
  /**
   * Fetch nothing: start from an empty project with this name and runtime (a `Pulumi.yaml` with only these two fields).
   */
  projectInfo?: WorkspaceSpecProjectInfo;
  /**
   * Environment variables of the `pulumi` container taken from all keys of ConfigMaps or Secrets. Values set in `env` take precedence.
   */
  envFrom?: EnvFromSource[];
  /**
   * Environment variables of the `pulumi` container, keyed by name.
   */
  env?: EnvVar[];
  /**
   * CPU and memory of the `pulumi` container. Without requests, 64Mi of memory and 100m of CPU are requested.
   */
  resources?: ResourceRequirements;
  /**
   * Merged onto the workspace pod template like a strategic merge patch: add volumes, init containers, sidecars, tolerations, node selectors, pod labels; change the `pulumi` container by listing a container with that name.
   */
  podTemplate?: EmbeddedPodTemplate;
  /**
   * Labels and annotations for the workspace's Service.
   */
  serviceTemplate?: EmbeddedServiceTemplate;
  /**
   * Verbosity of Pulumi's logs for operations, as with `pulumi --verbose=N`. 0 (the default) disables verbose logging.
   */
  pulumiLogLevel?: number;
  /**
   * Stacks to select, create if asked, and configure when the workspace starts, keyed by name. Here one at most: with more, the Workspace is Stalled (MultipleStacksUnsupported); make one Workspace per stack.
   */
  stacks?: WorkspaceSpecStack[];
}

/**
 * A git repository holding the project.
 */
export interface WorkspaceSpecGitSource {
  /**
   * Clone URL of the repository, `https://...` or an SSH URL such as `git@github.com:org/repo.git`.
   */
  url?: string;
  /**
   * Commit SHA, branch or tag to check out.
   */
  ref?: string;
  /**
   * Directory in the repository that holds the project (its `Pulumi.yaml`); the repository root by default.
   */
  dir?: string;
  /**
   * Credentials for the repository; none for a public one.
   */
  auth?: WorkspaceSpecGitAuth;
  /**
   * Clone only the requested commit, without history.
   */
  shallow?: boolean;
}

/**
 * Git credentials, as keys of Secrets in the Workspace's namespace: an SSH key, a user name and password, a token, or a GitHub App.
 */
export interface WorkspaceSpecGitAuth {
  /**
   * SSH private key, for an SSH URL.
   */
  sshPrivateKey?: SecretKeySelector;
  /**
   * User name for HTTPS.
   */
  username?: SecretKeySelector;
  /**
   * Password for HTTPS, or passphrase of the SSH key.
   */
  password?: SecretKeySelector;
  /**
   * Access token for HTTPS.
   */
  token?: SecretKeySelector;
  /**
   * GitHub App credentials, exchanged for an installation token.
   */
  githubApp?: WorkspaceSpecGitHubAppAuth;
}

/**
 * GitHub App credentials, as keys of Secrets.
 */
export interface WorkspaceSpecGitHubAppAuth {
  /**
   * The App's ID.
   */
  appID: SecretKeySelector;
  /**
   * The installation's ID.
   */
  installationID: SecretKeySelector;
  /**
   * The App's private key.
   */
  privateKey: SecretKeySelector;
}

/**
 * Name and runtime of the project to start from.
 */
export interface WorkspaceSpecProjectInfo {
  /**
   * Project name.
   */
  name: string;
  /**
   * Project runtime, for example `nodejs`, `python`, `go` or `yaml`.
   */
  runtime: string;
}

/**
 * A stack of a workspace.
 */
export interface WorkspaceSpecStack {
  /**
   * Stack name, as `pulumi stack select` takes it (`stack`, `org/stack` or `org/project/stack`).
   */
  name: string;
  /**
   * Create the stack when it does not exist.
   */
  create?: boolean;
  /**
   * Secrets provider used when creating the stack, for example `passphrase` or `awskms://...`.
   */
  secretsProvider?: string;
  /**
   * Configuration values set on the stack, keyed by `key`.
   */
  config?: WorkspaceSpecConfigItem[];
  /**
   * Pulumi ESC environments imported by the stack.
   */
  environment?: string[];
}

/**
 * One configuration value of a stack: either `value` or `valueFrom`.
 */
export interface WorkspaceSpecConfigItem {
  /**
   * Config key; without a `namespace:` prefix it belongs to the project.
   */
  key: string;
  /**
   * Treat the key as a property path into a structured value, as `pulumi config set --path`.
   */
  path?: boolean;
  /**
   * The value: a string, or structured data (which needs Pulumi CLI 3.202.0 or later).
   */
  value?: unknown;
  /**
   * Read the value in the workspace pod instead.
   */
  valueFrom?: WorkspaceSpecConfigValueFrom;
  /**
   * Store the value encrypted.
   */
  secret?: boolean;
}

/**
 * Where in the workspace pod a configuration value is read: `env` or `path`.
 */
export interface WorkspaceSpecConfigValueFrom {
  /**
   * Environment variable of the `pulumi` container holding the value.
   */
  env?: string;
  /**
   * File in the `pulumi` container holding the value.
   */
  path?: string;
  /**
   * Parse the value as JSON (structured data needs Pulumi CLI 3.202.0 or later).
   */
  json?: boolean;
}

/**
 * Observed state of a workspace.
 */
export interface WorkspaceStatus {
  /**
   * The `metadata.generation` this status was computed for.
   */
  observedGeneration?: number;
  /**
   * gRPC address of the workspace pod's agent, `<host>:<port>`, through the workspace's Service.
   */
  address?: string;
  /**
   * Version of the Pulumi CLI in the workspace image, for example `v3.200.0`.
   */
  pulumiVersion?: string;
  /**
   * Conditions `Ready` (True once the workspace pod runs and its stacks are selected and configured; its reason says what it waits for otherwise) and `Stalled` (True when the workspace cannot become ready until its spec changes, for example an incompatible configuration). Keyed by `type`.
   */
  conditions?: Condition[];
  /**
   * This operator's addition: how many times the workspace has become Stalled (newly, for another reason, or still after a spec change); absent until it first does. The Warning event of each stall is named by it, so that a sync repeated on a copy of the Workspace older than its last written status names the same event. See docs/design.md#events.
   */
  stalls?: number;
  /**
   * This operator's addition: a digest (`sha256:<hex>` of its canonical JSON) of each child (StatefulSet, Service, Role, RoleBinding), by `<Kind>/<name>`, as the last answer asked for it. While the workspace is held for an operation, the operator keeps a child only if its last-applied configuration has this digest. See docs/design.md#how-children-are-kept.
   */
  childDigests?: {
    [k: string]: string;
  };
}

/**
 * A condition, in the standard Kubernetes shape.
 */
export interface Condition {
  /**
   * Condition type, in CamelCase or `domain/CamelCase`.
   */
  type: string;
  /**
   * `True`, `False` or `Unknown`.
   */
  status: "True" | "False" | "Unknown";
  /**
   * Machine-readable reason for the last transition, in CamelCase.
   */
  reason: string;
  /**
   * Human-readable details about the last transition.
   */
  message: string;
  /**
   * When the status last changed.
   */
  lastTransitionTime: string;
  /**
   * The `metadata.generation` the condition was computed from.
   */
  observedGeneration?: number;
}

/**
 * An Update runs one Pulumi operation (preview, up, destroy or refresh) on a stack of a Workspace, once. Its status reports the result: start and end time, the Pulumi Cloud permalink, the stack outputs, and the conditions Progressing, Failed and Complete. A Stack makes an Update for each operation it runs; one can also be created directly.
 */
export interface Update {
  /**
   * API version: `auto.pulumi.com/v1alpha1`.
   */
  apiVersion?: string;
  /**
   * Kind: `Update`.
   */
  kind?: string;
  /**
   * Standard object metadata.
   */
  metadata: ObjectMeta;
  /**
   * The operation to run.
   */
  spec?: UpdateSpec;
  /**
   * Observed state, written by the operator.
   */
  status?: UpdateStatus;
}

/**
 * The operation an Update runs. Each option applies only to the operation types that take it.
 */
export interface UpdateSpec {
  /**
   * Name of the Workspace, in the Update's namespace, to run the operation in. The Update waits while the workspace is missing or not ready.
   */
  workspaceName?: string;
  /**
   * Stack to run the operation on; it is selected (and created if missing) first.
   */
  stackName?: string;
  /**
   * Operation: `preview`, `up`, `destroy` or `refresh`.
   */
  type?: string;
  /**
   * How long the Update is kept after it completed, as a duration such as `1h` or `30m`, counted from the Complete condition's last transition; then it is deleted. Without it, the Update is kept.
   */
  ttlAfterCompleted?: string;
  /**
   * This operator's addition: the most seconds the operation may take, counted from when its Job's pod starts. When it passes, the operation is cancelled (Pulumi stops after the steps in flight and unlocks the stack) and fails with reason `DeadlineExceeded`; the Job's `activeDeadlineSeconds` is this plus 60 s, in case the cancel cannot run. Without it, the hooks' OPERATION_DEADLINE_SECONDS applies, if set; else there is no deadline.
   */
  activeDeadlineSeconds?: number;
  /**
   * This operator's addition, for `type: refresh`: only preview the refresh (`pulumi refresh --preview-only`), so the stack's state is left unchanged; `status.changedResources` and `status.changedResourceUrns` say which resources differ from the state (drift). A Stack's drift checks are such Updates (`spec.driftDetection`).
   */
  previewOnly?: boolean;
  /**
   * Maximum number of resource operations run at the same time (all types).
   */
  parallel?: number;
  /**
   * Message recorded with the update in the stack's history (all types).
   */
  message?: string;
  /**
   * Fail the operation if it would change anything (`preview`, `up`, `refresh`).
   */
  expectNoChanges?: boolean;
  /**
   * URNs of resources to replace even when they have not changed (`preview`, `up`).
   */
  replace?: string[];
  /**
   * URNs of the resources the operation is limited to (all types).
   */
  target?: string[];
  /**
   * With `target`: include the resources that depend on the targeted ones (`preview`, `up`, `destroy`).
   */
  targetDependents?: boolean;
  /**
   * Refresh the state from the actual resources before the operation (`preview`, `up`, `destroy`).
   */
  refresh?: boolean;
  /**
   * Keep going after a resource fails, updating all resources that do not depend on it (`up`, `destroy`).
   */
  continueOnError?: boolean;
  /**
   * After the destroy, also remove the stack and its configuration from the backend (`destroy`).
   */
  remove?: boolean;
  /**
   * Run the program to compute the resources (`refresh`, `destroy`).
   */
  runProgram?: boolean;
  /**
   * This operator's addition, `preview` only: save the preview's update plan in the workspace pod under this Update's name, for an `up` that names it in `plan`. The plan lasts as long as the workspace pod.
   */
  savePlan?: boolean;
  /**
   * This operator's addition, `up` only: apply exactly the plan the preview Update of this name saved (`pulumi up --plan`). If the workspace no longer has it (its pod was replaced), the Update fails with reason `PlanNotFound` and nothing is applied.
   */
  plan?: string;
  /**
   * This operator's addition: recover from an interrupted operation before this one (all types). A lock that an operation of this workspace left behind when it was killed (taken on the workspace pod's host by a `pulumi` process that no longer runs there) is removed with `pulumi cancel` and the operation runs again, once; pending operations left in the state are resolved with `pulumi refresh --clear-pending-creates` first (not for `preview`). What was done is appended to the status message. See docs/self-healing.md.
   */
  selfHealing?: boolean;
}

/**
 * Result of an Update.
 */
export interface UpdateStatus {
  /**
   * The `metadata.generation` this status was computed for.
   */
  observedGeneration?: number;
  /**
   * When the operation started.
   */
  startTime?: string;
  /**
   * When the operation ended.
   */
  endTime?: string;
  /**
   * Link to the update in Pulumi Cloud, when the stack's backend is Pulumi Cloud.
   */
  permalink?: string;
  /**
   * Result message: the error of a failed operation.
   */
  message?: string;
  /**
   * Name of the Secret, in the Update's namespace, that holds all the stack outputs of an `up`, one key per output with its value as JSON, secret values included.
   */
  outputs?: string;
  /**
   * Conditions `Progressing` (True while the operation runs), `Failed` (True when it failed or was aborted; its reason says why) and `Complete` (True once it is over, whatever the result). Keyed by `type`.
   */
  conditions?: Condition[];
  /**
   * Name and runtime of the project the operation ran.
   */
  projectInfo?: StackProjectInfo;
  /**
   * This operator's addition: the stack outputs after an `up`, with every secret value replaced by the string `[secret]`, so that readers need no access to the Secret `outputs`. Only as many as fit: see `outputsOmitted`.
   */
  outputValues?: {
    /**
     * An output's value: a string, or structured data.
     */
    [k: string]: unknown;
  };
  /**
   * This operator's addition: True when some outputs did not fit in `outputValues`; all of them are in the Secret `outputs`.
   */
  outputsOmitted?: boolean;
  /**
   * This operator's addition: how many outputs the stack has (those in `outputValues` and those omitted).
   */
  outputsTotal?: number;
  /**
   * This operator's addition: what the `up` of a Stack with `spec.outputsTo` wrote there.
   */
  outputsTo?: UpdateOutputsTo;
  /**
   * This operator's addition, for a `refresh`: how many resources the refresh found different from the stack's state (drifted), or would change with `previewOnly`.
   */
  changedResources?: number;
  /**
   * This operator's addition, for a `refresh`: the URNs of the first of those resources (at most 20), in the order the refresh reported them.
   */
  changedResourceUrns?: string[];
  /**
   * This operator's addition: resource changes by operation (`create`, `update`, `delete`, `replace`, `same`, …), from Pulumi's summary of the operation.
   */
  resourceChanges?: {
    [k: string]: number;
  };
}

/**
 * The Secret or ConfigMap an `up` wrote the outputs to, and the outputs it left out.
 */
export interface UpdateOutputsTo {
  /**
   * `Secret` or `ConfigMap`.
   */
  kind: string;
  /**
   * Name of the object, in the Update's namespace.
   */
  name: string;
  /**
   * `written`, or `conflict`: an object of that name that is not the Stack's exists, and was left untouched.
   */
  state: string;
  /**
   * Outputs left out, by why.
   */
  skipped?: UpdateOutputsToSkipped;
}

/**
 * Outputs an `up` did not write to the Stack's `spec.outputsTo` object. Each list names at most 20.
 */
export interface UpdateOutputsToSkipped {
  /**
   * Secret outputs, which a ConfigMap never holds.
   */
  secret?: string[];
  /**
   * Outputs whose names are not valid keys: list them in `spec.outputsTo.outputs` with a `key`.
   */
  invalidKey?: string[];
  /**
   * Outputs listed in `spec.outputsTo.outputs` that the stack does not have.
   */
  missing?: string[];
  /**
   * How many outputs were left out, in all.
   */
  total: number;
}
