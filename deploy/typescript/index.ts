// Installs Metacontroller (optional), the operator and one Stack, with the typed Stack class
// generated from schemas/ (docs/install-with-pulumi.md). Runs from a clone of this repository:
// there is no package.json here, so modules resolve from the repository's own node_modules and
// `pulumi-metacontroller-operator/pulumi` is the repository's package export (run `npm run build`
// once at the root first).
import * as pulumi from '@pulumi/pulumi';
import * as k8s from '@pulumi/kubernetes';
import * as crds from 'pulumi-metacontroller-operator/pulumi';

const config = new pulumi.Config();
// Defaults are in Pulumi.yaml.
const namespace = config.require('namespace');
const commit = config.get('commit');

// Metacontroller from its upstream manifests, unless the cluster has it already.
const metacontroller = config.requireBoolean('installMetacontroller')
  ? [new k8s.kustomize.v2.Directory('metacontroller', { directory: '../metacontroller/true' })]
  : [];

// The operator: CRDs, the hook server and its Metacontroller controllers (the quickstart manifest).
const operator = new k8s.yaml.v2.ConfigFile(
  'pulumi-mc-operator',
  { file: '../../manifests/install.yaml' },
  { dependsOn: metacontroller },
);

// The Stack's ServiceAccount: its workspace checks callers with TokenReviews (manifests/stack-rbac.yaml).
const serviceAccount = new k8s.core.v1.ServiceAccount('pulumi', { metadata: { namespace } });
const authDelegator = new k8s.rbac.v1.ClusterRoleBinding('pulumi:auth-delegator', {
  roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:auth-delegator' },
  subjects: [{ kind: 'ServiceAccount', name: serviceAccount.metadata.name, namespace }],
});

// The Pulumi access token, from the secret config value.
const token = new k8s.core.v1.Secret('pulumi-api-secret', {
  metadata: { namespace },
  stringData: { accessToken: config.requireSecret('pulumiAccessToken') },
});

const stack = new crds.pulumi.v1.Stack(
  'app',
  {
    metadata: { namespace },
    spec: {
      stack: config.require('stack'),
      projectRepo: config.require('projectRepo'),
      repoDir: config.require('repoDir'),
      // A pinned commit, or the branch's head followed as it moves.
      ...(commit ? { commit } : { branch: config.require('branch') }),
      serviceAccountName: serviceAccount.metadata.name,
      envRefs: {
        PULUMI_ACCESS_TOKEN: { type: 'Secret', secret: { name: token.metadata.name, key: 'accessToken' } },
      },
      destroyOnFinalize: true,
    },
  },
  { dependsOn: [operator, authDelegator] },
);

export const stackName = stack.metadata.name;
export const lastUpdate = stack.status.apply((status) => status?.lastUpdate?.state);
