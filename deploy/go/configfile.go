package main

import (
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/utilities"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// configFile is the Kubernetes provider's yaml/v2 ConfigFile, registered as the SDK's own
// kubernetes/yaml/v2 package registers it (the same type token, inputs and default options). That
// package is not imported: it imports every API group of the SDK (its kinds.go), 69 packages whose
// first compile took about an hour on this repository's 2-core machine
// (docs/install-with-pulumi.md#go), where this program needs five of them.
type configFile struct {
	pulumi.ResourceState

	// The objects the provider made from the file.
	Resources pulumi.ArrayOutput `pulumi:"resources"`
}

func newConfigFile(ctx *pulumi.Context, name, file string, opts ...pulumi.ResourceOption) (*configFile, error) {
	var resource configFile
	args := pulumi.Map{"file": pulumi.String(file)}
	opts = utilities.PkgResourceDefaultOpts(opts)
	if err := ctx.RegisterRemoteComponentResource("kubernetes:yaml/v2:ConfigFile", name, args, &resource, opts...); err != nil {
		return nil, err
	}
	return &resource, nil
}
