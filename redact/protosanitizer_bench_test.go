package redact

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-lib-utils/protosanitizer"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/test/bench/messages"
)

// BenchmarkRedactVsProtosanitizer redacts the messages of `make bench`'s workloads three ways:
// Redact (the gateway's redacted copy), RedactJSON (Redactor.JSON, the redacted JSON a debug
// log line carries, written straight from the message) and Protosanitizer (csi-lib-utils'
// StripSecrets(m).String(), the JSON the Kubernetes sidecars log). RedactJSON and
// Protosanitizer produce the same thing, a loggable string without the secrets; test/bench
// reads these results into docs/benchmarks.md.
func BenchmarkRedactVsProtosanitizer(b *testing.B) {
	r := NewRedactor()
	for _, m := range []struct {
		name string
		msg  proto.Message
	}{
		{"Probe", &csi.ProbeRequest{}},
		{"CreateVolume", messages.CreateVolumeRequest("pvc-5f1c6a2e-8d0b-4c1e-9a57-3b2d7e0f4a19")},
		{"ListVolumes100", messages.ListVolumesResponse()},
		{"NodePublishVolume", messages.NodePublishVolumeRequest("vol-pvc-5f1c6a2e")},
		{"GetMetadataAllocated", messages.GetMetadataAllocatedRequest("snap-1")},
	} {
		b.Run(m.name+"/Redact", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = r.Redact(m.msg)
			}
		})
		b.Run(m.name+"/RedactJSON", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = r.JSON(m.msg)
			}
		})
		b.Run(m.name+"/Protosanitizer", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = protosanitizer.StripSecrets(m.msg).String()
			}
		})
	}
}
