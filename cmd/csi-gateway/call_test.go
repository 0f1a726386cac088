package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"

	"github.com/csi-gateway/csi-gateway/backends/embedded"
)

const canary = "CANARY-call-9d2f"

// seenSecrets records the secrets map of every request the test server receives.
type seenSecrets struct {
	mu   sync.Mutex
	maps []map[string]string
}

func (s *seenSecrets) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if r, ok := req.(interface{ GetSecrets() map[string]string }); ok && len(r.GetSecrets()) > 0 {
		s.mu.Lock()
		s.maps = append(s.maps, maps.Clone(r.GetSecrets()))
		s.mu.Unlock()
	}
	return h(ctx, req)
}

func (s *seenSecrets) all() []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.maps)
}

// metadataServer streams two allocated-block messages for any GetMetadataAllocated call.
type metadataServer struct {
	csi.UnimplementedSnapshotMetadataServer
}

func (metadataServer) GetMetadataAllocated(_ *csi.GetMetadataAllocatedRequest, s csi.SnapshotMetadata_GetMetadataAllocatedServer) error {
	for i := range int64(2) {
		if err := s.Send(&csi.GetMetadataAllocatedResponse{VolumeCapacityBytes: 1 << 20, BlockMetadata: []*csi.BlockMetadata{{ByteOffset: i * 4096, SizeBytes: 4096}}}); err != nil {
			return err
		}
	}
	return nil
}

// startAppliance serves the reference appliance on a Unix socket in a temporary directory,
// with an interceptor recording the secrets each call carried, and returns its endpoint.
func startAppliance(t *testing.T) (string, *seenSecrets) {
	t.Helper()
	dir := t.TempDir()
	a, err := embedded.Open(embedded.Config{DataDir: filepath.Join(dir, "data")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	seen := &seenSecrets{}
	srv := grpc.NewServer(grpc.UnaryInterceptor(seen.intercept))
	a.Register(srv)
	csi.RegisterSnapshotMetadataServer(srv, metadataServer{})
	sock := filepath.Join(dir, "csi.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return "unix://" + sock, seen
}

// call runs `csi-gateway call --endpoint ep args...` and returns stdout, stderr and the error.
func call(t *testing.T, ep string, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(t.Context(), append([]string{"call", "--endpoint", ep}, args...), &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// mustCall runs a call that must succeed and decodes its JSON output.
func mustCall(t *testing.T, ep string, args ...string) map[string]any {
	t.Helper()
	stdout, stderr, err := call(t, ep, args...)
	if err != nil {
		t.Fatalf("call %q: %v; stderr: %s", args, err, stderr)
	}
	var out map[string]any
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("call %q: output is not one JSON object: %v\n%s", args, err, stdout)
	}
	return out
}

func exitStatus(err error) int {
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const createJSON = `{"name":"%s","volume_capabilities":[{"mount":{},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}],"capacityRange":{"requiredBytes":"1048576"}}`

func TestCallGenericCreateVolume(t *testing.T) {
	ep, _ := startAppliance(t)
	out := mustCall(t, ep, "Controller/CreateVolume", strings.Replace(createJSON, "%s", "generic-1", 1))
	vol, _ := out["volume"].(map[string]any)
	if id, _ := vol["volumeId"].(string); id == "" {
		t.Fatalf("no volume.volumeId in %v", out)
	}
	if vol["capacityBytes"] != "1048576" {
		t.Errorf("capacityBytes = %v, want \"1048576\"", vol["capacityBytes"])
	}

	// The same request from a file.
	file := writeFile(t, "req.json", strings.Replace(createJSON, "%s", "generic-2", 1))
	out = mustCall(t, ep, "csi.v1.Controller/CreateVolume", "@"+file)
	if _, ok := out["volume"]; !ok {
		t.Fatalf("@file: no volume in %v", out)
	}
}

func TestCallMethodSpellings(t *testing.T) {
	ep, _ := startAppliance(t)
	for _, m := range []string{"Identity/GetPluginInfo", "csi.v1.Identity/GetPluginInfo", "/csi.v1.Identity/GetPluginInfo"} {
		t.Run(m, func(t *testing.T) {
			out := mustCall(t, ep, m)
			if out["name"] != "embedded.csi-gateway.io" {
				t.Errorf("name = %v", out["name"])
			}
		})
	}
	// A bare service found outside csi.v1: the csi-addons VolumeGroup controller.
	m, err := resolveMethod("Controller/CreateVolumeGroup")
	if err != nil || m.full != "/volumegroup.Controller/CreateVolumeGroup" {
		t.Errorf("Controller/CreateVolumeGroup resolved to %q, %v", m.full, err)
	}
	if m, err := resolveMethod("volumegroup.Controller/CreateVolumeGroup"); err != nil || m.full != "/volumegroup.Controller/CreateVolumeGroup" {
		t.Errorf("volumegroup.Controller/CreateVolumeGroup resolved to %q, %v", m.full, err)
	}
}

func TestCallAliasRoundTrip(t *testing.T) {
	ep, _ := startAppliance(t)
	out := mustCall(t, ep, "create-volume", "pvc-round", "--size", "64Mi", "--fs", "ext4", "--param", "tier=premium")
	vol := out["volume"].(map[string]any)
	id := vol["volumeId"].(string)
	if vol["capacityBytes"] != "67108864" {
		t.Errorf("capacityBytes = %v, want 64Mi", vol["capacityBytes"])
	}
	if !strings.Contains(mustCallRaw(t, ep, "list-volumes", "--max", "10"), id) {
		t.Fatalf("list-volumes does not show %s", id)
	}
	out = mustCall(t, ep, "get-volume", id)
	if got := out["volume"].(map[string]any)["volumeId"]; got != id {
		t.Errorf("get-volume: volumeId = %v", got)
	}
	if out := mustCall(t, ep, "delete-volume", id); len(out) != 0 {
		t.Errorf("delete-volume printed %v, want {}", out)
	}
	if strings.Contains(mustCallRaw(t, ep, "list-volumes"), id) {
		t.Fatalf("list-volumes still shows %s after delete-volume", id)
	}
}

func mustCallRaw(t *testing.T, ep string, args ...string) string {
	t.Helper()
	stdout, stderr, err := call(t, ep, args...)
	if err != nil {
		t.Fatalf("call %q: %v; stderr: %s", args, err, stderr)
	}
	return stdout
}

func TestCallCaps(t *testing.T) {
	ep, _ := startAppliance(t)
	out := mustCall(t, ep, "caps")
	for _, k := range []string{"plugin", "controller", "node"} {
		if _, ok := out[k]; !ok {
			t.Errorf("caps has no %q member: %v", k, out)
		}
	}
}

func TestCallStreaming(t *testing.T) {
	ep, _ := startAppliance(t)
	stdout, stderr, err := call(t, ep, "SnapshotMetadata/GetMetadataAllocated", `{"snapshotId":"snap-1"}`)
	if err != nil {
		t.Fatalf("%v; stderr: %s", err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 NDJSON lines, got %d:\n%s", len(lines), stdout)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["volumeCapacityBytes"] != "1048576" {
			t.Errorf("line %q: %v, %v", l, m, err)
		}
	}
}

func TestCallFailures(t *testing.T) {
	ep, _ := startAppliance(t)
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		wantStderr []string
	}{
		{"unknown volume", []string{"get-volume", "vol-nope"}, 5,
			[]string{"csi-gateway call: ControllerGetVolume: NOT_FOUND: ", "vol-nope"}},
		{"bad JSON", []string{"Controller/CreateVolume", `{"name":`}, exitUsage,
			[]string{"csi-gateway call: request for CreateVolume is not a valid csi.v1.CreateVolumeRequest in JSON"}},
		{"unknown field", []string{"Controller/CreateVolume", `{"nme":"x"}`}, exitUsage,
			[]string{`unknown field "nme"`}},
		{"unknown method", []string{"Controller/CreateVolum"}, exitUsage,
			[]string{`unknown method "Controller/CreateVolum"; did you mean csi.v1.Controller/CreateVolume`}},
		{"unknown service", []string{"Nothing/AtAll"}, exitUsage,
			[]string{"the services are ", "csi.v1.Controller"}},
		{"not a method", []string{"CreateVolume"}, exitUsage, []string{"want <Service>/<Method>"}},
		{"no method", nil, exitUsage, []string{"want <Service>/<Method>"}},
		{"missing request file", []string{"Identity/Probe", "@/nonexistent.json"}, exitUsage, []string{"request: open /nonexistent.json"}},
		{"alias arguments", []string{"delete-volume"}, exitUsage, []string{"delete-volume takes ID; got 0 argument(s)"}},
		{"required flag", []string{"expand-volume", "vol-1"}, exitUsage, []string{"expand-volume: --size is required"}},
		{"bad size", []string{"create-volume", "v", "--size", "1Gx"}, exitUsage, []string{`--size "1Gx": want a positive whole number`}},
		{"bad access mode", []string{"create-volume", "v", "--access-mode", "RWO"}, exitUsage, []string{`--access-mode "RWO": want one of SINGLE_NODE_WRITER`}},
		{"bad param", []string{"create-volume", "v", "--param", "tier"}, exitUsage, []string{`--param "tier": want key=value`}},
		{"unknown flag", []string{"info", "--bogus"}, exitUsage, []string{"unknown flag: --bogus"}},
		{"refused by the appliance", []string{"create-volume", "v", "--param", "tier=gold"}, 3,
			[]string{"csi-gateway call: CreateVolume: INVALID_ARGUMENT: ", "tier"}},
		{"secrets where none go", []string{"info", "--secrets-file", "/dev/null"}, exitUsage,
			[]string{"--secrets-file: GetPluginInfo takes no secrets"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, err := call(t, ep, tc.args...)
			if got := exitStatus(err); got != tc.code {
				t.Fatalf("exit status %d (%v), want %d; stderr: %s", got, err, tc.code, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			for _, w := range tc.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q does not contain %q", stderr, w)
				}
			}
		})
	}
}

func TestCallEndpoint(t *testing.T) {
	ep, _ := startAppliance(t)
	var stdout, stderr bytes.Buffer

	t.Setenv("CSI_ENDPOINT", "")
	err := run(t.Context(), []string{"call", "info"}, &stdout, &stderr)
	if exitStatus(err) != exitUsage || !strings.Contains(stderr.String(), "no endpoint: pass --endpoint unix:///path.sock or set CSI_ENDPOINT") {
		t.Fatalf("no endpoint: %v; stderr %q", err, stderr.String())
	}

	t.Setenv("CSI_ENDPOINT", ep)
	stderr.Reset()
	if err := run(t.Context(), []string{"call", "info"}, &stdout, &stderr); err != nil {
		t.Fatalf("CSI_ENDPOINT: %v; stderr %q", err, stderr.String())
	}

	t.Setenv("CSI_ENDPOINT", "relative.sock")
	stderr.Reset()
	err = run(t.Context(), []string{"call", "info"}, &stdout, &stderr)
	if exitStatus(err) != exitUsage || !strings.Contains(stderr.String(), "CSI_ENDPOINT: endpoint \"relative.sock\"") {
		t.Fatalf("bad CSI_ENDPOINT: %v; stderr %q", err, stderr.String())
	}

	// Nobody listening: the call fails with UNAVAILABLE.
	_, errOut, err := call(t, "unix://"+filepath.Join(t.TempDir(), "none.sock"), "probe")
	if exitStatus(err) != 14 || !strings.Contains(errOut, "csi-gateway call: Probe: UNAVAILABLE: ") {
		t.Fatalf("no listener: %v; stderr %q", err, errOut)
	}
}

func TestCallSecrets(t *testing.T) {
	ep, seen := startAppliance(t)
	flat := writeFile(t, "secrets.json", `{"username":"admin","password":"`+canary+`"}`)
	sanity := writeFile(t, "sanity.yaml", "CreateVolumeSecret:\n  password: "+canary+"\nDeleteVolumeSecret:\n  password: other-secret\n")

	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"flat file", []string{"create-volume", "sec-1", "--secrets-file", flat}, 0},
		{"csi-sanity file", []string{"create-volume", "sec-2", "--secrets-file", sanity}, 0},
		{"generic form", []string{"--secrets-file", flat, "Controller/CreateVolume", strings.Replace(createJSON, "%s", "sec-3", 1)}, 0},
		// The appliance quotes the bad value in its refusal: the scrubber must remove it.
		{"refused, secret echoed", []string{"create-volume", "sec-4", "--secrets-file", flat, "--param", "tier=" + canary}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(seen.all())
			stdout, stderr, err := call(t, ep, tc.args...)
			if got := exitStatus(err); got != tc.code {
				t.Fatalf("exit status %d (%v), want %d; stderr: %s", got, err, tc.code, stderr)
			}
			if strings.Contains(stdout, canary) || strings.Contains(stderr, canary) {
				t.Fatalf("the canary leaked:\nstdout: %s\nstderr: %s", stdout, stderr)
			}
			got := seen.all()
			if len(got) != before+1 || got[len(got)-1]["password"] != canary {
				t.Fatalf("the appliance did not receive the secret: %v", got[before:])
			}
			if tc.code != 0 && !strings.Contains(stderr, `tier "***"`) {
				t.Errorf("stderr %q: want the echoed secret scrubbed to ***", stderr)
			}
		})
	}

	// A csi-sanity file without a section for the method.
	_, stderr, err := call(t, ep, "delete-snapshot", "snap-1", "--secrets-file", sanity)
	if exitStatus(err) != exitUsage || !strings.Contains(stderr, "no DeleteSnapshotSecret section (it has CreateVolumeSecret, DeleteVolumeSecret)") {
		t.Fatalf("missing section: %v; stderr %q", err, stderr)
	}
	// A file of the wrong shape is refused without quoting it.
	bad := writeFile(t, "bad.yaml", "password: "+canary+"\nnested:\n  a: b\n")
	_, stderr, err = call(t, ep, "create-volume", "sec-5", "--secrets-file", bad)
	if exitStatus(err) != exitUsage || strings.Contains(stderr, canary) || !strings.Contains(stderr, "want a map of key: value") {
		t.Fatalf("bad secrets file: %v; stderr %q", err, stderr)
	}
}

func TestReadRequestFromStdin(t *testing.T) {
	b, err := readRequest("-", strings.NewReader(`{"name":"x"}`))
	if err != nil || string(b) != `{"name":"x"}` {
		t.Fatalf("readRequest(-) = %q, %v", b, err)
	}
}

func TestCallPublishRedaction(t *testing.T) {
	ep, _ := startAppliance(t)
	id := mustCall(t, ep, "create-volume", "pub-1")["volume"].(map[string]any)["volumeId"].(string)

	// Publish context values are redacted by default, and shown with --show-secrets.
	for _, tc := range []struct {
		flags []string
		want  string
	}{{nil, "***stripped***"}, {[]string{"--show-secrets"}, "false"}} {
		out := mustCall(t, ep, append([]string{"publish", id, "--node", "node-1"}, tc.flags...)...)
		pc, _ := out["publishContext"].(map[string]any)
		if len(pc) != 1 {
			t.Fatalf("publishContext = %v", out["publishContext"])
		}
		for k, v := range pc {
			if v != tc.want {
				t.Errorf("%v: publishContext[%s] = %v, want %q", tc.flags, k, v, tc.want)
			}
		}
	}
	mustCall(t, ep, "unpublish", id, "--node", "node-1")
}

func TestCallSnapshotAliases(t *testing.T) {
	ep, _ := startAppliance(t)
	vol := mustCall(t, ep, "create-volume", "snap-src", "--size", "1Mi")["volume"].(map[string]any)["volumeId"].(string)
	snap := mustCall(t, ep, "create-snapshot", "snap-1", "--source", vol)["snapshot"].(map[string]any)["snapshotId"].(string)
	if !strings.Contains(mustCallRaw(t, ep, "list-snapshots", "--source", vol), snap) {
		t.Fatalf("list-snapshots --source %s does not show %s", vol, snap)
	}
	mustCall(t, ep, "delete-snapshot", snap)
	if strings.Contains(mustCallRaw(t, ep, "list-snapshots"), snap) {
		t.Fatalf("list-snapshots still shows %s", snap)
	}
	if out := mustCall(t, ep, "expand-volume", vol, "--size", "2Mi"); out["capacityBytes"] != "2097152" {
		t.Errorf("expand-volume: %v", out)
	}
}

// TestCallOutputID: -o id prints only the ID a create made, so a script captures it; a
// response with no single object ID is a usage error, not an empty line.
func TestCallOutputID(t *testing.T) {
	ep, _ := startAppliance(t)
	vol := mustCallRaw(t, ep, "create-volume", "id-1", "--size", "1Mi", "-o", "id")
	got := mustCall(t, ep, "get-volume", strings.TrimSpace(vol))["volume"].(map[string]any)["volumeId"]
	if !strings.HasPrefix(vol, "vol-") || vol != got.(string)+"\n" {
		t.Errorf("create-volume -o id = %q, want the volume's ID and a newline (%v)", vol, got)
	}
	if snap := mustCallRaw(t, ep, "create-snapshot", "id-snap", "--source", strings.TrimSpace(vol), "--output", "id"); strings.Count(snap, "\n") != 1 || strings.ContainsAny(snap, "{\" ") {
		t.Errorf("create-snapshot -o id = %q, want one ID", snap)
	}
	for _, args := range [][]string{{"info", "-o", "id"}, {"caps", "-o", "id"}, {"info", "-o", "yaml"}} {
		if _, stderr, err := call(t, ep, args...); exitStatus(err) != exitUsage || !strings.Contains(stderr, "--output") {
			t.Errorf("call %v: exit %d, stderr %q; want a usage error naming --output", args, exitStatus(err), stderr)
		}
	}
}

// TestCallCarriesPublishContext: publish --save-publish-context writes the publish context
// whole to a 0600 file while the terminal shows it redacted; stage and node-publish read it
// back with --publish-context-file, --publish-context entries over it.
func TestCallCarriesPublishContext(t *testing.T) {
	ep, _ := startAppliance(t)
	id := strings.TrimSpace(mustCallRaw(t, ep, "create-volume", "ctx-1", "-o", "id"))
	file := filepath.Join(t.TempDir(), "ctx.json")
	out := mustCallRaw(t, ep, "publish", id, "--node", "node-1", "--save-publish-context", file)
	if !strings.Contains(out, "***stripped***") || strings.Contains(out, `"false"`) {
		t.Errorf("publish printed the publish context unredacted:\n%s", out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("saved publish context: %v, %v; want mode 0600", fi, err)
	}
	f := &aliasFlags{publishContextFile: file}
	if pc, err := f.publishContextMap(); err != nil || len(pc) != 1 || pc["readonly"] != "false" {
		t.Errorf("read back = %v, %v; want the appliance's {readonly: false}", pc, err)
	}
	f.publishContext = []string{"readonly=true"}
	if pc, err := f.publishContextMap(); err != nil || pc["readonly"] != "true" {
		t.Errorf("with --publish-context readonly=true = %v, %v; want the flag over the file", pc, err)
	}
	bad := writeFile(t, "bad.json", `["not", "a", "map"]`)
	if _, err := (&aliasFlags{publishContextFile: bad}).publishContextMap(); !isUsageError(err) {
		t.Errorf("a file that is not a JSON object: %v, want a usage error", err)
	}
}

func isUsageError(err error) bool {
	var ue usageError
	return errors.As(err, &ue)
}

// TestSavePublishContextKeepsItPrivate: an existing file is narrowed to 0600 and its values
// are written whole (they may be credentials: the file is where they go instead of the
// terminal).
func TestSavePublishContextKeepsItPrivate(t *testing.T) {
	const canary = "PUBCTX-CANARY-5e1d-chap-secret"
	file := writeFile(t, "ctx.json", "old")
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := savePublishContext(file, map[string]string{"chapSecret": canary}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	fi, _ := os.Stat(file)
	if err != nil || !strings.Contains(string(b), canary) || fi.Mode().Perm() != 0o600 {
		t.Errorf("saved %q (mode %v), %v; want the value, mode 0600", b, fi.Mode().Perm(), err)
	}
}
