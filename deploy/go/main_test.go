package main

// Runs the program under Pulumi's mocks and writes what it registered (type, name, inputs) as JSON
// to the file REGISTERED_JSON names, for deploy/deploy.test.ts to check as it checks the TypeScript
// program's. The config is PULUMI_CONFIG's, as the CLI would pass it (Pulumi.yaml's defaults applied).

import (
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

type registration struct {
	Type   string         `json:"type"`
	Name   string         `json:"name"`
	Inputs map[string]any `json:"inputs"`
}

// mocks records each registration and answers with its inputs and a generated name (as the
// provider's auto-naming would).
type mocks struct {
	mu         sync.Mutex
	registered []registration
}

func (m *mocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	m.mu.Lock()
	m.registered = append(m.registered, registration{args.TypeToken, args.Name, args.Inputs.Mappable()})
	m.mu.Unlock()
	state := args.Inputs.Copy()
	metadata := resource.PropertyMap{}
	if md := state["metadata"]; md.IsObject() {
		metadata = md.ObjectValue().Copy()
	}
	metadata["name"] = resource.NewStringProperty(args.Name + "-abc")
	state["metadata"] = resource.NewObjectProperty(metadata)
	return args.Name + "-id", state, nil
}

func (m *mocks) Call(pulumi.MockCallArgs) (resource.PropertyMap, error) {
	return resource.PropertyMap{}, nil
}

func TestInstallUnderMocks(t *testing.T) {
	out := os.Getenv("REGISTERED_JSON")
	if out == "" {
		t.Fatal("REGISTERED_JSON is not set: run this through deploy/deploy.test.ts (npx jest deploy/deploy.test.ts)")
	}
	m := &mocks{}
	if err := pulumi.RunErr(install, pulumi.WithMocks("pulumi-mc-operator-install", "dev", m)); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(m.registered)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
