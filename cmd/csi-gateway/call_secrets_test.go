package main

import (
	"testing"

	"github.com/csi-addons/spec/lib/go/volumegroup"
)

func TestFillSecretsFindsVolumeGroupSecrets(t *testing.T) {
	file := writeFile(t, "s.yaml", "password: "+canary+"\n")
	m, err := resolveMethod("volumegroup.Controller/CreateVolumeGroup")
	if err != nil {
		t.Fatal(err)
	}
	req := &volumegroup.CreateVolumeGroupRequest{}
	if err := (&callOptions{secretsFile: file}).fillSecrets(m, req); err != nil {
		t.Fatal(err)
	}
	if req.GetSecrets()["password"] != canary {
		t.Fatalf("secrets = %v", req.GetSecrets())
	}
}
