"""Installs Metacontroller (optional), the operator and one Stack (docs/install-with-pulumi.md).

The Stack is a `kubernetes` CustomResource, as upstream's documentation creates it from Python:
the typed classes of this repository are TypeScript only.
"""

import pulumi
import pulumi_kubernetes as k8s

config = pulumi.Config()
# Defaults are in Pulumi.yaml.
namespace = config.require("namespace")
commit = config.get("commit")

# Metacontroller from its upstream manifests, unless the cluster has it already.
metacontroller = []
if config.require_bool("installMetacontroller"):
    metacontroller.append(
        k8s.kustomize.v2.Directory("metacontroller", directory="../metacontroller/true")
    )

# The operator: CRDs, the hook server and its Metacontroller controllers (the quickstart manifest).
operator = k8s.yaml.v2.ConfigFile(
    "pulumi-mc-operator",
    file="../../manifests/install.yaml",
    opts=pulumi.ResourceOptions(depends_on=metacontroller),
)

# The Stack's ServiceAccount: its workspace checks callers with TokenReviews (manifests/stack-rbac.yaml).
service_account = k8s.core.v1.ServiceAccount("pulumi", metadata={"namespace": namespace})
auth_delegator = k8s.rbac.v1.ClusterRoleBinding(
    "pulumi:auth-delegator",
    role_ref={
        "api_group": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "system:auth-delegator",
    },
    subjects=[
        {
            "kind": "ServiceAccount",
            "name": service_account.metadata.name,
            "namespace": namespace,
        }
    ],
)

# The Pulumi access token, from the secret config value.
token = k8s.core.v1.Secret(
    "pulumi-api-secret",
    metadata={"namespace": namespace},
    string_data={"accessToken": config.require_secret("pulumiAccessToken")},
)

# A pinned commit, or the branch's head followed as it moves.
source = {"commit": commit} if commit else {"branch": config.require("branch")}

stack = k8s.apiextensions.CustomResource(
    "app",
    api_version="pulumi.com/v1",
    kind="Stack",
    metadata={"namespace": namespace},
    spec={
        "stack": config.require("stack"),
        "projectRepo": config.require("projectRepo"),
        "repoDir": config.require("repoDir"),
        **source,
        "serviceAccountName": service_account.metadata.name,
        "envRefs": {
            "PULUMI_ACCESS_TOKEN": {
                "type": "Secret",
                "secret": {"name": token.metadata.name, "key": "accessToken"},
            },
        },
        "destroyOnFinalize": True,
    },
    opts=pulumi.ResourceOptions(depends_on=[operator, auth_delegator]),
)

# A CustomResource's metadata is a plain dict (no attribute access).
pulumi.export("stackName", stack.metadata.apply(lambda metadata: metadata["name"]))
