package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	csi "github.com/csi-gateway/csi-gateway/internal/csiv0"
	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// v0EchoDriver is a CSI v0 driver on the generated stubs that fails every secret-bearing RPC
// with PERMISSION_DENIED and a message that echoes the request, secrets and all, as a careless
// v0 driver does ("bad credentials: secretKey=…"), and records what it received.
type v0EchoDriver struct {
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer
	received chan proto.Message
}

func (d *v0EchoDriver) echo(req proto.Message, secrets map[string]string) error {
	d.received <- req
	var words []string
	for k, v := range secrets {
		words = append(words, k+"="+v)
	}
	slices.Sort(words)
	return status.Errorf(codes.PermissionDenied, "bad credentials: %s (request %s)", strings.Join(words, " "), prototext.Format(req))
}

func (d *v0EchoDriver) CreateVolume(_ context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	return nil, d.echo(r, r.GetControllerCreateSecrets())
}

func (d *v0EchoDriver) DeleteVolume(_ context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return nil, d.echo(r, r.GetControllerDeleteSecrets())
}

func (d *v0EchoDriver) ControllerPublishVolume(_ context.Context, r *csi.ControllerPublishVolumeRequest) (*csi.ControllerPublishVolumeResponse, error) {
	return nil, d.echo(r, r.GetControllerPublishSecrets())
}

func (d *v0EchoDriver) ControllerUnpublishVolume(_ context.Context, r *csi.ControllerUnpublishVolumeRequest) (*csi.ControllerUnpublishVolumeResponse, error) {
	return nil, d.echo(r, r.GetControllerUnpublishSecrets())
}

func (d *v0EchoDriver) CreateSnapshot(_ context.Context, r *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	return nil, d.echo(r, r.GetCreateSnapshotSecrets())
}

func (d *v0EchoDriver) DeleteSnapshot(_ context.Context, r *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	return nil, d.echo(r, r.GetDeleteSnapshotSecrets())
}

func (d *v0EchoDriver) NodeStageVolume(_ context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	return nil, d.echo(r, r.GetNodeStageSecrets())
}

func (d *v0EchoDriver) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	return nil, d.echo(r, r.GetNodePublishSecrets())
}

// v0SecretRPCs are the CSI v0 RPCs whose request carries secrets: six of v0.2, two of v0.3.
var v0SecretRPCs = []string{
	"/csi.v0.Controller/ControllerPublishVolume", "/csi.v0.Controller/ControllerUnpublishVolume",
	"/csi.v0.Controller/CreateSnapshot", "/csi.v0.Controller/CreateVolume", "/csi.v0.Controller/DeleteSnapshot",
	"/csi.v0.Controller/DeleteVolume", "/csi.v0.Node/NodePublishVolume", "/csi.v0.Node/NodeStageVolume",
}

// TestV0DriverEchoesSecrets: the real gateway, at debug level with spans on stdout, in front of
// a v0 driver that echoes every secret it receives in its error messages, for every v0
// secret-bearing RPC, with canary secrets: the driver receives them intact, and no canary is
// in the caller's error, the gateway's log and spans, the tap (table and JSON) or /metrics.
func TestV0DriverEchoesSecrets(t *testing.T) {
	dir := t.TempDir()
	driver := &v0EchoDriver{received: make(chan proto.Message, len(v0SecretRPCs))}
	sock := filepath.Join(dir, "v0-driver.sock")
	ds := grpc.NewServer()
	csi.RegisterControllerServer(ds, driver)
	csi.RegisterNodeServer(ds, driver)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go ds.Serve(l)
	t.Cleanup(ds.Stop)

	admin := testutil.FreeAddr(t)
	gw := startGatewayWith(t, dir, fmt.Sprintf(`admin: {listen: %q}
backends:
  v0driver: {type: grpc, target: "unix://%s"}
routes:
  - {methods: ["*"], backend: v0driver}
logging: {level: debug}
tracing: {exporter: stdout, sampleRatio: 1}
`, admin, sock))
	waitListening(t, gw.Process, admin)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	tapJSON := startTapOutput(ctx, t, admin, len(v0SecretRPCs), "json")
	tapTable := startTapOutput(ctx, t, admin, len(v0SecretRPCs), "table")

	canaries := map[string][]string{} // by method
	var all []string
	for _, m := range v0SecretRPCs {
		short := m[strings.LastIndex(m, "/")+1:]
		secrets := map[string]string{"secretKey": "CANARY-v0-" + short + "-key-7f3a", "password": "CANARY-v0-" + short + "-pw-91c2"}
		canaries[m] = []string{secrets["secretKey"], secrets["password"]}
		all = append(all, canaries[m]...)
		req, ok := testutil.V0Requests(secrets)[m]
		if !ok {
			t.Fatalf("no v0 request for %s", m)
		}
		_, err := invoke(ctx, gw.Conn, m, req)
		st := checkStatus(t, short, err, codes.PermissionDenied)
		if !strings.Contains(st.Message(), "bad credentials") {
			t.Errorf("%s: the caller's message %q lost the driver's words", short, st.Message())
		}
		for _, c := range all {
			if strings.Contains(st.Message(), c) {
				t.Errorf("%s: the caller's error holds canary %s: %q", short, c, st.Message())
			}
		}
		select {
		case got := <-driver.received:
			if !proto.Equal(got, req) {
				t.Errorf("%s: the driver received %v, want %v", short, got, req)
			}
		default:
			t.Errorf("%s: the driver was not called", short)
		}
	}

	sinks := map[string]string{}
	sinks["tap --output json"], _ = tapJSON()
	sinks["tap --output table"], _ = tapTable()
	_, metrics, err := getHTTP("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	sinks["/metrics"] = metrics
	stopAndCheckCanaries(t, gw, sinks, all)

	// Redaction that works by writing nothing would pass the checks above.
	out := gw.Output()
	for _, m := range v0SecretRPCs {
		short := m[strings.LastIndex(m, "/")+1:]
		if !strings.Contains(out, `"method":"`+short+`"`) || !strings.Contains(sinks["tap --output json"], `"method":"`+short+`"`) {
			t.Errorf("%s is missing from the debug log or the tap", short)
		}
	}
	for _, want := range []string{`***stripped***`, `"volume_id":"vol-1"`, `"SpanID"`, "bad credentials"} {
		if !strings.Contains(out, want) {
			t.Errorf("the gateway's output does not contain %s", want)
		}
	}
	for _, want := range []string{`csi.v0.Controller/CreateVolume`, `PermissionDenied`} {
		if !strings.Contains(metrics+sinks["tap --output table"], want) {
			t.Errorf("neither /metrics nor the tap's table mention %s", want)
		}
	}
	t.Logf("%d v0 secret-bearing RPCs, %d canaries, absent from %d outputs", len(v0SecretRPCs), len(all), len(sinks))
}
