package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base32"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// secretRPCs are the methods of csi.v1 (CSI v1.13: 22) and volumegroup (csi-addons: 5) whose
// request carries a field marked secret. TestGatewayCanary sends every secret-bearing method
// it finds in the protobuf registry and fails when one is not listed here, so a new spec
// version that adds one is noticed, not silently covered by luck.
var secretRPCs = []string{
	"/csi.v1.Controller/CreateVolume",
	"/csi.v1.Controller/DeleteVolume",
	"/csi.v1.Controller/ControllerPublishVolume",
	"/csi.v1.Controller/ControllerUnpublishVolume",
	"/csi.v1.Controller/ValidateVolumeCapabilities",
	"/csi.v1.Controller/ControllerListVolumeHealth",
	"/csi.v1.Controller/ControllerGetVolumeHealth",
	"/csi.v1.Controller/CreateSnapshot",
	"/csi.v1.Controller/DeleteSnapshot",
	"/csi.v1.Controller/ListSnapshots",
	"/csi.v1.Controller/GetSnapshot",
	"/csi.v1.Controller/ControllerExpandVolume",
	"/csi.v1.Controller/ControllerModifyVolume",
	"/csi.v1.GroupController/CreateVolumeGroupSnapshot",
	"/csi.v1.GroupController/DeleteVolumeGroupSnapshot",
	"/csi.v1.GroupController/GetVolumeGroupSnapshot",
	"/csi.v1.SnapshotMetadata/GetMetadataAllocated",
	"/csi.v1.SnapshotMetadata/GetMetadataDelta",
	"/csi.v1.Node/NodeStageVolume",
	"/csi.v1.Node/NodePublishVolume",
	"/csi.v1.Node/NodeGetStorageHealth",
	"/csi.v1.Node/NodeExpandVolume",
	"/volumegroup.Controller/CreateVolumeGroup",
	"/volumegroup.Controller/ModifyVolumeGroupMembership",
	"/volumegroup.Controller/DeleteVolumeGroup",
	"/volumegroup.Controller/ListVolumeGroups",
	"/volumegroup.Controller/ControllerGetVolumeGroup",
}

// TestGatewayCanary sends canary secrets through the real gateway binary, at debug level, in
// every secret-bearing RPC, to a driver that records what it receives: round one answers OK,
// round two fails every call with a message that echoes the request's secrets (a nasty
// backend), and a third round pads that echo so a canary straddles the 1 KiB bound of error
// messages. Secrets must reach the driver intact and appear in no log line, no error the
// caller gets, and no output of `csi-gateway call`; the debug log must still log the calls.
// It runs on both of the gateway's transports. TestGatewayCanaryForms does the same for
// secrets whose bytes a backend reformats (a trailing newline, a CRLF, a tab, a PEM key),
// through a grpc driver and a rest appliance.
func TestGatewayCanary(t *testing.T) { onEachTransport(t, testGatewayCanary) }

func testGatewayCanary(t *testing.T, transport string) {
	began := time.Now()
	methods := secretBearingMethods()
	if !slices.Equal(methods, slices.Sorted(slices.Values(secretRPCs))) {
		for _, m := range methods {
			if !slices.Contains(secretRPCs, m) {
				t.Errorf("%s carries a secret field but is not in secretRPCs: add it", m)
			}
		}
		for _, m := range secretRPCs {
			if !slices.Contains(methods, m) {
				t.Errorf("secretRPCs lists %s, which carries no secret field (or is gone)", m)
			}
		}
	}

	dir := t.TempDir()
	book := newCanaryBook()
	respVolumeContext := book.mint("response-CreateVolume", "volume_context")
	respPublishContext := book.mint("response-ControllerPublishVolume", "publish_context")

	var nasty atomic.Bool
	driver := startTestDriver(t, dir, "driver.sock", func(ctx context.Context, c *driverCall, send func([]byte) error) error {
		md := methodDesc(c.Method)
		if nasty.Load() && md != nil && md.Parent().FullName() != "csi.v1.Identity" {
			req := newMessage(md.Input())
			if err := proto.Unmarshal(c.Request, req); err != nil {
				return status.Errorf(codes.InvalidArgument, "cannot decode: %v", err)
			}
			msg := fmt.Sprintf("bad credentials %v", sensitiveValues(req.ProtoReflect(), ""))
			if pad := c.MD.Get("x-e2e-pad"); len(pad) == 1 {
				n, _ := strconv.Atoi(pad[0])
				msg = strings.Repeat("x", n) + msg
			}
			return status.Error(codes.Internal, msg)
		}
		switch c.Method {
		case "/csi.v1.Controller/CreateVolume":
			return send(marshal(&csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: "vol-e2e", CapacityBytes: 1 << 20,
				VolumeContext: map[string]string{"chap-password": respVolumeContext}}}))
		case "/csi.v1.Controller/ControllerPublishVolume":
			return send(marshal(&csi.ControllerPublishVolumeResponse{PublishContext: map[string]string{"chap-secret": respPublishContext}}))
		}
		return nil
	})
	// repair: plugin, where the gateway cuts messages to 1 KiB: round two's padded echoes test
	// that it scrubs before it cuts. (TestRepairSettings scrubs under spec and none.)
	gw := startGatewayWith(t, dir, "transport: "+transport+"\n"+noValidation+fmt.Sprintf(`backends:
  driver: {type: grpc, target: %q, repair: plugin}
routes:
  - {methods: ["*"], backend: driver}
logging: {level: debug}
`, driver.Endpoint))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Round one: every secret-bearing RPC, canaries in every secret field, mount flag and
	// context value; the driver answers OK and must receive every canary intact.
	requests := map[string]proto.Message{}
	for _, m := range methods {
		req := buildCanaryRequest(m, book)
		requests[m] = req
		if got := len(book.of(shortName(m))); got == 0 {
			t.Fatalf("%s: the request holds no canary", m)
		}
		resps, err := invoke(ctx, gw.Conn, m, req)
		if err != nil {
			t.Errorf("round one: %s: %v", m, err)
			continue
		}
		calls := driver.Calls(m)
		if len(calls) != 1 {
			t.Errorf("round one: %s: the driver received %d calls, want 1", m, len(calls))
			continue
		}
		got := newMessage(methodDesc(m).Input())
		if err := proto.Unmarshal(calls[0].Request, got); err != nil || !proto.Equal(got, req) {
			t.Errorf("round one: %s: the driver received %v (%v), want %v", m, got, err, req)
		}
		for _, c := range book.of(shortName(m)) {
			if !bytes.Contains(calls[0].Request, []byte(c)) {
				t.Errorf("round one: %s: canary %s did not reach the driver intact", m, c)
			}
		}
		switch m {
		case "/csi.v1.Controller/CreateVolume":
			if v := resps[0].(*csi.CreateVolumeResponse).GetVolume().GetVolumeContext()["chap-password"]; v != respVolumeContext {
				t.Errorf("CreateVolume: the caller got volume_context %q, want the driver's %q", v, respVolumeContext)
			}
		case "/csi.v1.Controller/ControllerPublishVolume":
			if v := resps[0].(*csi.ControllerPublishVolumeResponse).GetPublishContext()["chap-secret"]; v != respPublishContext {
				t.Errorf("ControllerPublishVolume: the caller got publish_context %q, want the driver's %q", v, respPublishContext)
			}
		}
	}

	// `csi-gateway call`, with the secrets from a file, while the driver answers OK.
	cli := []cliCase{
		{method: "Controller/CreateVolume", label: "cli-CreateVolume", json: func(b *canaryBook, l string) string {
			return fmt.Sprintf(`{"name":"cli-vol","volumeCapabilities":[{"mount":{"mountFlags":[%q]},"accessMode":{"mode":"SINGLE_NODE_WRITER"}}]}`,
				b.mint(l, "mount-flags"))
		}, wantOut: []string{`"volumeId": "vol-e2e"`, `"chap-password": "***stripped***"`}},
		{method: "Node/NodePublishVolume", label: "cli-NodePublishVolume", json: func(b *canaryBook, l string) string {
			return fmt.Sprintf(`{"volumeId":"cli-vol","targetPath":"/tmp/e2e-cli/target","volumeCapability":{"mount":{"mountFlags":[%q]},`+
				`"accessMode":{"mode":"SINGLE_NODE_WRITER"}},"volumeContext":{"chap-password":%q},"publishContext":{"chap-secret":%q}}`,
				b.mint(l, "mount-flags"), b.mint(l, "volume_context"), b.mint(l, "publish_context"))
		}},
		{alias: []string{"create-volume", "cli-alias-vol", "--size", "1Mi"}, method: "Controller/CreateVolume", label: "cli-alias-create-volume",
			wantOut: []string{`"volumeId": "vol-e2e"`}},
	}
	for _, c := range cli {
		c.run(t, dir, gw.Endpoint, book, driver)
	}

	// Round two: the driver fails every call with a message that echoes the request's
	// secrets, context values and mount flags.
	nasty.Store(true)
	for _, m := range methods {
		_, err := invoke(ctx, gw.Conn, m, requests[m])
		st := checkStatus(t, "round two: "+m, err, codes.Internal)
		if !strings.Contains(st.Message(), "bad credentials") {
			t.Errorf("round two: %s: the message %q lost the driver's words", m, st.Message())
		}
		for _, leak := range book.leaks(st.Message()) {
			t.Errorf("round two: %s: the caller's error message holds %s: %q", m, leak, st.Message())
		}
	}
	// The same echo, padded so that a canary straddles the 1 KiB bound of messages wherever
	// the gateway cuts: a cut before scrubbing would leave the canary's first bytes behind.
	straddleLeaks := 0
	for pad := 800; pad <= 1024; pad += 8 {
		m := "/csi.v1.Controller/CreateVolume"
		padCtx := metadata.AppendToOutgoingContext(ctx, "x-e2e-pad", strconv.Itoa(pad))
		_, err := invoke(padCtx, gw.Conn, m, requests[m])
		st := checkStatus(t, fmt.Sprintf("round two, padded %d: %s", pad, m), err, codes.Internal)
		if leaks := book.leaks(st.Message()); len(leaks) > 0 {
			if straddleLeaks == 0 {
				t.Errorf("round two, echo padded by %d bytes: %s: the caller's error message holds %s: …%q",
					pad, m, strings.Join(leaks, ", "), st.Message()[max(0, len(st.Message())-120):])
			}
			straddleLeaks++
		}
	}
	if straddleLeaks > 1 {
		t.Errorf("round two, padded: %d more padded echoes leaked", straddleLeaks-1)
	}
	for _, c := range []cliCase{
		{method: "Controller/DeleteVolume", label: "cli-DeleteVolume", json: func(*canaryBook, string) string { return `{"volumeId":"cli-vol"}` },
			wantExit: int(codes.Internal), wantOut: []string{"INTERNAL", "bad credentials"}},
		{method: "SnapshotMetadata/GetMetadataAllocated", label: "cli-GetMetadataAllocated",
			json:     func(*canaryBook, string) string { return `{"snapshotId":"cli-snap"}` },
			wantExit: int(codes.Internal), wantOut: []string{"INTERNAL", "bad credentials"}},
	} {
		c.run(t, dir, gw.Endpoint, book, driver)
	}

	// A last call whose log line, once written, follows every line before it.
	if _, err := invoke(ctx, gw.Conn, "/csi.v1.Identity/GetPluginInfo", &csi.GetPluginInfoRequest{}); err != nil {
		t.Fatalf("GetPluginInfo: %v", err)
	}
	waitOutput(t, gw.Process, `"method":"GetPluginInfo"`, 20*time.Second)
	out := gw.Output()
	for _, leak := range book.leaks(out) {
		t.Errorf("the gateway's log holds %s", leak)
	}
	if t.Failed() {
		t.Logf("gateway log lines that leak:\n%s", book.leakingLines(out))
	}

	// Redaction that works by logging nothing would pass the checks above: the debug log
	// must show every unary request, redacted, and the responses.
	lines := callLines(t, out)
	for _, m := range methods {
		if serverStreaming(m) {
			continue // streams are logged by name and code only
		}
		var logged bool
		for _, l := range lines[shortName(m)] {
			req, _ := l["request"].(string)
			logged = logged || strings.Contains(req, "***stripped***")
		}
		if !logged {
			t.Errorf("the debug log has no line for %s with its redacted request", shortName(m))
		}
	}
	for _, want := range []string{`"method":"CreateVolume"`, `***stripped***`, `"request":`, `"response":`} {
		if !strings.Contains(out, want) {
			t.Errorf("the gateway's debug log does not contain %s", want)
		}
	}
	var responseRedacted bool
	for _, l := range lines["CreateVolume"] {
		resp, _ := l["response"].(string)
		responseRedacted = responseRedacted || (strings.Contains(resp, "vol-e2e") && strings.Contains(resp, "***stripped***"))
	}
	if !responseRedacted {
		t.Errorf("the debug log has no CreateVolume line whose response shows the volume with its context redacted")
	}
	t.Logf("%d secret-bearing RPCs, %d canaries, %d log lines checked in %v", len(methods), len(book.all), strings.Count(out, "\n"),
		time.Since(began).Round(time.Millisecond))
}

// cliCase is one run of `csi-gateway call` with a secrets file of fresh canaries.
type cliCase struct {
	method   string   // Service/Method of the generic form
	alias    []string // or the short form and its arguments
	label    string   // names the canaries
	json     func(b *canaryBook, label string) string
	wantExit int
	wantOut  []string
}

func (c cliCase) run(t *testing.T, dir, endpoint string, book *canaryBook, driver *testDriver) {
	t.Helper()
	secrets := filepath.Join(dir, c.label+"-secrets.yaml")
	yaml := fmt.Sprintf("password: %s\ntoken: %s\n", book.mint(c.label, "secret-password"), book.mint(c.label, "secret-token"))
	if err := os.WriteFile(secrets, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"call", "--endpoint", endpoint, "--timeout", "30s", "--secrets-file", secrets}
	if c.alias != nil {
		args = append(args, c.alias...)
	} else {
		args = append(args, c.method, c.json(book, c.label))
	}
	before := len(driver.Calls(fullName(c.method)))
	out, exit := runCLI(t, args...)
	if exit != c.wantExit {
		t.Errorf("csi-gateway call %s: exit %d, want %d\n%s", c.label, exit, c.wantExit, out)
	}
	for _, w := range c.wantOut {
		if !strings.Contains(out, w) {
			t.Errorf("csi-gateway call %s: the output does not contain %s:\n%s", c.label, w, out)
		}
	}
	for _, leak := range book.leaks(out) {
		t.Errorf("csi-gateway call %s: the output holds %s:\n%s", c.label, leak, out)
	}
	calls := driver.Calls(fullName(c.method))
	if len(calls) != before+1 {
		t.Errorf("csi-gateway call %s: the driver received %d calls, want 1", c.label, len(calls)-before)
		return
	}
	for _, canary := range book.of(c.label) {
		if !bytes.Contains(calls[len(calls)-1].Request, []byte(canary)) {
			t.Errorf("csi-gateway call %s: canary %s did not reach the driver intact", c.label, canary)
		}
	}
}

// fullName turns the CLI's Service/Method into the full method name.
func fullName(m string) string {
	if strings.HasPrefix(m, "SnapshotMetadata/") || strings.HasPrefix(m, "Controller/") || strings.HasPrefix(m, "Node/") {
		return "/csi.v1." + m
	}
	return "/" + m
}

func shortName(full string) string { return full[strings.LastIndex(full, "/")+1:] }

// canaryBook mints canary values and finds them, whole or in part, in text.
type canaryBook struct {
	all   []string
	cores map[string]string   // canary → its distinctive 8-character core
	by    map[string][]string // label → its canaries
}

func newCanaryBook() *canaryBook {
	return &canaryBook{cores: map[string]string{}, by: map[string][]string{}}
}

// canaryMarker starts every canary; the gateway never writes it on its own, so finding it
// anywhere reveals a leak, even of a truncated canary.
const canaryMarker = "CANARY-"

// mint returns the canary of label and kind, "CANARY-e2e-<label>-<kind>-<core>", where core
// is 8 characters derived from label and kind that occur nowhere else.
func (b *canaryBook) mint(label, kind string) string {
	h := fnv.New64a()
	h.Write([]byte(label + "/" + kind + "/7c1f"))
	core := strings.ToLower(base32.StdEncoding.EncodeToString(h.Sum(nil)))[:8]
	c := fmt.Sprintf("%se2e-%s-%s-%s", canaryMarker, label, kind, core)
	if _, dup := b.cores[c]; !dup {
		b.all = append(b.all, c)
		b.cores[c] = core
		b.by[label] = append(b.by[label], c)
	}
	return c
}

func (b *canaryBook) of(label string) []string { return b.by[label] }

// leaks describes every canary found in text: whole, by its core, base64-encoded, or by the
// marker that starts all of them.
func (b *canaryBook) leaks(text string) []string {
	var out []string
	for _, c := range b.all {
		switch {
		case strings.Contains(text, c):
			out = append(out, "canary "+c)
		case strings.Contains(text, b.cores[c]):
			out = append(out, fmt.Sprintf("the core %q of canary %s", b.cores[c], c))
		case strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(c))[:16]),
			strings.Contains(text, base64.RawURLEncoding.EncodeToString([]byte(c))[:16]):
			out = append(out, "canary "+c+" in base64")
		}
	}
	if len(out) == 0 && strings.Contains(text, canaryMarker) {
		out = append(out, fmt.Sprintf("part of a canary (%q)", canaryMarker))
	}
	return out
}

// leakingLines returns the lines of text that hold a canary, cut to 300 bytes each.
func (b *canaryBook) leakingLines(text string) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if l := sc.Text(); len(b.leaks(l)) > 0 {
			out = append(out, l[:min(len(l), 300)])
		}
	}
	return strings.Join(out, "\n")
}

// callLines parses the gateway's JSON log and returns its "call" lines by method.
func callLines(t *testing.T, out string) map[string][]map[string]any {
	t.Helper()
	lines := map[string][]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil || l["msg"] != "call" {
			continue
		}
		m, _ := l["method"].(string)
		lines[m] = append(lines[m], l)
	}
	return lines
}

// secretBearingMethods returns, sorted, the full names of every method of the csi.v1 and
// volumegroup packages in the protobuf registry whose request holds a secret field at any
// depth.
func secretBearingMethods() []string {
	var out []string
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if p := fd.Package(); p != "csi.v1" && p != "volumegroup" {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				if holdsSecret(md.Input(), map[protoreflect.FullName]bool{}) {
					out = append(out, "/"+string(sd.FullName())+"/"+string(md.Name()))
				}
			}
		}
		return true
	})
	slices.Sort(out)
	return out
}

func holdsSecret(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		if isSecretField(fd) {
			return true
		}
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if fd.Message() != nil && holdsSecret(fd.Message(), seen) {
			return true
		}
	}
	return false
}

// isSecretField reports whether a field is marked secret: by any registered bool option of
// FieldOptions whose name ends in "secret" (csi.v1.csi_secret, which csi-addons uses too), or
// by the VolumeGroup proposal's vg_csi_secret (field 1101), which no Go package registers and
// so survives only as an unknown field of the options.
func isSecretField(fd protoreflect.FieldDescriptor) bool {
	opts := fd.Options()
	secret := false
	protoregistry.GlobalTypes.RangeExtensionsByMessage("google.protobuf.FieldOptions", func(xt protoreflect.ExtensionType) bool {
		xd := xt.TypeDescriptor()
		if strings.HasSuffix(string(xd.Name()), "secret") && xd.Kind() == protoreflect.BoolKind && proto.HasExtension(opts, xt) {
			secret, _ = proto.GetExtension(opts, xt).(bool)
		}
		return !secret
	})
	if secret {
		return true
	}
	for b := opts.ProtoReflect().GetUnknown(); len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return false
		}
		if num == 1101 {
			return true
		}
		b = b[n+m:]
	}
	return false
}

// contextFields are the string maps whose values the spec lets drivers fill with credentials.
var contextFields = map[protoreflect.Name]bool{"volume_context": true, "publish_context": true, "volume_group_context": true}

// idFields are identifying fields the test fills so that requests look like real ones.
var idFields = map[protoreflect.Name]bool{"name": true, "volume_id": true, "snapshot_id": true, "source_volume_id": true,
	"node_id": true, "volume_group_id": true, "group_snapshot_id": true, "base_snapshot_id": true, "target_snapshot_id": true,
	"target_path": true, "staging_target_path": true, "volume_path": true, "staging_path": true}

// buildCanaryRequest returns the request of method with a canary in every secret field (two
// keys in each secrets map), in every mount_flags and in every volume/publish context value,
// and plain values in the identifying fields.
func buildCanaryRequest(method string, book *canaryBook) proto.Message {
	req := newMessage(methodDesc(method).Input())
	fillCanaries(req.ProtoReflect(), shortName(method), book)
	return req
}

func fillCanaries(m protoreflect.Message, label string, book *canaryBook) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case isSecretField(fd) && fd.IsMap() && fd.MapValue().Kind() == protoreflect.StringKind:
			mp := m.Mutable(fd).Map()
			for _, k := range []string{"password", "token"} {
				mp.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfString(book.mint(label, "secret-"+k)))
			}
		case isSecretField(fd) && fd.Kind() == protoreflect.StringKind && fd.IsList():
			m.Mutable(fd).List().Append(protoreflect.ValueOfString(book.mint(label, string(fd.Name()))))
		case isSecretField(fd) && fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(book.mint(label, string(fd.Name()))))
		case isSecretField(fd):
			panic(fmt.Sprintf("%s: a secret field of a kind the test cannot fill; teach fillCanaries", fd.FullName()))
		case fd.IsMap() && contextFields[fd.Name()] && fd.MapValue().Kind() == protoreflect.StringKind:
			m.Mutable(fd).Map().Set(protoreflect.ValueOfString("chap-password").MapKey(),
				protoreflect.ValueOfString(book.mint(label, string(fd.Name()))))
		case fd.Message() != nil && fd.Message().FullName() == "csi.v1.VolumeCapability":
			vc := &csi.VolumeCapability{
				AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{
					FsType: "ext4", MountFlags: []string{"noatime", book.mint(label, "mount-flags")}}},
				AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
			}
			if fd.IsList() {
				m.Mutable(fd).List().Append(protoreflect.ValueOfMessage(vc.ProtoReflect()))
			} else {
				m.Set(fd, protoreflect.ValueOfMessage(vc.ProtoReflect()))
			}
		case fd.Kind() == protoreflect.StringKind && !fd.IsList() && idFields[fd.Name()]:
			v := "e2e-" + label + "-" + string(fd.Name())
			if strings.HasSuffix(string(fd.Name()), "_path") {
				v = "/tmp/e2e/" + label + "/" + string(fd.Name())
			}
			m.Set(fd, protoreflect.ValueOfString(v))
		case fd.Kind() == protoreflect.StringKind && fd.IsList() && (fd.Name() == "source_volume_ids" || fd.Name() == "volume_ids"):
			m.Mutable(fd).List().Append(protoreflect.ValueOfString("e2e-" + label + "-member"))
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap() && holdsSecret(fd.Message(), map[protoreflect.FullName]bool{}):
			fillCanaries(m.Mutable(fd).Message(), label, book)
		}
	}
}

// sensitiveValues returns every secret value, mount flag and context value in m by where it
// is ("secrets.password"), which is what a careless driver would echo.
func sensitiveValues(m protoreflect.Message, prefix string) map[string]string {
	out := map[string]string{}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := prefix + string(fd.Name())
		switch {
		case fd.IsMap() && (isSecretField(fd) || contextFields[fd.Name()]):
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				out[name+"."+k.String()] = mv.String()
				return true
			})
		case fd.Name() == "mount_flags" || (isSecretField(fd) && fd.IsList()):
			for i := range v.List().Len() {
				out[fmt.Sprintf("%s[%d]", name, i)] = v.List().Get(i).String()
			}
		case isSecretField(fd):
			out[name] = v.String()
		case fd.Message() != nil && fd.IsList():
			for i := range v.List().Len() {
				for k, s := range sensitiveValues(v.List().Get(i).Message(), fmt.Sprintf("%s[%d].", name, i)) {
					out[k] = s
				}
			}
		case fd.Message() != nil && !fd.IsMap():
			for k, s := range sensitiveValues(v.Message(), name+".") {
				out[k] = s
			}
		}
		return true
	})
	return out
}
