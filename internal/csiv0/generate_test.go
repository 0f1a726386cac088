package csiv0

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// protocVersion is the protoc the committed files were generated with (their header names it).
const protocVersion = "libprotoc 3.21.12"

// protoc returns the protoc to run, or skips the test, saying why, when the pinned one is absent.
func protoc(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("SKIPPED: protoc is not installed; `make test` installs Debian's protobuf-compiler (" + protocVersion + ")")
	}
	out, err := exec.Command(p, "--version").Output()
	if err != nil || strings.TrimSpace(string(out)) != protocVersion {
		t.Skipf("SKIPPED: %s is %q, the committed files were generated with %s", p, strings.TrimSpace(string(out)), protocVersion)
	}
	return p
}

// TestGeneratedFilesCurrent regenerates the package with the pinned protoc and plugins into a
// temporary directory and fails when any committed file differs: csi.proto and the generated
// Go code never drift apart. make test names the plugins it installed in CSIGWTEST_PROTOC_GEN_GO
// and CSIGWTEST_PROTOC_GEN_GO_GRPC.
func TestGeneratedFilesCurrent(t *testing.T) {
	p := protoc(t)
	gen, genGRPC := os.Getenv("CSIGWTEST_PROTOC_GEN_GO"), os.Getenv("CSIGWTEST_PROTOC_GEN_GO_GRPC")
	if gen == "" || genGRPC == "" {
		t.Skip("SKIPPED: CSIGWTEST_PROTOC_GEN_GO and CSIGWTEST_PROTOC_GEN_GO_GRPC are unset; `make test` sets them to the pinned plugins")
	}
	dir := t.TempDir()
	cmd := exec.Command("./generate.sh", dir)
	cmd.Env = append(os.Environ(), "PROTOC="+p, "PROTOC_GEN_GO="+gen, "PROTOC_GEN_GO_GRPC="+genGRPC)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate.sh: %v\n%s", err, out)
	}
	for _, f := range []string{"csi.pb.go", "csi_grpc.pb.go"} {
		want, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what `make generate` writes now: run make generate and commit it", f)
		}
	}
}

// TestV03WireSupersetOfV02 compiles the seed's v0.2 proto and checks that every message field,
// enum value and RPC of it is in the compiled-in v0.3 schema with the same number, name, type
// and label: one schema decodes both versions' calls.
func TestV03WireSupersetOfV02(t *testing.T) {
	p := protoc(t)
	set := filepath.Join(t.TempDir(), "v0.2.pb")
	if out, err := exec.Command(p, "-I", "testdata", "--descriptor_set_out="+set, "v0.2.proto").CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	b, err := os.ReadFile(set)
	if err != nil {
		t.Fatal(err)
	}
	var fds descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &fds); err != nil {
		t.Fatal(err)
	}
	v02, v03 := schemaRows(fds.File[0]), schemaRows(protodesc.ToFileDescriptorProto(File_csiv0_csi_proto))
	added := 0
	for k, v := range v02 {
		if v03[k] != v {
			t.Errorf("%s: v0.2 has %q, v0.3 %q", k, v, v03[k])
		}
	}
	for k := range v03 {
		if _, ok := v02[k]; !ok {
			added++
		}
	}
	t.Logf("v0.2: %d fields, enum values and RPCs, all in v0.3 unchanged; v0.3 adds %d", len(v02), added)
}

// schemaRows lists what fixes a file's wire format: each field (by message and number), enum
// value and RPC, with what must not change.
func schemaRows(fd *descriptorpb.FileDescriptorProto) map[string]string {
	rows := map[string]string{}
	var walk func(prefix string, ms []*descriptorpb.DescriptorProto, es []*descriptorpb.EnumDescriptorProto)
	walk = func(prefix string, ms []*descriptorpb.DescriptorProto, es []*descriptorpb.EnumDescriptorProto) {
		for _, m := range ms {
			name := prefix + m.GetName()
			for _, f := range m.Field {
				rows[fmt.Sprintf("%s#%d", name, f.GetNumber())] = fmt.Sprintf("%s %s %s %s oneof=%v",
					f.GetName(), f.GetType(), f.GetTypeName(), f.GetLabel(), f.OneofIndex != nil)
			}
			walk(name+".", m.NestedType, m.EnumType)
		}
		for _, e := range es {
			for _, v := range e.Value {
				rows[fmt.Sprintf("%s%s=%d", prefix, e.GetName(), v.GetNumber())] = v.GetName()
			}
		}
	}
	walk("", fd.MessageType, fd.EnumType)
	for _, s := range fd.Service {
		for _, m := range s.Method {
			rows[s.GetName()+"/"+m.GetName()] = m.GetInputType() + " " + m.GetOutputType()
		}
	}
	return rows
}
