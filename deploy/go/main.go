// Installs Metacontroller (optional), the operator and one Stack: deploy/typescript in Go
// (docs/install-with-pulumi.md). Runs from a clone of this repository (the manifests are read by
// relative path); the SDKs come from the Go module proxy (go.mod).
package main

import (
	k8s "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/apiextensions"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	kustomize "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/kustomize/v2"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	rbacv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/rbac/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi/config"
)

func main() {
	pulumi.Run(install)
}

func install(ctx *pulumi.Context) error {
	cfg := config.New(ctx, "")
	// Defaults are in Pulumi.yaml.
	namespace := cfg.Require("namespace")
	commit := cfg.Get("commit")

	// Metacontroller from its upstream manifests, unless the cluster has it already.
	var metacontroller []pulumi.Resource
	if cfg.RequireBool("installMetacontroller") {
		dir, err := kustomize.NewDirectory(ctx, "metacontroller", &kustomize.DirectoryArgs{
			Directory: pulumi.String("../metacontroller/true"),
		})
		if err != nil {
			return err
		}
		metacontroller = append(metacontroller, dir)
	}

	// The operator: CRDs, the hook server and its Metacontroller controllers (the quickstart manifest).
	operator, err := newConfigFile(ctx, "pulumi-mc-operator", "../../manifests/install.yaml", pulumi.DependsOn(metacontroller))
	if err != nil {
		return err
	}

	// The Stack's ServiceAccount: its workspace checks callers with TokenReviews (manifests/stack-rbac.yaml).
	serviceAccount, err := corev1.NewServiceAccount(ctx, "pulumi", &corev1.ServiceAccountArgs{
		Metadata: &metav1.ObjectMetaArgs{Namespace: pulumi.String(namespace)},
	})
	if err != nil {
		return err
	}
	authDelegator, err := rbacv1.NewClusterRoleBinding(ctx, "pulumi:auth-delegator", &rbacv1.ClusterRoleBindingArgs{
		RoleRef: &rbacv1.RoleRefArgs{
			ApiGroup: pulumi.String("rbac.authorization.k8s.io"),
			Kind:     pulumi.String("ClusterRole"),
			Name:     pulumi.String("system:auth-delegator"),
		},
		Subjects: rbacv1.SubjectArray{&rbacv1.SubjectArgs{
			Kind:      pulumi.String("ServiceAccount"),
			Name:      serviceAccount.Metadata.Name().Elem(),
			Namespace: pulumi.String(namespace),
		}},
	})
	if err != nil {
		return err
	}

	// The Pulumi access token, from the secret config value.
	token, err := corev1.NewSecret(ctx, "pulumi-api-secret", &corev1.SecretArgs{
		Metadata:   &metav1.ObjectMetaArgs{Namespace: pulumi.String(namespace)},
		StringData: pulumi.StringMap{"accessToken": cfg.RequireSecret("pulumiAccessToken")},
	})
	if err != nil {
		return err
	}

	spec := pulumi.Map{
		"stack":              pulumi.String(cfg.Require("stack")),
		"projectRepo":        pulumi.String(cfg.Require("projectRepo")),
		"repoDir":            pulumi.String(cfg.Require("repoDir")),
		"serviceAccountName": serviceAccount.Metadata.Name().Elem(),
		"envRefs": pulumi.Map{
			"PULUMI_ACCESS_TOKEN": pulumi.Map{
				"type":   pulumi.String("Secret"),
				"secret": pulumi.Map{"name": token.Metadata.Name().Elem(), "key": pulumi.String("accessToken")},
			},
		},
		"destroyOnFinalize": pulumi.Bool(true),
	}
	// A pinned commit, or the branch's head followed as it moves.
	if commit != "" {
		spec["commit"] = pulumi.String(commit)
	} else {
		spec["branch"] = pulumi.String(cfg.Require("branch"))
	}
	stack, err := apiextensions.NewCustomResource(ctx, "app", &apiextensions.CustomResourceArgs{
		ApiVersion:  pulumi.String("pulumi.com/v1"),
		Kind:        pulumi.String("Stack"),
		Metadata:    &metav1.ObjectMetaArgs{Namespace: pulumi.String(namespace)},
		OtherFields: k8s.UntypedArgs{"spec": spec},
	}, pulumi.DependsOn([]pulumi.Resource{operator, authDelegator}))
	if err != nil {
		return err
	}

	ctx.Export("stackName", stack.Metadata.Name().Elem())
	return nil
}
