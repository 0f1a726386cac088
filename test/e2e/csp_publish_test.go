package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/csi-gateway/csi-gateway/backends/rest/csp/cspfake"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// TestCSPPublishThroughNodeRegistry is the node initiators' documented path, through the
// real binary: on the node, `csi-gateway initiators --write DIR` reads the node's initiator
// files and publishes them in the registry; the controller-side gateway, with
// csp.nodeRegistry and no static nodes, registers the node with the CSP from it at
// ControllerPublishVolume, and hands the node the CSP's answer in publish_context (no CHAP).
func TestCSPPublishThroughNodeRegistry(t *testing.T) {
	dir := t.TempDir()
	registry := filepath.Join(dir, "initiators")
	fixture, err := filepath.Abs("../../backends/rest/csp/initiators/testdata/iscsi-debian")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(testutil.Binary(t), "initiators", "--root", fixture, "--node-id", "worker-7",
		"--networks", "192.0.2.0/24", "--write", registry).CombinedOutput()
	if err != nil {
		t.Fatalf("csi-gateway initiators: %v\n%s", err, out)
	}
	iqn := strings.Trim(strings.SplitN(strings.SplitN(string(out), `iqns: [`, 2)[1], "]", 2)[0], `"`)

	fake, csp := startFakeCSP(t, dir, cspfake.Options{Profile: cspfake.ProfileHPE})
	endpoint := "unix://" + filepath.Join(dir, "csi.sock")
	testutil.Start(t, "serve", "--config", writeFile(t, filepath.Join(dir, "gateway.yaml"), fmt.Sprintf(`listeners: [{endpoint: %q}]
backends:
  array:
    type: rest
    protocol: csp
    urls: [%q]
    tls: {ca: %s, serverName: example.com}
    auth: {usernameFile: %s, passwordFile: %s}
    csp: {profile: hpe, nodeRegistry: %s}
routes: [{methods: ["*"], backend: array}]
`, endpoint, csp.url, csp.ca, csp.user, csp.password, registry)))
	ctl := csi.NewControllerClient(testutil.Dial(t, endpoint))
	ctx := callCtx(t)
	mount := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}
	vol, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-published", VolumeCapabilities: []*csi.VolumeCapability{mount},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol.GetVolume().GetVolumeId(), NodeId: "worker-7", VolumeCapability: mount})
	if err != nil {
		t.Fatalf("ControllerPublishVolume: %v", err)
	}
	hosts := fake.Hosts()
	if len(hosts) != 1 || hosts[0].UUID != "worker-7" || !slices.Equal(hosts[0].IQNs, []string{iqn}) || !slices.Equal(hosts[0].Networks, []string{"192.0.2.0/24"}) {
		t.Errorf("the CSP's hosts: %+v; want worker-7 with %s from the registry", hosts, iqn)
	}
	pc := pub.GetPublishContext()
	if pc["accessProtocol"] != "iscsi" || pc["targetNames"] == "" || pc["serialNumber"] == "" || pc["lunId"] == "" || pc["fsType"] != "ext4" {
		t.Errorf("publish_context %v lacks what the node needs", pc)
	}
	for k := range pc {
		if strings.Contains(strings.ToLower(k), "chap") {
			t.Errorf("publish_context carries %s: CHAP must never be in it", k)
		}
	}
	// A node in neither the registry nor csp.nodes: NOT_FOUND, naming both.
	_, err = ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: vol.GetVolume().GetVolumeId(), NodeId: "worker-unknown", VolumeCapability: mount})
	if st := checkStatus(t, "ControllerPublishVolume to an unknown node", err, codes.NotFound); !strings.Contains(st.Message(), "nodeRegistry") {
		t.Errorf("an unknown node: %v; want NOT_FOUND naming csp.nodeRegistry", err)
	}
	if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol.GetVolume().GetVolumeId(), NodeId: "worker-7"}); err != nil {
		t.Errorf("ControllerUnpublishVolume: %v", err)
	}
	if n := fake.Counters().Publishes; n != 0 {
		t.Errorf("%d publications left", n)
	}
	if v := fake.ContractViolations(); len(v) > 0 {
		t.Errorf("outside the contract: %v", v)
	}
}
