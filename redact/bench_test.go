package redact

import (
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/test/bench/messages"
)

// benchCreateVolume is a typical provisioning request: secrets, two capabilities (one with
// mount flags), parameters and topology.
func benchCreateVolume() *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               "pvc-5f1c6a2e-8d0b-4c1e-9a57-3b2d7e0f4a19",
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 10 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{mountCap("noatime", "discard"), blockCap()},
		Parameters: map[string]string{
			"type": "ssd", "pool": "gold", "csi.storage.k8s.io/pvc/name": "data-web-0",
			"csi.storage.k8s.io/pvc/namespace": "prod",
		},
		Secrets: map[string]string{"username": "admin", "password": canary, "chapSecret": "s3cr3t-chap"},
		AccessibilityRequirements: &csi.TopologyRequirement{
			Requisite: []*csi.Topology{{Segments: map[string]string{"zone": "a"}}},
		},
	}
}

// BenchmarkRedact measures Redact against proto.Clone, its floor; the side-by-side with
// csi-lib-utils' protosanitizer is in redact_protosanitizer_bench_test.go.
func BenchmarkRedact(b *testing.B) {
	req := benchCreateVolume()
	r := NewRedactor()
	b.Run("CreateVolume/Redact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = r.Redact(req)
		}
	})
	b.Run("CreateVolume/CloneBaseline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = proto.Clone(req)
		}
	})
	b.Run("CreateVolume/RedactAndFormatJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = protojson.Format(r.Redact(req))
		}
	})
	b.Run("CreateVolume/SecretValues", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = r.SecretValues(req)
		}
	})
	noSecrets := &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: "/var/lib/kubelet/staging/vol-1"}
	b.Run("NoSecrets/Redact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = r.Redact(noSecrets)
		}
	})
	b.Run("NoSecrets/SecretValues", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = r.SecretValues(noSecrets)
		}
	})
}

func BenchmarkScrub(b *testing.B) {
	values := NewRedactor().SecretValues(benchCreateVolume())
	clean := "rpc error: code = FailedPrecondition desc = backend \"array1\": volume vol-1 is still attached to node node-1; detach it first"
	dirty := strings.Replace(clean, "node-1", "node-1 (login "+canary+")", 1)
	// A call's scrubber: its request's secret values, then their encodings.
	for name, req := range map[string]proto.Message{
		"CreateVolume":      benchCreateVolume(),
		"NodePublishVolume": messages.NodePublishVolumeRequest("vol-pvc-5f1c6a2e"),
	} {
		b.Run("NewScrubber/"+name, func(b *testing.B) {
			b.ReportAllocs()
			r := NewRedactor()
			for b.Loop() {
				_ = NewScrubber(r.SecretValues(req))
			}
		})
	}
	sc := NewScrubber(values)
	for _, bc := range []struct {
		name string
		sc   *Scrubber
		in   string
	}{
		{"NoSecrets", NewScrubber(nil), clean},
		{"NoMatch", sc, clean},
		{"Match", sc, dirty},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.in)))
			for b.Loop() {
				_ = bc.sc.Scrub(bc.in)
			}
		})
	}
}
