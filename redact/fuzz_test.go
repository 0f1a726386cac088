package redact

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// FuzzRedact decodes arbitrary bytes into a CreateVolumeRequest or NodeStageVolumeRequest,
// plants the canary in its secrets (and, by the bits of which, in mount flags and context
// maps), and checks that no rendering of the redacted copy contains it, that the input is
// unchanged and that SecretValues reports it.
func FuzzRedact(f *testing.F) {
	f.Add(uint8(0), testutil.MustMarshal(f, &csi.CreateVolumeRequest{
		Name:               "pvc-1",
		VolumeCapabilities: []*csi.VolumeCapability{mountCap("noatime"), blockCap()},
		Parameters:         map[string]string{"type": "ssd"},
		Secrets:            map[string]string{"user": "admin"},
	}))
	f.Add(uint8(0xff), testutil.MustMarshal(f, &csi.NodeStageVolumeRequest{
		VolumeId:          "vol-1",
		StagingTargetPath: "/staging",
		VolumeCapability:  mountCap("discard"),
		PublishContext:    map[string]string{"lun": "3"},
		VolumeContext:     map[string]string{"pool": "a"},
	}))
	f.Add(uint8(3), []byte{})
	f.Add(uint8(1), []byte{0x2a, 0x03, 0x0a, 0x01, 0x41}) // secrets entry with key "A", no value

	r := NewRedactor(WithSafeContextKeys("lun", "pool"))
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		if bytes.Contains(data, []byte(canary)) {
			t.Skip("the input itself holds the canary in a field that may be non-secret")
		}
		var m proto.Message
		if which&1 == 0 {
			req := &csi.CreateVolumeRequest{}
			_ = proto.Unmarshal(data, req)
			req.Secrets = plant(req.Secrets, "password")
			if which&2 != 0 {
				req.VolumeCapabilities = append(req.VolumeCapabilities, mountCap("ro", canary))
			}
			m = req
		} else {
			req := &csi.NodeStageVolumeRequest{}
			_ = proto.Unmarshal(data, req)
			req.Secrets = plant(req.Secrets, "password")
			if which&2 != 0 {
				req.VolumeContext = plant(req.VolumeContext, "chap-password")
			}
			if which&4 != 0 {
				req.PublishContext = plant(req.PublishContext, "token")
			}
			if which&8 != 0 {
				if mnt := req.GetVolumeCapability().GetMount(); mnt != nil {
					mnt.MountFlags = append(mnt.MountFlags, canary)
				} else {
					req.VolumeCapability = mountCap(canary)
				}
			}
			m = req
		}
		orig := proto.Clone(m)

		out := r.Redact(m)
		for name, s := range renderings(out) {
			if strings.Contains(s, canary) {
				t.Fatalf("canary in %s of the redacted message: %q", name, s)
			}
		}
		j := r.JSON(m)
		if strings.Contains(j, canary) {
			t.Fatalf("canary in JSON: %q", j)
		}
		if want, err := protojson.Marshal(out); err == nil {
			sameJSON(t, j, string(want))
		}
		if !proto.Equal(m, orig) {
			t.Fatalf("Redact modified its input")
		}
		if !slices.Contains(r.SecretValues(m), canary) {
			t.Fatalf("SecretValues = %q lacks the canary", r.SecretValues(m))
		}
	})
}

func plant(m map[string]string, key string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[key] = canary
	return m
}

// renderings returns the ways the gateway may print m; encoders that fail (invalid UTF-8 in
// a decoded string) produce nothing and are left out.
func renderings(m proto.Message) map[string]string {
	out := map[string]string{
		"prototext":  prototext.Format(m),
		"fmt.Sprint": fmt.Sprint(m),
	}
	if b, err := protojson.Marshal(m); err == nil {
		out["protojson"] = string(b)
	}
	if b, err := (proto.MarshalOptions{AllowPartial: true}).Marshal(m); err == nil {
		out["wire"] = string(b)
	}
	return out
}

// FuzzScrub checks that the output of Scrub never contains a scrubbed value (one of at least
// 4 bytes), and that scrubbing is idempotent: nothing a Scrubber removes is left behind.
func FuzzScrub(f *testing.F) {
	f.Add("login failed: ", "", "", canary, "hunter2")
	f.Add("a", "b", "c", "abcdef", "defghi")
	f.Add("x", "", "", "x***", "yyyy")
	f.Add("", "**", "", "****", "***")
	f.Add("pw=", "&", "", "p@ss w/rd", `"\<>`)
	f.Fuzz(func(t *testing.T, a, b, c, v1, v2 string) {
		in := a + v1 + b + v2 + c
		sc := NewScrubber([]string{v1, v2})
		out := sc.Scrub(in)
		for _, v := range []string{v1, v2} {
			if len(v) >= minScrubLen && strings.Contains(out, v) {
				t.Fatalf("Scrub(%q) = %q still contains %q", in, out, v)
			}
		}
		if len(v1) < minScrubLen && len(v2) < minScrubLen && out != in {
			t.Fatalf("Scrub changed %q to %q without scrubbable values", in, out)
		}
		if again := sc.Scrub(out); again != out {
			t.Fatalf("Scrub not idempotent: %q -> %q -> %q", in, out, again)
		}
	})
}
